"""A lab episode inside a durable workflow step that pauses makes the workflow wait for it:
the workflow run is stored `waiting` for the paused run, deciding that run (in this process or
another, on SQLite and PostgreSQL) resumes the workflow from its journal, and the step gets the
run's final result as if it had never paused — the approved tool run once, the steps before
not run again. A second pause keeps the workflow waiting; a denial reaches the model."""

from __future__ import annotations

import asyncio
import os
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from tests.postgres_server import postgres_url

from tether import approve, define_tool, deny
from tether.errors import (
    ResumedRunFailedError,
    StoreCorruptError,
    WorkflowNotWaitingError,
    WorkflowWaitingError,
)
from tether.lab import Runtime
from tether.stores.workflow_store import RunLease
from tether.testing import script_client
from tether.workflows import WorkflowContext

from .conftest import run_events

WIPE = {"tool_use": [{"id": "w1", "name": "wipe", "input": {"path": "/tmp"}}]}


def wipe_tool(ran: list[Any]) -> Any:
    return define_tool(
        name="wipe",
        input_schema={"type": "object", "properties": {"path": {"type": "string"}}},
        execute=lambda value: ran.append(value["path"]) or f"wiped {value['path']}",
        approval=True,
    )


def janitor_flow(lab: Runtime, agent: Any, steps: list[str]) -> Any:
    async def run(room: str, ctx: WorkflowContext[str]) -> dict[str, Any]:
        def plan() -> str:
            steps.append("plan")
            return f"clean {room}"

        task = await ctx.step("plan", plan)

        async def clean() -> dict[str, Any]:
            steps.append("clean")
            result = await agent.run(memory_scope=ctx.run_local_scope("janitor"), user=task).result
            return {"text": result.text, "run_id": result.run_id, "turns": result.turns}

        done = await ctx.step("clean", clean)
        report = await ctx.step("report", lambda: steps.append("report") or done["text"])
        return {"report": report, **done}

    return lab.create_workflow("janitor-flow", run)


@pytest.fixture(params=["sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'lab.db'}"
    else:
        yield postgres_url()


async def test_a_paused_episode_in_a_step_makes_the_workflow_wait_until_it_is_decided(
    store: str,
) -> None:
    ran: list[str] = []
    steps: list[str] = []
    lab = Runtime(store=store, version=False)
    client = script_client([WIPE, {"text": "all clean"}])
    agent = lab.create_agent(id="janitor", model=client, tools=[wipe_tool(ran)])
    flow = janitor_flow(lab, agent, steps)
    try:
        handle = flow.run("the attic")
        with pytest.raises(WorkflowWaitingError) as waiting:
            await handle
        paused_run = waiting.value.paused_run_id
        assert paused_run is not None and "tether runs resume" in str(waiting.value)
        assert ran == [] and steps == ["plan", "clean"]
        # The workflow waits for the paused run, which holds the pending call.
        record = await lab.workflow_store.get_run(handle.workflow_run_id)
        assert record is not None and record.status == "waiting"
        assert record.waiting_for is not None and record.waiting_for.paused_run == paused_run
        parent = await lab.run_store.get_run(handle.workflow_run_id)
        assert parent is not None and parent.status == "waiting"
        assert parent.lease_expires_at is None
        child = await lab.run_store.get_run(paused_run)
        assert child is not None and child.status == "paused"
        assert child.workflow_run_id == handle.workflow_run_id
        assert [p["id"] for p in child.pending] == ["w1"]
        waits = [
            e["data"]
            for e in await run_events(lab, handle.workflow_run_id)
            if e["type"] == "workflow_waiting"
        ]
        assert waits[-1]["paused_run_id"] == paused_run
        # A signal cannot answer it: deciding the run does.
        with pytest.raises(WorkflowNotWaitingError, match="waits for paused agent run"):
            await lab.signal(handle.workflow_run_id, waits[-1]["name"], "x")

        told: list[str] = []
        lab.on_resumed = lambda run_id, handle, task: told.append(run_id)
        done = await lab.resume(paused_run, {"w1": approve()}, decided_by="ann")
        assert done.text == "all clean"
        assert told == [handle.workflow_run_id]  # what serve tracks as its own
        await lab.wait_idle()  # the workflow resumed here, as background work
        record = await lab.workflow_store.get_run(handle.workflow_run_id)
        assert record is not None and record.status == "completed"
        assert record.output == {
            "report": "all clean",
            "text": "all clean",
            "run_id": paused_run,
            "turns": 2,
        }
        assert ran == ["/tmp"]  # the approved tool ran once, in the resumed turn
        # The step ran again up to the episode, which handed back the run's result; the step
        # before it was not run again.
        assert steps == ["plan", "clean", "clean", "report"]
        parent = await lab.run_store.get_run(handle.workflow_run_id)
        assert parent is not None and parent.status == "completed"
        agent_runs = [r for r in await lab.run_store.list_runs() if r.kind == "agent"]
        assert [r.run_id for r in agent_runs] == [paused_run]  # no second episode
        # Attaching to the finished run reads its output.
        assert (await flow.run(workflow_run_id=handle.workflow_run_id))["report"] == "all clean"
    finally:
        await lab.aclose()


async def test_a_second_pause_keeps_the_workflow_waiting_and_a_denial_reaches_the_model(
    store: str,
) -> None:
    ran: list[str] = []
    steps: list[str] = []
    lab = Runtime(store=store, version=False)
    again = {"tool_use": [{"id": "w2", "name": "wipe", "input": {"path": "/var"}}]}
    client = script_client([WIPE, again, {"text": "left it"}])
    agent = lab.create_agent(id="janitor", model=client, tools=[wipe_tool(ran)])
    flow = janitor_flow(lab, agent, steps)
    try:
        handle = flow.run("the cellar")
        with pytest.raises(WorkflowWaitingError) as waiting:
            await handle
        paused_run = waiting.value.paused_run_id
        assert paused_run is not None
        second = await lab.resume(paused_run, {"w1": approve()})
        assert second.paused and [p["id"] for p in second.pending] == ["w2"]
        await lab.wait_idle()
        record = await lab.workflow_store.get_run(handle.workflow_run_id)
        assert record is not None and record.status == "waiting"  # still: nothing resumed it
        assert record.waiting_for is not None and record.waiting_for.paused_run == paused_run
        assert steps == ["plan", "clean"]

        done = await lab.resume(paused_run, {"w2": deny("not /var")})
        assert done.text == "left it"
        sent = client.calls[2]["messages"]
        denied = [p for m in sent for p in m["content"] if p["type"] == "tool_result"][-1]
        assert denied["is_error"] and "not /var" in denied["output"]
        await lab.wait_idle()
        assert ran == ["/tmp"]
        record = await lab.workflow_store.get_run(handle.workflow_run_id)
        assert record is not None and record.status == "completed"
        assert record.output["text"] == "left it" and record.output["turns"] == 3
        assert steps == ["plan", "clean", "clean", "report"]
    finally:
        await lab.aclose()


async def test_a_resumed_run_that_fails_fails_the_step_where_it_ran(tmp_path: Path) -> None:
    lab = Runtime(store=f"sqlite:///{tmp_path / 'lab.db'}", version=False)

    def broken(request: Any) -> Any:
        raise RuntimeError("the model is gone")

    agent = lab.create_agent(
        id="janitor", model=script_client([WIPE, broken]), tools=[wipe_tool([])]
    )
    seen: list[str] = []

    async def run(room: str, ctx: WorkflowContext[str]) -> str:
        async def clean() -> str:
            try:
                return (await agent.run(user=room).result).text
            except ResumedRunFailedError as exc:
                seen.append(exc.run_id)
                return f"failed: {exc.error}"

        return await ctx.step("clean", clean)

    flow = lab.create_workflow("fragile", run)
    try:
        handle = flow.run("the attic")
        with pytest.raises(WorkflowWaitingError) as waiting:
            await handle
        paused_run = waiting.value.paused_run_id
        assert paused_run is not None
        with pytest.raises(Exception, match="the model is gone"):
            await lab.resume(paused_run, {"w1": approve()})
        await lab.wait_idle()
        record = await lab.workflow_store.get_run(handle.workflow_run_id)
        assert record is not None and record.status == "completed"
        assert seen == [paused_run]
        assert "the model is gone" in record.output
    finally:
        await lab.aclose()


PROJECT = textwrap.dedent(
    """
    from tether import define_tool
    from tether.lab import Runtime
    from tether.testing import script_client

    def reply(request):
        results = [
            p for m in request["messages"] for p in m["content"] if p["type"] == "tool_result"
        ]
        if not results:
            return {"tool_use": [{"id": "w1", "name": "wipe", "input": {"path": "/tmp"}}]}
        return {"text": "done: " + results[-1]["output"]}

    def build(store, log):
        def wipe(value):
            with open(log, "a") as f:
                f.write("wipe\\n")
            return "wiped"

        def note(what):
            with open(log, "a") as f:
                f.write(what + "\\n")
            return what

        lab = Runtime(store=store, version=False)
        tools = [define_tool(name="wipe", input_schema={"type": "object"}, execute=wipe,
                             approval=True)]
        agent = lab.create_agent(id="janitor", model=script_client([reply] * 4), tools=tools)

        async def run(room, ctx):
            first = await ctx.step("plan", lambda: note("plan"))
            async def clean():
                result = await agent.run(memory_scope=ctx.run_local_scope("j"), user=room).result
                return result.text
            text = await ctx.step("clean", clean)
            return {"plan": first, "text": text}

        flow = lab.create_workflow("janitor-flow", run)
        return lab, flow
    """
)

FIRST = textwrap.dedent(
    """
    import asyncio, sys
    from project import build
    from tether.errors import WorkflowWaitingError

    async def main(store, log):
        lab, flow = build(store, log)
        handle = flow.run("the attic")
        try:
            await handle
        except WorkflowWaitingError as waiting:
            print("WAITING", handle.workflow_run_id, waiting.paused_run_id, flush=True)
        await lab.aclose()

    asyncio.run(main(sys.argv[1], sys.argv[2]))
    """
)

RESUME = textwrap.dedent(
    """
    import asyncio, sys
    from project import build
    from tether import approve

    async def main(store, log, run_id):
        lab, flow = build(store, log)
        result = await lab.resume(run_id, {"w1": approve()}, decided_by="ann")
        print("RESUMED", result.text, flush=True)
        await lab.aclose()  # waits for the workflow resumed here

    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3]))
    """
)


async def _python(tmp_path: Path, script: str, *args: str) -> list[str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        script,
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])},
    )
    out, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    return out.decode().split()


async def test_a_workflow_waiting_in_one_process_is_resumed_by_deciding_in_another(
    store: str, tmp_path: Path
) -> None:
    (tmp_path / "project.py").write_text(PROJECT, encoding="utf-8")
    log = tmp_path / "log.txt"
    line = await _python(tmp_path, FIRST, store, str(log))
    assert line[0] == "WAITING"
    workflow_run_id, paused_run = line[1], line[2]
    assert log.read_text() == "plan\n"
    line = await _python(tmp_path, RESUME, store, str(log), paused_run)
    assert line == ["RESUMED", "done:", "wiped"]
    assert log.read_text() == "plan\nwipe\n"  # the tool once, the plan step not again

    lab = Runtime(store=store, version=False)
    try:
        record = await lab.workflow_store.get_run(workflow_run_id)
        assert record is not None and record.status == "completed"
        assert record.output == {"plan": "plan", "text": "done: wiped"}
        parent = await lab.run_store.get_run(workflow_run_id)
        assert parent is not None and parent.status == "completed"
    finally:
        await lab.aclose()


async def test_a_workflow_resumed_by_hand_waits_again_or_finds_the_run_ended(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran: list[str] = []
    steps: list[str] = []
    lab = Runtime(store=f"sqlite:///{tmp_path / 'lab.db'}", version=False)
    agent = lab.create_agent(
        id="janitor", model=script_client([WIPE, {"text": "all clean"}]), tools=[wipe_tool(ran)]
    )
    flow = janitor_flow(lab, agent, steps)
    try:
        handle = flow.run("the attic")
        with pytest.raises(WorkflowWaitingError) as waiting:
            await handle
        paused_run = waiting.value.paused_run_id
        # Resumed without the run decided: it waits for the same run again, no new episode.
        with pytest.raises(WorkflowWaitingError) as again:
            await flow.run(workflow_run_id=handle.workflow_run_id)
        assert again.value.paused_run_id == paused_run
        assert [r.run_id for r in await lab.run_store.list_runs() if r.kind == "agent"] == [
            paused_run
        ]

        # The run is decided by a process that dies before it answers the workflow.
        async def dies(*args: Any) -> None:
            return None

        monkeypatch.setattr(lab, "answer_workflow", dies)
        assert paused_run is not None
        assert (await lab.resume(paused_run, {"w1": approve()})).text == "all clean"
        record = await lab.workflow_store.get_run(handle.workflow_run_id)
        assert record is not None and record.status == "waiting"
        # The next resume finds the run ended and goes on with its result.
        output = await flow.run(workflow_run_id=handle.workflow_run_id)
        assert output["text"] == "all clean" and output["run_id"] == paused_run
        assert ran == ["/tmp"]
        assert steps == ["plan", "clean", "clean", "clean", "report"]
    finally:
        await lab.aclose()


async def test_a_runtime_without_the_workflow_leaves_it_to_one_that_has_it(
    tmp_path: Path,
) -> None:
    store = f"sqlite:///{tmp_path / 'lab.db'}"
    ran: list[str] = []
    steps: list[str] = []
    first = Runtime(store=store, version=False)
    agent = first.create_agent(
        id="janitor", model=script_client([WIPE, {"text": "all clean"}]), tools=[wipe_tool(ran)]
    )
    flow = janitor_flow(first, agent, steps)
    handle = flow.run("the attic")
    with pytest.raises(WorkflowWaitingError) as waiting:
        await handle
    paused_run = waiting.value.paused_run_id
    assert paused_run is not None
    # A process with the agent but not the workflow decides the run.
    other = Runtime(store=store, version=False)
    other.create_agent(
        id="janitor", model=script_client([{"text": "all clean"}]), tools=[wipe_tool(ran)]
    )
    try:
        assert (await other.resume(paused_run, {"w1": approve()})).text == "all clean"
        await other.wait_idle()
        # The outcome is journaled and the run held by nobody alive: for a worker to take.
        journal = await other.workflow_store.get_run(handle.workflow_run_id)
        assert journal is not None and journal.status in ("running", "interrupted")
        assert journal.waiting_for is None
    finally:
        await other.aclose()
    try:
        # The first one (a `tether serve` worker's sweep does the same) takes it over at once.
        output = await flow.run(workflow_run_id=handle.workflow_run_id, wait=False)
        assert output["text"] == "all clean" and output["run_id"] == paused_run
        assert ran == ["/tmp"] and steps == ["plan", "clean", "clean", "report"]
    finally:
        await first.aclose()


async def test_a_journal_entry_that_is_no_outcome_is_corrupt(tmp_path: Path) -> None:
    lab = Runtime(store=f"sqlite:///{tmp_path / 'lab.db'}", version=False)
    agent = lab.create_agent(id="janitor", model=script_client([WIPE]), tools=[wipe_tool([])])

    async def run(room: str, ctx: WorkflowContext[str]) -> str:
        await ctx.step("run:janitor", lambda: "a step of the same name")  # taking its place
        return (await agent.run(user=room).result).text

    flow = lab.create_workflow("clash", run)
    try:
        handle = flow.run("x")
        with pytest.raises(WorkflowWaitingError):
            await handle
        # A step of the place's name does not take it: the place is numbered after it. A
        # journal answered with something else (by hand) is refused on the replay.
        record = await lab.workflow_store.get_run(handle.workflow_run_id)
        assert record is not None and record.waiting_for is not None
        assert record.waiting_for.step_id == "run:janitor#2"
        await lab.workflow_store.deliver_signal(
            handle.workflow_run_id,
            name=record.waiting_for.name,
            step_id=record.waiting_for.step_id,
            waiter_run_id=handle.workflow_run_id,
            output="not an outcome",
            lease=RunLease("x", 0.0),
        )
        with pytest.raises(StoreCorruptError, match="not that run's outcome"):
            await flow.run(workflow_run_id=handle.workflow_run_id)
    finally:
        await lab.aclose()
