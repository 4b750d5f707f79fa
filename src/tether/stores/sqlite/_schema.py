"""The SQLite stores' schema: one initial schema, then migrations appended one per change.

Every store of a file applies the same list on construction (the ones already recorded are
skipped), so a file always holds all of tether's tables. The tables and their names are the
PostgreSQL stores' (`tether.stores.postgres._schema`), except where SQLite has a tool of its own:
run search is the FTS5 table `tether_runs_fts` (PostgreSQL searches a generated column).
"""

from __future__ import annotations

import sqlite3

from ._migrations import SqliteMigrations

__all__ = ["schema"]

schema = SqliteMigrations("tether")
"""The migrations of every SQLite store. Append only."""


@schema
def m001_initial_schema(conn: sqlite3.Connection) -> None:
    # -- messages: a scope row carries its length, so an append reads one row.
    conn.execute(
        "CREATE TABLE tether_message_scopes ("
        " scope TEXT PRIMARY KEY,"
        " length INTEGER NOT NULL DEFAULT 0,"
        " title TEXT,"
        " created_at REAL NOT NULL,"
        " updated_at REAL NOT NULL)"
    )
    conn.execute("CREATE INDEX tether_message_scopes_updated ON tether_message_scopes (updated_at)")
    conn.execute(
        "CREATE TABLE tether_messages ("
        " scope TEXT NOT NULL REFERENCES tether_message_scopes (scope) ON DELETE CASCADE,"
        " seq INTEGER NOT NULL,"
        " record TEXT NOT NULL,"
        " PRIMARY KEY (scope, seq)) WITHOUT ROWID"
    )
    # -- leases: which episode may write a scope now (`ScopeLeases`).
    conn.execute(
        "CREATE TABLE tether_scope_leases ("
        " scope TEXT PRIMARY KEY,"
        " owner TEXT NOT NULL,"
        " expires_at REAL NOT NULL) WITHOUT ROWID"
    )
    # -- runs: one row per run (its rowid numbers the FTS5 row and pages), one per event.
    conn.execute(
        "CREATE TABLE tether_runs ("
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
        " event_count INTEGER NOT NULL DEFAULT 0,"
        " usage TEXT NOT NULL DEFAULT '{}',"
        " cost_usd REAL,"
        " input_text TEXT NOT NULL DEFAULT '',"
        " output_text TEXT NOT NULL DEFAULT '',"
        " lease_expires_at REAL,"
        " parent_run_id TEXT,"
        " parent_tool_call_id TEXT,"
        " traceback TEXT)"
    )
    # A filtered page of a large store is an index range, not a scan: the run list shows root
    # runs (no workflow run) newest first, a timeline the runs one episode started.
    for index, columns in (
        ("started", "started_at"),
        ("scope", "memory_scope"),
        ("status_started", "status, started_at"),
        ("name_started", "name, started_at"),
        ("workflow_started", "workflow_run_id, started_at"),
        ("parent_started", "parent_run_id, started_at"),
    ):
        conn.execute(f"CREATE INDEX tether_runs_{index} ON tether_runs ({columns})")
    conn.execute(
        "CREATE TABLE tether_run_events ("
        " run_id TEXT NOT NULL REFERENCES tether_runs (run_id) ON DELETE CASCADE,"
        " seq INTEGER NOT NULL,"
        " type TEXT NOT NULL,"
        " at REAL NOT NULL,"
        " data TEXT NOT NULL,"
        " PRIMARY KEY (run_id, seq)) WITHOUT ROWID"
    )
    conn.execute(
        "CREATE TABLE tether_run_tags ("
        " tag TEXT NOT NULL,"
        " run_id TEXT NOT NULL REFERENCES tether_runs (run_id) ON DELETE CASCADE,"
        " PRIMARY KEY (tag, run_id)) WITHOUT ROWID"
    )
    conn.execute("CREATE VIRTUAL TABLE tether_runs_fts USING fts5(body, tokenize = 'unicode61')")
    # -- workflows: one row per run, one per journaled step.
    conn.execute(
        "CREATE TABLE tether_workflow_runs ("
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
        " updated_at REAL NOT NULL,"
        " lease_owner TEXT,"
        " lease_expires_at REAL)"
    )
    conn.execute(
        "CREATE INDEX tether_workflow_runs_by_workflow ON tether_workflow_runs (workflow_id)"
    )
    conn.execute("CREATE INDEX tether_workflow_runs_by_root ON tether_workflow_runs (root_run_id)")
    conn.execute(
        "CREATE TABLE tether_workflow_steps ("
        " run_id TEXT NOT NULL REFERENCES tether_workflow_runs (run_id),"
        " step_id TEXT NOT NULL,"
        " seq INTEGER NOT NULL,"
        " name TEXT NOT NULL,"
        " output TEXT NOT NULL,"
        " created_at REAL NOT NULL,"
        " PRIMARY KEY (run_id, step_id),"
        " UNIQUE (run_id, seq))"
    )


@schema
def m002_run_lease_tokens(conn: sqlite3.Connection) -> None:
    """The token of the lease a run's writer holds: its writes are refused once another
    writer took the run over (`RunStore` fencing)."""
    conn.execute("ALTER TABLE tether_runs ADD COLUMN lease_owner TEXT")


@schema
def m003_workflow_waits(conn: sqlite3.Connection) -> None:
    """What a waiting workflow run waits for (`ctx.wait_for`), and when that wait times out
    (indexed: the sweep that resumes overdue waits reads a range, not the table)."""
    conn.execute("ALTER TABLE tether_workflow_runs ADD COLUMN wait TEXT")
    conn.execute("ALTER TABLE tether_workflow_runs ADD COLUMN wait_deadline REAL")
    conn.execute(
        "CREATE INDEX tether_workflow_runs_wait_deadline ON tether_workflow_runs"
        " (wait_deadline) WHERE wait_deadline IS NOT NULL"
    )


@schema
def m004_run_event_pieces(conn: sqlite3.Connection) -> None:
    """An event whose JSON text is longer than `run_store.PIECE` is stored here in pieces (its
    row's `data` is empty), so a stream passes it on a piece at a time (`EventPieces`)."""
    conn.execute(
        "CREATE TABLE tether_run_event_pieces ("
        " run_id TEXT NOT NULL REFERENCES tether_runs (run_id) ON DELETE CASCADE,"
        " seq INTEGER NOT NULL,"
        " piece INTEGER NOT NULL,"
        " text TEXT NOT NULL,"
        " PRIMARY KEY (run_id, seq, piece)) WITHOUT ROWID"
    )


@schema
def m005_blobs(conn: sqlite3.Connection) -> None:
    """Media bytes kept once, under their sha256 (`tether.blobs`): records and run events hold
    a reference. Nothing deletes a row (a blob may be referred to from any scope or run)."""
    conn.execute(
        "CREATE TABLE tether_blobs ("
        " sha256 TEXT PRIMARY KEY,"
        " media_type TEXT NOT NULL,"
        " size INTEGER NOT NULL,"
        " data BLOB NOT NULL,"
        " created_at REAL NOT NULL) WITHOUT ROWID"
    )


@schema
def m006_paused_runs(conn: sqlite3.Connection) -> None:
    """A paused run's pending calls (listed with the run), the turn it resumes from (read
    only by the resumer) and when its calls expire (indexed: the sweep reads a range)."""
    conn.execute("ALTER TABLE tether_runs ADD COLUMN pending TEXT")
    conn.execute("ALTER TABLE tether_runs ADD COLUMN paused_turn TEXT")
    conn.execute("ALTER TABLE tether_runs ADD COLUMN pending_deadline REAL")
    conn.execute(
        "CREATE INDEX tether_runs_pending_deadline ON tether_runs (pending_deadline)"
        " WHERE pending_deadline IS NOT NULL"
    )


@schema
def m007_runs_indexed_as_they_end(conn: sqlite3.Connection) -> None:
    """A run's text goes into `tether_runs_fts` once, as it ends (not at its start and again at
    its end): `unindexed` marks a live run, which a search matches by its input instead."""
    conn.execute("ALTER TABLE tether_runs ADD COLUMN unindexed INTEGER NOT NULL DEFAULT 0")
