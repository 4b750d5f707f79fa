"""Partial structured output: the JSON value parsed so far from an answer that is still
streaming, for `partial_output` events."""

from __future__ import annotations

from typing import Any

from ._text import TextBuffer
from .events import PartialOutputEvent

__all__ = ["PartialOutput"]


class PartialOutput:
    """Parses the answer so far after each text chunk (pydantic-core's partial JSON mode, in
    which an unfinished string is kept as far as it came) and reports a value only when it
    differs from the last one reported."""

    __slots__ = ("last", "seen")

    def __init__(self) -> None:
        self.last: Any = None
        self.seen = False

    def feed(self, text: TextBuffer) -> PartialOutputEvent | None:
        """The event for the answer so far, or None when nothing parses yet or nothing
        changed (an answer that is not JSON never yields one)."""
        from pydantic_core import from_json  # on first use: importing it costs ~40 ms

        try:
            value = from_json(text.value(), allow_partial="trailing-strings")
        except ValueError:
            return None
        if self.seen and value == self.last:
            return None
        self.seen = True
        self.last = value
        return {"type": "partial_output", "output": value}
