"""The runtime's heartbeat renews the leases of what runs (an episode, a workflow run and its
record, a held scope) for as long as it runs, however much longer than one lease that is; what
ended holds nothing."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tether.errors import LeaseLostError
from tether.lab import Runtime
from tether.llm.base import ChatRequest
from tether.stores import ScopeLeases

from .test_scope_lease import GatedClient

TTL = 0.3


@pytest.fixture(params=["memory", "sqlite"])
async def lab(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    store = "memory" if request.param == "memory" else f"sqlite:///{tmp_path / 'lab.db'}"
    runtime = Runtime(store=store, version=False, lease_ttl=TTL)
    yield runtime
    await runtime.aclose()


async def test_a_long_episode_stays_running_and_keeps_its_scope(lab: Runtime) -> None:
    seen: list[str] = []
    holders: list[str | None] = []

    async def gate(request: ChatRequest) -> None:
        for _ in range(5):  # five lease lengths inside one model call
            await asyncio.sleep(TTL)
            (run,) = await lab.run_store.list_runs()
            seen.append(run.status)
            store = lab.message_store
            assert isinstance(store, ScopeLeases)
            holders.append(await store.acquire_scope("s", "someone else", ttl=TTL))

    agent = lab.create_agent(id="a", model=GatedClient([{"text": "done"}], gate))
    handle = agent.run(memory_scope="s", user="hi")
    assert (await handle.result).text == "done"
    assert seen == ["running"] * 5
    assert all(h is not None and handle.run_id in h for h in holders)
    info = await lab.run_store.get_run(handle.run_id)
    assert info is not None and (info.status, info.lease_expires_at) == ("completed", None)
    # The scope was given back at the end.
    store = lab.message_store
    assert isinstance(store, ScopeLeases)
    assert await store.acquire_scope("s", "someone else", ttl=TTL) is None


async def test_a_long_workflow_run_stays_running_in_both_stores(lab: Runtime) -> None:
    seen: list[tuple[str, str]] = []

    async def slow(input: Any, ctx: Any) -> Any:
        async def wait() -> str:
            for _ in range(5):
                await asyncio.sleep(TTL)
                record = await lab.workflow_store.get_run(ctx.workflow_run_id)
                info = await lab.run_store.get_run(ctx.workflow_run_id)
                assert record is not None and info is not None
                seen.append((record.status, info.status))
            return "ok"

        return await ctx.step("wait", wait)

    handle = lab.create_workflow("slow", slow).run(None)
    assert await handle == "ok"
    assert seen == [("running", "running")] * 5
    info = await lab.run_store.get_run(handle.workflow_run_id)
    assert info is not None and (info.status, info.lease_expires_at) == ("completed", None)


async def test_an_episode_whose_scope_was_taken_over_stores_nothing_more(lab: Runtime) -> None:
    store = lab.message_store
    assert isinstance(store, ScopeLeases)

    async def lost(scope: str, owner: str, *, ttl: float) -> bool:
        return False  # as if another episode took the scope after this one stalled

    store.renew_scope = lost  # type: ignore[method-assign]

    async def gate(request: ChatRequest) -> None:
        await asyncio.sleep(TTL)  # a beat passes inside the model call

    agent = lab.create_agent(id="a", model=GatedClient([{"text": "late"}], gate))
    handle = agent.run(memory_scope="s", user="hi")
    with pytest.raises(LeaseLostError, match="memory scope 's' was lost"):
        await handle.result
    assert await store.load("s") == []
    info = await lab.run_store.get_run(handle.run_id)
    assert info is not None and info.status == "failed"
