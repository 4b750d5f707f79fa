"""What only the SQLite WorkflowStore has to show: durability across handles, processes' worth of
concurrent writers on one file, and living beside the other SQLite stores without blocking the
event loop."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from tether.errors import StoreError
from tether.stores import SqliteMessageStore, SqliteWorkflowStore
from tether.stores.sqlite import connect, schema


async def test_runs_and_steps_survive_reopening(tmp_path: Path) -> None:
    path = tmp_path / "wf.db"
    async with SqliteWorkflowStore.open(path) as store:
        await store.create_run(run_id="r1", workflow_id="wf", input={"q": "x"})
        await store.append_step("r1", step_id="s", name="s", output=[1, "two"])
    async with SqliteWorkflowStore.open(path) as again:
        run = await again.get_run("r1")
        assert run is not None and run.input == {"q": "x"} and run.status == "running"
        assert [s.output for s in await again.list_steps("r1")] == [[1, "two"]]


async def test_the_schema_is_recorded_as_named_migrations(tmp_path: Path) -> None:
    async with SqliteWorkflowStore.open(tmp_path / "wf.db") as store:
        assert schema.applied(store._conn) == schema.names
        assert schema.names[0] == "m001_initial_schema"


def test_writers_on_separate_connections_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "wf.db"

    async def setup() -> None:
        async with SqliteWorkflowStore.open(path) as store:
            await store.create_run(run_id="r1", workflow_id="wf", input=None)

    asyncio.run(setup())
    start = threading.Barrier(4)
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        async def go() -> None:
            async with SqliteWorkflowStore.open(path) as store:
                start.wait()
                for i in range(25):
                    await store.append_step("r1", step_id=f"w{n}-{i}", name="s", output=[n, i])
                    # Every writer also races for one shared step id: exactly one output wins.
                    await store.append_step("r1", step_id="shared", name="s", output=n)

        try:
            asyncio.run(go())
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []

    async def check() -> None:
        async with SqliteWorkflowStore.open(path) as store:
            steps = await store.list_steps("r1")
            assert [s.seq for s in steps] == list(range(1, 102))
            assert len({s.step_id for s in steps}) == 101
            assert sum(1 for s in steps if s.step_id == "shared") == 1

    asyncio.run(check())


async def test_a_file_locked_by_another_writer_does_not_block_the_event_loop(
    tmp_path: Path,
) -> None:
    path = tmp_path / "wf.db"
    async with SqliteWorkflowStore.open(path) as store:
        await store.create_run(run_id="r1", workflow_id="wf", input=None)
        other = connect(path)
        other.execute("BEGIN IMMEDIATE")  # another process holds the write lock
        append = asyncio.ensure_future(store.append_step("r1", step_id="s", name="s", output=1))
        for _ in range(5):
            await asyncio.sleep(0)
        # The append waits for the lock in a worker thread; the loop (this test) goes on.
        assert not append.done()
        other.execute("COMMIT")
        other.close()
        assert (await append).output == 1


async def test_a_connection_shared_with_the_other_stores_keeps_their_writes_apart(
    tmp_path: Path,
) -> None:
    conn = connect(tmp_path / "all.db")
    messages, workflows = SqliteMessageStore(conn), SqliteWorkflowStore(conn)
    await workflows.create_run(run_id="r1", workflow_id="wf", input=None)

    async def write_messages() -> None:
        for i in range(100):
            await messages.append(
                "s", [{"role": "user", "content": [{"type": "text", "text": str(i)}]}]
            )

    async def write_steps() -> None:
        for i in range(100):
            await workflows.append_step("r1", step_id=f"s{i}", name="s", output=i)

    await asyncio.gather(write_messages(), write_steps())
    assert await messages.length("s") == 100
    assert [s.output for s in await workflows.list_steps("r1")] == list(range(100))
    conn.close()


async def test_sqlite_failures_are_store_errors(tmp_path: Path) -> None:
    conn = connect(tmp_path / "wf.db")
    store = SqliteWorkflowStore(conn)
    conn.close()  # the caller closed its connection under the store
    with pytest.raises(StoreError, match="closed database"):
        await store.get_run("r1")
