"""The run store's paused runs, on every backend: a pause stores the pending calls (listed with
the run) and the turn, releases the lease; `resume_run` is one conditional write that one
resumer wins; `expired_pauses` finds the runs whose calls are overdue."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tether.errors import RunNotFoundError, RunNotPausedError, StoreError
from tether.stores import RunInfo, RunQuery, RunStore

from .test_run_store import STORES, ev


@pytest.fixture(params=list(STORES))
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[RunStore]:
    s = STORES[request.param](tmp_path)
    yield s
    await s.aclose()


PENDING = [{"id": "c1", "name": "wipe", "input": {"path": "/"}, "kind": "approval"}]
TURN = {"messages": [{"role": "user", "content": [{"type": "text", "text": "go"}]}], "n": 1}


async def paused_run(store: RunStore, run_id: str, deadline: float | None = None) -> None:
    await store.start_run(RunInfo(run_id=run_id, kind="agent", name="a"), lease_ttl=30)
    await store.finish_run(
        run_id,
        "paused",
        events=[ev("agent_paused", pending=PENDING)],
        pending=PENDING,
        paused=TURN,
        pending_deadline=deadline,
    )


async def test_a_paused_run_lists_its_calls_and_holds_no_lease(store: RunStore) -> None:
    await paused_run(store, "r1")
    run = await store.get_run("r1")
    assert run is not None and run.status == "paused"
    assert run.pending == PENDING and run.ended_at is None and run.lease_expires_at is None
    page = await store.query_runs(RunQuery(status="paused"))
    assert [(r.run_id, r.pending) for r in page.runs] == [("r1", PENDING)]
    assert [r.pending for r in await store.list_runs()] == [PENDING]
    with pytest.raises(StoreError, match="needs its pending calls"):
        await store.finish_run("r1", "paused", pending=[], paused=TURN)


async def test_one_resumer_wins_the_run_and_the_other_is_told_who(store: RunStore) -> None:
    await paused_run(store, "r1")
    outcomes = await asyncio.gather(
        store.resume_run("r1", resumed_by="ann", lease_ttl=30, events=[ev("decision", by="ann")]),
        store.resume_run("r1", resumed_by="bo", lease_ttl=30, events=[ev("decision", by="bo")]),
        return_exceptions=True,
    )
    won = [o for o in outcomes if not isinstance(o, BaseException)]
    lost = [o for o in outcomes if isinstance(o, BaseException)]
    assert len(won) == 1 and len(lost) == 1, outcomes
    taken, error = won[0], lost[0]
    assert isinstance(error, RunNotPausedError) and error.status == "running"
    assert error.winner in ("ann", "bo") and f"{error.winner} resumed it first" in str(error)
    assert taken.turn == TURN and taken.info.status == "running" and taken.info.pending == []
    assert taken.seq == 2  # the paused event, then the winner's decision
    events = await store.events("r1")
    assert [e["data"].get("by") for e in events[1:]] == [error.winner]
    run = await store.get_run("r1")
    assert run is not None and run.status == "running" and run.pending == []
    assert run.lease_expires_at is not None
    await store.finish_run("r1", "completed")
    with pytest.raises(RunNotPausedError, match="status completed") as done:
        await store.resume_run("r1", resumed_by="cy")
    assert done.value.status == "completed"
    with pytest.raises(RunNotFoundError, match="no run 'nope'"):
        await store.resume_run("nope", resumed_by="cy")


async def test_a_run_paused_again_after_a_resume_has_the_new_calls(store: RunStore) -> None:
    await paused_run(store, "r1")
    await store.resume_run("r1", resumed_by="ann", lease_ttl=30)
    again = [{**PENDING[0], "id": "c2"}]
    await store.finish_run("r1", "paused", pending=again, paused={**TURN, "n": 2})
    taken = await store.resume_run("r1", resumed_by="bo")
    assert taken.turn["n"] == 2
    await store.finish_run("r1", "completed")
    run = await store.get_run("r1")
    assert run is not None and run.pending == [] and run.meta["resumed_by"] == "bo"


async def test_expired_pauses_are_the_paused_runs_past_their_deadline(store: RunStore) -> None:
    now = time.time()
    await paused_run(store, "late", deadline=now - 5)
    await paused_run(store, "later", deadline=now - 1)
    await paused_run(store, "soon", deadline=now + 3600)
    await paused_run(store, "never")
    assert await store.expired_pauses() == ["late", "later"]
    assert await store.expired_pauses(limit=1) == ["late"]
    await store.resume_run("late", resumed_by="sweep")
    assert await store.expired_pauses() == ["later"]
