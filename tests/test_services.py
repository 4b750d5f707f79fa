from __future__ import annotations

from typing import Any

from tether import (
    RunContext,
    Session,
    create_agent,
    define_guardrail,
    define_resource,
    define_tool,
    prompt_layer,
)
from tether.testing import collect, script_client


class Store:
    """A dependency a tool uses: what `services` is for."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"Store({self.name})"


def capture_tool(seen: dict[str, Any]) -> Any:
    def execute(value: Any, ctx: RunContext) -> str:
        seen["input"] = value
        seen["services"] = dict(ctx.services)
        return "ok"

    return define_tool(name="use_store", execute=execute)


def one_tool_call() -> Any:
    return script_client(
        [{"tool_use": [{"name": "use_store", "input": {"q": "x"}}]}, {"text": "done"}]
    )


async def test_agent_services_reach_tools_as_ctx_services() -> None:
    store = Store("primary")
    seen: dict[str, Any] = {}
    agent = create_agent(llm=one_tool_call(), tools=[capture_tool(seen)], services={"store": store})
    await collect(agent, Session(), "go")
    assert seen["services"] == {"store": store}
    assert seen["services"]["store"] is store


async def test_per_run_services_reach_tools_without_agent_services() -> None:
    seen: dict[str, Any] = {}
    agent = create_agent(llm=one_tool_call(), tools=[capture_tool(seen)])
    await collect(agent, Session(), "go", services={"store": Store("turn")})
    assert list(seen["services"]) == ["store"]
    assert seen["services"]["store"].name == "turn"


async def test_agent_and_per_run_services_merge_key_by_key_and_per_run_wins() -> None:
    seen: dict[str, Any] = {}
    agent_level = {"store": Store("agent"), "clock": "agent-clock"}
    agent = create_agent(llm=one_tool_call(), tools=[capture_tool(seen)], services=agent_level)
    per_run = {"store": Store("turn"), "adapter": "turn-adapter"}
    await collect(agent, Session(), "go", services=per_run)
    assert seen["services"] == {
        "store": per_run["store"],
        "clock": "agent-clock",
        "adapter": "turn-adapter",
    }
    # neither side was changed by the merge, and the next turn is back to the agent's own
    assert agent.services == agent_level
    assert per_run == {"store": per_run["store"], "adapter": "turn-adapter"}
    agent.client = one_tool_call()
    await collect(agent, Session(), "again")
    assert seen["services"] == agent_level


async def test_the_input_stays_the_subject_and_services_never_reach_the_model() -> None:
    seen: dict[str, Any] = {}
    client = one_tool_call()
    agent = create_agent(llm=client, tools=[capture_tool(seen)], services={"store": Store("s")})
    await collect(agent, Session(), "go", services={"token": "s3cr3t"})
    assert seen["input"] == {"q": "x"}
    assert "s3cr3t" not in repr(client.calls)
    assert "Store(s)" not in repr(client.calls)


async def test_services_reach_resources_in_attach_and_tool_mode() -> None:
    got: dict[str, Any] = {}

    def attached(value: Any, ctx: RunContext) -> str:
        got["attach"] = dict(ctx.services)
        return "attached body"

    def read(value: Any, ctx: RunContext) -> str:
        got["tool"] = dict(ctx.services)
        return "section body"

    client = script_client(
        [{"tool_use": [{"name": "read_plan", "input": {"section": "a"}}]}, {"text": "done"}]
    )
    agent = create_agent(
        llm=client,
        resources=[
            define_resource(name="summary", mode="attach", get=attached),
            define_resource(
                name="plan",
                mode="tool",
                get=read,
                input_schema={"type": "object", "properties": {"section": {"type": "string"}}},
            ),
        ],
        services={"db": "agent-db", "cache": "agent-cache"},
    )
    await collect(agent, Session(), "go", services={"db": "turn-db"})
    expected = {"db": "turn-db", "cache": "agent-cache"}
    assert got == {"attach": expected, "tool": expected}


async def test_services_reach_guardrails_on_both_attach_points() -> None:
    got: dict[str, Any] = {}

    def on_call(call: Any, ctx: RunContext) -> Any:
        got["tool_call"] = dict(ctx.services)
        tenant = ctx.services["tenant"]
        return {"action": "rewrite", "input": {**call["input"], "tenant": tenant}}

    def on_output(text: str, ctx: RunContext) -> Any:
        got["output"] = dict(ctx.services)
        return None

    seen: dict[str, Any] = {}
    agent = create_agent(
        llm=one_tool_call(),
        tools=[capture_tool(seen)],
        services={"tenant": "t-agent"},
        guardrails=[define_guardrail(name="scope", tool_call=on_call, output=on_output)],
    )
    await collect(agent, Session(), "go", services={"tenant": "t-run"})
    assert got == {"tool_call": {"tenant": "t-run"}, "output": {"tenant": "t-run"}}
    assert seen["input"] == {"q": "x", "tenant": "t-run"}


async def test_services_reach_prompt_layers() -> None:
    def greeting(ctx: RunContext) -> str:
        return f"Locale: {ctx.services['locale']}"

    client = script_client([{"text": "hej"}])
    agent = create_agent(
        llm=client,
        prompt=[prompt_layer("identity", "You are terse."), prompt_layer("locale", greeting)],
        services={"locale": "en"},
    )
    await collect(agent, Session(), "hi", services={"locale": "sv"})
    assert [b["text"] for b in client.calls[0]["system"]] == ["You are terse.", "Locale: sv"]


async def test_services_ride_a_framed_client_message_turn() -> None:
    seen: dict[str, Any] = {}
    agent = create_agent(
        llm=one_tool_call(), tools=[capture_tool(seen)], services={"store": "agent"}
    )
    msg: Any = {"kind": "surface_action", "surface_id": "sf_1", "action": "submit", "context": {}}
    events = [
        e async for e in agent.send_client_message(Session(), msg, services={"store": "turn"})
    ]
    assert events[-1]["type"] == "done"
    assert seen["services"] == {"store": "turn"}
