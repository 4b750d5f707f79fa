"""Partial structured output: the JSON value parsed so far from an answer that is still
streaming, for `partial_output` events.

Parsing the whole answer after every chunk costs the square of its length (a 100 KB answer in
10-byte chunks: 10,000 parses averaging 50 KB). So the answer is parsed after every chunk only
while it is short; beyond that, once it has tripled since the last parse or about `INTERVAL`
seconds of text (at the rate it arrives) later, whichever comes first, and once more when the
stream ends. A fast stream's parsing work is then linear in the answer (about one and a half
parses of it, plus the short prefix), a chunk that is not parsed costs one comparison, and
the reader of a slow stream still sees the object grow every `INTERVAL` or so.
"""

from __future__ import annotations

import time
from typing import Any

from ._text import TextBuffer
from .events import PartialOutputEvent

__all__ = ["INTERVAL", "SHORT", "PartialOutput"]

SHORT = 256
"""Answers up to this many characters are parsed after every chunk (each parse is cheap)."""
INTERVAL = 0.05
"""About how often a longer answer is parsed again while it streams slowly."""


class PartialOutput:
    """Parses the answer so far (pydantic-core's partial JSON mode, in which an unfinished
    string is kept as far as it came) and reports a value only when it differs from the last
    one reported. `next` is the answer's length at which the next parse is due: a caller that
    checks it first costs a chunk one comparison."""

    __slots__ = ("_at", "_parsed", "last", "next", "seen")

    def __init__(self) -> None:
        self.last: Any = None
        self.seen = False
        self.next = 0
        """The length at which `feed` parses again."""
        self._parsed = 0
        """The answer's length at the last parse..."""
        self._at = 0.0
        """...and the monotonic time of it."""

    def feed(self, text: TextBuffer) -> PartialOutputEvent | None:
        """The event for the answer so far, or None when nothing parses yet, nothing changed
        or no parse is due (an answer that is not JSON never yields one)."""
        if text.size < self.next:
            return None
        return self._parse(text)

    def flush(self, text: TextBuffer) -> PartialOutputEvent | None:
        """At the end of the stream: the event for the whole answer, unless it was the last."""
        if text.size == self._parsed:
            return None
        return self._parse(text)

    def _parse(self, text: TextBuffer) -> PartialOutputEvent | None:
        from pydantic_core import from_json  # on first use: importing it costs ~40 ms

        size = text.size
        if size <= SHORT:
            self.next = size + 1
        else:
            # Due again when the answer has tripled, or sooner: after about INTERVAL seconds
            # at the rate the text has been arriving since the last parse.
            now = time.monotonic()
            rate = (size - self._parsed) / max(now - self._at, 1e-6)
            self.next = size + max(1, min(2 * size, int(rate * INTERVAL)))
            self._at = now
        self._parsed = size
        try:
            value = from_json(text.value(), allow_partial="trailing-strings")
        except ValueError:
            return None
        if self.seen and value == self.last:
            return None
        self.seen = True
        self.last = value
        return {"type": "partial_output", "output": value}
