"""MessageStore: one append-only transcript per `memory_scope`.

The lab keeps every conversation as a plain list of records per scope. The list only grows by
`append()` (or is swapped whole by `replace()`); nothing summarizes, drops or reorders it, so the
length of the list is a stable cursor: the inspection UI splits turns by it and a retry copies it.

The first record of a scope the lab created is the pinned system prompt
(`{"role": "system", "content": [{"type": "text", "text": ...}], "agent_id": ...}`); every other
record is a `tether.session.Message`. The store itself only requires JSON-safe dicts with a string
`role`, so it holds exactly what was given and hands back an equal copy.

Three implementations pass one contract suite (`tests/stores/test_message_store.py`):
`InMemoryMessageStore`, `SqliteMessageStore` and `PostgresMessageStore` (in
`tether.stores.postgres`).
Appends are atomic (all records of one call or none) and cost the same at record 10 and record
10,000; concurrent writers to one scope lose nothing.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from os import PathLike
from typing import Any, Literal, NotRequired, Protocol, TypeAlias, TypedDict

from .._json import check_json_safe, dumps
from ..errors import StoreCorruptError, StoreError
from ..events import TextPart
from ..session import Message
from .sqlite import Migrations, SqliteBacked, connect, transaction

__all__ = [
    "InMemoryMessageStore",
    "MessageStore",
    "ScopeInfo",
    "SqliteMessageStore",
    "StoredRecord",
    "SystemRecord",
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
        self, scope: str, *, start: int = 0, end: int | None = None
    ) -> list[StoredRecord]:
        """The records of `scope` with index `start` <= i < `end` (`end` None: to the last; an
        unknown scope is empty). A page of a long conversation reads only its own records.

        Raises:
            StoreCorruptError: a stored record does not parse.
        """
        ...

    async def append(self, scope: str, records: Sequence[StoredRecord]) -> int:
        """Append `records` atomically (all or none) and return the new length.

        Raises:
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

    async def scopes(self, *, limit: int = 100, offset: int = 0) -> list[ScopeInfo]:
        """Known scopes, most recently written first."""
        ...

    async def delete(self, scope: str) -> None:
        """Forget `scope` and its title (an unknown scope is a no-op)."""
        ...

    async def aclose(self) -> None:
        """Release what the store opened itself; idempotent."""
        ...


def _encode(scope: str, records: Sequence[StoredRecord]) -> list[str]:
    """Check every record first, so a bad one leaves the store untouched."""
    if not isinstance(scope, str) or not scope:
        raise StoreError(f"memory scope must be a non-empty string, got {scope!r}")
    if isinstance(records, (str, bytes, dict)):
        raise StoreError("records must be a sequence of message records")
    out: list[str] = []
    for i, record in enumerate(records):
        if not isinstance(record, dict) or not isinstance(record.get("role"), str):
            raise StoreError(
                f"records[{i}] for scope {scope!r} is not a message record "
                f"(a dict with a string 'role'): {record!r:.120}"
            )
        check_json_safe(record, f"records[{i}]")
        out.append(dumps(record))
    return out


_END = 2**63 - 1
"""The `end` of a load to the last record (SQL integers are 64-bit)."""


def _decode(scope: str, index: int, raw: str) -> StoredRecord:
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise StoreCorruptError(f"scope {scope!r}, record {index}: not JSON: {exc}") from exc
    if not isinstance(value, dict) or not isinstance(value.get("role"), str):
        raise StoreCorruptError(f"scope {scope!r}, record {index}: not a message record")
    return value  # type: ignore[return-value]


# -- in memory -------------------------------------------------------------------------------


@dataclass(slots=True)
class _Scope:
    records: list[str]
    title: str | None
    created_at: float
    updated_at: float


class InMemoryMessageStore:
    """A MessageStore in a dict: for tests and for processes that need no persistence.

    Records are kept as JSON text, so `load()` hands back fresh copies and a record that would not
    survive a real store is refused here too. Safe to share between threads.
    """

    def __init__(self) -> None:
        self._scopes: dict[str, _Scope] = {}
        self._lock = threading.Lock()

    async def load(
        self, scope: str, *, start: int = 0, end: int | None = None
    ) -> list[StoredRecord]:
        start = max(start, 0)
        with self._lock:
            entry = self._scopes.get(scope)
            raw = entry.records[start:end] if entry is not None else []
        return [_decode(scope, start + i, r) for i, r in enumerate(raw)]

    async def append(self, scope: str, records: Sequence[StoredRecord]) -> int:
        encoded = _encode(scope, records)
        now = time.time()
        with self._lock:
            entry = self._scopes.get(scope)
            if entry is None:
                entry = self._scopes[scope] = _Scope([], None, now, now)
            entry.records.extend(encoded)
            entry.updated_at = now
            return len(entry.records)

    async def replace(self, scope: str, records: Sequence[StoredRecord]) -> None:
        encoded = _encode(scope, records)
        now = time.time()
        with self._lock:
            entry = self._scopes.get(scope)
            if entry is None:
                self._scopes[scope] = _Scope(encoded, None, now, now)
            else:
                entry.records = encoded
                entry.updated_at = now

    async def length(self, scope: str) -> int:
        with self._lock:
            entry = self._scopes.get(scope)
            return len(entry.records) if entry is not None else 0

    async def set_title(self, scope: str, title: str) -> None:
        _check_title(scope, title)
        now = time.time()
        with self._lock:
            entry = self._scopes.get(scope)
            if entry is None:
                entry = self._scopes[scope] = _Scope([], None, now, now)
            entry.title = title

    async def get_title(self, scope: str) -> str | None:
        with self._lock:
            entry = self._scopes.get(scope)
            return entry.title if entry is not None else None

    async def info(self, scope: str) -> ScopeInfo | None:
        with self._lock:
            entry = self._scopes.get(scope)
            if entry is None:
                return None
            return ScopeInfo(
                scope, len(entry.records), entry.title, entry.created_at, entry.updated_at
            )

    async def scopes(self, *, limit: int = 100, offset: int = 0) -> list[ScopeInfo]:
        with self._lock:
            items = [
                ScopeInfo(k, len(v.records), v.title, v.created_at, v.updated_at)
                for k, v in self._scopes.items()
            ]
        # Insertion order breaks ties, newest first, like the SQLite rowid order.
        order = {info.scope: i for i, info in enumerate(items)}
        items.sort(key=lambda s: (s.updated_at, order[s.scope]), reverse=True)
        return items[offset : offset + limit]

    async def delete(self, scope: str) -> None:
        with self._lock:
            self._scopes.pop(scope, None)

    async def aclose(self) -> None:
        return None


def _check_title(scope: str, title: str) -> None:
    if not isinstance(scope, str) or not scope:
        raise StoreError(f"memory scope must be a non-empty string, got {scope!r}")
    if not isinstance(title, str):
        raise StoreError(f"a title must be a string, got {type(title).__name__}")


# -- SQLite ----------------------------------------------------------------------------------

message_migrations = Migrations("messages")


@message_migrations
def m001_create_message_tables(conn: sqlite3.Connection) -> None:
    conn.execute(
        "CREATE TABLE message_scopes ("
        " scope TEXT PRIMARY KEY,"
        " length INTEGER NOT NULL DEFAULT 0,"
        " title TEXT,"
        " created_at REAL NOT NULL,"
        " updated_at REAL NOT NULL)"
    )
    conn.execute(
        "CREATE TABLE messages ("
        " scope TEXT NOT NULL REFERENCES message_scopes(scope) ON DELETE CASCADE,"
        " seq INTEGER NOT NULL,"
        " record TEXT NOT NULL,"
        " PRIMARY KEY (scope, seq)) WITHOUT ROWID"
    )
    conn.execute("CREATE INDEX message_scopes_updated ON message_scopes (updated_at)")


class SqliteMessageStore(SqliteBacked):
    """A MessageStore in SQLite. Takes its connection from the caller and migrates on
    construction; `SqliteMessageStore.open(path)` opens (and later closes) its own.

    The scope row carries the length, so an append reads one row and inserts its records: the
    same cost at any transcript length. The whole append is one `BEGIN IMMEDIATE` transaction,
    so writers in other threads or processes queue up instead of losing records.
    """

    def __init__(self, conn: sqlite3.Connection, *, owns: bool = False) -> None:
        super().__init__(conn, owns=owns)
        self._sync(message_migrations.apply)

    @classmethod
    def open(cls, path: str | PathLike[str]) -> SqliteMessageStore:
        """Open (creating if needed) the database at `path` with a connection of its own."""
        return cls(connect(path), owns=True)

    async def load(
        self, scope: str, *, start: int = 0, end: int | None = None
    ) -> list[StoredRecord]:
        def op(conn: sqlite3.Connection) -> list[tuple[int, str]]:
            return conn.execute(
                "SELECT seq, record FROM messages WHERE scope = ? AND seq >= ? AND seq < ?"
                " ORDER BY seq",
                (scope, max(start, 0), _END if end is None else end),
            ).fetchall()

        rows = await self._run(op)
        return [_decode(scope, seq, raw) for seq, raw in rows]

    async def append(self, scope: str, records: Sequence[StoredRecord]) -> int:
        encoded = _encode(scope, records)
        now = time.time()

        def op(conn: sqlite3.Connection) -> int:
            with transaction(conn):
                base = _ensure_scope(conn, scope, now)
                conn.executemany(
                    "INSERT INTO messages (scope, seq, record) VALUES (?, ?, ?)",
                    [(scope, base + i, raw) for i, raw in enumerate(encoded)],
                )
                total = base + len(encoded)
                conn.execute(
                    "UPDATE message_scopes SET length = ?, updated_at = ? WHERE scope = ?",
                    (total, now, scope),
                )
                return total

        return await self._run(op)

    async def replace(self, scope: str, records: Sequence[StoredRecord]) -> None:
        encoded = _encode(scope, records)
        now = time.time()

        def op(conn: sqlite3.Connection) -> None:
            with transaction(conn):
                _ensure_scope(conn, scope, now)
                conn.execute("DELETE FROM messages WHERE scope = ?", (scope,))
                conn.executemany(
                    "INSERT INTO messages (scope, seq, record) VALUES (?, ?, ?)",
                    [(scope, i, raw) for i, raw in enumerate(encoded)],
                )
                conn.execute(
                    "UPDATE message_scopes SET length = ?, updated_at = ? WHERE scope = ?",
                    (len(encoded), now, scope),
                )

        await self._run(op)

    async def length(self, scope: str) -> int:
        def op(conn: sqlite3.Connection) -> int:
            row = conn.execute(
                "SELECT length FROM message_scopes WHERE scope = ?", (scope,)
            ).fetchone()
            return int(row[0]) if row else 0

        return await self._run(op)

    async def set_title(self, scope: str, title: str) -> None:
        _check_title(scope, title)
        now = time.time()

        def op(conn: sqlite3.Connection) -> None:
            with transaction(conn):
                _ensure_scope(conn, scope, now)
                conn.execute("UPDATE message_scopes SET title = ? WHERE scope = ?", (title, scope))

        await self._run(op)

    async def get_title(self, scope: str) -> str | None:
        info = await self.info(scope)
        return info.title if info is not None else None

    async def info(self, scope: str) -> ScopeInfo | None:
        def op(conn: sqlite3.Connection) -> tuple[Any, ...] | None:
            row: tuple[Any, ...] | None = conn.execute(
                "SELECT scope, length, title, created_at, updated_at FROM message_scopes"
                " WHERE scope = ?",
                (scope,),
            ).fetchone()
            return row

        row = await self._run(op)
        return ScopeInfo(*row) if row is not None else None

    async def scopes(self, *, limit: int = 100, offset: int = 0) -> list[ScopeInfo]:
        def op(conn: sqlite3.Connection) -> list[tuple[Any, ...]]:
            return conn.execute(
                "SELECT scope, length, title, created_at, updated_at FROM message_scopes"
                " ORDER BY updated_at DESC, rowid DESC LIMIT ? OFFSET ?",
                (limit, offset),
            ).fetchall()

        return [ScopeInfo(*row) for row in await self._run(op)]

    async def delete(self, scope: str) -> None:
        def op(conn: sqlite3.Connection) -> None:
            with transaction(conn):
                conn.execute("DELETE FROM messages WHERE scope = ?", (scope,))
                conn.execute("DELETE FROM message_scopes WHERE scope = ?", (scope,))

        await self._run(op)


def _ensure_scope(conn: sqlite3.Connection, scope: str, now: float) -> int:
    """Create the scope row if needed (inside the caller's transaction); return its length."""
    conn.execute(
        "INSERT INTO message_scopes (scope, length, created_at, updated_at) VALUES (?, 0, ?, ?)"
        " ON CONFLICT(scope) DO NOTHING",
        (scope, now, now),
    )
    row = conn.execute("SELECT length FROM message_scopes WHERE scope = ?", (scope,)).fetchone()
    return int(row[0])
