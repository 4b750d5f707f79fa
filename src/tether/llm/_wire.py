"""What every stream parser reads events with: one event's JSON, tool arguments, token counts."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ..events import Usage

__all__ = [
    "append_turn",
    "cached_usage",
    "loads",
    "openai_usage",
    "parse_json_or_raw",
    "usage_int",
]

# The decoder's scanner is an instance attribute CPython sets in `JSONDecoder.__init__`; typeshed
# does not declare it, so it is read from the instance's namespace.
_scan_once: Callable[[str, int], tuple[Any, int]] = vars(json.JSONDecoder())["scan_once"]


def loads(text: str) -> Any:
    """`json.loads` for one event's data, minus the wrapper layers: the C scanner parses the value
    and only an unusual payload (leading whitespace, trailing garbage) takes the strict path."""
    try:
        value, end = _scan_once(text, 0)
    except StopIteration:
        return json.loads(text)  # raises the proper JSONDecodeError, or handles leading space
    if end != len(text) and not text[end:].isspace():
        return json.loads(text)  # raises "Extra data"
    return value


def parse_json_or_raw(raw: str, empty: Any) -> Any:
    """Tool arguments parsed once: `empty` for an empty string, the raw text if not JSON."""
    if not raw or raw.isspace():
        return empty
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def cached_usage(raw: dict[str, Any], keys: tuple[str, str, str, str]) -> Usage:
    """`Usage` from a usage object that counts cache reads and writes apart from the other
    input tokens (Anthropic, Bedrock): `keys` names its input, output, cache-read and
    cache-write counts; `input_tokens` is their sum, as every provider's is."""
    out: Usage = {}
    if not raw:
        return out
    inputs, outputs, reads, writes = keys
    cache_read = usage_int(raw.get(reads))
    cache_write = usage_int(raw.get(writes))
    out["input_tokens"] = (usage_int(raw.get(inputs)) or 0) + (cache_read or 0) + (cache_write or 0)
    out["output_tokens"] = usage_int(raw.get(outputs)) or 0
    if cache_read is not None:
        out["cache_read_tokens"] = cache_read
    if cache_write is not None:
        out["cache_creation_tokens"] = cache_write
    return out


def usage_int(value: Any) -> int | None:
    """A token count from a usage object, or None when absent or not a number."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value)
    return None


def openai_usage(raw: Any, input_name: str, output_name: str) -> Usage:
    """OpenAI's usage object in `Usage` terms; Chat Completions names its counts ``prompt`` and
    ``completion``, the Responses API ``input`` and ``output`` (`input_name`, `output_name`)."""
    out: Usage = {}
    if not raw:
        return out
    out["input_tokens"] = usage_int(raw.get(f"{input_name}_tokens")) or 0
    out["output_tokens"] = usage_int(raw.get(f"{output_name}_tokens")) or 0
    cached = usage_int((raw.get(f"{input_name}_tokens_details") or {}).get("cached_tokens"))
    if cached is not None:
        out["cache_read_tokens"] = cached
    details = raw.get(f"{output_name}_tokens_details") or {}
    reasoning = usage_int(details.get("reasoning_tokens"))
    if reasoning is not None:
        out["reasoning_tokens"] = reasoning
    return out


def append_turn(
    out: list[dict[str, Any]], role: str, items: list[Any], key: str = "content"
) -> None:
    """One message's wire items onto `out` (nothing when there are none), merged into the last
    message when it has the same role: the APIs whose turns alternate (Anthropic, Bedrock,
    Gemini) take a tool result and the user's next text as one user turn."""
    if not items:
        return
    if out and out[-1]["role"] == role:
        out[-1][key].extend(items)
    else:
        out.append({"role": role, key: items})
