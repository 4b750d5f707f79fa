"""WAL checkpoints off the event loop: a store that owns its connection turns SQLite's own
checkpoint-in-a-commit off and a thread of its own moves the WAL into the database file."""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from pathlib import Path

from tether.stores import SqliteMessageStore
from tether.stores._checkpoint import Checkpointer
from tether.stores.sqlite import connect


def _checkpoint_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "tether-sqlite-checkpoint"]


def _fill(conn: sqlite3.Connection, rows: int) -> None:
    conn.execute("CREATE TABLE IF NOT EXISTS t (x TEXT)")
    for i in range(rows):
        conn.execute("INSERT INTO t VALUES (?)", ("x" * 500 + str(i),))


async def test_a_store_owning_a_file_checkpoints_from_its_own_thread(tmp_path: Path) -> None:
    before = len(_checkpoint_threads())
    store = SqliteMessageStore.open(tmp_path / "m.db")
    try:
        (auto,) = store._conn.execute("PRAGMA wal_autocheckpoint").fetchone()
        assert auto == 0  # no commit pays for a checkpoint
        assert len(_checkpoint_threads()) == before + 1
        await store.append("s", [{"role": "user", "content": []}])
    finally:
        await store.aclose()
    assert len(_checkpoint_threads()) == before  # closing stops the thread


async def test_an_in_memory_store_or_a_borrowed_connection_keeps_sqlites_checkpoints(
    tmp_path: Path,
) -> None:
    before = len(_checkpoint_threads())
    memory = SqliteMessageStore.open(":memory:")
    conn = connect(tmp_path / "b.db")
    borrowed = SqliteMessageStore(conn)  # the caller owns (and closes) the connection
    try:
        assert len(_checkpoint_threads()) == before
        (auto,) = conn.execute("PRAGMA wal_autocheckpoint").fetchone()
        assert auto == 1000
    finally:
        await memory.aclose()
        await borrowed.aclose()
        conn.close()


def test_the_checkpointer_moves_written_pages_into_the_database_file(tmp_path: Path) -> None:
    def written(path: Path, checkpoints: bool) -> int:
        conn = connect(path)
        conn.execute("PRAGMA wal_autocheckpoint = 0")
        checkpointer = Checkpointer(str(path), every=0.02) if checkpoints else None
        try:
            _fill(conn, 400)
            if checkpointer is not None:
                checkpointer.wrote()
                deadline = time.monotonic() + 10
                while checkpointer.runs == 0 and time.monotonic() < deadline:
                    time.sleep(0.01)
                assert checkpointer.runs >= 1
            return os.path.getsize(path)  # measured while the connection is open
        finally:
            if checkpointer is not None:
                checkpointer.stop()
            conn.close()

    without = written(tmp_path / "without.db", checkpoints=False)
    with_thread = written(tmp_path / "with.db", checkpoints=True)
    assert without < 50_000  # everything still in the WAL
    assert with_thread > 200_000  # 400 rows of 500 bytes moved into the file
    conn = sqlite3.connect(tmp_path / "with.db")
    assert conn.execute("SELECT count(*) FROM t").fetchone() == (400,)
    conn.close()


def test_the_checkpointer_idles_when_nothing_was_written(tmp_path: Path) -> None:
    conn = connect(tmp_path / "idle.db")
    _fill(conn, 1)
    checkpointer = Checkpointer(str(tmp_path / "idle.db"), every=0.01)
    try:
        time.sleep(0.1)
        assert checkpointer.runs == 0
    finally:
        checkpointer.stop()
        conn.close()
