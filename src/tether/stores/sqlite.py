"""SQLite storage: the shared connection helper, ordered named migrations, and the SQLite stores.

Every SQLite store in tether uses the same three pieces, so a file can hold all of them:

- `connect(path)` opens a connection the way every store expects it (WAL, a busy timeout,
  foreign keys on, autocommit so that `transaction()` alone decides where a transaction begins).
- `Migrations(store)` is an append-only, ordered list of migration functions named
  `mNNN_what_changed`. `apply(conn)` runs the ones not yet recorded for that store in the
  `_tether_migrations` table, each in its own transaction together with its record, so two
  processes opening the same file at once apply each migration exactly once.
- `transaction(conn)` is `BEGIN IMMEDIATE … COMMIT` (or a savepoint when one is already open):
  taking the write lock up front means a read-then-write inside it can never be interleaved with
  another writer, which is what makes appends atomic across processes.

A store takes its connection from the caller and migrates on construction; it closes only a
connection it opened itself (`SqliteWorkflowStore.open(path)`).

```python
conn = connect(".tether/tether.db")
workflows = SqliteWorkflowStore(conn)        # migrates the "workflow" tables
```

Adding a store next to these: declare `my_migrations = Migrations("messages")`, decorate one
function per schema change with `@my_migrations`, and call `my_migrations.apply(conn)` in the
store's constructor. Never edit or reorder a migration that has shipped; append a new one.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from os import PathLike
from pathlib import Path
from typing import Any, Literal, TypeVar

from ..errors import StoreError
from ..workflows._store import (
    RUN_COLUMNS,
    STEP_COLUMNS,
    StepRecord,
    WorkflowRunRecord,
    _check_finish,
    _encode,
    run_from_row,
    step_from_row,
)
from ._migrations import MigrationList
from ._sql import where_equal

__all__ = [
    "MIGRATIONS_TABLE",
    "Migration",
    "Migrations",
    "SqliteBacked",
    "SqliteWorkflowStore",
    "connect",
    "connection_lock",
    "transaction",
    "workflow_migrations",
]

MIGRATIONS_TABLE = "_tether_migrations"
"""Where applied migrations are recorded, one row per (store, name)."""

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
        raise StoreError(f"cannot commit a SQLite transaction: {exc}") from exc


class Migrations(MigrationList[Migration]):
    """The ordered, append-only migrations of one store.

    ```python
    workflow_migrations = Migrations("workflow")

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
    conn.execute(
        f"CREATE TABLE IF NOT EXISTS {MIGRATIONS_TABLE} ("
        " store TEXT NOT NULL,"
        " name TEXT NOT NULL,"
        " applied_at TEXT NOT NULL,"
        " PRIMARY KEY (store, name))"
    )


# -- shared plumbing of the SQLite stores ---------------------------------------------------

_LOCKS: dict[int, threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()


def connection_lock(conn: sqlite3.Connection) -> threading.Lock:
    """The one lock every tether store takes around its use of `conn`.

    A connection shared between threads shares its transaction state too: without this, one
    thread's `BEGIN IMMEDIATE` would swallow another thread's statements. Keyed by id() because
    sqlite3 connections cannot be weakly referenced; a reused id only ever reuses an idle lock.
    """
    key = id(conn)
    with _LOCKS_GUARD:
        lock = _LOCKS.get(key)
        if lock is None:
            lock = _LOCKS[key] = threading.Lock()
        return lock


_T = TypeVar("_T")


class SqliteBacked:
    """Shared plumbing of the SQLite stores: the connection, its lock, and running each
    operation in a worker thread so a busy database never blocks the event loop."""

    def __init__(self, conn: sqlite3.Connection, *, owns: bool = False) -> None:
        self._conn = conn
        self._lock = connection_lock(conn)
        self._owns = owns
        self._closed = False

    def _sync(self, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        if self._closed:
            raise StoreError("the store is closed")
        with self._lock:
            try:
                return fn(self._conn)
            except sqlite3.Error as exc:
                raise StoreError(f"SQLite {type(exc).__name__}: {exc}") from exc

    async def _run(self, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        return await asyncio.to_thread(self._sync, fn)

    async def aclose(self) -> None:
        """Close the connection if this store opened it; idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._owns:
            with self._lock:
                self._conn.close()


# -- the SQLite WorkflowStore ----------------------------------------------------------------

workflow_migrations = Migrations("workflow")
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


class SqliteWorkflowStore(SqliteBacked):
    """A WorkflowStore in SQLite: one row per run, one row per completed step.

    Takes its connection from the caller (see `connect()`) and migrates on construction; use
    `SqliteWorkflowStore.open(path)` to have the store open — and later close — its own.
    Like the other SQLite stores it runs each operation in a worker thread under the
    connection's lock, so a file locked by another process never blocks the event loop and a
    connection shared with the other stores never mixes their transactions.
    Each append is one `BEGIN IMMEDIATE` transaction, so several processes may journal into one
    file; a step's sequence number comes from the `(run_id, seq)` index, so an append costs the
    same at step 10 and step 10,000.
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
            f"SELECT {RUN_COLUMNS} FROM workflow_runs WHERE run_id = ?", (run_id,)
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
    ) -> WorkflowRunRecord:
        encoded = _encode(input, "input")
        now = time.time()

        def op(conn: sqlite3.Connection) -> tuple[Any, ...] | None:
            try:
                with transaction(conn):
                    conn.execute(
                        f"INSERT INTO workflow_runs ({RUN_COLUMNS})"
                        " VALUES (?, ?, 'running', ?, NULL, NULL, ?, ?, ?, 1, ?, ?)",
                        (
                            run_id,
                            workflow_id,
                            encoded,
                            parent_run_id,
                            root_run_id or run_id,
                            parent_step_id,
                            now,
                            now,
                        ),
                    )
            except sqlite3.IntegrityError as exc:
                raise StoreError(f"workflow run {run_id!r} already exists") from exc
            return self._row(conn, run_id)

        return run_from_row(_found(await self._run(op), run_id))

    async def get_run(self, run_id: str) -> WorkflowRunRecord | None:
        row = await self._run(lambda conn: self._row(conn, run_id))
        return None if row is None else run_from_row(row)

    async def start_attempt(self, run_id: str) -> WorkflowRunRecord:
        def op(conn: sqlite3.Connection) -> tuple[Any, ...] | None:
            with transaction(conn):
                conn.execute(
                    "UPDATE workflow_runs SET status = 'running', attempts = attempts + 1,"
                    " updated_at = ? WHERE run_id = ?",
                    (time.time(), run_id),
                )
                return self._row(conn, run_id)

        return run_from_row(_found(await self._run(op), run_id))

    async def finish_run(
        self,
        run_id: str,
        *,
        status: Literal["completed", "failed", "cancelled"],
        output: Any = None,
        error: dict[str, Any] | None = None,
    ) -> WorkflowRunRecord:
        out, err = _check_finish(status, error, output)

        def op(conn: sqlite3.Connection) -> tuple[Any, ...] | None:
            with transaction(conn):
                conn.execute(
                    "UPDATE workflow_runs SET status = ?, output = ?, error = ?, updated_at = ?"
                    " WHERE run_id = ?",
                    (status, out, err, time.time(), run_id),
                )
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
        sql = f"SELECT {RUN_COLUMNS} FROM workflow_runs{clause} ORDER BY rowid DESC"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)

        def op(conn: sqlite3.Connection) -> list[tuple[Any, ...]]:
            return conn.execute(sql, params).fetchall()

        return [run_from_row(row) for row in await self._run(op)]

    async def append_step(self, run_id: str, *, step_id: str, name: str, output: Any) -> StepRecord:
        encoded = _encode(output, "output")

        def op(conn: sqlite3.Connection) -> tuple[Any, ...]:
            # Read-then-write inside BEGIN IMMEDIATE: no other writer can slip in between.
            with transaction(conn):
                if (
                    conn.execute(
                        "SELECT 1 FROM workflow_runs WHERE run_id = ?", (run_id,)
                    ).fetchone()
                    is None
                ):
                    raise StoreError(f"no workflow run {run_id!r}")
                row: tuple[Any, ...] | None = conn.execute(
                    f"SELECT {STEP_COLUMNS} FROM workflow_steps WHERE run_id = ? AND step_id = ?",
                    (run_id, step_id),
                ).fetchone()
                if row is None:
                    (last,) = conn.execute(
                        "SELECT COALESCE(MAX(seq), 0) FROM workflow_steps WHERE run_id = ?",
                        (run_id,),
                    ).fetchone()
                    row = (run_id, step_id, name, last + 1, encoded, time.time())
                    conn.execute(
                        f"INSERT INTO workflow_steps ({STEP_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)",
                        row,
                    )
                return row

        return step_from_row(await self._run(op))

    async def get_step(self, run_id: str, step_id: str) -> StepRecord | None:
        def op(conn: sqlite3.Connection) -> tuple[Any, ...] | None:
            row: tuple[Any, ...] | None = conn.execute(
                f"SELECT {STEP_COLUMNS} FROM workflow_steps WHERE run_id = ? AND step_id = ?",
                (run_id, step_id),
            ).fetchone()
            return row

        row = await self._run(op)
        return None if row is None else step_from_row(row)

    async def list_steps(self, run_id: str) -> list[StepRecord]:
        def op(conn: sqlite3.Connection) -> list[tuple[Any, ...]]:
            return conn.execute(
                f"SELECT {STEP_COLUMNS} FROM workflow_steps WHERE run_id = ? ORDER BY seq",
                (run_id,),
            ).fetchall()

        return [step_from_row(row) for row in await self._run(op)]

    async def __aenter__(self) -> SqliteWorkflowStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def _found(row: tuple[Any, ...] | None, run_id: str) -> tuple[Any, ...]:
    if row is None:
        raise StoreError(f"no workflow run {run_id!r}")
    return row
