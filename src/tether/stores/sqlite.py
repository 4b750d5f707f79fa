"""The SQLite stores, and the connection helper, migrations and transactions they share.

Every SQLite store uses the same three pieces, so one file can hold all of them:

- `connect(path)` opens a connection the way every store expects it (WAL, a busy timeout,
  foreign keys on, autocommit so that `transaction()` alone decides where a transaction begins).
- `SqliteMigrations(store)` is an append-only, ordered list of migration functions named
  `mNNN_what_changed`. `apply(conn)` runs the ones not yet recorded for that store in the
  `tether_migrations` table, each in its own transaction together with its record, so two
  processes opening the same file at once apply each migration exactly once.
- `transaction(conn)` is `BEGIN IMMEDIATE … COMMIT` (or a savepoint when one is already open):
  taking the write lock up front means a read-then-write inside it can never be interleaved with
  another writer, which is what makes appends atomic across processes.

These three are SQLite's own; they are not part of `tether.stores`' backend-neutral surface.

A store takes its connection from the caller and migrates on construction; it closes only a
connection it opened itself (`SqliteMessageStore.open(path)` and the like).

```python
conn = connect(".tether/tether.db")
messages = SqliteMessageStore(conn)         # migrates the "messages" tables
workflows = SqliteWorkflowStore(conn)       # migrates the "workflow" tables
```

The tables are the PostgreSQL stores' tables, under the same names (`tether_messages`,
`tether_runs`, `tether_workflow_runs`, ...). Adding a store next to these: declare
`my_migrations = SqliteMigrations("mine")`, decorate one function per schema change with
`@my_migrations`, and call `my_migrations.apply(conn)` in the store's constructor. Never edit or
reorder a migration that has shipped; append a new one.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from os import PathLike
from pathlib import Path
from typing import Any, Literal, Self, TypeVar

from ..errors import StoreError
from ._checkpoint import Checkpointer
from ._codecs import (
    LAST_INDEX,
    NOW_SQL,
    RUN_COLUMNS,
    RUN_INFO_COLUMNS,
    SCOPE_COLUMNS,
    STEP_COLUMNS,
    busy_error,
    check_finish,
    check_run_status,
    check_scope,
    check_title,
    decode_cursor,
    decode_event,
    decode_records,
    encode_events,
    encode_json,
    encode_records,
    encode_run_info,
    end_time,
    finish_sets,
    finish_values,
    query_where,
    run_from_row,
    run_info_from_row,
    run_info_select,
    run_page,
    run_select,
    run_tags,
    step_from_row,
    title_like,
    totals_from_row,
    totals_sql,
    where_equal,
)
from ._migrations import MigrationList
from .message_store import ScopeInfo, StoredRecord
from .run_store import (
    CANCEL_REQUESTED,
    NewRunEvent,
    RunEvent,
    RunInfo,
    RunPage,
    RunQuery,
    RunTotals,
)
from .workflow_store import RunLease, RunStatus, StepRecord, WorkflowRunRecord

__all__ = [
    "MIGRATIONS_TABLE",
    "Migration",
    "SqliteBacked",
    "SqliteMessageStore",
    "SqliteMigrations",
    "SqliteRunStore",
    "SqliteWorkflowStore",
    "connect",
    "connection_thread_lock",
    "is_busy",
    "message_migrations",
    "run_migrations",
    "transaction",
    "workflow_migrations",
]

MIGRATIONS_TABLE = "tether_migrations"
"""Where applied migrations are recorded, one row per (store, name)."""

_LEGACY_MIGRATIONS_TABLE = "_tether_migrations"
"""The name of that table before the SQLite and PostgreSQL stores shared their table names. It is
kept as a view of the new one, so a tether from before the rename, opening a file migrated since,
sees migrations it does not know and refuses the file instead of starting an empty schema."""

Migration = Callable[[sqlite3.Connection], None]
"""One schema change: a function named `mNNN_what_changed` that runs its statements on `conn`.

It runs inside a transaction; it must not commit, and must not use `executescript` (which
commits first)."""


def connect(path: str | PathLike[str], *, timeout: float = 30.0) -> sqlite3.Connection:
    """Open `path` (or `":memory:"`) configured the way tether's stores expect.

    Creates missing parent directories. The connection is in autocommit mode
    (`isolation_level=None`); group writes with `transaction()`.

    Args:
        path: The database file, or `":memory:"`.
        timeout: Seconds to wait for another process's write lock before failing.
    """
    target = str(path)
    if target != ":memory:" and not target.startswith("file:"):
        Path(target).parent.mkdir(parents=True, exist_ok=True)
    try:
        conn = sqlite3.connect(
            target,
            timeout=timeout,
            isolation_level=None,
            check_same_thread=False,
            uri=target.startswith("file:"),
        )
        conn.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
        conn.execute("PRAGMA foreign_keys = ON")
        if target != ":memory:":
            conn.execute("PRAGMA journal_mode = WAL")
            # WAL + NORMAL is durable against process crashes (what the journal protects
            # against); only an OS crash may lose the last commits.
            conn.execute("PRAGMA synchronous = NORMAL")
    except sqlite3.Error as exc:
        raise StoreError(f"cannot open SQLite database {target!r}: {exc}") from exc
    return conn


@contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """Run the block in one write transaction; roll back if it raises.

    Outermost use issues `BEGIN IMMEDIATE` (take the write lock now, so reads inside the block
    see what the writes will be based on). Nested use becomes a savepoint.
    """
    if conn.in_transaction:
        name = f"sp_{id(object())}"
        conn.execute(f"SAVEPOINT {name}")
        try:
            yield conn
        except BaseException:
            conn.execute(f"ROLLBACK TO {name}")
            conn.execute(f"RELEASE {name}")
            raise
        conn.execute(f"RELEASE {name}")
        return
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.Error as exc:
        if is_busy(exc):
            raise  # another process holds the write lock: the caller may wait and retry
        raise StoreError(f"cannot start a SQLite transaction: {exc}") from exc
    try:
        yield conn
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    try:
        conn.execute("COMMIT")
    except sqlite3.Error as exc:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        if is_busy(exc):
            raise
        raise StoreError(f"cannot commit a SQLite transaction: {exc}") from exc


def is_busy(exc: sqlite3.Error) -> bool:
    """Whether `exc` is SQLite's "database is locked" (another connection holds the lock): the
    statement did nothing, and the same operation may be tried again."""
    code = getattr(exc, "sqlite_errorcode", None)
    return code is not None and code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


class SqliteMigrations(MigrationList[Migration]):
    """The ordered, append-only migrations of one SQLite store.

    ```python
    workflow_migrations = SqliteMigrations("workflow")

    @workflow_migrations
    def m001_create_runs(conn: sqlite3.Connection) -> None:
        conn.execute("CREATE TABLE ...")
    ```

    Names must match `mNNN_what_changed` and increase in declaration order; a name out of
    order is a programming error caught at import time.
    """

    def applied(self, conn: sqlite3.Connection) -> list[str]:
        """The names already recorded for this store in `conn`, in the order applied."""
        _ensure_table(conn)
        rows = conn.execute(
            f"SELECT name FROM {MIGRATIONS_TABLE} WHERE store = ? ORDER BY rowid",
            (self.store,),
        ).fetchall()
        return [str(row[0]) for row in rows]

    def apply(self, conn: sqlite3.Connection) -> list[str]:
        """Apply the migrations not yet recorded; return the names applied now.

        Raises:
            StoreError: the database records a migration this code does not know (it was
                written by a newer tether), or a migration failed (it is rolled back).
        """
        _ensure_table(conn)
        known = set(self.names)
        unknown = [name for name in self.applied(conn) if name not in known]
        if unknown:
            raise StoreError(
                f"the {self.store!r} tables were migrated by a newer tether "
                f"(unknown migrations {unknown}); upgrade tether to open this database"
            )
        done: list[str] = []
        for name, fn in self._items:
            with transaction(conn):
                # Checked inside the write lock: another process may have applied it meanwhile.
                exists = conn.execute(
                    f"SELECT 1 FROM {MIGRATIONS_TABLE} WHERE store = ? AND name = ?",
                    (self.store, name),
                ).fetchone()
                if exists:
                    continue
                try:
                    fn(conn)
                except sqlite3.Error as exc:
                    raise StoreError(f"migration {self.store}.{name} failed: {exc}") from exc
                conn.execute(
                    f"INSERT INTO {MIGRATIONS_TABLE} (store, name, applied_at) VALUES (?, ?, ?)",
                    (self.store, name, datetime.now(UTC).isoformat()),
                )
            done.append(name)
        return done


def _ensure_table(conn: sqlite3.Connection) -> None:
    def kind(name: str) -> str | None:
        row = conn.execute("SELECT type FROM sqlite_master WHERE name = ?", (name,)).fetchone()
        return None if row is None else str(row[0])

    if kind(MIGRATIONS_TABLE) == "table" and kind(_LEGACY_MIGRATIONS_TABLE) == "view":
        return
    with transaction(conn):  # checked again under the write lock: another process may race
        if kind(MIGRATIONS_TABLE) is None:
            if kind(_LEGACY_MIGRATIONS_TABLE) == "table":
                conn.execute(f"ALTER TABLE {_LEGACY_MIGRATIONS_TABLE} RENAME TO {MIGRATIONS_TABLE}")
            else:
                conn.execute(
                    f"CREATE TABLE {MIGRATIONS_TABLE} ("
                    " store TEXT NOT NULL,"
                    " name TEXT NOT NULL,"
                    " applied_at TEXT NOT NULL,"
                    " PRIMARY KEY (store, name))"
                )
        if kind(_LEGACY_MIGRATIONS_TABLE) is None:
            conn.execute(
                f"CREATE VIEW {_LEGACY_MIGRATIONS_TABLE} AS"
                f" SELECT store, name, applied_at FROM {MIGRATIONS_TABLE}"
            )


# -- shared plumbing of the SQLite stores ---------------------------------------------------


class _Shared:
    """What every store on one connection shares: the thread lock around its use, how long to
    wait for another process's write lock, how many stores own the connection, and (while one
    does) the thread that checkpoints its WAL."""

    __slots__ = ("checkpointer", "conn", "lock", "owners", "wait")

    def __init__(self, conn: sqlite3.Connection, wait: float) -> None:
        self.conn = conn
        self.lock = threading.Lock()
        self.wait = wait
        self.owners = 0
        self.checkpointer: Checkpointer | None = None

    def own(self) -> None:
        """One more store owns the connection; the first takes its WAL checkpoints over (see
        `tether.stores._checkpoint`)."""
        self.owners += 1
        if self.owners > 1 or self.checkpointer is not None:
            return
        with self.lock:
            (mode,) = self.conn.execute("PRAGMA journal_mode").fetchone()
            path = _file_of(self.conn)
            if str(mode).lower() != "wal" or not path:
                return
            self.conn.execute("PRAGMA wal_autocheckpoint = 0")
        self.checkpointer = Checkpointer(path)

    def disown(self) -> bool:
        """One store less owns the connection; True when it was the last (the caller closes
        the connection)."""
        self.owners -= 1
        if self.owners > 0:
            return False
        if self.checkpointer is not None:
            self.checkpointer.stop()
            self.checkpointer = None
        return True


def _file_of(conn: sqlite3.Connection) -> str:
    """The file of the connection's main database ('' for an in-memory one)."""
    for _, name, file in conn.execute("PRAGMA database_list").fetchall():
        if name == "main":
            return str(file or "")
    return ""


_SHARED: dict[int, _Shared] = {}
_SHARED_GUARD = threading.Lock()


def _shared(conn: sqlite3.Connection) -> _Shared:
    # sqlite3 connections cannot be weakly referenced: the entry holds the connection (so its
    # id is not reused while the entry lives) and entries of closed connections are swept out
    # when a new connection comes.
    key = id(conn)
    with _SHARED_GUARD:
        state = _SHARED.get(key)
        if state is None:
            for old in [k for k, v in _SHARED.items() if _is_closed(v.conn)]:
                del _SHARED[old]
            # The wait the caller configured (connect(timeout=...)), before the stores take
            # the busy handler over: from now on they wait in the event loop instead.
            (ms,) = conn.execute("PRAGMA busy_timeout").fetchone()
            state = _SHARED[key] = _Shared(conn, ms / 1000 if ms > 0 else _DEFAULT_WAIT)
            conn.execute("PRAGMA busy_timeout = 0")
        return state


def _is_closed(conn: sqlite3.Connection) -> bool:
    try:
        conn.in_transaction  # noqa: B018 - raises on a closed connection
    except sqlite3.ProgrammingError:
        return True
    return False


_NOW = NOW_SQL["sqlite"]
"""SQLite's clock (the machine's) in Unix seconds: what leases are set and judged by."""

_DEFAULT_WAIT = 30.0
"""Seconds a store waits for another process's write lock on a connection that set none."""


def connection_thread_lock(conn: sqlite3.Connection) -> threading.Lock:
    """The one thread lock every tether store takes around its use of `conn`.

    A connection shared between threads shares its transaction state too: without this, one
    thread's `BEGIN IMMEDIATE` would swallow another thread's statements.
    """
    return _shared(conn).lock


_T = TypeVar("_T")


class _Busy(Exception):
    """An operation found the file locked by another process; nothing of it was done."""


class SqliteBacked:
    """Shared plumbing of the SQLite stores: one writer per connection, in the event loop.

    Each operation runs whole, synchronously, under the connection's thread lock: a few tens of
    microseconds, less than handing it to a worker thread would cost. The stores on one
    connection therefore never race each other — one event loop runs one operation at a time —
    so SQLite's busy handler, which sleeps before it retries, is never needed within a process:
    the stores set the connection's busy timeout to 0. When another *process* holds the write
    lock, an operation fails at once without doing anything and is tried again after an
    `asyncio.sleep` (1 ms, doubling to 50 ms), so the wait never blocks the event loop; it gives
    up after the connection's configured timeout (`connect(timeout=...)`, 30 s by default).

    A store takes its connection from the caller. With `owns=True` it shares the connection's
    ownership: the last owning store to close closes it (so the message, run and workflow stores
    of one file can share one connection, and so one writer).
    """

    def __init__(self, conn: sqlite3.Connection, *, owns: bool = False) -> None:
        self._conn = conn
        try:
            self._shared = _shared(conn)
        except sqlite3.Error as exc:
            raise StoreError(f"SQLite {type(exc).__name__}: {exc}") from exc
        self._lock = self._shared.lock
        self._owns = owns
        if owns:
            try:
                self._shared.own()
            except sqlite3.Error as exc:
                raise StoreError(f"SQLite {type(exc).__name__}: {exc}") from exc
        self._closed = False

    def _attempt(self, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        if self._closed:
            raise StoreError("the store is closed")
        checkpointer = self._shared.checkpointer
        if checkpointer is not None:
            checkpointer.wrote()
        with self._lock:
            try:
                return fn(self._conn)
            except sqlite3.Error as exc:
                if is_busy(exc):
                    raise _Busy from exc
                raise StoreError(f"SQLite {type(exc).__name__}: {exc}") from exc

    def _sync(self, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        """Run `fn` now, blocking while another process holds the write lock (for the work a
        constructor does, which cannot wait in the event loop)."""
        delay, deadline = 0.001, time.monotonic() + self._shared.wait
        while True:
            try:
                return self._attempt(fn)
            except _Busy as busy:
                delay = self._next_delay(delay, deadline, busy)
                time.sleep(delay)

    async def _run(self, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        """Run `fn` in the event loop; while another process holds the write lock, wait with
        `asyncio.sleep` between attempts (a cancellation stops the wait)."""
        try:
            return self._attempt(fn)
        except _Busy as busy:
            delay, deadline = 0.001, time.monotonic() + self._shared.wait
            last = busy
        while True:
            await asyncio.sleep(delay)
            try:
                return self._attempt(fn)
            except _Busy as busy:
                last = busy
                delay = self._next_delay(delay, deadline, last)

    def _next_delay(self, delay: float, deadline: float, busy: _Busy) -> float:
        if time.monotonic() >= deadline:
            raise StoreError(
                f"the SQLite database is locked by another process and stayed locked for "
                f"{self._shared.wait:g} s ({busy.__cause__}); retry when it is done, or open "
                "the store with a longer connect(timeout=...)"
            ) from busy.__cause__
        return min(delay * 2, 0.05)

    async def aclose(self) -> None:
        """Close the connection once every store that owns it is closed; idempotent."""
        if self._closed:
            return
        self._closed = True
        if not self._owns:
            return
        with self._lock:
            if not self._shared.disown():
                return
            with _SHARED_GUARD:
                _SHARED.pop(id(self._conn), None)
            self._conn.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


# -- MessageStore ----------------------------------------------------------------------------

message_migrations = SqliteMigrations("messages")
"""Schema of `SqliteMessageStore`. Append only."""


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


@message_migrations
def m002_tether_message_table_names(conn: sqlite3.Connection) -> None:
    """The PostgreSQL store's names (SQLite rewrites the foreign key that names the table)."""
    _rename(conn, {"message_scopes": "tether_message_scopes", "messages": "tether_messages"})
    conn.execute("DROP INDEX message_scopes_updated")
    conn.execute("CREATE INDEX tether_message_scopes_updated ON tether_message_scopes (updated_at)")


@message_migrations
def m003_scope_leases(conn: sqlite3.Connection) -> None:
    """Which episode may write a scope now (`ScopeLeases`)."""
    conn.execute(
        "CREATE TABLE tether_scope_leases ("
        " scope TEXT PRIMARY KEY,"
        " owner TEXT NOT NULL,"
        " expires_at REAL NOT NULL) WITHOUT ROWID"
    )


def _rename(conn: sqlite3.Connection, names: dict[str, str]) -> None:
    for old, new in names.items():
        conn.execute(f"ALTER TABLE {old} RENAME TO {new}")


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
                "SELECT seq, record FROM tether_messages WHERE scope = ? AND seq >= ? AND seq < ?"
                " ORDER BY seq",
                (scope, max(start, 0), LAST_INDEX if end is None else end),
            ).fetchall()

        rows = await self._run(op)
        return decode_records(scope, rows[0][0] if rows else 0, [raw for _, raw in rows])

    async def append(self, scope: str, records: Sequence[StoredRecord]) -> int:
        encoded = encode_records(scope, records)
        now = time.time()

        def op(conn: sqlite3.Connection) -> int:
            with transaction(conn):
                # One upsert creates the scope row or bumps its length (as on PostgreSQL); the
                # records go after the old length.
                (total,) = conn.execute(
                    "INSERT INTO tether_message_scopes AS s (scope, length, created_at, updated_at)"
                    " VALUES (?, ?, ?, ?) ON CONFLICT (scope) DO UPDATE"
                    " SET length = s.length + excluded.length, updated_at = excluded.updated_at"
                    " RETURNING length",
                    (scope, len(encoded), now, now),
                ).fetchone()
                base = total - len(encoded)
                conn.executemany(
                    "INSERT INTO tether_messages (scope, seq, record) VALUES (?, ?, ?)",
                    [(scope, base + i, raw) for i, raw in enumerate(encoded)],
                )
                return int(total)

        return await self._run(op)

    async def replace(self, scope: str, records: Sequence[StoredRecord]) -> None:
        encoded = encode_records(scope, records)
        now = time.time()

        def op(conn: sqlite3.Connection) -> None:
            with transaction(conn):
                _ensure_scope(conn, scope, now)
                conn.execute("DELETE FROM tether_messages WHERE scope = ?", (scope,))
                conn.executemany(
                    "INSERT INTO tether_messages (scope, seq, record) VALUES (?, ?, ?)",
                    [(scope, i, raw) for i, raw in enumerate(encoded)],
                )
                conn.execute(
                    "UPDATE tether_message_scopes SET length = ?, updated_at = ? WHERE scope = ?",
                    (len(encoded), now, scope),
                )

        await self._run(op)

    async def length(self, scope: str) -> int:
        def op(conn: sqlite3.Connection) -> int:
            row = conn.execute(
                "SELECT length FROM tether_message_scopes WHERE scope = ?", (scope,)
            ).fetchone()
            return int(row[0]) if row else 0

        return await self._run(op)

    async def set_title(self, scope: str, title: str) -> None:
        check_title(scope, title)
        now = time.time()

        def op(conn: sqlite3.Connection) -> None:
            with transaction(conn):
                _ensure_scope(conn, scope, now)
                conn.execute(
                    "UPDATE tether_message_scopes SET title = ? WHERE scope = ?", (title, scope)
                )

        await self._run(op)

    async def get_title(self, scope: str) -> str | None:
        info = await self.info(scope)
        return info.title if info is not None else None

    async def info(self, scope: str) -> ScopeInfo | None:
        def op(conn: sqlite3.Connection) -> tuple[Any, ...] | None:
            row: tuple[Any, ...] | None = conn.execute(
                f"SELECT {SCOPE_COLUMNS} FROM tether_message_scopes WHERE scope = ?", (scope,)
            ).fetchone()
            return row

        row = await self._run(op)
        return ScopeInfo(*row) if row is not None else None

    async def scopes(
        self, *, limit: int = 100, offset: int = 0, title: str | None = None
    ) -> list[ScopeInfo]:
        where, args = ("", []) if title is None else title_like(title, "?")

        def op(conn: sqlite3.Connection) -> list[tuple[Any, ...]]:
            return conn.execute(
                f"SELECT {SCOPE_COLUMNS} FROM tether_message_scopes{where}"
                " ORDER BY updated_at DESC, rowid DESC LIMIT ? OFFSET ?",
                (*args, limit, offset),
            ).fetchall()

        return [ScopeInfo(*row) for row in await self._run(op)]

    async def delete(self, scope: str) -> None:
        def op(conn: sqlite3.Connection) -> None:
            with transaction(conn):
                conn.execute("DELETE FROM tether_messages WHERE scope = ?", (scope,))
                conn.execute("DELETE FROM tether_message_scopes WHERE scope = ?", (scope,))

        await self._run(op)

    async def acquire_scope(self, scope: str, owner: str, *, ttl: float) -> str | None:
        check_scope(scope)

        def op(conn: sqlite3.Connection) -> str | None:
            with transaction(conn):
                taken = conn.execute(
                    "INSERT INTO tether_scope_leases (scope, owner, expires_at)"
                    f" VALUES (?, ?, {_NOW} + ?) ON CONFLICT (scope) DO UPDATE"
                    " SET owner = excluded.owner, expires_at = excluded.expires_at"
                    " WHERE tether_scope_leases.owner = excluded.owner"
                    f" OR tether_scope_leases.expires_at < {_NOW}"
                    " RETURNING owner",
                    (scope, owner, ttl),
                ).fetchone()
                if taken is not None:
                    return None
                row = conn.execute(
                    "SELECT owner FROM tether_scope_leases WHERE scope = ?", (scope,)
                ).fetchone()
                return str(row[0])

        return await self._run(op)

    async def renew_scope(self, scope: str, owner: str, *, ttl: float) -> bool:
        def op(conn: sqlite3.Connection) -> bool:
            cur = conn.execute(
                f"UPDATE tether_scope_leases SET expires_at = {_NOW} + ?"
                " WHERE scope = ? AND owner = ?",
                (ttl, scope, owner),
            )
            return cur.rowcount > 0

        return await self._run(op)

    async def release_scope(self, scope: str, owner: str) -> None:
        def op(conn: sqlite3.Connection) -> None:
            conn.execute(
                "DELETE FROM tether_scope_leases WHERE scope = ? AND owner = ?", (scope, owner)
            )

        await self._run(op)


def _ensure_scope(conn: sqlite3.Connection, scope: str, now: float) -> int:
    """Create the scope row if needed (inside the caller's transaction); return its length."""
    conn.execute(
        "INSERT INTO tether_message_scopes (scope, length, created_at, updated_at)"
        " VALUES (?, 0, ?, ?) ON CONFLICT(scope) DO NOTHING",
        (scope, now, now),
    )
    row = conn.execute(
        "SELECT length FROM tether_message_scopes WHERE scope = ?", (scope,)
    ).fetchone()
    return int(row[0])


# -- RunStore --------------------------------------------------------------------------------

run_migrations = SqliteMigrations("runs")
"""Schema of `SqliteRunStore`. Append only."""


@run_migrations
def m001_create_run_tables(conn: sqlite3.Connection) -> None:
    conn.execute(
        "CREATE TABLE runs ("
        " run_id TEXT PRIMARY KEY,"
        " kind TEXT NOT NULL,"
        " name TEXT NOT NULL,"
        " status TEXT NOT NULL,"
        " started_at REAL NOT NULL,"
        " ended_at REAL,"
        " tags TEXT NOT NULL,"
        " memory_scope TEXT,"
        " workflow_run_id TEXT,"
        " step_id TEXT,"
        " error TEXT,"
        " meta TEXT NOT NULL,"
        " event_count INTEGER NOT NULL DEFAULT 0)"
    )
    conn.execute(
        "CREATE TABLE run_events ("
        " run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,"
        " seq INTEGER NOT NULL,"
        " type TEXT NOT NULL,"
        " at REAL NOT NULL,"
        " data TEXT NOT NULL,"
        " PRIMARY KEY (run_id, seq)) WITHOUT ROWID"
    )
    conn.execute("CREATE INDEX runs_started ON runs (started_at)")
    conn.execute("CREATE INDEX runs_workflow ON runs (workflow_run_id)")
    conn.execute("CREATE INDEX runs_scope ON runs (memory_scope)")


@run_migrations
def m002_run_cost_text_and_filters(conn: sqlite3.Connection) -> None:
    # Cost and usage per run; input and output text for listing and search; a tag table and
    # indexes so that a filtered page of a large store is an index range, not a scan.
    conn.execute("ALTER TABLE runs ADD COLUMN usage TEXT NOT NULL DEFAULT '{}'")
    conn.execute("ALTER TABLE runs ADD COLUMN cost_usd REAL")
    conn.execute("ALTER TABLE runs ADD COLUMN input_text TEXT NOT NULL DEFAULT ''")
    conn.execute("ALTER TABLE runs ADD COLUMN output_text TEXT NOT NULL DEFAULT ''")
    conn.execute(
        "CREATE TABLE run_tags ("
        " tag TEXT NOT NULL,"
        " run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,"
        " PRIMARY KEY (tag, run_id)) WITHOUT ROWID"
    )
    conn.execute(
        "INSERT OR IGNORE INTO run_tags (tag, run_id)"
        " SELECT j.value, r.run_id FROM runs r, json_each(r.tags) j"
        " WHERE json_valid(r.tags) AND j.type = 'text'"
    )
    conn.execute("CREATE VIRTUAL TABLE runs_fts USING fts5(body, tokenize = 'unicode61')")
    conn.execute("CREATE INDEX runs_status_started ON runs (status, started_at)")
    conn.execute("CREATE INDEX runs_name_started ON runs (name, started_at)")


@run_migrations
def m003_tether_run_table_names(conn: sqlite3.Connection) -> None:
    """The PostgreSQL store's names (PostgreSQL searches a column where SQLite has its FTS5
    table, `tether_runs_fts`)."""
    _rename(
        conn,
        {
            "runs": "tether_runs",
            "run_events": "tether_run_events",
            "run_tags": "tether_run_tags",
            "runs_fts": "tether_runs_fts",
        },
    )
    for index, columns in (
        ("started", "started_at"),
        ("workflow", "workflow_run_id"),
        ("scope", "memory_scope"),
        ("status_started", "status, started_at"),
        ("name_started", "name, started_at"),
    ):
        conn.execute(f"DROP INDEX runs_{index}")
        conn.execute(f"CREATE INDEX tether_runs_{index} ON tether_runs ({columns})")


@run_migrations
def m004_runs_by_parent_and_time(conn: sqlite3.Connection) -> None:
    """Runs by the workflow run they belong to, in time order: the run list shows root runs
    (no parent) newest first, and without this SQLite reads every root run and sorts them."""
    conn.execute("DROP INDEX tether_runs_workflow")
    conn.execute(
        "CREATE INDEX tether_runs_workflow_started ON tether_runs (workflow_run_id, started_at)"
    )


@run_migrations
def m005_run_leases(conn: sqlite3.Connection) -> None:
    """A running run's heartbeat lease: past it, the run reads as interrupted."""
    conn.execute("ALTER TABLE tether_runs ADD COLUMN lease_expires_at REAL")


@run_migrations
def m006_runs_started_by_tool_calls(conn: sqlite3.Connection) -> None:
    """The episode (and its tool call) that started a run: an agent or workflow used as a
    tool. Its runs are read by parent, in time order, for its timeline."""
    conn.execute("ALTER TABLE tether_runs ADD COLUMN parent_run_id TEXT")
    conn.execute("ALTER TABLE tether_runs ADD COLUMN parent_tool_call_id TEXT")
    conn.execute(
        "CREATE INDEX tether_runs_parent_started ON tether_runs (parent_run_id, started_at)"
    )


@run_migrations
def m007_run_tracebacks(conn: sqlite3.Connection) -> None:
    """Where a failed run failed: its traceback, beside the error."""
    conn.execute("ALTER TABLE tether_runs ADD COLUMN traceback TEXT")


_RUN_SELECT = run_info_select("sqlite")
_RUN_SELECT_R = run_info_select("sqlite", "r")
_RUN_MARKS = ", ".join("?" * len(RUN_INFO_COLUMNS.split(",")))


class SqliteRunStore(SqliteBacked):
    """A RunStore in SQLite. Takes its connection from the caller and migrates on construction;
    `SqliteRunStore.open(path)` opens (and later closes) its own."""

    def __init__(self, conn: sqlite3.Connection, *, owns: bool = False) -> None:
        super().__init__(conn, owns=owns)
        self._sync(run_migrations.apply)

    @classmethod
    def open(cls, path: str | PathLike[str]) -> SqliteRunStore:
        """Open (creating if needed) the database at `path` with a connection of its own."""
        return cls(connect(path), owns=True)

    async def start_run(self, info: RunInfo, *, lease_ttl: float | None = None) -> None:
        row = encode_run_info(info)
        tags = run_tags(info)

        def op(conn: sqlite3.Connection) -> None:
            with transaction(conn):
                try:
                    cur = conn.execute(
                        f"INSERT INTO tether_runs ({RUN_INFO_COLUMNS}, lease_expires_at)"
                        f" VALUES ({_RUN_MARKS}, {_NOW} + ?)",
                        (*row, lease_ttl),
                    )
                except sqlite3.IntegrityError as exc:
                    raise StoreError(f"run {info.run_id!r} already exists") from exc
                if tags:
                    conn.executemany(
                        "INSERT OR IGNORE INTO tether_run_tags (tag, run_id) VALUES (?, ?)",
                        [(tag, info.run_id) for tag in tags],
                    )
                conn.execute(
                    "INSERT INTO tether_runs_fts (rowid, body) VALUES (?, ?)",
                    (cur.lastrowid, f"{row[-2]}\n{row[-1]}"),
                )

        await self._run(op)

    async def append_events(self, run_id: str, events: Sequence[NewRunEvent]) -> int:
        (last,) = await self.append_events_many([(run_id, events)])
        return last

    async def append_events_many(
        self, batches: Sequence[tuple[str, Sequence[NewRunEvent]]]
    ) -> list[int]:
        encoded = [(run_id, encode_events(run_id, events)) for run_id, events in batches]

        def op(conn: sqlite3.Connection) -> list[int]:
            lasts: list[int] = []
            with transaction(conn):
                for run_id, rows in encoded:
                    # The run row's count is bumped first (as on PostgreSQL): one statement says
                    # where the events go, under the write lock this transaction holds.
                    row = conn.execute(
                        "UPDATE tether_runs SET event_count = event_count + ? WHERE run_id = ?"
                        " RETURNING event_count",
                        (len(rows), run_id),
                    ).fetchone()
                    if row is None:
                        raise StoreError(f"run {run_id!r} was never started")
                    total = int(row[0])
                    base = total - len(rows)
                    conn.executemany(
                        "INSERT INTO tether_run_events (run_id, seq, type, at, data)"
                        " VALUES (?, ?, ?, ?, ?)",
                        [(run_id, base + i + 1, k, at, raw) for i, (k, at, raw) in enumerate(rows)],
                    )
                    lasts.append(total)
            return lasts

        return await self._run(op)

    async def finish_run(
        self,
        run_id: str,
        status: RunStatus,
        *,
        ended_at: float | None = None,
        error: str | None = None,
        output_text: str | None = None,
        usage: dict[str, int] | None = None,
        cost_usd: float | None = None,
        lease_ttl: float | None = None,
        traceback: str | None = None,
    ) -> None:
        check_run_status(status)
        end = end_time(status, ended_at)
        extra = finish_values(output_text, usage, cost_usd, traceback)
        ttl = lease_ttl if status == "running" else None

        def op(conn: sqlite3.Connection) -> None:
            with transaction(conn):
                row = conn.execute(
                    f"UPDATE tether_runs SET status = ?, ended_at = ?, error = ?"
                    f"{finish_sets('?', extra)}, lease_expires_at = {_NOW} + ? WHERE run_id = ?"
                    " RETURNING rowid, input_text, output_text",
                    (status, end, error, *extra.values(), ttl, run_id),
                ).fetchone()
                if row is None:
                    raise StoreError(f"run {run_id!r} was never started")
                if output_text is not None:
                    rowid, input_text, new_output = row
                    conn.execute(
                        "UPDATE tether_runs_fts SET body = ? WHERE rowid = ?",
                        (f"{input_text}\n{new_output}", rowid),
                    )

        await self._run(op)

    async def run_totals(self, query: RunQuery) -> RunTotals:
        conds, args = query_where(query, "?", "sqlite")
        where = (" WHERE " + " AND ".join(conds)) if conds else ""

        def op(conn: sqlite3.Connection) -> tuple[Any, ...]:
            row: tuple[Any, ...] = conn.execute(
                f"SELECT {totals_sql('sqlite')} FROM tether_runs r{where}", args
            ).fetchone()
            return row

        return totals_from_row(await self._run(op))

    async def renew_leases(self, run_ids: Sequence[str], *, lease_ttl: float) -> None:
        if not run_ids:
            return
        marks = ", ".join("?" * len(run_ids))

        def op(conn: sqlite3.Connection) -> None:
            conn.execute(
                f"UPDATE tether_runs SET lease_expires_at = {_NOW} + ?"
                f" WHERE status = 'running' AND run_id IN ({marks})",
                (lease_ttl, *run_ids),
            )

        await self._run(op)

    async def query_runs(
        self, query: RunQuery, *, limit: int = 50, cursor: str | None = None
    ) -> RunPage:
        conds, args = query_where(query, "?", "sqlite")
        if cursor is not None:
            started, seq = decode_cursor(cursor)
            conds.append("(r.started_at, r.rowid) < (?, ?)")
            args.extend((started, seq))
        where = (" WHERE " + " AND ".join(conds)) if conds else ""

        def op(conn: sqlite3.Connection) -> list[tuple[Any, ...]]:
            return conn.execute(
                f"SELECT {_RUN_SELECT_R}, r.rowid FROM tether_runs r{where}"
                " ORDER BY r.started_at DESC, r.rowid DESC LIMIT ?",
                (*args, limit + 1),
            ).fetchall()

        rows = await self._run(op)
        return run_page(rows, limit)

    async def get_run(self, run_id: str) -> RunInfo | None:
        def op(conn: sqlite3.Connection) -> tuple[Any, ...] | None:
            row: tuple[Any, ...] | None = conn.execute(
                f"SELECT {_RUN_SELECT} FROM tether_runs WHERE run_id = ?", (run_id,)
            ).fetchone()
            return row

        row = await self._run(op)
        return run_info_from_row(row) if row is not None else None

    async def request_cancel(self, run_id: str) -> bool:
        def op(conn: sqlite3.Connection) -> bool:
            with transaction(conn):
                row = conn.execute(
                    "UPDATE tether_runs SET meta = json_set(meta, ?, ?)"
                    " WHERE run_id = ? AND status = 'running' RETURNING 1",
                    (f"$.{CANCEL_REQUESTED}", time.time(), run_id),
                ).fetchone()
            return row is not None

        return await self._run(op)

    async def cancel_requests(self, run_ids: Sequence[str]) -> list[str]:
        if not run_ids:
            return []
        ids = list(run_ids)

        def op(conn: sqlite3.Connection) -> list[str]:
            marks = ", ".join("?" * len(ids))
            rows = conn.execute(
                f"SELECT run_id FROM tether_runs WHERE run_id IN ({marks})"
                " AND json_extract(meta, ?) IS NOT NULL",
                (*ids, f"$.{CANCEL_REQUESTED}"),
            ).fetchall()
            return [str(r[0]) for r in rows]

        return await self._run(op)

    async def list_runs(
        self,
        *,
        kind: str | None = None,
        workflow_run_id: str | None = None,
        memory_scope: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> list[RunInfo]:
        clause, args = where_equal(
            "?", kind=kind, workflow_run_id=workflow_run_id, memory_scope=memory_scope
        )

        def op(conn: sqlite3.Connection) -> list[tuple[Any, ...]]:
            return conn.execute(
                f"SELECT {_RUN_SELECT} FROM tether_runs{clause}"
                " ORDER BY started_at DESC, rowid DESC LIMIT ? OFFSET ?",
                (*args, limit, offset),
            ).fetchall()

        return [run_info_from_row(row) for row in await self._run(op)]

    async def events(self, run_id: str, *, after: int = 0) -> list[RunEvent]:
        def op(conn: sqlite3.Connection) -> list[tuple[int, str, float, str]]:
            return conn.execute(
                "SELECT seq, type, at, data FROM tether_run_events WHERE run_id = ? AND seq > ?"
                " ORDER BY seq",
                (run_id, after),
            ).fetchall()

        return [decode_event(run_id, seq, k, at, raw) for seq, k, at, raw in await self._run(op)]


# -- the SQLite WorkflowStore ----------------------------------------------------------------

workflow_migrations = SqliteMigrations("workflow")
"""Schema of `SqliteWorkflowStore`. Append only."""


@workflow_migrations
def m001_create_workflow_tables(conn: sqlite3.Connection) -> None:
    conn.execute(
        "CREATE TABLE workflow_runs ("
        " run_id TEXT PRIMARY KEY,"
        " workflow_id TEXT NOT NULL,"
        " status TEXT NOT NULL,"
        " input TEXT NOT NULL,"
        " output TEXT,"
        " error TEXT,"
        " parent_run_id TEXT,"
        " root_run_id TEXT NOT NULL,"
        " parent_step_id TEXT,"
        " attempts INTEGER NOT NULL DEFAULT 1,"
        " created_at REAL NOT NULL,"
        " updated_at REAL NOT NULL)"
    )
    conn.execute("CREATE INDEX workflow_runs_by_workflow ON workflow_runs (workflow_id)")
    conn.execute("CREATE INDEX workflow_runs_by_root ON workflow_runs (root_run_id)")
    conn.execute(
        "CREATE TABLE workflow_steps ("
        " run_id TEXT NOT NULL REFERENCES workflow_runs (run_id),"
        " step_id TEXT NOT NULL,"
        " seq INTEGER NOT NULL,"
        " name TEXT NOT NULL,"
        " output TEXT NOT NULL,"
        " created_at REAL NOT NULL,"
        " PRIMARY KEY (run_id, step_id),"
        " UNIQUE (run_id, seq))"
    )


@workflow_migrations
def m002_tether_workflow_table_names(conn: sqlite3.Connection) -> None:
    """The PostgreSQL store's names."""
    _rename(
        conn, {"workflow_runs": "tether_workflow_runs", "workflow_steps": "tether_workflow_steps"}
    )
    for index, column in (("by_workflow", "workflow_id"), ("by_root", "root_run_id")):
        conn.execute(f"DROP INDEX workflow_runs_{index}")
        conn.execute(
            f"CREATE INDEX tether_workflow_runs_{index} ON tether_workflow_runs ({column})"
        )


@workflow_migrations
def m003_workflow_run_leases(conn: sqlite3.Connection) -> None:
    """Who holds a running run, and until when: past it, the run reads as interrupted and may
    be taken over."""
    conn.execute("ALTER TABLE tether_workflow_runs ADD COLUMN lease_owner TEXT")
    conn.execute("ALTER TABLE tether_workflow_runs ADD COLUMN lease_expires_at REAL")


_WORKFLOW_RUN_SELECT = run_select(_NOW)


class SqliteWorkflowStore(SqliteBacked):
    """A WorkflowStore in SQLite: one row per run, one row per completed step.

    Takes its connection from the caller (see `connect()`) and migrates on construction; use
    `SqliteWorkflowStore.open(path)` to have the store open — and later close — its own.
    Like the other SQLite stores it runs each operation whole under the connection's lock (see
    `SqliteBacked`), so a file locked by another process never blocks the event loop and a
    connection shared with the other stores never mixes their transactions.
    Each append is one `BEGIN IMMEDIATE` transaction, so several processes may journal into one
    file; a step's sequence number comes from the `(run_id, seq)` index, so an append costs the
    same at step 10 and step 10,000. A takeover (`start_attempt` with a lease) is a conditional
    update under the same write lock, so of two processes only one gets the run.
    """

    def __init__(self, conn: sqlite3.Connection, *, owns: bool = False) -> None:
        super().__init__(conn, owns=owns)
        self._sync(workflow_migrations.apply)

    @classmethod
    def open(cls, path: str | PathLike[str]) -> SqliteWorkflowStore:
        """Open (creating if needed) the database at `path`; `aclose()` closes it."""
        return cls(connect(path), owns=True)

    @staticmethod
    def _row(conn: sqlite3.Connection, run_id: str) -> tuple[Any, ...] | None:
        row: tuple[Any, ...] | None = conn.execute(
            f"SELECT {_WORKFLOW_RUN_SELECT} FROM tether_workflow_runs WHERE run_id = ?",
            (run_id,),
        ).fetchone()
        return row

    async def create_run(
        self,
        *,
        run_id: str,
        workflow_id: str,
        input: Any,
        parent_run_id: str | None = None,
        root_run_id: str | None = None,
        parent_step_id: str | None = None,
        lease: RunLease | None = None,
    ) -> WorkflowRunRecord:
        encoded = encode_json(input, "input")
        now = time.time()

        def op(conn: sqlite3.Connection) -> tuple[Any, ...] | None:
            try:
                with transaction(conn):
                    conn.execute(
                        f"INSERT INTO tether_workflow_runs ({RUN_COLUMNS})"
                        " VALUES (?, ?, 'running', ?, NULL, NULL, ?, ?, ?, 1, ?, ?, ?,"
                        f" {_NOW} + ?)",
                        (
                            run_id,
                            workflow_id,
                            encoded,
                            parent_run_id,
                            root_run_id or run_id,
                            parent_step_id,
                            now,
                            now,
                            None if lease is None else lease.owner,
                            None if lease is None else lease.ttl,
                        ),
                    )
            except sqlite3.IntegrityError as exc:
                raise StoreError(f"workflow run {run_id!r} already exists") from exc
            return self._row(conn, run_id)

        return run_from_row(_found(await self._run(op), run_id))

    async def get_run(self, run_id: str) -> WorkflowRunRecord | None:
        row = await self._run(lambda conn: self._row(conn, run_id))
        return None if row is None else run_from_row(row)

    async def start_attempt(
        self, run_id: str, *, lease: RunLease | None = None
    ) -> WorkflowRunRecord:
        owner = None if lease is None else lease.owner
        ttl = None if lease is None else lease.ttl

        def op(conn: sqlite3.Connection) -> tuple[Any, ...] | None:
            with transaction(conn):
                # The conditional update is the takeover: it matches only a run that is free.
                taken = conn.execute(
                    "UPDATE tether_workflow_runs SET status = 'running', attempts = attempts + 1,"
                    f" updated_at = ?, lease_owner = ?, lease_expires_at = {_NOW} + ?"
                    " WHERE run_id = ? AND (? IS NULL OR status <> 'running'"
                    f" OR lease_owner IS NULL OR lease_owner = ? OR lease_expires_at < {_NOW})"
                    " RETURNING root_run_id",
                    (time.time(), owner, ttl, run_id, owner, owner),
                ).fetchone()
                if taken is None:
                    held = conn.execute(
                        "SELECT lease_owner, lease_expires_at FROM tether_workflow_runs"
                        " WHERE run_id = ?",
                        (run_id,),
                    ).fetchone()
                    if held is None:
                        return None
                    raise busy_error(run_id, held[0], held[1])
                if lease is not None:
                    conn.execute(
                        f"UPDATE tether_workflow_runs SET lease_owner = ?,"
                        f" lease_expires_at = {_NOW} + ?"
                        " WHERE root_run_id = ? AND status = 'running' AND run_id <> ?",
                        (owner, ttl, taken[0], run_id),
                    )
                return self._row(conn, run_id)

        return run_from_row(_found(await self._run(op), run_id))

    async def renew_lease(self, run_id: str, lease: RunLease) -> bool:
        def op(conn: sqlite3.Connection) -> bool:
            with transaction(conn):
                held = conn.execute(
                    "SELECT root_run_id FROM tether_workflow_runs"
                    " WHERE run_id = ? AND status = 'running' AND lease_owner = ?",
                    (run_id, lease.owner),
                ).fetchone()
                if held is None:
                    return False
                conn.execute(
                    f"UPDATE tether_workflow_runs SET lease_expires_at = {_NOW} + ?"
                    " WHERE root_run_id = ? AND lease_owner = ? AND status = 'running'",
                    (lease.ttl, held[0], lease.owner),
                )
                return True

        return await self._run(op)

    async def finish_run(
        self,
        run_id: str,
        *,
        status: Literal["completed", "failed", "cancelled"],
        output: Any = None,
        error: dict[str, Any] | None = None,
        lease: RunLease | None = None,
    ) -> WorkflowRunRecord:
        out, err = check_finish(status, error, output)
        owner = None if lease is None else lease.owner

        def op(conn: sqlite3.Connection) -> tuple[Any, ...] | None:
            with transaction(conn):
                done = conn.execute(
                    "UPDATE tether_workflow_runs SET status = ?, output = ?, error = ?,"
                    " updated_at = ?, lease_owner = NULL, lease_expires_at = NULL"
                    " WHERE run_id = ? AND (? IS NULL OR lease_owner IS NULL OR lease_owner = ?)"
                    " RETURNING 1",
                    (status, out, err, time.time(), run_id, owner, owner),
                ).fetchone()
                if done is None:
                    held = conn.execute(
                        "SELECT lease_owner, lease_expires_at FROM tether_workflow_runs"
                        " WHERE run_id = ?",
                        (run_id,),
                    ).fetchone()
                    if held is not None:
                        raise busy_error(run_id, held[0], held[1])
                return self._row(conn, run_id)

        return run_from_row(_found(await self._run(op), run_id))

    async def list_runs(
        self,
        *,
        workflow_id: str | None = None,
        root_run_id: str | None = None,
        limit: int | None = None,
    ) -> list[WorkflowRunRecord]:
        clause, params = where_equal("?", workflow_id=workflow_id, root_run_id=root_run_id)
        sql = f"SELECT {_WORKFLOW_RUN_SELECT} FROM tether_workflow_runs{clause} ORDER BY rowid DESC"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)

        def op(conn: sqlite3.Connection) -> list[tuple[Any, ...]]:
            return conn.execute(sql, params).fetchall()

        return [run_from_row(row) for row in await self._run(op)]

    async def append_step(self, run_id: str, *, step_id: str, name: str, output: Any) -> StepRecord:
        encoded = encode_json(output, "output")

        def op(conn: sqlite3.Connection) -> tuple[Any, ...]:
            # Read-then-write inside BEGIN IMMEDIATE: no other writer can slip in between.
            with transaction(conn):
                if (
                    conn.execute(
                        "SELECT 1 FROM tether_workflow_runs WHERE run_id = ?", (run_id,)
                    ).fetchone()
                    is None
                ):
                    raise StoreError(f"no workflow run {run_id!r}")
                row: tuple[Any, ...] | None = conn.execute(
                    f"SELECT {STEP_COLUMNS} FROM tether_workflow_steps"
                    " WHERE run_id = ? AND step_id = ?",
                    (run_id, step_id),
                ).fetchone()
                if row is None:
                    (last,) = conn.execute(
                        "SELECT COALESCE(MAX(seq), 0) FROM tether_workflow_steps WHERE run_id = ?",
                        (run_id,),
                    ).fetchone()
                    row = (run_id, step_id, name, last + 1, encoded, time.time())
                    conn.execute(
                        f"INSERT INTO tether_workflow_steps ({STEP_COLUMNS})"
                        " VALUES (?, ?, ?, ?, ?, ?)",
                        row,
                    )
                return row

        return step_from_row(await self._run(op))

    async def get_step(self, run_id: str, step_id: str) -> StepRecord | None:
        def op(conn: sqlite3.Connection) -> tuple[Any, ...] | None:
            row: tuple[Any, ...] | None = conn.execute(
                f"SELECT {STEP_COLUMNS} FROM tether_workflow_steps"
                " WHERE run_id = ? AND step_id = ?",
                (run_id, step_id),
            ).fetchone()
            return row

        row = await self._run(op)
        return None if row is None else step_from_row(row)

    async def list_steps(self, run_id: str) -> list[StepRecord]:
        def op(conn: sqlite3.Connection) -> list[tuple[Any, ...]]:
            return conn.execute(
                f"SELECT {STEP_COLUMNS} FROM tether_workflow_steps WHERE run_id = ? ORDER BY seq",
                (run_id,),
            ).fetchall()

        return [step_from_row(row) for row in await self._run(op)]


def _found(row: tuple[Any, ...] | None, run_id: str) -> tuple[Any, ...]:
    if row is None:
        raise StoreError(f"no workflow run {run_id!r}")
    return row
