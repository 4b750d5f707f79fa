"""The PostgreSQL stores' schema: one initial schema, then migrations appended one per change.

Every store of a database applies the same list on first use (under one advisory lock, the ones
already recorded skipped), so a database always holds all of tether's tables. The statements
are the SQLite stores' (`tether.stores._ddl`, in PostgreSQL's words), except run search: a
generated `tsvector` column with a GIN index where SQLite has an FTS5 table.
"""

from __future__ import annotations

from collections.abc import Sequence

from .._ddl import MIGRATIONS, POSTGRES
from ._connection import Connection, execute
from ._migrations import PostgresMigration, PostgresMigrations

__all__ = ["schema"]

_OWN: dict[str, tuple[str, ...]] = {
    # Run search: the generated column (`Words.run_search`) read through a GIN index.
    "m001_initial_schema": ("CREATE INDEX tether_runs_search ON tether_runs USING GIN (search)",),
}
"""The statements PostgreSQL runs after a shared migration's."""


def _running(statements: Sequence[str]) -> PostgresMigration:
    async def migrate(conn: Connection) -> None:
        for sql in statements:
            await execute(conn, sql)

    return migrate


schema = PostgresMigrations("tether")
"""The migrations of every PostgreSQL store. Append only (to `tether.stores._ddl.MIGRATIONS`)."""
for _name, _statements in MIGRATIONS:
    schema.add(_name, _running([*_statements(POSTGRES), *_OWN.get(_name, ())]))
