"""Kept transcripts: what an episode left on its memory scope, for the next episode there.

Loading a scope's whole transcript on every turn (reading each record, parsing it, checking the
session it makes) is what made a long conversation's turns cost more than its first ones; yet
the episode that loaded a transcript and appended to it knows what the scope holds when it
ends. With a MessageStore that has `ScopeVersions`, the lab keeps that transcript per scope
together with the version the episode left the scope at (the version it loaded, plus one per
append it made); the next episode on the scope reads the version (one short read) and uses the
kept transcript when it matches: nobody wrote the scope since, in this process or another,
under a lease or not. Otherwise it loads the scope whole, and keeps that.

What is kept is what a load gives: the pinned prompt split off and any other system record
dropped (`split_pin`), each record an equal copy of what was appended. An append of media (which
a store may keep as a blob, the record holding a reference) or of a record that is no message
(a history policy's summary) drops the scope's copy: the next episode loads it. The kept
records are the episodes' to read, never to change (the harness only ever appends messages of
its own to a turn's transcript). At most `KEEP_RECORDS` records per store are kept, the
transcripts of the scopes used least recently dropped first.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

from .._json import copy_json
from ..blobs import MEDIA_PART_TYPES
from ..session import Message
from ..stores.message_store import MessageStore, ScopeVersions, StoredRecord, SystemRecord

__all__ = ["KEEP_RECORDS", "appended", "load"]

KEEP_RECORDS: Final = 20_000
"""Records kept per store, all scopes together: past it, the transcripts of the scopes used
least recently are dropped (one longer than this is not kept)."""

Split: TypeAlias = Callable[[str, list[StoredRecord]], tuple[SystemRecord | None, list[Message]]]
"""How a loaded list becomes the pin and the transcript (`tether.lab._episode.split_pin`)."""

_MESSAGE_ROLES: Final = frozenset({"user", "assistant", "tool"})


@dataclass(slots=True)
class _Kept:
    version: int
    """The version the scope is at when it still holds exactly this."""
    length: int
    pin: SystemRecord | None
    messages: list[Message]


class _Transcripts:
    """The kept transcripts of one store, least recently used first, and their records."""

    __slots__ = ("records", "scopes")

    def __init__(self) -> None:
        self.scopes: OrderedDict[str, _Kept] = OrderedDict()
        self.records = 0

    def take(self, scope: str) -> _Kept | None:
        entry = self.scopes.pop(scope, None)
        if entry is not None:
            self.records -= entry.length
        return entry

    def put(self, scope: str, entry: _Kept) -> None:
        self.take(scope)
        if entry.length > KEEP_RECORDS:
            return  # kept, it would drop every other
        self.scopes[scope] = entry
        self.records += entry.length
        while self.records > KEEP_RECORDS:
            _, dropped = self.scopes.popitem(last=False)
            self.records -= dropped.length


_KEPT: weakref.WeakKeyDictionary[Any, _Transcripts] = weakref.WeakKeyDictionary()
_VERSIONED: dict[type, bool] = {}


def _kept(store: MessageStore) -> _Transcripts | None:
    """The kept transcripts of `store`; None for a store without `ScopeVersions`."""
    kind = type(store)
    versioned = _VERSIONED.get(kind)
    if versioned is None:
        # A Protocol check looks every method up; a class is checked once (a delegating
        # wrapper, which answers per instance, every time).
        versioned = isinstance(store, ScopeVersions)
        if not hasattr(kind, "__getattr__"):
            _VERSIONED[kind] = versioned
    if not versioned:
        return None
    try:
        kept = _KEPT.get(store)
        if kept is None:
            kept = _KEPT[store] = _Transcripts()
    except TypeError:  # a store that cannot be weakly referenced keeps nothing
        return None
    return kept


async def load(
    store: MessageStore, scope: str, split: Split
) -> tuple[SystemRecord | None, list[Message], int]:
    """The pin, the transcript (a list of the caller's own) and the length of `scope`: the kept
    transcript when the store's version says it is still what the scope holds, else loaded.

    Raises:
        StoreCorruptError: a stored record does not parse, or they make no session.
    """
    kept = _kept(store)
    if kept is None:
        stored = await store.load(scope)
        pin, messages = split(scope, stored)
        return pin, messages, len(stored)
    assert isinstance(store, ScopeVersions)
    entry = kept.scopes.get(scope)
    if entry is not None and await store.version(scope) == entry.version:
        kept.scopes.move_to_end(scope)
        return entry.pin, list(entry.messages), entry.length
    version, stored = await store.load_versioned(scope)
    pin, messages = split(scope, stored)
    if version:  # a scope never written starts at a random version: nothing to keep yet
        kept.put(scope, _Kept(version, len(stored), pin, list(messages)))
    else:
        kept.take(scope)
    return pin, messages, len(stored)


def appended(store: MessageStore, scope: str, records: Sequence[StoredRecord], length: int) -> None:
    """`records` were appended to `scope` in one write that made it `length` long: the kept
    transcript goes on with copies of them, at the next version (or is dropped when the append
    did not go right after it, or holds what a load would not give back equal)."""
    try:
        kept = _KEPT.get(store)
    except TypeError:  # no weak references: nothing kept
        return
    entry = kept.take(scope) if kept is not None else None
    if kept is None or entry is None or entry.length != length - len(records):
        return
    pin = entry.pin
    add: list[Message] = []
    for index, record in enumerate(records, entry.length):
        role = record.get("role")
        if role == "system":
            if index == 0:
                pin = copy_json(record)
            continue
        if role not in _MESSAGE_ROLES or not _plain(record):
            return
        add.append(copy_json(record))
    entry.messages.extend(add)
    entry.pin = pin
    entry.version += 1
    entry.length = length
    kept.put(scope, entry)


def _plain(record: StoredRecord) -> bool:
    """Whether a store gives `record` back equal: no media in it (a store may keep media as a
    blob, the record holding a reference), wherever a store would look for some. Parts of a
    kind other than text, thinking, tool calls and results (a provider's own block) count as
    media."""
    content: Any = record.get("content")
    if not isinstance(content, list):
        return True
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "tool_call":
            if _has_media(part.get("input")):
                return False
        elif kind not in _PLAIN_PARTS or "parts" in part:
            return False
    return True


_PLAIN_PARTS: Final = frozenset({"text", "thinking", "tool_result"})


def _has_media(value: Any) -> bool:
    """A media part anywhere in `value` (a tool call's input: small, and rarely nested)."""
    if isinstance(value, dict):
        return value.get("type") in MEDIA_PART_TYPES or any(map(_has_media, value.values()))
    if isinstance(value, list):
        return any(map(_has_media, value))
    return False
