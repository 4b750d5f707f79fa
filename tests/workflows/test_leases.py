"""A running workflow run holds a lease its heartbeat renews: in one process, a second resume of
a run that is running is refused (or waits), a cancelled run is "cancelled" and free, a nested
run shares its root's lease, and a holder that lost its lease stops instead of finishing over the
new holder. (Processes that die or race: test_crash.py.)"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tether.errors import LeaseLostError, WorkflowRunBusyError
from tether.stores import InMemoryWorkflowStore, RunLease
from tether.workflows import WorkflowContext, _engine, create_workflow


async def test_a_second_resume_of_a_running_run_is_refused_naming_the_holder() -> None:
    store = InMemoryWorkflowStore()
    release, entered = asyncio.Event(), asyncio.Event()
    ran: list[str] = []

    async def body(input: int, ctx: WorkflowContext[int]) -> int:
        async def slow() -> int:
            ran.append("slow")
            entered.set()
            await release.wait()
            return input + 1

        return await ctx.step("slow", slow)

    workflow = create_workflow("wf", body, store=store)
    first = workflow.run(1)
    await entered.wait()
    record = await store.get_run(first.workflow_run_id)
    assert record is not None and record.lease_owner is not None
    with pytest.raises(WorkflowRunBusyError) as busy:
        await workflow.run(workflow_run_id=first.workflow_run_id, wait=False)
    assert busy.value.holder == record.lease_owner
    with pytest.raises(WorkflowRunBusyError):  # a bounded wait that ends first
        await workflow.run(workflow_run_id=first.workflow_run_id, wait=0.1)
    release.set()
    assert await first == 2
    assert ran == ["slow"]


async def test_a_resume_that_waits_for_the_lease_gets_the_stored_output() -> None:
    store = InMemoryWorkflowStore()
    calls: list[int] = []

    async def body(input: int, ctx: WorkflowContext[int]) -> int:
        async def slow() -> int:
            calls.append(input)
            await asyncio.sleep(0.3)
            return input * 10

        return await ctx.step("slow", slow)

    workflow = create_workflow("wf", body, store=store, lease_ttl=0.6)
    first = workflow.run(4)
    await asyncio.sleep(0.05)
    # By default a resume of a run another holder runs waits for it: an attach.
    second = workflow.run(workflow_run_id=first.workflow_run_id)
    assert list(await asyncio.gather(first.result, second.result)) == [40, 40]
    assert calls == [4]


async def test_an_attach_in_memory_wakes_at_the_holder_s_finish_not_at_a_poll(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_engine, "_FIRST_POLL", 3600.0)  # a poll would not come in time
    store = InMemoryWorkflowStore()
    entered, release = asyncio.Event(), asyncio.Event()

    async def body(input: int, ctx: WorkflowContext[int]) -> int:
        async def slow() -> int:
            entered.set()
            await release.wait()
            return input * 10

        return await ctx.step("slow", slow)

    workflow = create_workflow("wf", body, store=store, lease_ttl=600)
    first = workflow.run(4)
    await entered.wait()
    second = workflow.run(workflow_run_id=first.workflow_run_id)
    await asyncio.sleep(0.1)
    release.set()
    assert await asyncio.wait_for(second.result, 60) == 40


async def test_the_heartbeat_keeps_a_long_step_running_and_the_end_releases_the_lease() -> None:
    store = InMemoryWorkflowStore()
    seen: list[str] = []

    async def body(input: None, ctx: WorkflowContext[None]) -> str:
        async def long() -> str:
            for _ in range(6):  # three lease lengths
                await asyncio.sleep(0.1)
                record = await store.get_run(ctx.workflow_run_id)
                assert record is not None
                seen.append(record.status)
            return "done"

        return await ctx.step("long", long)

    workflow = create_workflow("wf", body, store=store, lease_ttl=0.2)
    handle = workflow.run(None)
    assert await handle == "done"
    assert set(seen) == {"running"}
    record = await store.get_run(handle.workflow_run_id)
    assert record is not None
    assert (record.status, record.lease_owner, record.lease_expires_at) == ("completed", None, None)


async def test_a_cancelled_run_is_cancelled_not_interrupted_and_free_to_resume() -> None:
    store = InMemoryWorkflowStore()
    started = asyncio.Event()

    async def body(input: None, ctx: WorkflowContext[None]) -> str:
        async def wait() -> str:
            started.set()
            await asyncio.Event().wait()
            return "never"

        return await ctx.step("wait", wait)

    workflow = create_workflow("wf", body, store=store, lease_ttl=0.2)
    handle = workflow.run(None)
    await started.wait()
    handle.cancel()
    with pytest.raises(asyncio.CancelledError):
        await handle
    await asyncio.sleep(0.3)
    record = await store.get_run(handle.workflow_run_id)
    assert record is not None and (record.status, record.lease_owner) == ("cancelled", None)


async def test_a_nested_run_is_held_by_its_root_s_lease() -> None:
    store = InMemoryWorkflowStore()
    owners: dict[str, Any] = {}

    async def inner(input: int, ctx: WorkflowContext[int]) -> int:
        record = await store.get_run(ctx.workflow_run_id)
        assert record is not None
        owners["inner"] = record.lease_owner
        return input

    child = create_workflow("inner", inner, store=store)

    async def outer(input: int, ctx: WorkflowContext[int]) -> int:
        record = await store.get_run(ctx.workflow_run_id)
        assert record is not None
        owners["outer"] = record.lease_owner
        return await child.run(input)

    assert await create_workflow("outer", outer, store=store).run(3) == 3
    assert owners["inner"] == owners["outer"] is not None


async def test_a_holder_that_lost_its_lease_stops_and_leaves_the_run_to_the_new_holder() -> None:
    store = InMemoryWorkflowStore()
    renew = store.renew_lease
    stalled = True

    async def stalling(run_id: str, lease: RunLease) -> bool:
        # The holder stalls (its heartbeat does not get through) until its lease expired and
        # another process took the run over; then its next renewal finds that out.
        if stalled:
            return True
        return await renew(run_id, lease)

    store.renew_lease = stalling  # type: ignore[method-assign]
    in_step = asyncio.Event()
    ran: list[str] = []

    async def body(input: None, ctx: WorkflowContext[None]) -> str:
        async def step() -> str:
            ran.append("step")
            in_step.set()
            await asyncio.sleep(5)
            return "stale"

        await ctx.step("one", step)
        ran.append("after")
        return "stale"

    handle = create_workflow("wf", body, store=store, lease_ttl=0.2).run(None)
    await in_step.wait()
    await asyncio.sleep(0.3)
    record = await store.get_run(handle.workflow_run_id)
    assert record is not None and record.status == "interrupted"
    other = RunLease("other-host:99:beef", 30.0)
    await store.start_attempt(handle.workflow_run_id, lease=other)
    stalled = False
    with pytest.raises(LeaseLostError, match="was lost") as lost:
        await handle
    assert lost.value.holder == other.owner
    assert ran == ["step"]  # stopped in the step: nothing after it ran here
    record = await store.get_run(handle.workflow_run_id)
    assert record is not None
    assert (record.status, record.lease_owner) == ("running", other.owner)
    assert await store.get_step(handle.workflow_run_id, "one") is None
