"""The ordered, append-only migrations of PostgreSQL stores, recorded in `tether_migrations`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, Final, TypeAlias

import psycopg

from ...errors import StoreError
from .._migrations import MigrationList
from ._connection import Connection, execute, fetch_all, fetch_one

__all__ = ["MIGRATIONS_TABLE", "PostgresMigration", "PostgresMigrations"]

MIGRATIONS_TABLE: Final = "tether_migrations"
"""Where applied migrations are recorded, one row per (store, name)."""

PostgresMigration: TypeAlias = Callable[["psycopg.AsyncConnection[Any]"], Awaitable[None]]
"""One schema change: an async function named `mNNN_what_changed` that runs its statements on
`conn` inside the migration transaction (it must not commit)."""

# pg_advisory_xact_lock key for migrations ("tetherMg"): one database-wide key, held only for
# the migration transaction, so two processes never create the same table at once.
_MIGRATION_LOCK: Final = 0x7465_7468_6572_4D67


class PostgresMigrations(MigrationList[PostgresMigration]):
    """The ordered, append-only migrations of one PostgreSQL store.

    ```python
    my_migrations = PostgresMigrations("messages")

    @my_migrations
    async def m001_create_tables(conn: Connection) -> None:
        await conn.execute("CREATE TABLE ...")
    ```

    Names must match `mNNN_what_changed` and increase in declaration order; a name out of order
    is a programming error caught at import time. Never edit or reorder a migration that has
    shipped; append a new one.
    """

    async def applied(self, conn: Connection) -> list[str]:
        """The names already recorded for this store (in the schema `conn` sees), in order."""
        row = await fetch_one(conn, "SELECT to_regclass(%s)::text", (MIGRATIONS_TABLE,))
        if row is None or row[0] is None:
            return []
        rows = await fetch_all(
            conn,
            f"SELECT name FROM {MIGRATIONS_TABLE} WHERE store = %s ORDER BY id",
            (self.store,),
        )
        return [str(name) for (name,) in rows]

    async def apply(self, conn: Connection) -> list[str]:
        """Apply the migrations not yet recorded, in one transaction; return the names applied.

        Raises:
            StoreError: the database records a migration this code does not know (a newer tether
                wrote it), or a migration failed (nothing of this call is kept).
        """
        done: list[str] = []
        async with conn.transaction():
            await execute(conn, "SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            await execute(
                conn,
                f"CREATE TABLE IF NOT EXISTS {MIGRATIONS_TABLE} ("
                " id BIGINT GENERATED ALWAYS AS IDENTITY,"
                " store TEXT NOT NULL,"
                " name TEXT NOT NULL,"
                " applied_at TIMESTAMPTZ NOT NULL,"
                " PRIMARY KEY (store, name))",
            )
            applied = await self.applied(conn)
            known = set(self.names)
            unknown = [name for name in applied if name not in known]
            if unknown:
                raise StoreError(
                    f"the {self.store!r} tables were migrated by a newer tether "
                    f"(unknown migrations {unknown}); upgrade tether to open this database"
                )
            for name, fn in self._items:
                if name in applied:
                    continue
                try:
                    await fn(conn)
                except psycopg.Error as exc:
                    raise StoreError(f"migration {self.store}.{name} failed: {exc}") from exc
                await execute(
                    conn,
                    f"INSERT INTO {MIGRATIONS_TABLE} (store, name, applied_at) VALUES (%s, %s, %s)",
                    (self.store, name, datetime.now(UTC)),
                )
                done.append(name)
        return done
