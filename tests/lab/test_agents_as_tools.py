"""Agents and workflows as tools, and agents as workflows."""

from __future__ import annotations

import json
from typing import Any

import pydantic
from tests.helpers import texts

from tether import RunContext, define_tool
from tether.errors import LLMError
from tether.lab import Runtime, ToolCallInfo
from tether.workflows import WorkflowContext

from .conftest import scripted


class ResearchArgs(pydantic.BaseModel):
    thread_id: str
    query: str


class Summary(pydantic.BaseModel):
    summary: str


def tool_results(request: Any) -> list[dict[str, Any]]:
    return [p for m in request["messages"] for p in m["content"] if p["type"] == "tool_result"]


async def test_an_agent_tool_runs_one_episode_and_returns_its_text(lab: Runtime) -> None:
    inner_client = scripted({"text": "CRISPR edits genes."})
    researcher = lab.create_agent(id="researcher", model=inner_client, description="Researches.")
    tool = lab.tool_from_agent(researcher, description="Run one research episode")
    assert tool.name == "researcher"
    assert tool.input_schema["required"] == ["user"]
    outer_client = scripted(
        {"tool_use": [{"name": "researcher", "input": {"user": "What is CRISPR?"}}]},
        {"text": "Done."},
    )
    orchestrator = lab.create_agent(id="orchestrator", model=outer_client, tools=[tool])
    result = await orchestrator.run(user="Ask the researcher").result
    assert result.text == "Done."
    assert tool_results(outer_client.calls[1])[0]["output"] == "CRISPR edits genes."
    assert texts(inner_client.calls[0]["messages"]) == [("user", "What is CRISPR?")]


async def test_an_inner_episode_that_fails_is_an_error_result_and_the_outer_goes_on(
    lab: Runtime,
) -> None:
    researcher = lab.create_agent(
        id="researcher", model=scripted({"error": LLMError("inner model down", provider="x")})
    )
    outer_client = scripted(
        {"tool_use": [{"name": "researcher", "input": {"user": "What is CRISPR?"}}]},
        {"text": "I could not ask the researcher."},
    )
    orchestrator = lab.create_agent(
        id="orchestrator", model=outer_client, tools=[lab.tool_from_agent(researcher)]
    )
    result = await orchestrator.run(user="Ask the researcher").result
    assert result.text == "I could not ask the researcher."
    [failed] = tool_results(outer_client.calls[1])
    assert failed["is_error"] and "inner model down" in failed["output"]
    [inner] = [r for r in await lab.run_store.list_runs(kind="agent") if r.name == "researcher"]
    assert inner.status == "failed"


async def test_typed_arguments_reach_map_run_and_the_output_is_the_agents_type(
    lab: Runtime,
) -> None:
    seen: list[tuple[Any, Any]] = []
    researcher = lab.create_agent(
        id="researcher",
        model=scripted({"text": '{"summary": "S1"}'}, {"text": '{"summary": "S2"}'}),
        output_schema=Summary,
    )

    def map_run(args: ResearchArgs, info: ToolCallInfo) -> dict[str, Any]:
        seen.append((args, info.ctx))
        base = f"tool:{args.thread_id}"
        scope = info.ctx.memory_scope_with_suffix(base) if info.ctx else base
        return {"memory_scope": scope, "user": args.query}

    tool = lab.tool_from_agent(
        researcher,
        description="Run one research episode",
        input_schema=ResearchArgs,
        map_run=map_run,
    )
    assert set(tool.input_schema["properties"]) == {"thread_id", "query"}
    outer_client = scripted(
        {"tool_use": [{"name": "researcher", "input": {"thread_id": "t1", "query": "q1"}}]},
        {"tool_use": [{"name": "researcher", "input": {"thread_id": "t1"}}]},
        {"text": "ok"},
    )
    orchestrator = lab.create_agent(id="orchestrator", model=outer_client, tools=[tool])
    await orchestrator.run(user="go").result
    assert seen == [(ResearchArgs(thread_id="t1", query="q1"), None)]
    assert json.loads(tool_results(outer_client.calls[1])[0]["output"]) == {"summary": "S1"}
    # Arguments that do not match the schema never reach map_run; the model sees why.
    bad = tool_results(outer_client.calls[2])[1]
    assert bad["is_error"] and "query" in bad["output"]
    assert texts(await lab.message_store.load("tool:t1"))[0] == ("user", "q1")


async def test_inside_a_workflow_map_run_gets_the_run_and_the_scope_follows_it(
    lab: Runtime,
) -> None:
    researcher = lab.create_agent(id="researcher", model=scripted({"text": "inner"}))
    scopes: list[str] = []

    def map_run(args: ResearchArgs, info: ToolCallInfo) -> dict[str, Any]:
        assert info.ctx is not None
        scope = info.ctx.memory_scope_with_suffix(f"tool:{args.thread_id}")
        scopes.append(scope)
        return {"memory_scope": scope, "user": args.query}

    tool = lab.tool_from_agent(
        researcher, description="Research", input_schema=ResearchArgs, map_run=map_run
    )
    orchestrator = lab.create_agent(
        id="orchestrator",
        model=scripted(
            {"tool_use": [{"name": "researcher", "input": {"thread_id": "x", "query": "q"}}]},
            {"text": "outer"},
        ),
        tools=[tool],
    )

    async def run(topic: str, ctx: WorkflowContext[str]) -> str:
        async def orchestrate() -> str:
            return (await orchestrator.run(user=topic).result).text

        return await ctx.step("orchestrate", orchestrate)

    handle = lab.create_workflow("orchestration", run).run("CRISPR")
    assert await handle.result == "outer"
    assert scopes == [f"{handle.workflow_run_id}:tool:x"]
    runs = await lab.run_store.list_runs(kind="agent", workflow_run_id=handle.workflow_run_id)
    assert sorted((r.name, r.step_id) for r in runs) == [
        ("orchestrator", "orchestrate"),
        ("researcher", "orchestrate"),
    ]


async def test_the_outer_run_context_reaches_the_inner_agents_tools(lab: Runtime) -> None:
    seen: list[Any] = []

    def whoami(value: Any, ctx: RunContext) -> str:
        seen.append(ctx.context)
        return "ok"

    inner = lab.create_agent(
        id="inner",
        model=scripted({"tool_use": [{"name": "whoami", "input": {}}]}, {"text": "inner done"}),
        tools=[define_tool(name="whoami", description="Who", execute=whoami)],
    )
    outer = lab.create_agent(
        id="outer",
        model=scripted(
            {"tool_use": [{"name": "inner", "input": {"user": "check"}}]}, {"text": "done"}
        ),
        tools=[lab.tool_from_agent(inner, description="Inner")],
    )
    await outer.run(user="go", context={"tenant": "t-9"}).result
    assert seen == [{"tenant": "t-9"}]


async def test_a_workflow_tool_runs_the_workflow_and_returns_its_output(lab: Runtime) -> None:
    async def review(input: dict[str, Any], ctx: WorkflowContext[dict[str, Any]]) -> dict[str, Any]:
        papers = await ctx.step("search", lambda: [f"paper on {input['topic']}"])
        return {"papers": papers}

    literature_review = lab.create_workflow("literature-review", review)
    tool = lab.tool_from_workflow(
        literature_review, description="Run the full literature review workflow"
    )
    assert tool.name == "literature-review"
    client = scripted(
        {"tool_use": [{"name": "literature-review", "input": {"topic": "CRISPR"}}]},
        {"text": "Reviewed."},
    )
    agent = lab.create_agent(id="orchestrator", model=client, tools=[tool])
    await agent.run(user="Review CRISPR").result
    assert json.loads(tool_results(client.calls[1])[0]["output"]) == {"papers": ["paper on CRISPR"]}
    runs = await lab.workflow_store.list_runs(workflow_id="literature-review")
    assert [r.status for r in runs] == ["completed"]


async def test_a_workflow_tool_with_map_input(lab: Runtime) -> None:
    async def echo(input: Any, ctx: Any) -> Any:
        return {"got": input}

    tool = lab.tool_from_workflow(
        lab.create_workflow("echo", echo),
        description="Echo",
        input_schema=ResearchArgs,
        map_input=lambda args, info: {"q": args.query, "in_workflow": info.ctx is not None},
    )
    client = scripted(
        {"tool_use": [{"name": "echo", "input": {"thread_id": "t", "query": "hi"}}]},
        {"text": "ok"},
    )
    await lab.create_agent(id="a", model=client, tools=[tool]).run(user="x").result
    assert json.loads(tool_results(client.calls[1])[0]["output"]) == {
        "got": {"q": "hi", "in_workflow": False}
    }


async def test_an_agent_as_a_workflow_takes_a_user_message(lab: Runtime) -> None:
    client = scripted({"text": "CRISPR is a gene-editing tool."})
    researcher = lab.create_agent(id="researcher", model=client)
    ask = lab.workflow_from_agent(researcher, id="ask-researcher")
    handle = ask.run("What is CRISPR?")
    assert await handle.result == "CRISPR is a gene-editing tool."
    steps = await lab.workflow_store.list_steps(handle.workflow_run_id)
    assert [(s.step_id, s.output) for s in steps] == [
        ("researcher", "CRISPR is a gene-editing tool.")
    ]
    scope = f"{handle.workflow_run_id}:researcher"
    assert texts(await lab.message_store.load(scope))[0] == ("user", "What is CRISPR?")
    runs = await lab.run_store.list_runs(kind="agent")
    assert (runs[0].workflow_run_id, runs[0].step_id) == (handle.workflow_run_id, "researcher")
    # A resumed run does not ask again: the step is journaled.
    again = ask.run(workflow_run_id=handle.workflow_run_id)
    assert await again.result == "CRISPR is a gene-editing tool."
    assert len(client.calls) == 1


async def test_an_agent_whose_id_has_separators_works_as_a_workflow(lab: Runtime) -> None:
    researcher = lab.create_agent(id="team/researcher#1", model=scripted({"text": "ok"}))
    handle = lab.workflow_from_agent(researcher, id="ask").run("q")
    assert await handle.result == "ok"
    [step] = await lab.workflow_store.list_steps(handle.workflow_run_id)
    assert step.step_id == "team%2Fresearcher%231"


async def test_an_agent_workflow_returns_structured_output_as_json(lab: Runtime) -> None:
    researcher = lab.create_agent(
        id="researcher", model=scripted({"text": '{"summary": "S"}'}), output_schema=Summary
    )
    ask = lab.workflow_from_agent(researcher, id="ask")
    assert await ask.run("q").result == {"summary": "S"}
