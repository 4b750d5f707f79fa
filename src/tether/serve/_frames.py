"""Run events as SSE messages, written a bounded piece at a time.

A stream's memory must not grow with the largest event of its run: the last events of a run
carry its whole answer (`agent_messages_committed`, `agent_finished`), and a tool result may be
megabytes. So no event is encoded whole here:

- an event the store gives as its JSON text (`EventPieces.stored_events`) is framed around that
  text, and one the store keeps in pieces is read a few pieces at a time and written as it comes;
- an event given as a value (a live one, or from a store without `EventPieces`) is encoded by
  `json_pieces`, which cuts long strings and long containers into bounded pieces (the value is
  in this process's memory already; its encoding never is, whole).

Small events are gathered into writes of about `WRITE` bytes, so a page of deltas is one write,
as before. Each message is ``id: <seq>``, ``event: <type>`` and one ``data:`` line holding the
event as JSON (JSON never holds a raw CR or LF, so one line it stays).
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any, Final

from ..stores.run_store import PIECE, EventPieces, RunEvent, StoredEvent

__all__ = ["WRITE", "event_messages", "json_pieces"]

WRITE: Final = 65_536
"""Bytes gathered before they are written (a bigger event goes out in writes about this big)."""
_PIECES_AT_ONCE: Final = max(WRITE // PIECE, 1)
"""Pieces of a long stored event read from the store at once."""
_FLAT: Final = 32
"""A list or object of at most this many scalars, none of them a long string, is encoded in one
call (at most `_FLAT` × `PIECE` characters); a bigger one item by item."""

_SURROGATE = re.compile("[\ud800-\udfff]")
_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def _small(value: Any) -> bool:
    """Whether `value` encodes to a bounded text: a scalar, a string of at most `PIECE`
    characters, or a flat list or object of at most `_FLAT` of those."""
    if isinstance(value, str):
        return len(value) <= PIECE
    if isinstance(value, dict):
        items: Any = value.values()
    elif isinstance(value, list | tuple):
        items = value
    else:
        return True
    if len(items) > _FLAT:
        return False
    for item in items:
        if isinstance(item, str):
            if len(item) > PIECE:
                return False
        elif isinstance(item, dict | list | tuple):
            return False
    return True


def json_pieces(value: Any) -> Iterator[str]:
    """`value` as compact JSON (non-ASCII kept), in pieces of bounded size (see `_FLAT`):
    joined, they are the value's JSON text. The value must be JSON-safe (a run event is)."""
    if _small(value):
        yield _dumps(value)
    elif isinstance(value, str):
        yield '"'
        for start in range(0, len(value), PIECE):
            yield _dumps(value[start : start + PIECE])[1:-1]
        yield '"'
    elif isinstance(value, dict):
        sep = "{"
        for key, item in value.items():
            yield f"{sep}{_dumps(str(key))}:"
            yield from json_pieces(item)
            sep = ","
        yield "}" if sep == "," else "{}"
    else:
        sep = "["
        for item in value:
            yield sep
            yield from json_pieces(item)
            sep = ","
        yield "]" if sep == "," else "[]"


def _utf8(text: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate (from a \\ud800 escape a model or tool wrote): UTF-8 has no bytes
        # for it, JSON's escape keeps it. In JSON text a character outside ASCII is only ever
        # inside a string, where its escape means the same.
        return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text).encode("utf-8")


def _head(run_id: str, seq: int, kind: str, at: float) -> str:
    return (
        f"id: {seq}\nevent: {kind}\ndata: "
        f'{{"run_id":{_dumps(run_id)},"seq":{seq},"type":{_dumps(kind)},"at":{_dumps(at)},"data":'
    )


async def event_messages(
    store: object, run_id: str, events: Sequence[RunEvent | StoredEvent]
) -> AsyncIterator[bytes]:
    """The SSE messages of `events`, in writes of about `WRITE` bytes (a small batch in one).

    `store` is where a `StoredEvent` kept in pieces is read from (an `EventPieces`)."""
    out: list[bytes] = []
    size = 0
    for event in events:
        async for text in _texts(store, run_id, event):
            chunk = _utf8(text)
            out.append(chunk)
            size += len(chunk)
            if size >= WRITE:
                yield b"".join(out)
                out, size = [], 0
    if out:
        yield b"".join(out)


def _texts(store: object, run_id: str, event: RunEvent | StoredEvent) -> AsyncIterator[str]:
    if isinstance(event, StoredEvent):
        return _stored(store, run_id, event)
    return _live(event)


async def _live(event: RunEvent) -> AsyncIterator[str]:
    yield _head(run_id=event["run_id"], seq=event["seq"], kind=event["type"], at=event["at"])
    for piece in json_pieces(event["data"]):
        yield piece
    yield "}\n\n"


async def _stored(store: object, run_id: str, event: StoredEvent) -> AsyncIterator[str]:
    yield _head(run_id, event.seq, event.type, event.at)
    if event.data is not None:
        yield event.data
    else:
        assert isinstance(store, EventPieces)
        start = 0
        while pieces := await store.event_pieces(
            run_id, event.seq, start=start, limit=_PIECES_AT_ONCE
        ):
            for piece in pieces:
                yield piece
            start += len(pieces)
    yield "}\n\n"
