"""MessageStore: one append-only transcript per `memory_scope`.

The lab keeps every conversation as a plain list of records per scope. The list only grows by
`append()` (or is swapped whole by `replace()`); nothing summarizes, drops or reorders it, so the
length of the list is a stable cursor: the inspection UI splits turns by it and a retry copies it.

The first record of a scope the lab created is the pinned system prompt
(`{"role": "system", "content": [{"type": "text", "text": ...}], "agent_id": ...}`); every other
record is a `tether.session.Message`. The store itself only requires JSON-safe dicts with a string
`role`, so it holds exactly what was given and hands back an equal copy.

Three implementations pass one contract suite (`tests/stores/test_message_store.py`):
`InMemoryMessageStore` (`tether.stores.memory`), `SqliteMessageStore` (`tether.stores.sqlite`)
and `PostgresMessageStore` (`tether.stores.postgres`).
Appends are atomic (all records of one call or none) and cost the same at record 10 and record
10,000; concurrent writers to one scope lose nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Literal, NotRequired, Protocol, TypeAlias, TypedDict, runtime_checkable

from ..events import TextPart
from ..session import Message

__all__ = [
    "MessageStore",
    "ScopeInfo",
    "ScopeLeases",
    "ScopeVersions",
    "StoredRecord",
    "SystemRecord",
    "WatchesScopes",
]


class SystemRecord(TypedDict):
    """The pinned system prompt: the first stored record of a scope the lab created."""

    role: Literal["system"]
    content: list[TextPart]
    agent_id: NotRequired[str]
    """The id of the agent whose prompt was pinned (tells a follow-up from a conflict)."""


StoredRecord: TypeAlias = Message | SystemRecord


@dataclass(slots=True, frozen=True)
class ScopeInfo:
    """What a store knows about one scope besides its records."""

    scope: str
    length: int
    """How many records the scope holds."""
    title: str | None
    """The conversation title, once a title workflow named it."""
    created_at: float
    """Unix time of the first write."""
    updated_at: float
    """Unix time of the last write."""


class MessageStore(Protocol):
    """One append-only list of records per scope."""

    async def load(
        self, scope: str, *, start: int = 0, end: int | None = None, after: int | None = None
    ) -> list[StoredRecord]:
        """The records of `scope` with index `start` <= i < `end` (`end` None: to the last; an
        unknown scope is empty); `after=seq` is `start=seq + 1` (the records after index `seq`). A
        page of a long conversation reads only its own records.

        Raises:
            StoreCorruptError: a stored record does not parse.
        """
        ...

    async def tail(self, scope: str, n: int) -> tuple[int, list[StoredRecord]]:
        """The last `n` records of `scope` and the index of the first of them (``(0, [])`` when
        nothing is returned): read backwards on the (scope, index) key, so the cost depends on
        `n`, not on how long the conversation is. With `load(start=)` it pages backwards.

        Raises:
            StoreCorruptError: a stored record does not parse.
        """
        ...

    async def append(
        self, scope: str, records: Sequence[StoredRecord], *, lease: str | None = None
    ) -> int:
        """Append `records` atomically (all or none) and return the new length.

        `lease` (for a store with `ScopeLeases`) is the owner of the scope's lease the append
        is made under: it is refused, in the statement that would write it, unless that owner
        still holds the lease (a holder that stalled past its lease and was taken over writes
        nothing more).

        Raises:
            LeaseLostError: `lease` is given and does not hold the scope's lease; nothing is
                written.
            NotJSONSafeError: a record would not survive a JSON round trip; nothing is written.
            StoreError: a record is not a dict with a string `role`; nothing is written.
        """
        ...

    async def replace(self, scope: str, records: Sequence[StoredRecord]) -> None:
        """Swap the whole list of `scope` for `records` atomically (the title stays)."""
        ...

    async def length(self, scope: str) -> int:
        """How many records `scope` holds (0 for an unknown scope)."""
        ...

    async def set_title(self, scope: str, title: str) -> None:
        """Store the conversation title with the scope."""
        ...

    async def get_title(self, scope: str) -> str | None:
        """The title stored with the scope, if any."""
        ...

    async def info(self, scope: str) -> ScopeInfo | None:
        """Length, title and times of `scope`; None when it was never written."""
        ...

    async def scopes(
        self, *, limit: int = 100, offset: int = 0, title: str | None = None
    ) -> list[ScopeInfo]:
        """Known scopes, most recently written first; with `title`, only those whose title
        contains it (case-insensitive for ASCII letters)."""
        ...

    async def delete(self, scope: str) -> None:
        """Forget `scope` and its title (an unknown scope is a no-op)."""
        ...

    async def aclose(self) -> None:
        """Release what the store opened itself; idempotent."""
        ...


@runtime_checkable
class ScopeLeases(Protocol):
    """Scope leases: which episode may write a scope now, across processes and machines.

    A lease is a row (scope, owner, expiry) taken and renewed in short transactions — never a
    transaction or a connection held across a model call — and judged by the store's clock
    (the server's, for PostgreSQL). An owner that dies stops renewing; its lease expires and
    the next episode takes the scope. The lab's episode runner takes the lease of its scope
    around load, run and commit (`tether.lab`), so turns on one scope run one after another.
    The three built-in MessageStores implement it; a MessageStore without it gets the
    in-process lock only.
    """

    async def acquire_scope(
        self, scope: str, owner: str, *, ttl: float, replace: str | None = None
    ) -> str | None:
        """Take the lease on `scope` for `owner`, for `ttl` seconds, unless another owner
        holds a lease that has not expired (a holder named `replace`, which the caller knows is
        gone, does not count). None when `owner` holds it now; else the holder."""
        ...

    async def renew_scope(self, scope: str, owner: str, *, ttl: float) -> bool:
        """Extend `owner`'s lease on `scope` to `ttl` seconds from now; False when `owner`
        no longer holds it (it expired and another owner took it)."""
        ...

    async def release_scope(self, scope: str, owner: str) -> None:
        """Give the lease up, if `owner` still holds it."""
        ...


@runtime_checkable
class ScopeVersions(Protocol):
    """Scope versions: whether anybody wrote a scope since a known point, in one short read.

    A scope's version goes up by exactly one with every `append` and `replace` of its records
    (a title does not count), whoever makes it: this process or another, under a lease or not.
    A scope that was never written is at version 0; a new scope starts at a random number, so a
    scope deleted and written again does not come back to a version it had. A writer that
    loaded the scope at version `v` (`load_versioned`) and made `k` appends since knows the
    records are still exactly what it loaded and appended when the scope is at `v + k`: the lab
    keeps the transcript an episode left, and the next episode on the scope uses it instead of
    loading it again when the version says nothing else was written (`tether.lab`). The three
    built-in MessageStores implement it.
    """

    async def version(self, scope: str) -> int:
        """The scope's version now (0: never written)."""
        ...

    async def load_versioned(self, scope: str) -> tuple[int, list[StoredRecord]]:
        """`load(scope)` and the version of what it read, read together (one snapshot).

        Raises:
            StoreCorruptError: a stored record does not parse.
        """
        ...


@runtime_checkable
class WatchesScopes(Protocol):
    """ScopeLeases that tell a waiting episode when a scope's lease is released, so it takes
    the scope then instead of polling (PostgreSQL: `LISTEN/NOTIFY`). Without it, an episode of
    another process polls with a backoff."""

    def watch_scope(self, scope: str) -> AbstractAsyncContextManager[asyncio.Event | None]:
        """While entered, an event set each time the scope's lease may have been released —
        try to take it again then. The watch is in place when the block begins. None: this
        store cannot tell now (poll)."""
        ...
