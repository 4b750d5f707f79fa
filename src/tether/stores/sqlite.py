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

import re
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from os import PathLike
from pathlib import Path

from ..errors import StoreError

__all__ = [
    "MIGRATIONS_TABLE",
    "Migration",
    "Migrations",
    "connect",
    "transaction",
]

MIGRATIONS_TABLE = "_tether_migrations"
"""Where applied migrations are recorded, one row per (store, name)."""

Migration = Callable[[sqlite3.Connection], None]
"""One schema change: a function named `mNNN_what_changed` that runs its statements on `conn`.

It runs inside a transaction; it must not commit, and must not use `executescript` (which
commits first)."""

_NAME = re.compile(r"^m(\d{3,})_[a-z0-9_]+$")


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


class Migrations:
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

    def __init__(self, store: str) -> None:
        self.store = store
        """The key these migrations are recorded under in the migrations table."""
        self._items: list[tuple[str, Migration]] = []

    def __call__(self, fn: Migration) -> Migration:
        """Register `fn` as the next migration (use as a decorator)."""
        self.add(fn.__name__, fn)
        return fn

    def add(self, name: str, fn: Migration) -> None:
        """Register `fn` under `name` as the next migration."""
        match = _NAME.match(name)
        if match is None:
            raise ValueError(f"migration name {name!r} must look like m001_what_changed")
        if self._items:
            last = self._items[-1][0]
            if int(_NAME.match(last).group(1)) >= int(match.group(1)):  # type: ignore[union-attr]
                raise ValueError(
                    f"migration {name!r} must come after {last!r}: migrations are append-only"
                )
        self._items.append((name, fn))

    @property
    def names(self) -> list[str]:
        """The declared migration names, in order."""
        return [name for name, _ in self._items]

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
