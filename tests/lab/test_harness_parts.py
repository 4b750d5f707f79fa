"""A lab agent is a harness agent with an id and a memory binding: every harness part works in
an episode under the harness's own name (prompt layers static and dynamic with cache
placement, tools as a list or a dict, resources, MCP integrations, guardrails, services,
tracing, on_tool_call, max_tool_rounds), and the scope pins only the static layers' text."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pydantic
import pytest
from tests.helpers import user

from tether import (
    RunContext,
    TraceRecord,
    define_guardrail,
    define_resource,
    define_tool,
    has_tool_call,
    prompt_layer,
)
from tether.lab import Runtime
from tether.mcp import mcp_server
from tether.testing import TestMcpServer, create_test_mcp_server

from .conftest import event_types, run_events, scripted


def call(name: str, input: dict[str, Any] | None = None, text: str = "") -> dict[str, Any]:
    turn: dict[str, Any] = {"tool_use": [{"name": name, "input": input or {}}]}
    if text:
        turn["text"] = text
    return turn


def system_blocks(request: Any) -> list[dict[str, Any]]:
    return [dict(b) for b in request["system"]]


@pytest.fixture
async def mcp() -> AsyncIterator[TestMcpServer]:
    server = create_test_mcp_server(
        tools=[
            {
                "name": "add",
                "description": "Add two integers",
                "input_schema": {
                    "type": "object",
                    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                    "required": ["a", "b"],
                },
                "run": lambda args: str(args["a"] + args["b"]),
            }
        ],
        resources=[{"name": "style-guide", "uri": "mem://style", "text": "Be brief."}],
    )
    yield server
    await server.aclose()


async def test_static_layers_are_pinned_and_dynamic_layers_and_resources_follow_every_turn(
    lab: Runtime,
) -> None:
    ticks = iter(["tick 1", "tick 2"])
    client = scripted({"text": "one"}, {"text": "two"})
    agent = lab.create_agent(
        id="a",
        model=client,
        prompt=[  # the alias of system_prompt=
            prompt_layer("identity", "You are the copilot.", cache=True),
            prompt_layer("clock", lambda: next(ticks)),
            "Answer in English.",
        ],
        resources=[define_resource(name="notes", mode="attach", get=lambda: "n1")],
    )
    await agent.run(memory_scope="s", user="q1").result
    await agent.run(memory_scope="s", user="q2").result
    stored = await lab.message_store.load("s")
    # The pin is the static layers' text, one part per layer; nothing dynamic is stored.
    assert stored[0] == {
        "role": "system",
        "content": [
            {"type": "text", "text": "You are the copilot."},
            {"type": "text", "text": "Answer in English."},
        ],
        "agent_id": "a",
    }
    assert all(m["role"] != "system" for m in stored[1:])
    for request, tick in zip(client.calls, ["tick 1", "tick 2"], strict=True):
        blocks = system_blocks(request)
        assert [b["text"] for b in blocks[:3]] == [
            "You are the copilot.",
            "Answer in English.",
            tick,
        ]
        assert "n1" in blocks[3]["text"] and "<resource" in blocks[3]["text"]
        # The pinned prompt is one stable prefix: cached whole, the cache mark on its end.
        assert [("cache_control" in b) for b in blocks] == [False, True, False, False]


async def test_a_dynamic_layer_is_not_compared_for_conflicts(
    lab: Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    client = scripted({"text": "1"}, {"text": "2"})
    a = lab.create_agent(id="a", model=client, system_prompt="Shared.")
    b = lab.create_agent(
        id="b",
        model=client,
        system_prompt=["Shared.", prompt_layer("now", lambda ctx: f"scope {ctx.session_id}")],
    )
    await a.run(memory_scope="s", user="x").result
    second = await b.run(memory_scope="s", user="y").result
    assert "agent_warning" not in await event_types(lab, second.run_id)
    assert [bl["text"] for bl in system_blocks(client.calls[1])] == ["Shared.", "scope s"]


async def test_tools_as_a_dict_are_named_by_their_keys(lab: Runtime) -> None:
    client = scripted(call("lookup", {"q": "x"}), {"text": "done"})
    search = define_tool(name="search", execute=lambda args: "found")
    agent = lab.create_agent(id="a", model=client, tools={"lookup": search})
    result = await agent.run(user="find").result
    assert [t["name"] for t in client.calls[0]["tools"]] == ["lookup"]
    assert result.steps[0].tool_results[0]["output"] == "found"


async def test_mcp_tools_guardrails_services_and_tracing_run_in_an_episode(
    lab: Runtime, mcp: TestMcpServer
) -> None:
    records: list[TraceRecord] = []
    seen: list[Any] = []

    def no_big_sums(subject: Any) -> Any:
        if subject["input"].get("a", 0) > 100:
            return {"action": "deny", "reason": "too big"}
        return None

    def whoami(args: Any, ctx: RunContext) -> str:
        seen.append((ctx.services["db"], ctx.services["cache"]))
        return "me"

    client = scripted(
        {"tool_use": [{"name": "m_add", "input": {"a": 1, "b": 2}}]},
        {"tool_use": [{"name": "m_add", "input": {"a": 500, "b": 2}}]},
        call("whoami"),
        {"text": "3 and no"},
    )
    agent = lab.create_agent(
        id="a",
        model=client,
        tools=[define_tool(name="whoami", execute=whoami)],
        integrations=[mcp_server(mcp.url, transport=mcp, prefix="m_", attach=["style-guide"])],
        guardrails=[define_guardrail(name="limits", tool_call=no_big_sums)],
        services={"db": "agent-db", "cache": "agent-cache"},
        trace=records.append,
    )
    handle = agent.stream(memory_scope="s", user="add", services={"db": "run-db"})
    events = [e async for e in handle.full_stream]
    result = await handle.result
    assert result.text == "3 and no"
    outputs = [r["output"] for s in result.steps for r in s.tool_results]
    assert outputs[0] == "3"
    assert "Guardrail limits denied" in outputs[1]
    assert seen == [("run-db", "agent-cache")]  # the run's services merge over the agent's
    assert any(e["type"] == "guardrail" and e["name"] == "limits" for e in events)
    assert "Be brief." in system_blocks(client.calls[0])[-1]["text"]  # attached MCP resource
    assert "m_add" in [t["name"] for t in client.calls[0]["tools"]]
    phases = {r["phase"] for r in records}
    assert {"prompt", "request", "response", "tool", "guardrail", "usage"} <= phases
    assert {r["session_id"] for r in records} == {"s"}  # the trace names the conversation
    (report,) = await agent.connect()  # what the UI's agent page lists
    assert report["tools"] == ["m_add"]
    assert report["resources"] == [{"name": "style-guide", "uri": "mem://style", "mode": "attach"}]


async def test_on_tool_call_decides_before_the_tool_runs(lab: Runtime) -> None:
    client = scripted(call("rm"), {"text": "ok"})
    agent = lab.create_agent(
        id="a",
        model=client,
        tools=[define_tool(name="rm", execute=lambda args: "deleted")],
        on_tool_call=lambda subject: {"action": "deny", "reason": "read-only"},
    )
    result = await agent.run(user="clean up").result
    assert "denied: read-only" in result.steps[0].tool_results[0]["output"]


async def test_tool_mode_resources_stay_beside_a_tool_provider(lab: Runtime) -> None:
    from tether.lab import tool_provider

    client = scripted(call("read_plan", {}), {"text": "ok"})
    agent = lab.create_agent(
        id="a",
        model=client,
        tools=tool_provider(lambda ctx: [define_tool(name="where", execute=lambda a: ctx)]),
        resources=[define_resource(name="plan", mode="tool", get=lambda: "the plan")],
    )
    result = await agent.run(user="x", tool_provider_context="here").result
    assert sorted(t["name"] for t in client.calls[0]["tools"]) == ["read_plan", "where"]
    assert result.steps[0].tool_results[0]["output"] == "the plan"


async def test_stop_when_governs_by_default_and_max_tool_rounds_caps_when_set(
    lab: Runtime,
) -> None:
    looping = scripted(*[call("noop")] * 30)
    tools = [define_tool(name="noop", execute=lambda args: "ok")]
    agent = lab.create_agent(id="a", model=looping, tools=tools)
    assert agent.max_tool_rounds is None
    result = await agent.run(user="go").result
    assert result.turns == 20  # step_count_is(20), not the harness's default of 8 rounds
    capped = lab.create_agent(
        id="b", model=scripted(*[call("noop")] * 5), tools=tools, max_tool_rounds=3
    )
    result = await capped.run(user="go").result
    assert (result.turns, result.stop_reason) == (3, "max_tool_rounds")
    first = lab.create_agent(
        id="c",
        model=scripted(call("noop"), call("done"), call("noop")),
        tools=[*tools, define_tool(name="done", execute=lambda args: "fin")],
        max_tool_rounds=5,
        stop_when=has_tool_call("done"),
    )
    assert (await first.run(user="go").result).turns == 2  # whichever comes first


async def test_the_pin_is_written_once_and_reused_with_the_same_layers(lab: Runtime) -> None:
    client = scripted({"text": "1"}, {"text": "2"})
    agent = lab.create_agent(id="a", model=client, system_prompt=["One.", "Two."])
    await agent.run(memory_scope="s", user="x").result
    await agent.run(memory_scope="s", user="y").result
    stored = await lab.message_store.load("s")
    assert [r["role"] for r in stored] == ["system", "user", "assistant", "user", "assistant"]
    assert stored[1] == user("x")
    assert [b["text"] for b in system_blocks(client.calls[1])] == ["One.", "Two."]
    assert stored[0]["content"] == [{"type": "text", "text": t} for t in ("One.", "Two.")]


async def test_an_mcp_tool_run_is_recorded_like_any_other(lab: Runtime, mcp: TestMcpServer) -> None:
    client = scripted({"tool_use": [{"name": "add", "input": {"a": 2, "b": 2}}]}, {"text": "4"})
    agent = lab.create_agent(
        id="a", model=client, integrations=[mcp_server(mcp.url, transport=mcp)]
    )
    result = await agent.run(user="2+2").result
    events = await run_events(lab, result.run_id)
    calls = [e["data"] for e in events if e["type"] == "agent_tool_result"]
    assert isinstance(calls[0].pop("started_at"), float)
    assert calls == [{"id": calls[0]["id"], "name": "add", "output": "4", "is_error": False}]
    await agent.aclose()


async def test_settings_reach_the_request_run_over_agent_over_runtime_defaults() -> None:
    client = scripted({"text": "1"}, {"text": "2"}, {"text": "3"})
    lab = Runtime(
        store="memory",
        version=False,
        defaults={"model": client, "settings": {"temperature": 0.1, "max_tokens": 50}},
    )
    plain = lab.create_agent(id="plain")
    tuned = lab.create_agent(id="tuned", settings={"temperature": 0.7, "seed": 3})
    await plain.run(user="a").result
    await tuned.run(user="b").result
    await tuned.run(user="c", settings={"seed": 9, "top_p": 0.5}).result
    assert [c.get("settings") for c in client.calls] == [
        {"temperature": 0.1, "max_tokens": 50},
        {"temperature": 0.7, "max_tokens": 50, "seed": 3},
        {"temperature": 0.7, "max_tokens": 50, "seed": 9, "top_p": 0.5},
    ]
    await lab.aclose()


async def test_no_settings_means_no_settings_key_on_the_request(lab: Runtime) -> None:
    client = scripted({"text": "1"})
    await lab.create_agent(id="a", model=client).run(user="x").result
    assert "settings" not in client.calls[0]


class Forecast(pydantic.BaseModel):
    city: str
    sky: str


async def test_stream_surfaces_partial_output_while_a_structured_answer_streams(
    lab: Runtime,
) -> None:
    client = scripted({"text": ['{"city": "Os', 'lo", "sky"', ': "clear"}']})
    agent = lab.create_agent(id="a", model=client, output_schema=Forecast)
    handle = agent.stream(user="weather?")
    partials = [e["output"] async for e in handle.full_stream if e["type"] == "partial_output"]
    result = await handle.result
    assert partials[0] == {"city": "Os"}
    assert partials[-1] == {"city": "Oslo", "sky": "clear"}
    assert result.output == Forecast(city="Oslo", sky="clear")
    # Render-only: nothing of them is stored.
    stored = await lab.message_store.load(result.memory_scope)
    assert stored[-1]["content"] == [{"type": "text", "text": '{"city": "Oslo", "sky": "clear"}'}]


async def test_the_follow_up_after_a_tool_loop_streams_partial_output_and_calls_no_mcp_tool(
    lab: Runtime, mcp: TestMcpServer
) -> None:
    client = scripted(
        {"tool_use": [{"name": "add", "input": {"a": 1, "b": 1}}]},
        {"text": "It is 2."},
        {"text": ['{"city": "Two", ', '"sky": "n/a"}']},
    )
    agent = lab.create_agent(
        id="a",
        model=client,
        integrations=[mcp_server(mcp.url, transport=mcp)],
        output_schema=Forecast,
        settings={"temperature": 0.3},
    )
    handle = agent.stream(user="1+1?")
    events = [e async for e in handle.full_stream]
    result = await handle.result
    assert result.output == Forecast(city="Two", sky="n/a")
    assert [e["output"] for e in events if e["type"] == "partial_output"][-1] == {
        "city": "Two",
        "sky": "n/a",
    }
    follow_up = client.calls[2]
    assert follow_up["response_format"]["name"] == "Forecast"
    # No tools at all (the MCP server's neither), so no tool_choice either.
    assert "add" in [t["name"] for t in client.calls[0]["tools"]]
    assert "tools" not in follow_up
    assert follow_up["settings"] == {"temperature": 0.3}
    assert "response_format" not in client.calls[0]
    await agent.aclose()


async def test_long_tool_results_are_cut_at_max_tool_result_chars(lab: Runtime) -> None:
    client = scripted(call("big"), {"text": "ok"})
    agent = lab.create_agent(
        id="a",
        model=client,
        tools=[define_tool(name="big", execute=lambda args: "x" * 500)],
        max_tool_result_chars=100,
    )
    result = await agent.run(user="go").result
    output = result.steps[0].tool_results[0]["output"]
    assert output.startswith("x" * 100) and len(output) < 500
