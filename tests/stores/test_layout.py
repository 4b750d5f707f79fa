"""One layout for both SQL backends: the same table names and the same stored text for the same
values, from one initial schema each."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import psycopg
from tests.postgres_server import postgres_url

from tether.stores import RunInfo, SqliteMessageStore, SqliteRunStore, SqliteWorkflowStore
from tether.stores.postgres import PostgresMessageStore, PostgresRunStore, PostgresWorkflowStore
from tether.stores.postgres import schema as postgres_schema
from tether.stores.sqlite import MIGRATIONS_TABLE, connect
from tether.stores.sqlite import schema as sqlite_schema

TABLES = {
    "tether_blobs",
    "tether_message_scopes",
    "tether_messages",
    "tether_migrations",
    "tether_run_event_pieces",
    "tether_run_events",
    "tether_run_tags",
    "tether_runs",
    "tether_scope_leases",
    "tether_workflow_runs",
    "tether_workflow_steps",
}
INFO = RunInfo(
    run_id="r",
    kind="agent",
    name="a",
    started_at=1.0,
    tags=["version:1.0", "naïve", 'q"uote'],
    meta={"model": "m", "n": [1, 2.5]},
)


def sqlite_tables(conn: sqlite3.Connection) -> set[str]:
    """The tables, less the full-text index of runs (PostgreSQL searches a column instead)."""
    rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    return {name for (name,) in rows if not name.startswith("tether_runs_fts")}


async def test_both_sql_backends_use_one_set_of_table_names_and_store_tags_alike(
    tmp_path: Path,
) -> None:
    path = tmp_path / "all.db"
    conn = connect(path)
    sqlite_runs = SqliteRunStore(conn)
    sqlite_stores = [SqliteMessageStore(conn), sqlite_runs, SqliteWorkflowStore(conn)]
    url = postgres_url()
    pg_runs = PostgresRunStore(url)
    pg_stores = [PostgresMessageStore(url), pg_runs, PostgresWorkflowStore(url)]
    for pg_store in pg_stores:
        await pg_store.migrate()
    await sqlite_runs.start_run(INFO)
    await pg_runs.start_run(INFO)

    with psycopg.connect(url, autocommit=True) as pg:
        pg_tables = {
            name
            for (name,) in pg.execute(
                "SELECT table_name FROM information_schema.tables"
                " WHERE table_schema = current_schema()"
            ).fetchall()
        }
        pg_row = pg.execute("SELECT tags, meta FROM tether_runs WHERE run_id = 'r'").fetchone()
    assert sqlite_tables(conn) == pg_tables == TABLES
    sqlite_row = conn.execute("SELECT tags, meta FROM tether_runs WHERE run_id = 'r'").fetchone()
    assert (
        sqlite_row == pg_row == ('["version:1.0","naïve","q\\"uote"]', '{"model":"m","n":[1,2.5]}')
    )
    for store in sqlite_stores:
        await store.aclose()
    for pg_store in pg_stores:
        await pg_store.aclose()
    conn.close()


async def test_every_store_of_a_file_applies_the_one_schema_once(tmp_path: Path) -> None:
    conn = connect(tmp_path / "one.db")
    stores = [SqliteWorkflowStore(conn), SqliteMessageStore(conn), SqliteRunStore(conn)]
    assert sqlite_tables(conn) == TABLES  # the first store created every table
    assert sqlite_schema.applied(conn) == sqlite_schema.names
    assert conn.execute(f"SELECT store, name FROM {MIGRATIONS_TABLE}").fetchall() == [
        ("tether", name) for name in sqlite_schema.names
    ]
    assert sqlite_schema.names[0] == postgres_schema.names[0] == "m001_initial_schema"
    # The two backends' schemas change together: the same migrations, under the same names.
    assert sqlite_schema.names == postgres_schema.names
    for store in stores:
        await store.aclose()
    conn.close()


async def test_only_runs_of_a_workflow_run_are_in_its_index_in_both_backends(
    tmp_path: Path,
) -> None:
    """Starting a run that belongs to no workflow run (most) writes no entry into the index of
    a workflow run's runs; a query by workflow run still reads that index."""
    conn = connect(tmp_path / "runs.db")
    sqlite_runs = SqliteRunStore(conn)
    url = postgres_url()
    pg_runs = PostgresRunStore(url)
    await pg_runs.migrate()
    (sqlite_sql,) = conn.execute(
        "SELECT sql FROM sqlite_master WHERE name = 'tether_runs_workflow_started'"
    ).fetchone()
    with psycopg.connect(url, autocommit=True) as pg:
        row = pg.execute(
            "SELECT indexdef FROM pg_indexes WHERE indexname = 'tether_runs_workflow_started'"
        ).fetchone()
    assert row is not None
    (pg_sql,) = row
    assert sqlite_sql.endswith("WHERE workflow_run_id IS NOT NULL")
    assert pg_sql.endswith("WHERE (workflow_run_id IS NOT NULL)")
    plan = conn.execute(
        "EXPLAIN QUERY PLAN SELECT run_id FROM tether_runs WHERE workflow_run_id = ?"
        " ORDER BY started_at DESC LIMIT 5",
        ("wf",),
    ).fetchall()
    assert "tether_runs_workflow_started" in str(plan)
    await sqlite_runs.aclose()
    await pg_runs.aclose()
    conn.close()
