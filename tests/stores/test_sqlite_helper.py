"""The shared SQLite helper: connection settings, ordered named migrations, transactions."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tether.errors import StoreError
from tether.stores.sqlite import MIGRATIONS_TABLE, SqliteMigrations, connect, transaction


def _two_step(store: str = "demo") -> SqliteMigrations:
    migrations = SqliteMigrations(store)

    @migrations
    def m001_create_items(conn: sqlite3.Connection) -> None:
        conn.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL)")

    @migrations
    def m002_add_items_note(conn: sqlite3.Connection) -> None:
        conn.execute("ALTER TABLE items ADD COLUMN note TEXT")

    return migrations


def test_connect_creates_parent_dirs_and_uses_wal(tmp_path: Path) -> None:
    conn = connect(tmp_path / "deep" / "dir" / "t.db")
    try:
        assert (tmp_path / "deep" / "dir" / "t.db").exists()
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
        assert conn.isolation_level is None
    finally:
        conn.close()


def test_migrations_apply_in_order_once_and_are_recorded_per_store() -> None:
    conn = connect(":memory:")
    migrations = _two_step()
    assert migrations.apply(conn) == ["m001_create_items", "m002_add_items_note"]
    assert migrations.apply(conn) == []
    assert migrations.applied(conn) == ["m001_create_items", "m002_add_items_note"]
    conn.execute("INSERT INTO items (name, note) VALUES ('a', 'b')")
    rows = conn.execute(f"SELECT store, name FROM {MIGRATIONS_TABLE} ORDER BY rowid").fetchall()
    assert rows == [("demo", "m001_create_items"), ("demo", "m002_add_items_note")]


def test_two_stores_keep_separate_migration_records() -> None:
    conn = connect(":memory:")
    other = SqliteMigrations("other")

    @other
    def m001_create_things(conn: sqlite3.Connection) -> None:
        conn.execute("CREATE TABLE things (id INTEGER PRIMARY KEY)")

    _two_step().apply(conn)
    assert other.apply(conn) == ["m001_create_things"]
    assert other.applied(conn) == ["m001_create_things"]


def test_appending_a_migration_applies_only_the_new_one(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    first = SqliteMigrations("demo")

    @first
    def m001_create_items(conn: sqlite3.Connection) -> None:
        conn.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL)")

    conn = connect(path)
    assert first.apply(conn) == ["m001_create_items"]
    conn.close()
    conn = connect(path)
    assert _two_step().apply(conn) == ["m002_add_items_note"]
    conn.close()


def test_names_must_be_well_formed_and_increasing() -> None:
    migrations = SqliteMigrations("demo")

    def m002_b(conn: sqlite3.Connection) -> None: ...

    def m001_a(conn: sqlite3.Connection) -> None: ...

    def create_things(conn: sqlite3.Connection) -> None: ...

    migrations(m002_b)
    with pytest.raises(ValueError, match="append-only"):
        migrations(m001_a)
    with pytest.raises(ValueError, match="m001_what_changed"):
        migrations(create_things)


def test_a_database_from_a_newer_tether_is_refused() -> None:
    conn = connect(":memory:")
    _two_step().apply(conn)
    older = SqliteMigrations("demo")

    @older
    def m001_create_items(conn: sqlite3.Connection) -> None:
        raise AssertionError("already applied")

    with pytest.raises(StoreError, match="newer tether"):
        older.apply(conn)


def test_a_failing_migration_is_rolled_back_and_not_recorded() -> None:
    conn = connect(":memory:")
    migrations = SqliteMigrations("demo")

    @migrations
    def m001_create_items(conn: sqlite3.Connection) -> None:
        conn.execute("CREATE TABLE items (id INTEGER PRIMARY KEY)")
        conn.execute("THIS IS NOT SQL")

    with pytest.raises(StoreError, match="m001_create_items"):
        migrations.apply(conn)
    assert migrations.applied(conn) == []
    tables = conn.execute("SELECT name FROM sqlite_master WHERE name = 'items'").fetchall()
    assert tables == []


def test_transaction_commits_or_rolls_back_and_nests_as_savepoint() -> None:
    conn = connect(":memory:")
    _two_step().apply(conn)
    with transaction(conn):
        conn.execute("INSERT INTO items (name) VALUES ('kept')")
        with pytest.raises(RuntimeError), transaction(conn):
            conn.execute("INSERT INTO items (name) VALUES ('inner')")
            raise RuntimeError("boom")
    with pytest.raises(RuntimeError), transaction(conn):
        conn.execute("INSERT INTO items (name) VALUES ('lost')")
        raise RuntimeError("boom")
    assert [r[0] for r in conn.execute("SELECT name FROM items")] == ["kept"]
    assert not conn.in_transaction


def test_two_connections_migrating_one_file_apply_each_migration_once(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    a, b = connect(path), connect(path)
    try:
        assert _two_step().apply(a) == ["m001_create_items", "m002_add_items_note"]
        assert _two_step().apply(b) == []
    finally:
        a.close()
        b.close()
