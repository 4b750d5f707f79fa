"""`approval_timeout` (an agent's, or a tool's own): a paused run's undecided calls are denied
as "expired" by the sweep of any runtime on the same stores (`Runtime.expire_approvals`,
which `tether serve` runs on its beat)."""

from __future__ import annotations

import asyncio
import os
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tether import approve, define_tool
from tether.errors import ConfigError, RunNotPausedError
from tether.lab import Runtime

from .conftest import run_events, scripted

CALL = {"tool_use": [{"id": "b", "name": "wipe", "input": {}}]}


def wipe(ran: list[Any], timeout: float | None = None) -> Any:
    return define_tool(
        name="wipe",
        input_schema={"type": "object"},
        execute=lambda value: ran.append(value) or "wiped",
        approval=True,
        approval_timeout=timeout,
    )


async def overdue(lab: Runtime) -> None:
    """Wait until the store's clock passed a pause's deadline (no assertion on the time)."""
    while True:
        if await lab.run_store.expired_pauses():
            return
        await asyncio.sleep(0.01)


async def test_an_overdue_pause_is_denied_as_expired_by_another_runtime(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'lab.db'}"
    ran: list[Any] = []
    first = Runtime(store=store, version=False)
    agent = first.create_agent(
        id="janitor", model=scripted(CALL), tools=[wipe(ran)], approval_timeout=0.05
    )
    paused = await agent.run(user="go").result
    run = await first.run_store.get_run(paused.run_id)
    assert run is not None and run.status == "paused"
    events = await run_events(first, paused.run_id)
    deadline = events[-1]["data"]["deadline"]
    assert events[-1]["type"] == "agent_paused" and deadline is not None
    await first.aclose()

    client = scripted({"text": "fine, I will not"})
    second = Runtime(store=store, version=False)
    second.create_agent(id="janitor", model=client, tools=[wipe(ran)], approval_timeout=0.05)
    await overdue(second)
    handles = await second.expire_approvals()
    assert [h.run_id for h in handles] == [paused.run_id]
    assert (await handles[0].result).text == "fine, I will not"
    assert ran == []
    sent = client.calls[0]["messages"]
    denied = [p for m in sent for p in m["content"] if p["type"] == "tool_result"]
    assert denied[0]["is_error"] and "expired" in denied[0]["output"]
    decisions = [
        e["data"] for e in await run_events(second, paused.run_id) if e["type"] == "decision"
    ]
    assert [(d["action"], d["reason"], d["decided_by"]) for d in decisions] == [
        ("deny", "expired", "approval_timeout")
    ]
    assert await second.expire_approvals() == []  # nothing left to expire
    with pytest.raises(RunNotPausedError, match="approval_timeout resumed it first"):
        await second.resume(paused.run_id, {"b": approve()})
    await second.aclose()


async def test_a_tools_own_timeout_wins_and_no_timeout_waits_for_ever(lab: Runtime) -> None:
    ran: list[Any] = []
    patient = lab.create_agent(id="patient", model=scripted(CALL), tools=[wipe(ran)])
    waiting = await patient.run(user="go").result
    quick = lab.create_agent(
        id="quick",
        model=scripted(CALL, {"text": "ok"}),
        tools=[wipe(ran, timeout=0.01)],
        approval_timeout=3600,
    )
    paused = await quick.run(user="go").result
    await overdue(lab)
    handles = await lab.expire_approvals()
    assert [h.run_id for h in handles] == [paused.run_id]
    await handles[0].result
    run = await lab.run_store.get_run(waiting.run_id)
    assert run is not None and run.status == "paused"  # no timeout: still waiting
    assert (await run_events(lab, waiting.run_id))[-1]["data"]["deadline"] is None


def test_an_approval_timeout_is_a_positive_number(lab: Runtime) -> None:
    bad: Any
    for bad in (0, -1, "5", True):
        with pytest.raises(ConfigError, match="approval_timeout= takes a positive number"):
            lab.create_agent(id="a", model=scripted(), approval_timeout=bad)


SWEEPER = textwrap.dedent(
    """
    import asyncio, sys
    from tether import define_tool
    from tether.lab import Runtime
    from tether.testing import script_client

    async def main(store, run_id):
        wipe = define_tool(name="wipe", input_schema={"type": "object"},
                           execute=lambda v: "wiped", approval=True)
        lab = Runtime(store=store, version=False, lease_ttl=0.6)
        lab.create_agent(id="janitor", model=script_client([{"text": "left it"}]),
                         tools=[wipe], approval_timeout=0.05)
        async with lab:  # nothing but an open runtime: no serve, no expire_approvals() call
            while (await lab.run_store.get_run(run_id)).status == "paused":
                await asyncio.sleep(0.05)
            await lab.wait_idle()
            info = await lab.run_store.get_run(run_id)
            events = await lab.run_store.events(run_id)
            denied = [e["data"] for e in events if e["type"] == "decision"]
            print(info.status, denied[0]["reason"], denied[0]["decided_by"], flush=True)

    asyncio.run(main(sys.argv[1], sys.argv[2]))
    """
)


async def test_a_plain_runtime_process_expires_an_overdue_pause_on_its_beat(
    tmp_path: Path,
) -> None:
    store = f"sqlite:///{tmp_path / 'lab.db'}"
    ran: list[Any] = []
    first = Runtime(store=store, version=False)
    agent = first.create_agent(
        id="janitor", model=scripted(CALL), tools=[wipe(ran)], approval_timeout=0.05
    )
    paused = await agent.run(user="go").result
    await first.aclose()
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        SWEEPER,
        store,
        paused.run_id,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    # (the guard only ends a hang: a runtime that never sweeps would wait for ever)
    out, err = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode == 0, err.decode()
    assert out.decode().split() == ["completed", "expired", "approval_timeout"]
    assert ran == []
    check = Runtime(store=store, version=False)
    events = await run_events(check, paused.run_id)
    assert events[-1]["type"] == "agent_finished" and events[-1]["data"]["text"] == "left it"
    await check.aclose()


async def test_the_sweep_runs_only_with_a_timeout_and_stops_on_close(tmp_path: Path) -> None:
    plain = Runtime(store="memory", version=False)
    plain.create_agent(id="a", model=scripted(), tools=[wipe([])])
    async with plain:
        assert not plain.heartbeat.beating()  # no timeout anywhere: no task at all
    timed = Runtime(store="memory", version=False)
    timed.create_agent(id="a", model=scripted(), tools=[wipe([], timeout=5)])
    async with timed:
        assert timed.heartbeat.beating()  # a tool's own timeout is enough
    assert not timed.heartbeat.beating()
    by_default = Runtime(store="memory", version=False, defaults={"approval_timeout": 5})
    by_default.create_agent(id="a", model=scripted())
    assert by_default.heartbeat.beating()  # created inside a loop: sweeping at once
    await by_default.aclose()
    assert not by_default.heartbeat.beating()


async def test_an_open_runtime_expires_on_its_beat_and_says_what_it_resumed() -> None:
    lab = Runtime(store="memory", version=False, lease_ttl=0.3)
    told: list[str] = []
    lab.on_resumed = lambda run_id, handle, task: told.append(run_id)
    agent = lab.create_agent(
        id="janitor",
        model=scripted(CALL, {"text": "fine"}),
        tools=[wipe([])],
        approval_timeout=0.05,
    )
    finished = asyncio.Event()
    lab.subscribe(lambda event: finished.set() if event["type"] == "agent_finished" else None)
    async with lab:
        paused = await agent.run(user="go").result
        await asyncio.wait_for(finished.wait(), 60)  # (the guard only ends a hang)
        assert told == [paused.run_id]
        await lab.wait_idle()
        run = await lab.run_store.get_run(paused.run_id)
        assert run is not None and run.status == "completed"
