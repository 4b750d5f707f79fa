"""Durable waits: `ctx.wait_for` stops a run (stored `waiting`, no task, no lease), a signal
answers it and resumes the run from its journal; schema, timeout, wrong names, nested waits,
two signals at once — on every store (PostgreSQL when initdb is installed)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from tests.postgres_server import postgres_url

from tether.errors import (
    NotJSONSafeError,
    WorkflowError,
    WorkflowNotWaitingError,
    WorkflowSignalError,
    WorkflowWaitingError,
    WorkflowWaitTimeoutError,
)
from tether.stores import InMemoryWorkflowStore, SqliteWorkflowStore, WorkflowStore
from tether.workflows import WorkflowContext, WorkflowEvent, create_workflow, resume_expired_waits


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[WorkflowStore]:
    if request.param == "memory":
        s: WorkflowStore = InMemoryWorkflowStore()
    elif request.param == "sqlite":
        s = SqliteWorkflowStore.open(tmp_path / "wf.db")
    else:
        from tether.stores.postgres import PostgresWorkflowStore

        s = PostgresWorkflowStore(postgres_url())
    yield s
    await s.aclose()


T = TypeVar("T")


def noting(calls: list[str], name: str, value: T) -> Callable[[], T]:
    """A step body that records that it executed, then returns `value`."""

    def body() -> T:
        calls.append(name)
        return value

    return body


def approval_flow(calls: list[str]) -> Any:
    async def run(input: dict[str, Any], ctx: WorkflowContext[dict[str, Any]]) -> dict[str, Any]:
        draft = await ctx.step("draft", noting(calls, "draft", f"draft of {input['x']}"))
        verdict = await ctx.wait_for(
            "review",
            schema={
                "type": "object",
                "properties": {"ok": {"type": "boolean"}},
                "required": ["ok"],
            },
        )
        sent = await ctx.step("send", noting(calls, "send", verdict["ok"]))
        return {"draft": draft, "sent": sent}

    return run


async def test_a_wait_stops_the_run_and_a_signal_resumes_it(store: WorkflowStore) -> None:
    calls: list[str] = []
    events: list[WorkflowEvent] = []
    flow = create_workflow("approve", approval_flow(calls), store=store, on_event=events.append)
    handle = flow.run({"x": 1})
    with pytest.raises(WorkflowWaitingError) as waiting:
        await handle
    assert waiting.value.run_id == handle.workflow_run_id
    assert waiting.value.waiting_for == "review"
    assert waiting.value.deadline is None
    record = await store.get_run(handle.workflow_run_id)
    assert record is not None and record.status == "waiting"
    assert record.lease_owner is None and record.lease_expires_at is None
    assert record.waiting_for is not None and record.waiting_for.name == "review"
    assert record.waiting_for.step_id == "wait:review"
    assert events[-1]["type"] == "workflow_waiting"
    assert calls == ["draft"]

    resumed = await flow.signal(handle.workflow_run_id, "review", {"ok": True})
    assert await resumed == {"draft": "draft of 1", "sent": True}
    assert calls == ["draft", "send"]  # the draft step was replayed, not run again
    done = await store.get_run(handle.workflow_run_id)
    assert done is not None and done.status == "completed" and done.waiting_for is None
    assert done.attempts == 2
    steps = [s.step_id for s in await store.list_steps(handle.workflow_run_id)]
    assert steps == ["draft", "wait:review", "send"]

    # The run waits for nothing now: a second signal is refused, naming its status.
    with pytest.raises(WorkflowNotWaitingError, match="it is completed and waits for no signal"):
        await flow.signal(handle.workflow_run_id, "review", {"ok": False})


async def test_a_signal_that_does_not_fit_is_refused_and_nothing_is_stored(
    store: WorkflowStore,
) -> None:
    flow = create_workflow("approve", approval_flow([]), store=store)
    handle = flow.run({"x": 1})
    with pytest.raises(WorkflowWaitingError):
        await handle
    rid = handle.workflow_run_id
    with pytest.raises(WorkflowSignalError) as bad:
        await flow.signal(rid, "review", {"ok": "yes"})
    assert bad.value.path == "value['ok']"
    assert "'yes' is not of type 'boolean'" in str(bad.value)
    with pytest.raises(WorkflowNotWaitingError) as wrong:
        await flow.signal(rid, "approval", {"ok": True})
    assert wrong.value.waiting_for == "review"
    assert "it waits for 'review'" in str(wrong.value)
    with pytest.raises(NotJSONSafeError):
        await flow.signal(rid, "review", {"ok": {1, 2}})
    with pytest.raises(WorkflowError, match="no stored run"):
        await flow.signal("nope", "review", {"ok": True})
    record = await store.get_run(rid)
    assert record is not None and record.status == "waiting"
    assert [s.step_id for s in await store.list_steps(rid)] == ["draft"]
    # The right signal still resumes it.
    assert (await (await flow.signal(rid, "review", {"ok": False})))["sent"] is False


async def test_of_two_signals_at_once_one_answers_the_wait(store: WorkflowStore) -> None:
    calls: list[str] = []
    flow = create_workflow("approve", approval_flow(calls), store=store)
    handle = flow.run({"x": 2})
    with pytest.raises(WorkflowWaitingError):
        await handle
    rid = handle.workflow_run_id
    outcomes = await asyncio.gather(
        flow.signal(rid, "review", {"ok": True}),
        flow.signal(rid, "review", {"ok": False}),
        return_exceptions=True,
    )
    handles = [o for o in outcomes if not isinstance(o, BaseException)]
    refused = [o for o in outcomes if isinstance(o, BaseException)]
    assert len(handles) == 1 and len(refused) == 1
    assert isinstance(refused[0], WorkflowNotWaitingError)
    result = await handles[0]
    assert calls.count("send") == 1
    step = await store.get_step(rid, "wait:review")
    assert step is not None and step.output["signal"]["ok"] is result["sent"]


async def test_a_timeout_raises_at_the_wait_and_is_journaled(store: WorkflowStore) -> None:
    seen: list[str] = []

    async def run(input: Any, ctx: WorkflowContext[Any]) -> str:
        try:
            return str(await ctx.wait_for("reply", timeout=0.2))
        except WorkflowWaitTimeoutError as exc:
            seen.append(exc.name)
            return "no reply"

    flow = create_workflow("timed", run, store=store)
    handle = flow.run({})
    with pytest.raises(WorkflowWaitingError) as waiting:
        await handle
    deadline = waiting.value.deadline
    assert deadline is not None and deadline > time.time()
    rid = handle.workflow_run_id
    assert await store.expired_waits() == []
    await asyncio.sleep(0.3)
    with pytest.raises(WorkflowSignalError, match="came after the wait's timeout"):
        await flow.signal(rid, "reply", "late")
    overdue = await store.expired_waits()
    assert [r.run_id for r in overdue] == [rid]
    (resumed,) = await resume_expired_waits([flow], store)
    assert await resumed == "no reply"
    assert seen == ["reply"]
    assert await store.expired_waits() == []
    # The timeout is journaled: a replay meets it again, at the same point.
    step = await store.get_step(rid, "wait:reply")
    assert step is not None and step.output == {"timed_out": True, "deadline": deadline}


async def test_a_resume_before_the_signal_waits_again_on_the_first_clock(
    store: WorkflowStore,
) -> None:
    async def run(input: Any, ctx: WorkflowContext[Any]) -> Any:
        return await ctx.wait_for("go", timeout=60)

    flow = create_workflow("again", run, store=store)
    handle = flow.run({})
    with pytest.raises(WorkflowWaitingError) as first:
        await handle
    with pytest.raises(WorkflowWaitingError) as second:
        await flow.run(workflow_run_id=handle.workflow_run_id)
    assert second.value.deadline == first.value.deadline  # the timeout did not restart
    assert await (await flow.signal(handle.workflow_run_id, "go", [1, 2])) == [1, 2]


async def test_a_nested_wait_stops_the_tree_and_a_signal_to_either_resumes_it(
    store: WorkflowStore,
) -> None:
    calls: list[str] = []

    async def child(input: Any, ctx: WorkflowContext[Any]) -> Any:
        await ctx.step("prepare", noting(calls, "prepare", 1))
        return await ctx.wait_for("ok")

    inner = create_workflow("inner", child, store=store)

    async def parent(input: Any, ctx: WorkflowContext[Any]) -> Any:
        first = await ctx.step("first", noting(calls, "first", 1))
        got = await inner.run({"n": 1})
        again = await inner.run({"n": 2})
        return [first, got, again]

    outer = create_workflow("outer", parent, store=store)
    handle = outer.run({})
    with pytest.raises(WorkflowWaitingError) as waiting:
        await handle
    root = handle.workflow_run_id
    waiter = waiting.value.waiter_run_id
    assert waiter != root
    child_record = await store.get_run(waiter)
    assert child_record is not None and child_record.status == "waiting"
    # Signalled through the root: the child's wait is answered, the tree goes on to the next
    # child's wait.
    with pytest.raises(WorkflowWaitingError) as next_wait:
        await (await outer.signal(root, "ok", "a"))
    second = next_wait.value.waiter_run_id
    assert second not in (root, waiter)
    # Signalled through the waiting child's own id: the root resumes.
    assert await (await outer.signal(second, "ok", "b")) == [1, "a", "b"]
    assert calls == ["first", "prepare", "prepare"]
    with pytest.raises(WorkflowError, match="belongs to workflow 'outer'"):
        await inner.signal(root, "ok", "c")


async def test_an_except_exception_around_the_wait_does_not_swallow_it(
    store: WorkflowStore,
) -> None:
    async def run(input: Any, ctx: WorkflowContext[Any]) -> Any:
        try:
            return await ctx.wait_for("x")
        except Exception:
            return "swallowed"

    flow = create_workflow("careful", run, store=store)
    with pytest.raises(WorkflowWaitingError):
        await flow.run({})


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"name": "a/b"}, "without '#' or '/'"),
        ({"name": "a", "timeout": 0}, "positive number"),
        ({"name": "a", "timeout": "1"}, "number of seconds"),
        ({"name": "a", "schema": {"type": 3}}, "not a valid JSON Schema"),
        ({"name": "a", "schema": []}, "JSON Schema object"),
    ],
)
async def test_a_bad_wait_fails_the_run_naming_what(kwargs: dict[str, Any], message: str) -> None:
    async def run(input: Any, ctx: WorkflowContext[Any]) -> Any:
        return await ctx.wait_for(**kwargs)

    flow = create_workflow("bad", run, store=InMemoryWorkflowStore())
    with pytest.raises(WorkflowError, match=message):
        await flow.run({})


async def test_a_stored_signal_leaves_the_run_to_whoever_takes_it_over(
    store: WorkflowStore,
) -> None:
    calls: list[str] = []
    flow = create_workflow("approve", approval_flow(calls), store=store)
    handle = flow.run({"x": 3})
    with pytest.raises(WorkflowWaitingError):
        await handle
    rid = handle.workflow_run_id
    with pytest.raises(WorkflowSignalError):
        await flow.store_signal(rid, "review", {"ok": 1})
    assert await flow.store_signal(rid, "review", {"ok": True}) == rid
    await asyncio.sleep(0.01)
    record = await store.get_run(rid)
    assert record is not None and record.status == "interrupted"  # held by nobody alive
    with pytest.raises(WorkflowNotWaitingError):
        await flow.signal(rid, "review", {"ok": False})
    # The takeover any worker does: the journaled signal is there.
    assert (await flow.run(workflow_run_id=rid, wait=False))["sent"] is True
    assert calls == ["draft", "send"]
