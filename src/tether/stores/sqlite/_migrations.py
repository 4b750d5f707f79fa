"""The ordered, append-only migrations of SQLite stores, recorded in `tether_migrations`."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime

from ...errors import StoreError
from .._migrations import MigrationList
from ._connection import transaction

__all__ = ["MIGRATIONS_TABLE", "Migration", "SqliteMigrations"]

MIGRATIONS_TABLE = "tether_migrations"
"""Where applied migrations are recorded, one row per (store, name)."""

Migration = Callable[[sqlite3.Connection], None]
"""One schema change: a function named `mNNN_what_changed` that runs its statements on `conn`.

It runs inside a transaction; it must not commit, and must not use `executescript` (which
commits first)."""


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
    exists = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (MIGRATIONS_TABLE,)
    ).fetchone()
    if exists:
        return
    with transaction(conn):  # IF NOT EXISTS: another process may have created it meanwhile
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {MIGRATIONS_TABLE} ("
            " store TEXT NOT NULL,"
            " name TEXT NOT NULL,"
            " applied_at TEXT NOT NULL,"
            " PRIMARY KEY (store, name))"
        )
