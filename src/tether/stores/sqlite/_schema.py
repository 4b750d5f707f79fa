"""The SQLite stores' schema: one initial schema, then migrations appended one per change.

Every store of a file applies the same list on construction (the ones already recorded are
skipped), so a file always holds all of tether's tables. The statements are the PostgreSQL
stores' (`tether.stores._ddl`, in SQLite's words), except where SQLite has a tool of its own:
run search is the FTS5 table `tether_runs_fts`, written as a run ends (PostgreSQL searches a
generated column).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from .._ddl import MIGRATIONS, SQLITE
from ._migrations import Migration, SqliteMigrations

__all__ = ["schema"]

_OWN: dict[str, tuple[str, ...]] = {
    # Run search: an FTS5 row per run, numbered by the run's rowid.
    "m001_initial_schema": (
        "CREATE VIRTUAL TABLE tether_runs_fts USING fts5(body, tokenize = 'unicode61')",
    ),
    # A run's text goes into `tether_runs_fts` once, as it ends (not at its start and again at
    # its end): `unindexed` marks a live run, which a search matches by its input instead.
    "m007_runs_indexed_as_they_end": (
        "ALTER TABLE tether_runs ADD COLUMN unindexed INTEGER NOT NULL DEFAULT 0",
    ),
    # Ended runs go into `tether_runs_fts` in batches (`INDEX_BATCH`), not one by one as they
    # end: `unindexed` stays set until a run's batch goes in, and this index lists those runs
    # (live ones too) so a batch reads them without a scan.
    "m008_runs_indexed_in_batches": (
        "CREATE INDEX tether_runs_unindexed ON tether_runs (unindexed) WHERE unindexed",
    ),
}
"""The statements SQLite runs after a shared migration's."""


def _running(statements: Sequence[str]) -> Migration:
    def migrate(conn: sqlite3.Connection) -> None:
        for sql in statements:
            conn.execute(sql)

    return migrate


schema = SqliteMigrations("tether")
"""The migrations of every SQLite store. Append only (to `tether.stores._ddl.MIGRATIONS`)."""
for _name, _statements in MIGRATIONS:
    schema.add(_name, _running([*_statements(SQLITE), *_OWN.get(_name, ())]))
