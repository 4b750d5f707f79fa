"""The normalized `finish_reason` of a response, from the provider's raw stop reason.

Each adapter holds its own table (raw value → `FinishReason`, its module's `FINISH_REASONS`,
documented in its module docstring and in the README) and sets `finish_reason` on its finish
chunk. `finish_reason_of` reads a finish chunk of any client: the client's own reading, else the
raw value through the built-in adapters' tables (for a client that sets none); the loop keeps
no table of its own. Two facts the raw value does not always say are passed to
`normalize_finish` beside it: whether the response holds tool calls (Gemini and the Responses
API report a natural stop when the model calls tools, and some OpenAI-compatible servers answer
``stop`` there too) and whether the model refused (OpenAI streams a refusal under a ``stop``).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ..events import FinishReason

if TYPE_CHECKING:
    from .base import FinishChunk

__all__ = ["ANTHROPIC_FINISH_REASONS", "finish_reason_of", "identify", "normalize_finish"]

ANTHROPIC_FINISH_REASONS: dict[str, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
    "refusal": "refusal",
}
"""The Anthropic adapter's table (`tether.llm.anthropic.FINISH_REASONS`), kept here so the
scripted test client, which speaks Anthropic's stop reasons, reads it without loading the
adapter (and httpx)."""

_ADAPTERS = ("anthropic", "openai_chat", "openai_responses", "gemini")
_known: dict[str, FinishReason] | None = None


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


def _known_reasons() -> dict[str, FinishReason]:
    """Every built-in adapter's table in one (read on first use: a client that sets its own
    `finish_reason`, as every adapter does, never needs it)."""
    global _known
    if _known is None:
        known: dict[str, FinishReason] = {}
        for name in _ADAPTERS:
            table = importlib.import_module(f"{__package__}.{name}").FINISH_REASONS
            for raw, reason in table.items():
                known.setdefault(raw, reason)
        _known = known
    return _known


def finish_reason_of(finish: FinishChunk) -> FinishReason:
    """The normalized finish reason of a model call: the client's own (`finish_reason`), else
    the raw `stop_reason` read through the built-in adapters' tables (for a client that does not
    set it): a value one of them knows gets its reading, None is `tool_calls` when the response
    holds tool calls and `stop` otherwise, anything else is `error`."""
    given = finish.get("finish_reason")
    if given is not None:
        return given
    raw = finish["stop_reason"]
    if raw is None:
        calls = any(p["type"] == "tool_call" for p in finish["content"])
        return "tool_calls" if calls else "stop"
    return _known_reasons().get(raw, "error")


def identify(finish: FinishChunk, response_id: object, model: object) -> FinishChunk:
    """`finish` with the response's id and model, where the provider sent them (strings)."""
    if isinstance(response_id, str) and response_id:
        finish["response_id"] = response_id
    if isinstance(model, str) and model:
        finish["response_model"] = model
    return finish
