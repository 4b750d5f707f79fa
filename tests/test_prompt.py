from __future__ import annotations

from typing import Any

import pytest

from tether import RunContext, Session, ToolDefinitionError, create_agent, prompt_layer
from tether.testing import collect, script_client


async def test_static_layers_come_first_with_cache_control_on_the_last_cached_one() -> None:
    turn = {"n": 0}

    def context() -> str:
        turn["n"] += 1
        return f"turn {turn['n']}"

    client = script_client([{"text": "a"}, {"text": "b"}])
    agent = create_agent(
        llm=client,
        prompt=[
            prompt_layer("identity", "You are X.", cache=True),
            prompt_layer("context", context),
            prompt_layer("rules", "Be brief.", cache=True),
            prompt_layer("style", "No emoji."),
        ],
    )
    session = Session()
    await collect(agent, session, "one")
    await collect(agent, session, "two")
    assert client.calls[0]["system"] == [
        {"type": "text", "text": "You are X."},
        {"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": "No emoji."},
        {"type": "text", "text": "turn 1"},
    ]
    # dynamic layers are evaluated every turn and never cached
    assert client.calls[1]["system"][3] == {"type": "text", "text": "turn 2"}


async def test_dynamic_layers_may_be_async_and_take_the_context() -> None:
    async def who(ctx: RunContext) -> str:
        return f"session {ctx.session_id}; tenant {ctx.services['tenant']}"

    client = script_client([{"text": "a"}])
    agent = create_agent(llm=client, prompt=[prompt_layer("who", who)], services={"tenant": "acme"})
    await collect(agent, Session(id="s7"), "hi")
    assert client.calls[0]["system"] == [{"type": "text", "text": "session s7; tenant acme"}]


def test_a_dynamic_layer_cannot_be_cached() -> None:
    with pytest.raises(ToolDefinitionError, match="cannot be cached"):
        prompt_layer("now", lambda: "x", cache=True)


async def test_no_layer_is_cached_when_none_asks() -> None:
    client = script_client([{"text": "a"}])
    agent = create_agent(llm=client, prompt=["one", "two"])
    await collect(agent, Session(), "hi")
    system: list[Any] = client.calls[0]["system"]
    assert all("cache_control" not in block for block in system)


def test_joined_string_for_providers_without_blocks() -> None:
    from tether.llm.base import joined

    assert (
        joined(
            [
                {"type": "text", "text": "a"},
                {"type": "text", "text": "b", "cache_control": {"type": "ephemeral"}},
            ]
        )
        == "a\n\nb"
    )


async def test_dynamic_layers_are_evaluated_once_per_turn_not_per_round() -> None:
    from tether import define_tool

    calls = {"n": 0}

    def context() -> str:
        calls["n"] += 1
        return f"evaluation {calls['n']}"

    client = script_client(
        [
            {"tool_use": [{"name": "noop", "input": {}}]},
            {"tool_use": [{"name": "noop", "input": {}}]},
            {"text": "done"},
            {"text": "next turn"},
        ]
    )
    agent = create_agent(
        llm=client,
        prompt=[prompt_layer("context", context)],
        tools=[define_tool(name="noop", execute=lambda i: "ok")],
    )
    session = Session()
    await collect(agent, session, "three rounds")
    assert calls["n"] == 1
    assert [c["system"] for c in client.calls[:3]] == [
        [{"type": "text", "text": "evaluation 1"}]
    ] * 3
    await collect(agent, session, "again")
    assert client.calls[3]["system"] == [{"type": "text", "text": "evaluation 2"}]


async def test_a_layer_keeps_its_name_and_a_dynamic_one_must_return_text() -> None:
    layer = prompt_layer("count", lambda: 3)  # type: ignore[arg-type, return-value]
    assert (layer.name, layer.is_static, layer.cache) == ("count", False, False)
    with pytest.raises(TypeError) as info:
        await layer.render(RunContext(session_id="s"))
    assert str(info.value) == "prompt layer 'count' returned int, not str"


async def test_the_first_layer_alone_may_carry_the_cache_mark() -> None:
    client = script_client([{"text": "a"}])
    agent = create_agent(
        llm=client, prompt=[prompt_layer("identity", "You are X.", cache=True), "Be brief."]
    )
    await collect(agent, Session(), "hi")
    assert client.calls[0]["system"] == [
        {"type": "text", "text": "You are X.", "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": "Be brief."},
    ]
