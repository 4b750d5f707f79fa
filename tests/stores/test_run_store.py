"""The RunStore contract, run against every implementation.

Adding an implementation is one line in STORES: a name and a factory taking pytest's tmp_path.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from tests.postgres_server import postgres_url

from tether.errors import LeaseLostError, NotJSONSafeError, StoreCorruptError, StoreError
from tether.stores import (
    CANCEL_REQUESTED,
    CancelRequests,
    InMemoryRunStore,
    ManyAppends,
    NewRunEvent,
    RunInfo,
    RunQuery,
    RunStore,
    SqliteRunStore,
)
from tether.stores.postgres import PostgresRunStore
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


async def test_events_are_read_in_pages_with_limit(store: RunStore) -> None:
    await store.start_run(agent_run("r1"))
    await store.append_events("r1", [ev("agent_text_delta", text=str(i)) for i in range(7)])
    pages: list[list[int]] = []
    last = 0
    while page := await store.events("r1", after=last, limit=3):
        pages.append([e["seq"] for e in page])
        last = page[-1]["seq"]
    assert pages == [[1, 2, 3], [4, 5, 6], [7]]
    assert await store.events("r1", after=2, limit=0) == []
    assert len(await store.events("r1", limit=None)) == 7


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
    conn.execute("UPDATE tether_run_events SET data = 'nope' WHERE run_id = 'r'")
    with pytest.raises(StoreCorruptError, match="'r', event 1"):
        await again.events("r")
    await again.aclose()
    conn.close()


async def test_message_and_run_stores_share_one_connection(tmp_path: Path) -> None:
    from tether.stores import SqliteMessageStore

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


# -- query_runs: filters, free text, cursors, cost ---------------------------------------------


async def fill(store: RunStore) -> None:
    runs = [
        RunInfo("a1", "agent", "researcher", "completed", 10.0, tags=["nightly", "v:1"],
                input_text="Find papers on CRISPR delivery", memory_scope="s1"),
        RunInfo("a2", "agent", "researcher", "failed", 20.0, tags=["v:1"],
                input_text="Summarise the quarterly report"),
        RunInfo("w1", "workflow", "review", "completed", 30.0, tags=["nightly"],
                input_text='{"topic": "gene editing"}'),
        RunInfo("a3", "agent", "writer", "completed", 40.0, workflow_run_id="w1",
                input_text="Outline gene editing"),
        RunInfo("a4", "agent", "helper", "running", 50.0, input_text="Ünïcode wörds here"),
    ]  # fmt: skip
    for info in runs:
        await store.start_run(info)
    await store.finish_run(
        "a1", "completed", output_text="Three papers about lipid nanoparticles",
        usage={"input_tokens": 120, "output_tokens": 30}, cost_usd=0.0021,
    )  # fmt: skip


async def ids(store: RunStore, **query: Any) -> list[str]:
    from tether.stores.run_store import RunQuery

    page = await store.query_runs(RunQuery(**query), limit=100)
    return [i.run_id for i in page.runs]


async def test_query_runs_filters_each_field(store: RunStore) -> None:
    await fill(store)
    assert await ids(store) == ["a4", "a3", "w1", "a2", "a1"]
    assert await ids(store, status="failed") == ["a2"]
    assert await ids(store, kind="workflow") == ["w1"]
    assert await ids(store, name="researcher") == ["a2", "a1"]
    assert await ids(store, tag="nightly") == ["w1", "a1"]
    assert await ids(store, tag="nope") == []
    assert await ids(store, since=20.0, until=40.0) == ["w1", "a2"]
    assert await ids(store, roots_only=True) == ["a4", "w1", "a2", "a1"]
    assert await ids(store, memory_scope="s1") == ["a1"]
    assert await ids(store, agents=("researcher",), workflows=()) == ["a2", "a1"]
    assert await ids(store, agents=("writer",), workflows=("review",)) == ["a3", "w1"]
    assert await ids(store, status="completed", tag="nightly", name="review") == ["w1"]


async def test_a_run_started_by_a_tool_call_names_its_parent_and_is_no_root(
    store: RunStore,
) -> None:
    await fill(store)
    child = RunInfo("a5", "agent", "writer", "completed", 60.0, parent_run_id="a4",
                    parent_tool_call_id="call_1", input_text="Called as a tool")  # fmt: skip
    await store.start_run(child)
    read = await store.get_run("a5")
    assert read is not None
    assert (read.parent_run_id, read.parent_tool_call_id) == ("a4", "call_1")
    parent = await store.get_run("a4")
    assert parent is not None and parent.parent_run_id is None
    assert parent.parent_tool_call_id is None
    assert await ids(store, parent_run_id="a4") == ["a5"]
    assert await ids(store, parent_run_id="a1") == []
    # Nested in an episode: not a root, like a run nested in a workflow run.
    assert await ids(store, roots_only=True) == ["a4", "w1", "a2", "a1"]
    assert "a5" in await ids(store, agents=("writer",), workflows=())


async def test_a_failed_runs_traceback_is_kept_to_its_last_characters(store: RunStore) -> None:
    from tether.stores.run_store import TRACEBACK_LIMIT

    await store.start_run(agent_run("short"))
    await store.start_run(agent_run("long"))
    await store.start_run(agent_run("plain"))
    await store.finish_run("short", "failed", error="E: x", traceback="Traceback\n  boom()\nE: x")
    tail = "\n  in the_raising_function\nValueError: bad"
    huge = "Traceback (most recent call last):\n" + "  frame\n" * 5000 + tail
    await store.finish_run("long", "failed", error="ValueError: bad", traceback=huge)
    await store.finish_run("plain", "failed", error="E: y")
    short, long, plain = [await store.get_run(r) for r in ("short", "long", "plain")]
    assert short is not None and short.traceback == "Traceback\n  boom()\nE: x"
    assert long is not None and long.traceback is not None
    assert len(long.traceback) == TRACEBACK_LIMIT and long.traceback.endswith(tail)
    assert plain is not None and plain.traceback is None
    # Listed runs carry it too; a run resumed ("running" again) drops it with the error.
    page = await store.query_runs(RunQuery(status="failed"))
    assert {r.run_id: r.traceback for r in page.runs}["short"] == short.traceback
    await store.finish_run("short", "running")
    again = await store.get_run("short")
    assert again is not None and again.error is None and again.traceback is None


async def test_query_runs_searches_inputs_and_outputs_by_word_prefix(store: RunStore) -> None:
    await fill(store)
    assert await ids(store, q="gene editing") == ["a3", "w1"]
    assert await ids(store, q="GENE edit") == ["a3", "w1"]
    assert await ids(store, q="nanoparticle") == ["a1"]  # the output, set at the end
    assert await ids(store, q="crispr papers") == ["a1"]
    assert await ids(store, q="crispr report") == []
    assert await ids(store, q="wörds") == ["a4"]
    # Query syntax is never interpreted: quotes, operators and stars are only separators.
    assert await ids(store, q='"report" * (-') == ["a2"]
    assert await ids(store, q="&|!:*()") == ["a4", "a3", "w1", "a2", "a1"]


async def test_a_run_is_found_by_its_input_while_it_runs_and_its_output_once_it_ends(
    store: RunStore,
) -> None:
    await store.start_run(agent_run("live", input_text="Draft the harbour report"))
    assert await ids(store, q="harb") == ["live"]
    assert await ids(store, q="harbour lighthouse") == []
    call = {"id": "c1", "name": "ask", "input": {}, "kind": "approval"}
    await store.finish_run("live", "paused", pending=[call], paused={"messages": []})
    assert await ids(store, q="draft harbour") == ["live"]
    await store.finish_run("live", "running")
    await store.finish_run("live", "completed", output_text="Lighthouse keepers interviewed")
    assert await ids(store, q="harbour lighthouse") == ["live"]
    # Taken up again and ended anew: found by its new output, not by the one it replaced.
    await store.finish_run("live", "running")
    assert await ids(store, q="harbour") == ["live"]
    await store.finish_run("live", "failed", error="E: x", output_text="Ferry timetable")
    assert await ids(store, q="ferry harbour") == ["live"]
    assert await ids(store, q="lighthouse") == []


async def test_query_runs_pages_by_cursor_stably_while_runs_start(store: RunStore) -> None:
    for i in range(7):
        await store.start_run(agent_run(f"r{i}", started_at=float(i // 2)))  # ties included
    from tether.stores.run_store import RunQuery

    first = await store.query_runs(RunQuery(), limit=3)
    assert [i.run_id for i in first.runs] == ["r6", "r5", "r4"]
    assert first.next_cursor is not None
    await store.start_run(agent_run("new", started_at=99.0))
    second = await store.query_runs(RunQuery(), limit=3, cursor=first.next_cursor)
    assert [i.run_id for i in second.runs] == ["r3", "r2", "r1"]
    third = await store.query_runs(RunQuery(), limit=3, cursor=second.next_cursor)
    assert [i.run_id for i in third.runs] == ["r0"] and third.next_cursor is None


async def test_a_bad_cursor_is_a_config_error(store: RunStore) -> None:
    from tether.errors import ConfigError
    from tether.stores.run_store import RunQuery

    for cursor in ("nope", "1.0~x", "nan~3"):
        with pytest.raises(ConfigError, match="cursor"):
            await store.query_runs(RunQuery(), cursor=cursor)


async def test_cost_usage_and_texts_are_kept(store: RunStore) -> None:
    await fill(store)
    info = await store.get_run("a1")
    assert info is not None
    assert info.cost_usd == 0.0021 and info.usage == {"input_tokens": 120, "output_tokens": 30}
    assert info.output_text == "Three papers about lipid nanoparticles"
    await store.finish_run("a2", "failed", error="boom")  # unset fields stay as they were
    other = await store.get_run("a2")
    assert other is not None and other.cost_usd is None and other.usage == {}
    await store.start_run(agent_run("long", input_text="x" * 5000))
    long = await store.get_run("long")
    assert long is not None and len(long.input_text) == 2000


async def test_run_totals_add_up_tokens_and_known_costs(store: RunStore) -> None:
    from tether.stores.run_store import RunQuery, RunTotals

    await fill(store)  # a1: 120 -> 30 tokens, $0.0021; the rest: no usage
    await store.finish_run("a2", "failed", usage={"input_tokens": 5, "output_tokens": 1})
    await store.finish_run(
        "a3", "completed", usage={"input_tokens": 10, "output_tokens": 2}, cost_usd=0.5
    )
    everything = await store.run_totals(RunQuery())
    assert everything == RunTotals(5, 135, 33, pytest.approx(0.5021), 1)  # type: ignore[arg-type]
    assert everything.known_cost is None  # a2 used tokens and has no price
    researcher = await store.run_totals(RunQuery(name="researcher", status="completed"))
    assert researcher == RunTotals(1, 120, 30, 0.0021, 0)
    assert researcher.known_cost == 0.0021
    assert await store.run_totals(RunQuery(name="nobody")) == RunTotals()


async def test_a_cancel_request_is_kept_with_a_running_run(store: RunStore) -> None:
    assert isinstance(store, CancelRequests)
    await store.start_run(agent_run("a"))
    await store.start_run(agent_run("b"))
    await store.start_run(agent_run("done"))
    await store.finish_run("done", "completed")
    assert await store.cancel_requests(["a", "b", "done", "never"]) == []
    assert await store.request_cancel("a") is True
    assert await store.request_cancel("done") is False  # nothing to cancel any more
    assert await store.request_cancel("never") is False
    assert await store.cancel_requests(["a", "b", "done", "never"]) == ["a"]
    assert await store.cancel_requests([]) == []
    info = await store.get_run("a")
    assert info is not None and isinstance(info.meta[CANCEL_REQUESTED], float)


async def test_appends_of_many_runs_go_in_one_write(store: RunStore) -> None:
    assert isinstance(store, ManyAppends)
    await store.start_run(agent_run("a"))
    await store.start_run(agent_run("b"))
    await store.append_events("a", [ev("x")])
    lasts = await store.append_events_many(
        [("a", [ev("y"), ev("z")], None), ("b", [ev("w")], None)]
    )
    assert lasts == [3, 1]
    assert [(e["seq"], e["type"]) for e in await store.events("a")] == [
        (1, "x"),
        (2, "y"),
        (3, "z"),
    ]
    assert [(e["seq"], e["type"]) for e in await store.events("b")] == [(1, "w")]
    # One unknown run: nothing of the write is stored.
    with pytest.raises(StoreError, match="never started"):
        await store.append_events_many([("a", [ev("lost")], None), ("never", [ev("lost")], None)])
    assert len(await store.events("a")) == 3
    with pytest.raises(NotJSONSafeError):
        await store.append_events_many([("b", [ev("bad", value=object())], None)])
    assert len(await store.events("b")) == 1


# -- heartbeat leases: runs whose process died ---------------------------------------------------


async def statuses(store: RunStore) -> dict[str, str]:
    return {i.run_id: i.status for i in await store.list_runs()}


async def test_a_running_run_whose_lease_expired_reads_interrupted(store: RunStore) -> None:
    await store.start_run(agent_run("dies"), lease_ttl=0.3)
    await store.start_run(agent_run("lives", started_at=2.0), lease_ttl=0.3)
    await store.start_run(agent_run("unleased", started_at=3.0))
    await store.start_run(agent_run("stopped", started_at=4.0), lease_ttl=0.3)
    info = await store.get_run("dies")
    assert info is not None and info.status == "running"
    assert info.lease_expires_at is not None and info.lease_expires_at > time.time()
    await store.finish_run("stopped", "cancelled")  # Ctrl-C: stays cancelled
    for _ in range(4):
        await asyncio.sleep(0.1)
        await store.renew_leases(["lives", "nope", "stopped"], lease_ttl=0.3)
    # Computed when read, the same in every read.
    assert await statuses(store) == {
        "dies": "interrupted",
        "lives": "running",
        "unleased": "running",
        "stopped": "cancelled",
    }
    dead = await store.get_run("dies")
    assert dead is not None and dead.status == "interrupted" and dead.ended_at is None
    assert await ids(store, status="interrupted") == ["dies"]
    assert await ids(store, status="running") == ["unleased", "lives"]
    assert await ids(store, status="cancelled") == ["stopped"]
    ended = await store.get_run("stopped")
    assert ended is not None and ended.lease_expires_at is None


async def test_a_resumed_run_takes_a_new_lease_and_an_ended_one_drops_it(store: RunStore) -> None:
    await store.start_run(agent_run("wf"), lease_ttl=0.2)
    await asyncio.sleep(0.3)
    assert await statuses(store) == {"wf": "interrupted"}
    await store.finish_run("wf", "running", lease_ttl=30)  # resumed elsewhere
    assert await statuses(store) == {"wf": "running"}
    await store.finish_run("wf", "completed")
    info = await store.get_run("wf")
    assert info is not None and (info.status, info.lease_expires_at) == ("completed", None)
    # An ended run is never renewed back to life.
    await store.renew_leases(["wf"], lease_ttl=30)
    info = await store.get_run("wf")
    assert info is not None and info.lease_expires_at is None


async def test_writes_under_a_lease_token_are_refused_once_another_writer_took_the_run(
    store: RunStore,
) -> None:
    assert isinstance(store, ManyAppends)
    await store.start_run(agent_run("r"), lease_ttl=30, lease="a")
    await store.start_run(agent_run("other"))
    assert await store.append_events("r", [ev("a1")], lease="a") == 1
    # Another writer takes the run over (a resumed workflow run): its token is the run's now.
    await store.finish_run("r", "running", lease_ttl=30, lease="b")
    with pytest.raises(LeaseLostError, match="run 'r'") as lost:
        await store.append_events("r", [ev("a2")], lease="a")
    assert (lost.value.lease, lost.value.key, lost.value.holder) == ("run", "r", "b")
    # In a batch of many runs, the stale batch refuses the whole write.
    with pytest.raises(LeaseLostError):
        await store.append_events_many([("other", [ev("o")], None), ("r", [ev("a3")], "a")])
    assert await store.append_events("r", [ev("b1")], lease="b") == 2
    with pytest.raises(LeaseLostError):
        await store.finish_run("r", "completed", output_text="a's", lease="a")
    await store.finish_run("r", "completed", output_text="b's", lease="b")
    info = await store.get_run("r")
    assert info is not None and (info.status, info.output_text) == ("completed", "b's")
    assert [e["type"] for e in await store.events("r")] == ["a1", "b1"]
    assert await store.events("other") == []
    with pytest.raises(StoreError, match="never started"):
        await store.append_events("nope", [ev("x")], lease="a")


async def test_a_runs_last_events_and_its_end_are_one_write(store: RunStore) -> None:
    await store.start_run(agent_run("r"), lease_ttl=30)
    await store.append_events("r", [ev("a")])
    last = await store.finish_run(
        "r", "completed", output_text="done", events=[ev("b"), ev("c", n=1)]
    )
    assert last == 3
    assert [(e["seq"], e["type"]) for e in await store.events("r")] == [
        (1, "a"),
        (2, "b"),
        (3, "c"),
    ]
    info = await store.get_run("r")
    assert info is not None and (info.status, info.output_text) == ("completed", "done")
    # An event that cannot be stored: neither it nor the end is written.
    await store.start_run(agent_run("s"), lease_ttl=30)
    with pytest.raises(NotJSONSafeError):
        await store.finish_run("s", "completed", events=[ev("ok"), ev("bad", value=object())])
    info = await store.get_run("s")
    assert info is not None and info.status == "running" and await store.events("s") == []
    assert await store.finish_run("s", "failed", error="E: x") == 0  # no events: the count stays
