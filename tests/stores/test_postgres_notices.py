"""PostgreSQL waiters wake on LISTEN/NOTIFY: a resume waiting for a run another holder runs (an
attach) and an episode waiting for a scope another process holds are woken by the holder's own
write, not by polling. Each holder here is a store of its own (its own pool), as another
process's would be; the waiters' polling is slowed to an hour, so only a notice wakes them in
the minute the tests give them."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import psycopg
import pytest
from tests.postgres_server import postgres_url

from tether.lab import _leases
from tether.lab._leases import Heartbeat, ScopeLocks
from tether.stores import RunLease
from tether.stores.message_store import WatchesScopes
from tether.stores.postgres import PostgresMessageStore, PostgresWorkflowStore
from tether.stores.workflow_store import WaitRecord, WatchesRuns
from tether.workflows import WorkflowContext, _engine, create_workflow

WAKE = 60.0
"""Seconds a woken waiter may take: far more than a notice needs, far less than a poll."""


@pytest.fixture
def url() -> str:
    return postgres_url()


@pytest.fixture
async def stores(url: str) -> AsyncIterator[tuple[PostgresWorkflowStore, PostgresWorkflowStore]]:
    """The waiter's store and the holder's: one schema, two pools."""
    waiter, holder = PostgresWorkflowStore(url), PostgresWorkflowStore(url)
    try:
        yield waiter, holder
    finally:
        await waiter.aclose()
        await holder.aclose()


@pytest.fixture
def slow_polls(monkeypatch: pytest.MonkeyPatch) -> None:
    """Polling that would not look again within the tests' wait."""
    monkeypatch.setattr(_engine, "_FIRST_POLL", 3600.0)
    monkeypatch.setattr(_leases, "_FIRST_POLL", 3600.0)
    monkeypatch.setattr(_leases, "_MAX_POLL", 3600.0)


async def listeners(url: str) -> int:
    """Sessions of the server listening on a channel now."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN tether_%%'"
        )
        row = await cur.fetchone()
    assert row is not None
    return int(row[0])


async def test_a_run_s_watch_is_woken_by_its_finish_and_its_suspension_in_another_store(
    stores: tuple[PostgresWorkflowStore, PostgresWorkflowStore],
) -> None:
    waiter, holder = stores
    assert isinstance(waiter, WatchesRuns)
    lease = RunLease("elsewhere:1:a", ttl=600)
    await holder.create_run(run_id="r1", workflow_id="wf", input=1, lease=lease)
    await holder.create_run(run_id="r2", workflow_id="wf", input=2, lease=lease)
    async with waiter.watch_run("r1") as one, waiter.watch_run("r2") as two:
        assert one is not None and two is not None
        await holder.append_step("r1", step_id="s", name="s", output=1, lease=lease)
        await holder.renew_lease("r1", lease)
        await asyncio.sleep(0.2)
        assert not one.is_set()  # a step and a renewal let nothing go
        await holder.finish_run("r1", status="completed", output=10, lease=lease)
        await asyncio.wait_for(one.wait(), WAKE)
        assert not two.is_set()  # a notice wakes the waiters of its run only
        wait = WaitRecord(run_id="r2", name="go", step_id="wait:go")
        await holder.suspend_run("r2", wait=wait, lease=lease)
        await asyncio.wait_for(two.wait(), WAKE)


async def test_the_listening_connection_is_open_only_while_someone_waits(
    url: str, stores: tuple[PostgresWorkflowStore, PostgresWorkflowStore]
) -> None:
    waiter, _ = stores
    await waiter.get_run("nothing")  # the pool is open
    assert await listeners(url) == 0
    async with waiter.watch_run("a"), waiter.watch_run("b"):
        assert await listeners(url) == 1  # one connection for every waiter of the pool
    assert await listeners(url) == 0


async def test_a_store_on_a_caller_s_connection_cannot_watch_and_says_so(url: str) -> None:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        store = PostgresWorkflowStore(conn)
        async with store.watch_run("r") as event:
            assert event is None


async def test_an_attach_wakes_when_the_holder_in_another_store_finishes(
    slow_polls: None, stores: tuple[PostgresWorkflowStore, PostgresWorkflowStore]
) -> None:
    waiter_store, holder_store = stores
    entered, release = asyncio.Event(), asyncio.Event()

    async def body(input: int, ctx: WorkflowContext[int]) -> int:
        async def slow() -> int:
            entered.set()
            await release.wait()
            return input * 10

        return await ctx.step("slow", slow)

    holder = create_workflow("wf", body, store=holder_store, lease_ttl=600)
    waiter = create_workflow("wf", body, store=waiter_store, lease_ttl=600)
    first = holder.run(4)
    await entered.wait()
    attach = waiter.run(workflow_run_id=first.workflow_run_id)
    await asyncio.sleep(0.5)  # the attach is waiting now
    assert not attach.result.done()
    release.set()
    assert await first == 40
    assert await asyncio.wait_for(attach.result, WAKE) == 40


async def test_an_attach_to_a_run_that_fails_gets_the_failure_not_a_resume_later(
    slow_polls: None, stores: tuple[PostgresWorkflowStore, PostgresWorkflowStore]
) -> None:
    waiter_store, holder_store = stores
    entered, release = asyncio.Event(), asyncio.Event()
    calls: list[str] = []

    async def body(input: int, ctx: WorkflowContext[int]) -> int:
        async def slow() -> int:
            calls.append("slow")
            entered.set()
            await release.wait()
            if len(calls) == 1:
                raise RuntimeError("first attempt fails")
            return input

        return await ctx.step("slow", slow)

    holder = create_workflow("wf", body, store=holder_store, lease_ttl=600)
    waiter = create_workflow("wf", body, store=waiter_store, lease_ttl=600)
    first = holder.run(4)
    await entered.wait()
    attach = waiter.run(workflow_run_id=first.workflow_run_id)
    await asyncio.sleep(0.3)
    release.set()
    with pytest.raises(RuntimeError):
        await first
    # A failed run is free: the attach resumes it at once and runs the step again.
    assert await asyncio.wait_for(attach.result, WAKE) == 4
    assert calls == ["slow", "slow"]


async def test_an_episode_waiting_for_a_scope_another_process_holds_wakes_at_its_release(
    slow_polls: None, url: str
) -> None:
    mine, theirs = PostgresMessageStore(url), PostgresMessageStore(url)
    assert isinstance(mine, WatchesScopes)
    here, there = Heartbeat(600), Heartbeat(600)
    order: list[str] = []
    try:
        held = asyncio.Event()

        async def other_process() -> None:
            async with ScopeLocks(there).hold(theirs, "notes", "run-a"):
                held.set()
                await asyncio.sleep(0.5)
                order.append("a done")

        async def this_process() -> None:
            await held.wait()
            async with ScopeLocks(here).hold(mine, "notes", "run-b"):
                order.append("b in")

        await asyncio.wait_for(asyncio.gather(other_process(), this_process()), WAKE)
        assert order == ["a done", "b in"]
    finally:
        await here.aclose()
        await there.aclose()
        await mine.aclose()
        await theirs.aclose()
