"""One layout for both SQL backends: the same table names, the same stored text for the same
values, and SQLite files written before the names were shared are migrated in place."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import psycopg
from tests.postgres_server import postgres_url

from tether.stores import RunInfo, RunQuery, SqliteMessageStore, SqliteRunStore, SqliteWorkflowStore
from tether.stores.postgres import PostgresMessageStore, PostgresRunStore, PostgresWorkflowStore
from tether.stores.sqlite import (
    MIGRATIONS_TABLE,
    connect,
    m001_create_message_tables,
    m001_create_run_tables,
    m001_create_workflow_tables,
    message_migrations,
    run_migrations,
    workflow_migrations,
)

TABLES = {
    "tether_message_scopes",
    "tether_messages",
    "tether_migrations",
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


def _legacy_file(path: Path) -> None:
    """A file as tether wrote it before the SQLite tables took the PostgreSQL names."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(
        "CREATE TABLE _tether_migrations (store TEXT NOT NULL, name TEXT NOT NULL,"
        " applied_at TEXT NOT NULL, PRIMARY KEY (store, name))"
    )
    for store, fn in (
        ("messages", m001_create_message_tables),
        ("runs", m001_create_run_tables),
        ("workflow", m001_create_workflow_tables),
    ):
        fn(conn)
        conn.execute(
            "INSERT INTO _tether_migrations VALUES (?, ?, '2025-01-01')", (store, fn.__name__)
        )
    conn.execute("INSERT INTO message_scopes VALUES ('s', 1, 'Old chat', 1.0, 2.0)")
    conn.execute(
        "INSERT INTO messages VALUES ('s', 0, ?)",
        ('{"role":"user","content":[{"type":"text","text":"hi"}]}',),
    )
    conn.execute(
        "INSERT INTO runs VALUES ('r', 'agent', 'a', 'completed', 1.0, 2.0, '[\"t\"]', 's',"
        " NULL, NULL, NULL, '{}', 1)"
    )
    conn.execute("INSERT INTO run_events VALUES ('r', 1, 'agent_started', 1.0, '{}')")
    conn.execute(
        "INSERT INTO workflow_runs VALUES ('w', 'wf', 'completed', '1', '2', NULL, NULL, 'w',"
        " NULL, 1, 1.0, 2.0)"
    )
    conn.execute("INSERT INTO workflow_steps VALUES ('w', 'one', 1, 'one', '[1]', 1.5)")
    conn.close()


async def test_a_file_written_with_the_old_table_names_is_migrated_and_keeps_everything(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.db"
    _legacy_file(path)
    conn = connect(path)
    messages, runs, workflows = (
        SqliteMessageStore(conn),
        SqliteRunStore(conn),
        SqliteWorkflowStore(conn),
    )
    assert sqlite_tables(conn) == TABLES
    assert await messages.load("s") == [
        {"role": "user", "content": [{"type": "text", "text": "hi"}]}
    ]
    assert await messages.get_title("s") == "Old chat"
    assert await messages.append("s", [{"role": "assistant", "content": []}]) == 2
    info = await runs.get_run("r")
    assert info is not None and info.tags == ["t"] and info.status == "completed"
    assert [e["type"] for e in await runs.events("r")] == ["agent_started"]
    # The tag table and the full-text index were renamed with the runs.
    await runs.start_run(RunInfo(run_id="r2", kind="agent", name="a", input_text="zebra crossing"))
    assert [i.run_id for i in (await runs.query_runs(RunQuery(tag="t"))).runs] == ["r"]
    assert [i.run_id for i in (await runs.query_runs(RunQuery(q="zebr"))).runs] == ["r2"]
    record = await workflows.get_run("w")
    assert record is not None and record.output == 2
    assert [s.output for s in await workflows.list_steps("w")] == [[1]]
    # The scopes' foreign key follows the renamed table: deleting a scope takes its records.
    await messages.delete("s")
    assert conn.execute("SELECT count(*) FROM tether_messages").fetchone() == (0,)
    # A tether from before the rename reads the old name, sees migrations it does not know and
    # refuses the file (instead of creating empty tables under the old names beside these).
    old_view = conn.execute(
        "SELECT store, name FROM _tether_migrations WHERE store = 'runs' ORDER BY rowid"
    ).fetchall()
    assert old_view == [("runs", name) for name in run_migrations.names]
    declared = message_migrations.names + run_migrations.names + workflow_migrations.names
    assert conn.execute(f"SELECT count(*) FROM {MIGRATIONS_TABLE}").fetchone() == (len(declared),)
    for store in (messages, runs, workflows):
        await store.aclose()
    conn.close()
