"""The normalized `finish_reason` of a response, from the provider's raw stop reason.

Each adapter passes its own table (raw value → `FinishReason`, documented in its module
docstring and in the README). Two facts the raw value does not always say are passed beside it:
whether the response holds tool calls (Gemini and the Responses API report a natural stop when
the model calls tools, and some OpenAI-compatible servers answer ``stop`` there too) and whether
the model refused (OpenAI streams a refusal under a ``stop``).
"""

from __future__ import annotations

from collections.abc import Mapping

from ..events import FinishReason

__all__ = ["normalize_finish"]


def normalize_finish(
    raw: str | None,
    table: Mapping[str, FinishReason],
    *,
    tool_calls: bool = False,
    refusal: bool = False,
    unknown: FinishReason = "error",
) -> FinishReason:
    """`raw` read through `table`. None (a stream that finished without saying why) is a natural
    stop; a value the table does not know is `unknown`. A natural stop with tool calls in the
    response is `tool_calls`, and one that carried a refusal is `refusal`."""
    reason: FinishReason = "stop" if raw is None else table.get(raw, unknown)
    if reason == "stop":
        if refusal:
            return "refusal"
        if tool_calls:
            return "tool_calls"
    return reason
