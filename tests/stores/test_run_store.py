"""The RunStore contract, run against every implementation.

Adding an implementation is one line in STORES: a name and a factory taking pytest's tmp_path.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from tests.postgres_server import postgres_url

from tether.errors import NotJSONSafeError, StoreCorruptError, StoreError
from tether.stores.postgres import PostgresRunStore
from tether.stores.run_store import (
    InMemoryRunStore,
    NewRunEvent,
    RunInfo,
    RunStore,
    SqliteRunStore,
)
from tether.stores.sqlite import connect

STORES: dict[str, Callable[[Path], RunStore]] = {
    "memory": lambda tmp: InMemoryRunStore(),
    "sqlite": lambda tmp: SqliteRunStore.open(tmp / "runs.db"),
    "postgres": lambda tmp: PostgresRunStore(postgres_url()),
}


@pytest.fixture(params=list(STORES))
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[RunStore]:
    s = STORES[request.param](tmp_path)
    yield s
    await s.aclose()


def ev(kind: str, **data: object) -> NewRunEvent:
    return {"type": kind, "at": 1.0, "data": dict(data)}


def agent_run(run_id: str, started_at: float = 1.0, **kw: object) -> RunInfo:
    return RunInfo(run_id=run_id, kind="agent", name="researcher", started_at=started_at, **kw)  # type: ignore[arg-type]


async def test_a_started_run_is_listed_with_its_summary(store: RunStore) -> None:
    info = agent_run(
        "r1",
        tags=["version:1.0", "nightly"],
        memory_scope="notes",
        workflow_run_id="wf1",
        step_id="outline",
        meta={"model": "script"},
    )
    await store.start_run(info)
    assert await store.get_run("r1") == info
    assert await store.list_runs() == [info]
    assert await store.get_run("nope") is None


async def test_events_are_numbered_per_run_and_tailed_with_after(store: RunStore) -> None:
    await store.start_run(agent_run("r1"))
    await store.start_run(agent_run("r2"))
    assert (
        await store.append_events("r1", [ev("agent_started"), ev("agent_text_delta", text="Hi")])
        == 2
    )
    assert await store.append_events("r2", [ev("agent_started")]) == 1
    assert await store.append_events("r1", [ev("agent_finished", text="Hi")]) == 3
    events = await store.events("r1")
    assert [(e["seq"], e["type"]) for e in events] == [
        (1, "agent_started"),
        (2, "agent_text_delta"),
        (3, "agent_finished"),
    ]
    assert events[1] == {
        "run_id": "r1",
        "seq": 2,
        "type": "agent_text_delta",
        "at": 1.0,
        "data": {"text": "Hi"},
    }
    assert [e["seq"] for e in await store.events("r1", after=2)] == [3]
    assert [e["type"] for e in await store.events("r2")] == ["agent_started"]
    assert await store.events("unknown") == []


async def test_finish_records_status_end_time_and_error(store: RunStore) -> None:
    await store.start_run(agent_run("ok"))
    await store.start_run(agent_run("bad"))
    await store.finish_run("ok", "completed", ended_at=5.0)
    await store.finish_run("bad", "failed", ended_at=6.0, error="LLMError: boom")
    ok, bad = await store.get_run("ok"), await store.get_run("bad")
    assert ok is not None and bad is not None
    assert (ok.status, ok.ended_at, ok.error) == ("completed", 5.0, None)
    assert (bad.status, bad.ended_at, bad.error) == ("failed", 6.0, "LLMError: boom")
    await store.finish_run("bad", "running")
    resumed = await store.get_run("bad")
    assert resumed is not None and (resumed.status, resumed.ended_at) == ("running", None)
    with pytest.raises(StoreError, match="never started"):
        await store.finish_run("ghost", "completed")
    with pytest.raises(StoreError, match="status"):
        await store.finish_run("ok", "finished")  # type: ignore[arg-type]


async def test_list_runs_is_newest_first_and_filters(store: RunStore) -> None:
    await store.start_run(agent_run("a", 1.0, memory_scope="s1"))
    await store.start_run(RunInfo(run_id="w", kind="workflow", name="review", started_at=2.0))
    await store.start_run(agent_run("b", 3.0, memory_scope="s2", workflow_run_id="w"))
    await store.start_run(agent_run("c", 3.0, memory_scope="s1"))
    assert [r.run_id for r in await store.list_runs()] == ["c", "b", "w", "a"]
    assert [r.run_id for r in await store.list_runs(kind="agent")] == ["c", "b", "a"]
    assert [r.run_id for r in await store.list_runs(workflow_run_id="w")] == ["b"]
    assert [r.run_id for r in await store.list_runs(memory_scope="s1")] == ["c", "a"]
    assert [r.run_id for r in await store.list_runs(limit=2, offset=1)] == ["b", "w"]


async def test_bad_writes_are_refused_and_change_nothing(store: RunStore) -> None:
    await store.start_run(agent_run("r"))
    with pytest.raises(StoreError, match="already exists"):
        await store.start_run(agent_run("r"))
    with pytest.raises(StoreError, match="never started"):
        await store.append_events("ghost", [ev("agent_started")])
    with pytest.raises(NotJSONSafeError, match=r"events\[1\]\.data\.x"):
        await store.append_events("r", [ev("a"), ev("b", x=object())])
    with pytest.raises(StoreError, match="type"):
        no_type: Any = {"data": {}}
        await store.append_events("r", [no_type])
    with pytest.raises(NotJSONSafeError):
        await store.start_run(agent_run("m", meta={"when": object()}))
    assert await store.events("r") == []
    assert await store.get_run("m") is None


async def test_readers_get_copies(store: RunStore) -> None:
    await store.start_run(agent_run("r", tags=["t"], meta={"k": [1]}))
    await store.append_events("r", [ev("x", items=[1, 2])])
    info = await store.get_run("r")
    assert info is not None
    info.tags.append("mutated")
    info.meta["k"].append(2)
    (await store.events("r"))[0]["data"]["items"].clear()
    again = await store.get_run("r")
    assert again is not None
    assert (again.tags, again.meta) == (["t"], {"k": [1]})
    assert (await store.events("r"))[0]["data"] == {"items": [1, 2]}


async def test_concurrent_writers_to_one_run_lose_nothing(store: RunStore) -> None:
    await store.start_run(agent_run("r"))

    async def writer(w: int) -> None:
        for i in range(20):
            await store.append_events("r", [ev("tick", w=w, i=i)])

    await asyncio.gather(*(writer(w) for w in range(6)))
    events = await store.events("r")
    assert [e["seq"] for e in events] == list(range(1, 121))
    for w in range(6):
        assert [e["data"]["i"] for e in events if e["data"]["w"] == w] == list(range(20))


async def test_sqlite_runs_survive_reopening_and_corruption_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    s = SqliteRunStore.open(path)
    await s.start_run(agent_run("r", tags=["a"]))
    await s.append_events("r", [ev("agent_started", agent_id="x")])
    await s.aclose()
    conn = connect(path)
    again = SqliteRunStore(conn)
    assert [e["data"] for e in await again.events("r")] == [{"agent_id": "x"}]
    conn.execute("UPDATE run_events SET data = 'nope' WHERE run_id = 'r'")
    with pytest.raises(StoreCorruptError, match="'r', event 1"):
        await again.events("r")
    await again.aclose()
    conn.close()


async def test_message_and_run_stores_share_one_connection(tmp_path: Path) -> None:
    from tether.stores.message_store import SqliteMessageStore

    conn = connect(tmp_path / "all.db")
    messages, runs = SqliteMessageStore(conn), SqliteRunStore(conn)

    async def write_messages() -> None:
        for i in range(20):
            await messages.append(
                "s", [{"role": "user", "content": [{"type": "text", "text": str(i)}]}]
            )

    async def write_runs() -> None:
        await runs.start_run(agent_run("r"))
        for i in range(20):
            await runs.append_events("r", [ev("tick", i=i)])

    await asyncio.gather(write_messages(), write_runs())
    assert await messages.length("s") == 20
    assert len(await runs.events("r")) == 20
    conn.close()
