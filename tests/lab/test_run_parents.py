"""A run an episode's tool starts (an agent or a workflow used as a tool, or any run a tool
starts) names that episode and the tool call on its record; a run inside a workflow run names
the workflow run instead."""

from __future__ import annotations

from typing import Any

from tether import define_tool
from tether.lab import Runtime
from tether.stores.run_store import RunInfo
from tether.workflows import WorkflowContext

from .conftest import run_events, scripted


async def runs_named(lab: Runtime, name: str) -> list[RunInfo]:
    return [r for r in await lab.run_store.list_runs(limit=500) if r.name == name]


async def tool_call_ids(lab: Runtime, run_id: str) -> list[str]:
    return [
        e["data"]["id"] for e in await run_events(lab, run_id) if e["type"] == "agent_tool_call"
    ]


async def test_an_agent_tool_episode_names_the_episode_and_the_tool_call(lab: Runtime) -> None:
    researcher = lab.create_agent(
        id="researcher", model=scripted({"text": "A."}, {"text": "B."}), description="Finds."
    )
    orchestrator = lab.create_agent(
        id="orchestrator",
        tools=[lab.tool_from_agent(researcher)],
        model=scripted(
            {
                "tool_use": [
                    {"name": "researcher", "input": {"user": "one"}},
                    {"name": "researcher", "input": {"user": "two"}},
                ]
            },
            {"text": "Done."},
        ),
    )
    outer = await orchestrator.run(user="Ask twice").result
    calls = await tool_call_ids(lab, outer.run_id)
    children = await runs_named(lab, "researcher")
    assert len(calls) == 2 and len(children) == 2
    assert {(c.parent_run_id, c.parent_tool_call_id) for c in children} == {
        (outer.run_id, calls[0]),
        (outer.run_id, calls[1]),
    }
    # Each child is the one its own tool call started.
    by_call = {c.parent_tool_call_id: c for c in children}
    assert by_call[calls[0]].input_text == "one" and by_call[calls[1]].input_text == "two"
    [root] = await runs_named(lab, "orchestrator")
    assert root.parent_run_id is None and root.parent_tool_call_id is None


async def test_a_grandchild_names_its_own_parent_not_the_outer_episode(lab: Runtime) -> None:
    leaf = lab.create_agent(id="leaf", model=scripted({"text": "leaf"}))
    middle = lab.create_agent(
        id="middle",
        tools=[lab.tool_from_agent(leaf)],
        model=scripted({"tool_use": [{"name": "leaf", "input": {"user": "x"}}]}, {"text": "m"}),
    )
    top = lab.create_agent(
        id="top",
        tools=[lab.tool_from_agent(middle)],
        model=scripted({"tool_use": [{"name": "middle", "input": {"user": "y"}}]}, {"text": "t"}),
    )
    outer = await top.run(user="go").result
    [mid] = await runs_named(lab, "middle")
    [lf] = await runs_named(lab, "leaf")
    assert mid.parent_run_id == outer.run_id
    assert mid.parent_tool_call_id == (await tool_call_ids(lab, outer.run_id))[0]
    assert lf.parent_run_id == mid.run_id
    assert lf.parent_tool_call_id == (await tool_call_ids(lab, mid.run_id))[0]


async def test_a_plain_tool_that_starts_an_episode_makes_it_a_child(lab: Runtime) -> None:
    helper = lab.create_agent(id="helper", model=scripted({"text": "helped"}))

    async def ask(value: dict[str, Any]) -> str:
        return str((await helper.run(user="help").result).text)

    outer_agent = lab.create_agent(
        id="outer",
        tools=[define_tool(name="ask", description="Ask the helper", execute=ask)],
        model=scripted({"tool_use": [{"name": "ask", "input": {}}]}, {"text": "ok"}),
    )
    outer = await outer_agent.run(user="go").result
    [child] = await runs_named(lab, "helper")
    # The episode is known; which call started it is known only to the lab's own tools.
    assert (child.parent_run_id, child.parent_tool_call_id) == (outer.run_id, None)


async def test_a_workflow_tool_run_names_the_episode_and_its_steps_stay_the_workflows(
    lab: Runtime,
) -> None:
    writer = lab.create_agent(id="writer", model=scripted({"text": "An outline."}))

    async def outline(input: Any, ctx: WorkflowContext[Any]) -> str:
        return await ctx.step(
            "write", lambda: _text(writer.run(memory_scope=ctx.run_local_scope("w"), user="o"))
        )

    workflow = lab.create_workflow("outline", outline)
    planner = lab.create_agent(
        id="planner",
        tools=[lab.tool_from_workflow(workflow)],
        model=scripted({"tool_use": [{"name": "outline", "input": {}}]}, {"text": "Planned."}),
    )
    outer = await planner.run(user="Plan").result
    [run] = await runs_named(lab, "outline")
    assert run.kind == "workflow"
    assert run.parent_run_id == outer.run_id
    assert run.parent_tool_call_id == (await tool_call_ids(lab, outer.run_id))[0]
    # The episode inside the workflow's step is the workflow run's, not the planner's.
    [inner] = await runs_named(lab, "writer")
    assert inner.workflow_run_id == run.run_id
    assert inner.parent_run_id is None


async def test_inside_a_workflow_an_agent_tool_episode_names_both(lab: Runtime) -> None:
    researcher = lab.create_agent(id="researcher", model=scripted({"text": "found"}))
    lead = lab.create_agent(
        id="lead",
        tools=[lab.tool_from_agent(researcher)],
        model=scripted(
            {"tool_use": [{"name": "researcher", "input": {"user": "q"}}]}, {"text": "l"}
        ),
    )

    async def flow(input: Any, ctx: WorkflowContext[Any]) -> str:
        return await ctx.step("lead", lambda: _text(lead.run(user="go")))

    handle = lab.create_workflow("flow", flow).run({})
    await handle.result
    [lead_run] = await runs_named(lab, "lead")
    [child] = await runs_named(lab, "researcher")
    assert lead_run.workflow_run_id == handle.workflow_run_id and lead_run.parent_run_id is None
    assert child.parent_run_id == lead_run.run_id
    assert child.workflow_run_id == handle.workflow_run_id


async def test_an_episode_started_by_no_tool_has_no_parent(lab: Runtime) -> None:
    solo = lab.create_agent(id="solo", model=scripted({"text": "1"}, {"text": "2"}))
    first = await solo.run(user="a").result
    second = await solo.run(user="b").result
    for run_id in (first.run_id, second.run_id):
        info = await lab.run_store.get_run(run_id)
        assert info is not None and info.parent_run_id is None


async def _text(handle: Any) -> str:
    return str((await handle.result).text)


async def test_a_title_workflow_of_an_agent_tool_episode_is_nobodys_child(lab: Runtime) -> None:
    """Naming the conversation is background work: its run hangs under no episode."""

    async def name(input: Any, ctx: WorkflowContext[Any]) -> dict[str, str]:
        return {"title": "Named"}

    title = lab.create_workflow("conversation-title", name)
    researcher = lab.create_agent(
        id="researcher", model=scripted({"text": "found"}), title_workflow=title
    )
    lead = lab.create_agent(
        id="lead",
        tools=[lab.tool_from_agent(researcher)],
        model=scripted(
            {"tool_use": [{"name": "researcher", "input": {"user": "q"}}]}, {"text": "l"}
        ),
    )
    outer = await lead.run(user="go").result
    await lab.wait_idle()
    [child] = await runs_named(lab, "researcher")
    assert child.parent_run_id == outer.run_id
    [titled] = await runs_named(lab, "conversation-title")
    assert titled.parent_run_id is None and titled.workflow_run_id is None
    assert await lab.message_store.get_title(child.memory_scope or "") == "Named"
