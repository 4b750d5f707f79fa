"""One writer per SQLite file: the stores on one connection run each operation whole in the event
loop, so they never race each other for the write lock and SQLite's busy handler (which sleeps
before it retries) never runs inside one process; another process's lock is waited for with
`asyncio.sleep`, up to the connection's timeout."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path

import pytest

from tether.errors import StoreError
from tether.session import Message
from tether.stores import RunInfo, SqliteMessageStore, SqliteRunStore, SqliteWorkflowStore
from tether.stores.sqlite import SqliteBacked, connect


def user(text: str) -> Message:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


async def test_stores_sharing_a_connection_never_wait_on_each_other(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    waits: list[str] = []
    next_delay = SqliteBacked._next_delay

    def counted(self: SqliteBacked, *args: object) -> float:
        waits.append(type(self).__name__)
        return next_delay(self, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(SqliteBacked, "_next_delay", counted)
    conn = connect(tmp_path / "one.db")
    messages, runs, workflows = (
        SqliteMessageStore(conn),
        SqliteRunStore(conn),
        SqliteWorkflowStore(conn),
    )
    # SQLite's own busy handler is off: it could only sleep.
    assert conn.execute("PRAGMA busy_timeout").fetchone() == (0,)
    await workflows.create_run(run_id="w", workflow_id="wf", input=None)

    async def episode(n: int) -> None:
        await runs.start_run(RunInfo(run_id=f"r{n}", kind="agent", name="a"))
        for i in range(10):
            await messages.append(f"s{n % 3}", [user(f"{n}-{i}")])
            await runs.append_events(f"r{n}", [{"type": "tick", "at": 1.0, "data": {"i": i}}])
            await workflows.append_step("w", step_id=f"{n}-{i}", name="s", output=i)
        await runs.finish_run(f"r{n}", "completed")

    await asyncio.gather(*(episode(n) for n in range(12)))
    assert waits == []
    assert sum([await messages.length(f"s{k}") for k in range(3)]) == 120
    assert len(await workflows.list_steps("w")) == 120
    for store in (messages, runs, workflows):
        await store.aclose()
    conn.close()


async def test_another_process_s_lock_is_waited_for_in_the_event_loop_then_times_out(
    tmp_path: Path,
) -> None:
    path = tmp_path / "locked.db"
    store = SqliteMessageStore(connect(path, timeout=0.3), owns=True)
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another process holds the write lock
    append = asyncio.ensure_future(store.append("s", [user("waits")]))
    ticks = 0
    started = time.monotonic()
    while not append.done():
        await asyncio.sleep(0.01)
        ticks += 1
    # The loop kept running while the append waited, and the wait ended at the timeout.
    assert ticks >= 10
    with pytest.raises(StoreError, match=r"locked by another process and stayed locked for 0.3 s"):
        await append
    assert 0.25 < time.monotonic() - started < 2
    other.execute("ROLLBACK")
    # Once the lock is free the store writes, and the failed attempt left nothing behind.
    assert await store.append("s", [user("now")]) == 1
    other.close()
    await store.aclose()


async def test_an_append_waiting_for_another_process_goes_through_when_the_lock_is_freed(
    tmp_path: Path,
) -> None:
    path = tmp_path / "locked.db"
    store = SqliteMessageStore(connect(path), owns=True)
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    append = asyncio.ensure_future(store.append("s", [user("queued")]))
    await asyncio.sleep(0.05)
    assert not append.done()
    other.execute("COMMIT")
    assert await append == 1
    other.close()
    await store.aclose()


async def test_another_process_s_short_hold_is_retried_soon_and_a_long_one_cheaply(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    delays: list[tuple[float, float]] = []
    next_delay = SqliteBacked._next_delay
    started = time.monotonic()

    def timed(self: SqliteBacked, *args: object) -> float:
        delay = next_delay(self, *args)  # type: ignore[arg-type]
        delays.append((time.monotonic() - started, delay))
        return delay

    monkeypatch.setattr(SqliteBacked, "_next_delay", timed)
    path = tmp_path / "locked.db"
    store = SqliteMessageStore(connect(path), owns=True)
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    started = time.monotonic()
    append = asyncio.ensure_future(store.append("s", [user("waits")]))
    await asyncio.sleep(0.5)
    other.execute("COMMIT")
    assert await append == 1
    # Another process's write transaction is usually over in well under a millisecond: the
    # first tenth of a second is retried at most 2 ms apart, then the retries space out.
    assert max(d for at, d in delays if at < 0.09) <= 0.002
    assert max(d for at, d in delays) == 0.05
    other.close()
    await store.aclose()


async def test_stores_owning_one_connection_close_it_with_the_last_of_them(
    tmp_path: Path,
) -> None:
    conn = connect(tmp_path / "shared.db")
    messages = SqliteMessageStore(conn, owns=True)
    runs = SqliteRunStore(conn, owns=True)
    workflows = SqliteWorkflowStore(conn, owns=True)
    await messages.aclose()
    await runs.aclose()
    assert conn.execute("SELECT 1").fetchone() == (1,)
    assert await workflows.get_run("nope") is None
    await workflows.aclose()
    with pytest.raises(sqlite3.ProgrammingError):
        conn.execute("SELECT 1")


async def test_a_runtime_on_a_sqlite_file_has_one_writer_for_its_three_stores(
    tmp_path: Path,
) -> None:
    from tether.lab import Runtime

    lab = Runtime(store=f"sqlite:///{tmp_path / 'lab.db'}", version=False)
    stores = (lab.message_store, lab.run_store, lab.workflow_store)
    assert all(isinstance(s, SqliteBacked) for s in stores)
    conns = {id(s._conn) for s in stores}  # type: ignore[union-attr]
    assert len(conns) == 1
    await lab.aclose()


async def test_episodes_of_a_runtime_on_one_file_never_wait_for_sqlite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tether.lab import Runtime
    from tether.testing import script_client

    waits: list[str] = []
    next_delay = SqliteBacked._next_delay

    def counted(self: SqliteBacked, *args: object) -> float:
        waits.append(type(self).__name__)
        return next_delay(self, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(SqliteBacked, "_next_delay", counted)
    lab = Runtime(store=f"sqlite:///{tmp_path / 'lab.db'}", version=False)
    agent = lab.create_agent(id="a", model=script_client([{"text": "ok"}] * 30))
    # Episodes on three scopes at once: run records, message appends and scope leases (taken,
    # renewed, released) all go through the one writer of the file.
    await asyncio.gather(
        *(agent.run(memory_scope=f"s{i % 3}", user=str(i)).result for i in range(30))
    )
    assert waits == []
    assert [await lab.message_store.length(f"s{k}") for k in range(3)] == [20, 20, 20]
    await lab.aclose()
