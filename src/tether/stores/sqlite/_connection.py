"""How every SQLite store opens, locks and writes its file.

- `connect(path)` opens a connection the way every store expects it (WAL, foreign keys on,
  autocommit so that `transaction()` alone decides where a transaction begins).
- `transaction(conn)` is `BEGIN IMMEDIATE … COMMIT` (or a savepoint when one is already open):
  taking the write lock up front means a read-then-write inside it can never be interleaved with
  another writer, which is what makes appends atomic across processes.
- `SqliteBacked` is what the stores share: one thread lock per connection, waits for another
  process's write lock in the event loop, and shared ownership of a connection.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from os import PathLike
from pathlib import Path
from typing import Any, Self, TypeVar

from ...errors import StoreError
from .._checkpoint import Checkpointer
from .._codecs import NOW_SQL, has_words
from .._sql import SQLITE, Row, SqlBacked

__all__ = [
    "NOW",
    "SqliteBacked",
    "connect",
    "connection_thread_lock",
    "is_busy",
    "transaction",
]

NOW = NOW_SQL["sqlite"]
"""SQLite's clock (the machine's) in Unix seconds: what leases are set and judged by."""


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
            # How a run search matches a live run, which is not in the index yet.
            conn.create_function("tether_has_words", 2, has_words, deterministic=True)
        return state


def _is_closed(conn: sqlite3.Connection) -> bool:
    try:
        conn.in_transaction  # noqa: B018 - raises on a closed connection
    except sqlite3.ProgrammingError:
        return True
    return False


_DEFAULT_WAIT = 30.0
"""Seconds a store waits for another process's write lock on a connection that set none."""


def connection_thread_lock(conn: sqlite3.Connection) -> threading.Lock:
    """The one thread lock every tether store takes around its use of `conn`.

    A connection shared between threads shares its transaction state too: without this, one
    thread's `BEGIN IMMEDIATE` would swallow another thread's statements.
    """
    return _shared(conn).lock


_T = TypeVar("_T")


_FIRST_DELAY = 0.0001
"""Seconds before the first retry of an operation that found another process's write lock."""
_SHORT_WAIT = 0.1
"""Seconds of waiting during which the retries stay at most `_SHORT_CAP` apart."""
_SHORT_CAP = 0.002
_LONG_CAP = 0.05
"""The longest sleep between two retries, once the wait is past `_SHORT_WAIT`."""


class _Busy(Exception):
    """An operation found the file locked by another process; nothing of it was done."""


class SqliteBacked(SqlBacked):
    """Shared plumbing of the SQLite stores: one writer per connection, in the event loop.

    Each operation runs whole, synchronously, under the connection's thread lock: a few tens of
    microseconds, less than handing it to a worker thread would cost. The stores on one
    connection therefore never race each other — one event loop runs one operation at a time —
    so SQLite's busy handler, which sleeps before it retries, is never needed within a process:
    the stores set the connection's busy timeout to 0. When another *process* holds the write
    lock, an operation fails at once without doing anything and is tried again after an
    `asyncio.sleep`, so the wait never blocks the event loop: 0.1 ms, doubling to 2 ms while the
    wait is under 0.1 s (another process's write transaction holds the lock for well under a
    millisecond, so a long first sleep would leave the lock free and this process idle: two Ray
    workers on one file lost 10-20% of their time so), then to 50 ms (a long hold, polled
    cheaply); it gives up after the connection's configured timeout (`connect(timeout=...)`,
    30 s by default).

    A store takes its connection from the caller. With `owns=True` it shares the connection's
    ownership: the last owning store to close closes it (so the message, run and workflow stores
    of one file can share one connection, and so one writer).
    """

    _sql = SQLITE

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

    @classmethod
    def open(cls, path: str | PathLike[str]) -> Self:
        """Open (creating if needed) the database at `path` with a connection of its own."""
        return cls(connect(path), owns=True)

    async def _one(self, sql: str, args: Sequence[Any] = ()) -> Row | None:
        row: Row | None = await self._run(lambda conn: conn.execute(sql, args).fetchone())
        return row

    async def _all(self, sql: str, args: Sequence[Any] = ()) -> list[Row]:
        rows: list[Row] = await self._run(lambda conn: conn.execute(sql, args).fetchall())
        return rows

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
        delay, deadline = _FIRST_DELAY, time.monotonic() + self._shared.wait
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
            delay, deadline = _FIRST_DELAY, time.monotonic() + self._shared.wait
            last = busy
        while True:
            await asyncio.sleep(delay)
            try:
                return self._attempt(fn)
            except _Busy as busy:
                last = busy
                delay = self._next_delay(delay, deadline, last)

    def _next_delay(self, delay: float, deadline: float, busy: _Busy) -> float:
        now = time.monotonic()
        if now >= deadline:
            raise StoreError(
                f"the SQLite database is locked by another process and stayed locked for "
                f"{self._shared.wait:g} s ({busy.__cause__}); retry when it is done, or open "
                "the store with a longer connect(timeout=...)"
            ) from busy.__cause__
        waited = self._shared.wait - (deadline - now)
        return min(delay * 2, _SHORT_CAP if waited < _SHORT_WAIT else _LONG_CAP)

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
