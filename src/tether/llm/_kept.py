"""`Kept`: what was made from a long string, kept by that string's identity, in an LRU bounded
in bytes. Used where a request would otherwise rebuild megabytes from the same string each turn
(a data: URL from an image's base64, the JSON bytes of either: see `tether.llm._body`).

An entry holds its string, so no other object can have that string's `id` while the entry
lives: a lookup finds an entry only for that very string. Equal text in another object is a
miss (made again, never confused with anything else).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Generic, TypeVar

from ..errors import ConfigError

__all__ = ["Kept"]

V = TypeVar("V")


class Kept(Generic[V]):
    """Values made from strings, by (the string's identity, a tag), least recently used first
    out once `max_bytes` is passed. `size` counts what an entry holds, its string included; an
    entry bigger than the whole bound is not kept."""

    def __init__(self, max_bytes: int) -> None:
        if not isinstance(max_bytes, int) or isinstance(max_bytes, bool) or max_bytes < 0:
            raise ConfigError(f"max_bytes must be an int >= 0, not {max_bytes!r}")
        self.max_bytes = max_bytes
        """The bound, in bytes (a string's characters count one each)."""
        self._entries: OrderedDict[tuple[int, str], tuple[str, V, int]] = OrderedDict()
        self._held = 0
        self._lock = threading.Lock()  # adapters may serve several threads' event loops

    @property
    def held(self) -> int:
        """The bytes the entries hold now."""
        return self._held

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, text: str, tag: str = "") -> V | None:
        """The value kept for this very string and tag, or None."""
        key = (id(text), tag)
        with self._lock:
            found = self._entries.get(key)
            if found is None or found[0] is not text:
                return None
            self._entries.move_to_end(key)
            return found[1]

    def put(self, text: str, value: V, size: int, tag: str = "") -> None:
        """Keep `value` for `text` and `tag` (`size`: the bytes of both)."""
        if size > self.max_bytes:
            return
        key = (id(text), tag)
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:  # another thread made it meanwhile: count it once
                self._held -= old[2]
            self._entries[key] = (text, value, size)
            self._held += size
            while self._held > self.max_bytes:
                _, (_, _, gone) = self._entries.popitem(last=False)
                self._held -= gone
