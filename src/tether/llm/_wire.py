"""What every stream parser reads events with: one event's JSON, tool arguments, token counts."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

__all__ = ["loads", "parse_json_or_raw", "usage_int"]

# The decoder's scanner is public in CPython but missing from typeshed.
_scan_once: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


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


def usage_int(value: Any) -> int | None:
    """A token count from a usage object, or None when absent or not a number."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value)
    return None
