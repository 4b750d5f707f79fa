"""The text of one streamed answer, and its `text` events, at a cost linear in the text.

A `text` event carries the delta and the whole `snapshot` so far. Building every snapshot as
the chunks arrive costs the square of the answer's length (a 1 MB answer in 10-byte chunks: 100k
strings averaging 500 kB), and a caller that keeps the events would keep all of them. So a
`text` event is a dict whose `snapshot` is joined from the shared list of deltas only when it is
read (and then kept in the event): an event nobody reads the snapshot of costs O(1).

The event stays a dict for every reader: ``event["snapshot"]``, ``.get()``, ``in``, iteration,
``dict(event)``, ``==``, ``repr()``, ``json.dumps`` and ``copy``/``pickle`` all see the snapshot.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["TextBuffer"]


class TextBuffer:
    """Collects one model call's text deltas and makes their `text` events."""

    __slots__ = ("_joined", "_joined_n", "parts", "size")

    def __init__(self) -> None:
        self.parts: list[str] = []
        """The deltas so far."""
        self.size = 0
        """Their total length, in characters."""
        self._joined = ""
        self._joined_n = 0

    def add(self, delta: str) -> Any:
        """Append `delta` and return its `TextEvent` (whose snapshot ends with it). Typed Any:
        the event is a `_LazyText` that reads as a TextEvent, and a cast costs on this path."""
        parts = self.parts
        parts.append(delta)
        self.size += len(delta)
        lazy = _LazyText()
        lazy["type"] = "text"
        lazy["text"] = delta
        lazy._buffer = self
        lazy._count = len(parts)
        return lazy

    def upto(self, count: int) -> str:
        """The text of the first `count` deltas (the latest join is kept: reading the snapshots
        in order joins each delta once more, not the whole prefix from the start)."""
        if count == self._joined_n:
            return self._joined
        if count > self._joined_n:
            text = self._joined + "".join(self.parts[self._joined_n : count])
        else:
            text = "".join(self.parts[:count])
        self._joined, self._joined_n = text, count
        return text

    def value(self) -> str:
        """Everything so far."""
        return self.upto(len(self.parts))


class _LazyText(dict[str, Any]):
    """A `text` event whose `snapshot` is filled in on first read."""

    __slots__ = ("_buffer", "_count")

    _buffer: TextBuffer
    _count: int

    def _fill(self) -> None:
        if not dict.__contains__(self, "snapshot"):
            dict.__setitem__(self, "snapshot", self._buffer.upto(self._count))

    def __missing__(self, key: str) -> Any:
        if key == "snapshot":
            self._fill()
            return dict.__getitem__(self, key)
        raise KeyError(key)

    def __contains__(self, key: object) -> bool:
        return key == "snapshot" or dict.__contains__(self, key)

    def get(self, key: str, default: Any = None) -> Any:
        if key == "snapshot":
            self._fill()
        return dict.get(self, key, default)

    def copy(self) -> dict[str, Any]:
        self._fill()
        return dict(dict.items(self))

    __hash__ = None

    def __or__(self, other: Any) -> Any:
        return self.copy() | other

    def __reduce_ex__(self, protocol: Any) -> Any:
        self._fill()
        return (dict, (dict(dict.items(self)),))


def _filled(method: Callable[..., Any]) -> Callable[..., Any]:
    def read(self: _LazyText, *args: Any) -> Any:
        self._fill()
        return method(self, *args)

    read.__name__ = read.__qualname__ = method.__name__
    return read


# The dict methods that see every key (or change the dict) fill the snapshot in first.
for _name in (
    "__iter__",
    "__len__",
    "__eq__",
    "__ne__",
    "__repr__",
    "keys",
    "values",
    "items",
    "pop",
    "popitem",
    "setdefault",
):
    setattr(_LazyText, _name, _filled(getattr(dict, _name)))
del _name
