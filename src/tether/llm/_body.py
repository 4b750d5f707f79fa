"""A request body's bytes, without encoding the same megabytes of media again each turn.

A body that carries an image carries its base64 text, megabytes of it, and `json` scans every
character of a string for what it must escape (about 45 ms for a 5 MB image's 7 MB), every
turn. The text is the same object turn after turn (a `BlobResolver` keeps it, a Session's part
holds it, `data_url` keeps the URL made of it), so `BodyEncoder` encodes each long string once
and keeps the JSON bytes by the string's identity, in an LRU bounded in bytes
(`tether.llm._kept`). The rest of the body is encoded by `json` around them (one call per run of
siblings without a long string), and the result is exactly `dumps(body).encode("utf-8")`: JSON
encodes a container as its members' encodings between separators, so splicing the members'
bytes changes nothing.

```python
encoder = BodyEncoder()
content = encoder.encode(body)  # == dumps(body).encode("utf-8"), long strings from the cache
```
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

from .._json import dumps
from ._kept import Kept
from ._media import MEDIA

__all__ = [
    "DEFAULT_BODY_CACHE_BYTES",
    "SPLICE_MIN",
    "BodyEncoder",
    "carries_long_data",
    "json_string",
]

SPLICE_MIN = 32 * 1024
"""Strings at least this long are encoded once and kept; shorter ones cost `json` little."""

DEFAULT_BODY_CACHE_BYTES = 128 * 1024 * 1024
"""What a `BodyEncoder` keeps: the encoded bytes plus the strings it holds them for."""

# Printable ASCII but the two characters JSON escapes there: deleting these from a string's
# bytes leaves nothing exactly when the string is its own JSON text between quotes.
_VERBATIM = bytes(c for c in range(0x20, 0x80) if c not in b'"\\')


def json_string(text: str) -> bytes:
    """`dumps(text).encode("utf-8")`, quicker for text that needs no escaping (base64, data:
    URLs): one pass that checks it, none that escapes it."""
    if text.isascii():
        raw = text.encode("ascii")
        if not raw.translate(None, _VERBATIM):
            return b"".join((b'"', raw, b'"'))
    return dumps(text).encode("utf-8")


def carries_long_data(messages: Sequence[Any]) -> bool:
    """True when a media part of `messages` (a tool result's included) has `SPLICE_MIN` or more
    characters of data: only then is a body worth walking for long strings (a text body is
    encoded by `json` alone, in one call)."""
    for message in messages:
        content = message.get("content")
        if type(content) is list and _long_data(content):
            return True
    return False


def _long_data(parts: list[Any]) -> bool:
    for part in parts:
        if type(part) is not dict:
            continue
        kind = part.get("type")
        if kind in MEDIA:
            data = part.get("data")
            if type(data) is str and len(data) >= SPLICE_MIN:
                return True
        elif kind == "tool_result":
            inner = part.get("parts")
            if type(inner) is list and _long_data(inner):
                return True
    return False


class Pieces:
    """A request body sent as its pieces, one after the other (httpx streams an async iterable
    with the `content-length` given): no copy of the megabytes joins them. Each iteration
    starts over, so a retried request sends it whole again."""

    __slots__ = ("length", "pieces")

    def __init__(self, pieces: Sequence[bytes]) -> None:
        self.pieces = pieces
        """The bytes, in order."""
        self.length = sum(len(p) for p in pieces)
        """Their total length."""

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._each()

    async def _each(self) -> AsyncIterator[bytes]:
        for piece in self.pieces:
            yield piece


class _NotPlain(Exception):
    """The body has something `dumps` encodes in a way a member-wise encoding would not match
    (a key that is not a string): encode it whole."""


class BodyEncoder:
    """Encodes request bodies, keeping the JSON bytes of their long strings (`SPLICE_MIN`
    characters or more) by the strings' identity (`tether.llm._kept`), within `max_bytes`."""

    def __init__(self, *, max_bytes: int = DEFAULT_BODY_CACHE_BYTES) -> None:
        self.kept: Kept[bytes] = Kept(max_bytes)
        """The encoded long strings (each entry counts its bytes and its string's)."""
        self.encoded = 0
        """How many long strings were encoded so far (a kept one is not encoded again)."""

    def encode(self, body: Any) -> bytes:
        """Exactly `dumps(body).encode("utf-8")`."""
        return b"".join(self.pieces(body))

    def pieces(self, body: Any) -> list[bytes]:
        """`encode(body)` in pieces, to be sent one after the other without joining them (a
        long string's kept bytes are one piece, never copied)."""
        try:
            pieces = self._pieces(body)
        except _NotPlain:
            pieces = None
        if pieces is None:
            return [dumps(body).encode("utf-8")]
        out: list[bytes] = []
        run: list[str] = []
        for piece in pieces:
            if isinstance(piece, str):
                run.append(piece)
            else:
                if run:
                    out.append("".join(run).encode("utf-8"))
                    run.clear()
                out.append(piece)
        if run:
            out.append("".join(run).encode("utf-8"))
        return out

    def string(self, text: str) -> bytes:
        """The JSON bytes of `text`, kept from before when this string was encoded before."""
        raw = self.kept.get(text)
        if raw is None:
            raw = json_string(text)
            self.encoded += 1
            self.kept.put(text, raw, len(raw) + len(text))
        return raw

    def _pieces(self, value: Any) -> list[str | bytes] | None:
        """`value`'s JSON as pieces (text from `dumps`, cached bytes), or None when it holds no
        long string (its caller encodes it with its siblings)."""
        if isinstance(value, str):
            return [self.string(value)] if len(value) >= SPLICE_MIN else None
        if isinstance(value, dict):
            return self._mapping(value)
        if isinstance(value, (list, tuple)):
            return self._sequence(value)
        return None  # a number, a bool, None (or what dumps refuses, as it will)

    def _mapping(self, value: dict[Any, Any]) -> list[str | bytes] | None:
        found: dict[Any, list[str | bytes]] = {}
        for key, member in value.items():
            t = type(member)
            if (t is str and len(member) < SPLICE_MIN) or t in _SCALARS:
                continue  # most of a body: no call for it
            pieces = self._pieces(member)
            if pieces is not None:
                found[key] = pieces
        if not found:
            return None
        out: list[str | bytes] = ["{"]
        for i, (key, member) in enumerate(value.items()):
            if type(key) is not str:
                raise _NotPlain
            if i:
                out.append(",")
            out.append(dumps(key))
            out.append(":")
            pieces = found.get(key)
            if pieces is None:
                out.append(dumps(member))
            else:
                out += pieces
        out.append("}")
        return out

    def _sequence(self, value: Sequence[Any]) -> list[str | bytes] | None:
        found: list[tuple[int, list[str | bytes]]] = []
        for i, member in enumerate(value):
            t = type(member)
            if (t is str and len(member) < SPLICE_MIN) or t in _SCALARS:
                continue
            pieces = self._pieces(member)
            if pieces is not None:
                found.append((i, pieces))
        if not found:
            return None
        out: list[str | bytes] = ["["]
        start = 0
        for i, pieces in found:
            if i > start:  # the members between: one dumps call, its brackets cut off
                out.append(dumps(list(value[start:i]))[1:-1])
                out.append(",")
            out += pieces
            out.append(",")
            start = i + 1
        if start < len(value):
            out.append(dumps(list(value[start:]))[1:-1])
        else:
            out.pop()  # the comma after the last member
        out.append("]")
        return out


_SCALARS = frozenset({int, float, bool, type(None)})
