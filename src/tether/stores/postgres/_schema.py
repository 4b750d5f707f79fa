"""The PostgreSQL stores' schema: one initial schema, then migrations appended one per change.

Every store of a database applies the same list on first use (under one advisory lock, the ones
already recorded skipped), so a database always holds all of tether's tables. The tables and
their names are the SQLite stores' (`tether.stores.sqlite._schema`), except run search: a
generated `tsvector` column with a GIN index where SQLite has an FTS5 table.
"""

from __future__ import annotations

from ._connection import Connection, execute
from ._migrations import PostgresMigrations

__all__ = ["schema"]

schema = PostgresMigrations("tether")
"""The migrations of every PostgreSQL store. Append only."""


@schema
async def m001_initial_schema(conn: Connection) -> None:
    # -- messages: a scope row carries its length, so an append bumps one row.
    await execute(
        conn,
        "CREATE TABLE tether_message_scopes ("
        " id BIGINT GENERATED ALWAYS AS IDENTITY,"
        " scope TEXT PRIMARY KEY,"
        " length BIGINT NOT NULL DEFAULT 0,"
        " title TEXT,"
        " created_at DOUBLE PRECISION NOT NULL,"
        " updated_at DOUBLE PRECISION NOT NULL)",
    )
    await execute(
        conn,
        "CREATE INDEX tether_message_scopes_updated ON tether_message_scopes (updated_at, id)",
    )
    await execute(
        conn,
        "CREATE TABLE tether_messages ("
        " scope TEXT NOT NULL REFERENCES tether_message_scopes (scope) ON DELETE CASCADE,"
        " seq BIGINT NOT NULL,"
        " record TEXT NOT NULL,"
        " PRIMARY KEY (scope, seq))",
    )
    # -- leases: which episode may write a scope now (`ScopeLeases`).
    await execute(
        conn,
        "CREATE TABLE tether_scope_leases ("
        " scope TEXT PRIMARY KEY,"
        " owner TEXT NOT NULL,"
        " expires_at DOUBLE PRECISION NOT NULL)",
    )
    # -- runs: one row per run, one per event; input and output text searched through a
    # generated tsvector.
    await execute(
        conn,
        "CREATE TABLE tether_runs ("
        " id BIGINT GENERATED ALWAYS AS IDENTITY,"
        " run_id TEXT PRIMARY KEY,"
        " kind TEXT NOT NULL,"
        " name TEXT NOT NULL,"
        " status TEXT NOT NULL,"
        " started_at DOUBLE PRECISION NOT NULL,"
        " ended_at DOUBLE PRECISION,"
        " tags TEXT NOT NULL,"
        " memory_scope TEXT,"
        " workflow_run_id TEXT,"
        " step_id TEXT,"
        " error TEXT,"
        " meta TEXT NOT NULL,"
        " event_count BIGINT NOT NULL DEFAULT 0,"
        " usage TEXT NOT NULL DEFAULT '{}',"
        " cost_usd DOUBLE PRECISION,"
        " input_text TEXT NOT NULL DEFAULT '',"
        " output_text TEXT NOT NULL DEFAULT '',"
        " search tsvector GENERATED ALWAYS AS"
        " (to_tsvector('simple', input_text || ' ' || output_text)) STORED,"
        " lease_expires_at DOUBLE PRECISION,"
        " parent_run_id TEXT,"
        " parent_tool_call_id TEXT,"
        " traceback TEXT)",
    )
    # A filtered page of a large store is an index range, not a scan: the run list shows root
    # runs (no workflow run) newest first, a timeline the runs one episode started.
    for index, columns in (
        ("started", "started_at, id"),
        ("scope", "memory_scope"),
        ("status_started", "status, started_at, id"),
        ("name_started", "name, started_at, id"),
        ("workflow_started", "workflow_run_id, started_at, id"),
        ("parent_started", "parent_run_id, started_at, id"),
    ):
        await execute(conn, f"CREATE INDEX tether_runs_{index} ON tether_runs ({columns})")
    await execute(conn, "CREATE INDEX tether_runs_search ON tether_runs USING GIN (search)")
    await execute(
        conn,
        "CREATE TABLE tether_run_events ("
        " run_id TEXT NOT NULL REFERENCES tether_runs (run_id) ON DELETE CASCADE,"
        " seq BIGINT NOT NULL,"
        " type TEXT NOT NULL,"
        " at DOUBLE PRECISION NOT NULL,"
        " data TEXT NOT NULL,"
        " PRIMARY KEY (run_id, seq))",
    )
    await execute(
        conn,
        "CREATE TABLE tether_run_tags ("
        " tag TEXT NOT NULL,"
        " run_id TEXT NOT NULL REFERENCES tether_runs (run_id) ON DELETE CASCADE,"
        " PRIMARY KEY (tag, run_id))",
    )
    # -- workflows: one row per run, one per journaled step.
    await execute(
        conn,
        "CREATE TABLE tether_workflow_runs ("
        " id BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,"
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
        " created_at DOUBLE PRECISION NOT NULL,"
        " updated_at DOUBLE PRECISION NOT NULL,"
        " lease_owner TEXT,"
        " lease_expires_at DOUBLE PRECISION)",
    )
    await execute(
        conn, "CREATE INDEX tether_workflow_runs_by_workflow ON tether_workflow_runs (workflow_id)"
    )
    await execute(
        conn, "CREATE INDEX tether_workflow_runs_by_root ON tether_workflow_runs (root_run_id)"
    )
    await execute(
        conn,
        "CREATE TABLE tether_workflow_steps ("
        " run_id TEXT NOT NULL REFERENCES tether_workflow_runs (run_id),"
        " step_id TEXT NOT NULL,"
        " seq INTEGER NOT NULL,"
        " name TEXT NOT NULL,"
        " output TEXT NOT NULL,"
        " created_at DOUBLE PRECISION NOT NULL,"
        " PRIMARY KEY (run_id, step_id),"
        " UNIQUE (run_id, seq))",
    )


@schema
async def m002_run_lease_tokens(conn: Connection) -> None:
    # The token of the lease a run's writer holds: its writes are refused once another writer
    # took the run over (`RunStore` fencing).
    await execute(conn, "ALTER TABLE tether_runs ADD COLUMN lease_owner TEXT")


@schema
async def m003_workflow_waits(conn: Connection) -> None:
    # What a waiting workflow run waits for (`ctx.wait_for`), and when that wait times out
    # (indexed: the sweep that resumes overdue waits reads a range, not the table).
    await execute(conn, "ALTER TABLE tether_workflow_runs ADD COLUMN wait TEXT")
    await execute(
        conn, "ALTER TABLE tether_workflow_runs ADD COLUMN wait_deadline DOUBLE PRECISION"
    )
    await execute(
        conn,
        "CREATE INDEX tether_workflow_runs_wait_deadline ON tether_workflow_runs"
        " (wait_deadline) WHERE wait_deadline IS NOT NULL",
    )


@schema
async def m004_run_event_pieces(conn: Connection) -> None:
    # An event whose JSON text is longer than `run_store.PIECE` is stored here in pieces (its
    # row's `data` is empty), so a stream passes it on a piece at a time (`EventPieces`).
    await execute(
        conn,
        "CREATE TABLE tether_run_event_pieces ("
        " run_id TEXT NOT NULL REFERENCES tether_runs (run_id) ON DELETE CASCADE,"
        " seq BIGINT NOT NULL,"
        " piece INTEGER NOT NULL,"
        " text TEXT NOT NULL,"
        " PRIMARY KEY (run_id, seq, piece))",
    )


@schema
async def m005_blobs(conn: Connection) -> None:
    # Media bytes kept once, under their sha256 (`tether.blobs`): records and run events hold
    # a reference. Nothing deletes a row (a blob may be referred to from any scope or run).
    await execute(
        conn,
        "CREATE TABLE tether_blobs ("
        " sha256 TEXT PRIMARY KEY,"
        " media_type TEXT NOT NULL,"
        " size BIGINT NOT NULL,"
        " data BYTEA NOT NULL,"
        " created_at DOUBLE PRECISION NOT NULL)",
    )


@schema
async def m006_paused_runs(conn: Connection) -> None:
    # A paused run's pending calls (listed with the run), the turn it resumes from (read only
    # by the resumer) and when its calls expire (indexed: the sweep reads a range).
    await execute(conn, "ALTER TABLE tether_runs ADD COLUMN pending TEXT")
    await execute(conn, "ALTER TABLE tether_runs ADD COLUMN paused_turn TEXT")
    await execute(conn, "ALTER TABLE tether_runs ADD COLUMN pending_deadline DOUBLE PRECISION")
    await execute(
        conn,
        "CREATE INDEX tether_runs_pending_deadline ON tether_runs (pending_deadline)"
        " WHERE pending_deadline IS NOT NULL",
    )


@schema
async def m007_runs_indexed_as_they_end(conn: Connection) -> None:
    """SQLite's run search index now takes a run's text once, as it ends (its `unindexed`
    column). PostgreSQL searches a generated column, always up to date: nothing changes here,
    and the migration keeps the two backends' lists one."""
