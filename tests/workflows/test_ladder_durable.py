"""The ladder on the durable engine: inside a durable run each round is a journaled step."""

from __future__ import annotations

from typing import Any

import pytest

import tether
from tether.errors import StepOutputError
from tether.session import reduce
from tether.stores import InMemoryWorkflowStore
from tether.testing import script_client
from tether.workflows import (
    LadderContext,
    LadderWorkflow,
    WorkflowContext,
    create_workflow,
    define_workflow,
)


class Crash(Exception):
    pass


def build(executed: list[str], crash_at: set[str]) -> tether.Agent:
    def step(ctx: LadderContext) -> dict[str, Any]:
        key = f"{ctx.step_name}{ctx.round}"
        executed.append(key)
        if key in crash_at:
            crash_at.discard(key)
            raise Crash(key)
        ctx.remember({"last": key})
        return {"key": key, "feedback": None if ctx.feedback is None else ctx.feedback.reason}

    ladder = define_workflow(
        "generate",
        [
            {
                "name": "draft",
                "run": step,
                "until": lambda r: {"accepted": False, "reason": f"weak-{r['key']}"},
                "retry": {"max_rounds": 2},
            },
            {
                "name": "polish",
                "run": step,
                "until": lambda r: r["key"] == "polish2",
                "retry": {"max_rounds": 3},
            },
        ],
        exit_gate=lambda r: True,
    )
    return tether.create_agent(llm=script_client([]), workflows=[ladder])


def durable(agent: tether.Agent) -> tether.workflows.Workflow[dict[str, Any], dict[str, Any]]:
    async def run(input: dict[str, Any], ctx: WorkflowContext[dict[str, Any]]) -> dict[str, Any]:
        session = agent.create_session()
        outcome = await agent.run_workflow(session, "generate", input)
        for event in outcome.events:
            session = reduce(session, event)
        return {**outcome.to_dict(), "memory": session.memory}

    return create_workflow("durable-ladder", run)


async def test_each_round_is_a_journaled_step_and_a_resume_skips_finished_rounds() -> None:
    store = InMemoryWorkflowStore()
    executed: list[str] = []
    wf = durable(build(executed, crash_at={"polish2"}))
    first = wf.run({"topic": "t"}, store=store)
    with pytest.raises(Crash):
        await first
    assert executed == ["draft1", "draft2", "polish1", "polish2"]
    assert [s.step_id for s in await store.list_steps(first.workflow_run_id)] == [
        "ladder:generate:draft:1",
        "ladder:generate:draft:2",
        "ladder:generate:polish:1",
    ]
    resumed = await wf.run(store=store, workflow_run_id=first.workflow_run_id)
    assert executed == ["draft1", "draft2", "polish1", "polish2", "polish2"]

    clean: list[str] = []
    uninterrupted = await durable(build(clean, crash_at=set())).run(
        {"topic": "t"}, store=InMemoryWorkflowStore()
    )
    assert clean == ["draft1", "draft2", "polish1", "polish2"]
    assert resumed == uninterrupted
    assert resumed["step"] == "polish" and resumed["accepted"] is True
    assert [
        (a["step"], a["round"], a["accepted"], a.get("reason")) for a in resumed["attempts"]
    ] == [
        ("draft", 1, False, "weak-draft1"),
        ("draft", 2, False, "weak-draft2"),
        ("polish", 1, False, None),
        ("polish", 2, True, None),
    ]
    # Feedback survives the journal: round 2 of draft saw round 1's verdict.
    assert resumed["attempts"][1]["result"] == {"key": "draft2", "feedback": "weak-draft1"}
    # Memory asked for in replayed rounds is replayed too.
    assert resumed["memory"] == {"last": "polish2"}


async def test_a_round_result_that_cannot_be_journaled_names_the_step_and_path() -> None:
    ladder = define_workflow("generate", [{"name": "draft", "run": lambda ctx: {"at": {1}}}])
    agent = tether.create_agent(llm=script_client([]), workflows=[ladder])

    async def run(_: None, ctx: WorkflowContext[None]) -> Any:
        return (await agent.run_workflow(agent.create_session(), "generate")).result

    with pytest.raises(StepOutputError) as info:
        await create_workflow("w", run).run(None, store=InMemoryWorkflowStore())
    assert info.value.step == "ladder:generate:draft:1"
    assert info.value.path == "result.at"


async def test_outside_a_durable_run_results_need_not_be_json_safe() -> None:
    marker = object()
    ladder = define_workflow("generate", [{"name": "draft", "run": lambda ctx: marker}])
    agent = tether.create_agent(llm=script_client([]), workflows=[ladder])
    outcome = await agent.run_workflow(agent.create_session(), "generate")
    assert outcome.result is marker


async def test_ladder_names_with_separators_are_journaled_safely() -> None:
    ladder = define_workflow(
        "gen/v2#x", [{"name": "a/b#c", "run": lambda ctx: 1, "until": lambda r: False}]
    )
    agent = tether.create_agent(llm=script_client([]), workflows=[ladder])
    store = InMemoryWorkflowStore()

    async def run(_: None, ctx: WorkflowContext[None]) -> dict[str, Any]:
        return (await agent.run_workflow(agent.create_session(), "gen/v2#x")).to_dict()

    wf = create_workflow("w", run)
    handle = wf.run(None, store=store)
    await handle.result
    assert [s.step_id for s in await store.list_steps(handle.workflow_run_id)] == [
        "ladder:gen%2Fv2%23x:a%2Fb%23c:1"
    ]


async def test_as_workflow_makes_the_ladder_a_durable_workflow() -> None:
    executed: list[str] = []
    agent = build(executed, crash_at={"polish1"})
    ladder = agent.workflows["generate"]
    assert isinstance(ladder, LadderWorkflow)
    wf = ladder.as_workflow(agent)
    assert wf.id == "generate"
    store = InMemoryWorkflowStore()
    first = wf.run({"topic": "t"}, store=store)
    with pytest.raises(Crash):
        await first
    out = await wf.run(store=store, workflow_run_id=first.workflow_run_id)
    assert executed == ["draft1", "draft2", "polish1", "polish1", "polish2"]
    assert out["step"] == "polish" and out["accepted"] is True
    assert len(out["attempts"]) == 4
