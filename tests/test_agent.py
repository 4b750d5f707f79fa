"""The one agent API: typed parameters, one name per concept (and its alias), model settings,
the one-call path, and the prepared turn."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tether import (
    Agent,
    ConfigError,
    ModelSettingError,
    PromptLayer,
    RoundResult,
    Session,
    TurnResult,
    create_agent,
    define_tool,
    prompt_layer,
    reduce,
    step_count_is,
)
from tether.llm.openai_chat import OpenAIChatClient
from tether.testing import script_client
from tether.turn import TurnOptions, TurnPlan

ECHO = define_tool(name="echo", execute=lambda i: "echoed")


def calls_echo(n: int) -> list[dict[str, Any]]:
    return [{"tool_use": [{"name": "echo", "input": {}}]} for _ in range(n)] + [{"text": "end"}]


# -- one name per concept ----------------------------------------------------------------


def test_model_takes_a_provider_model_string_and_llm_is_its_alias(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    agent = create_agent(model="openai:gpt-4o")
    assert isinstance(agent.client, OpenAIChatClient) and agent.client.model == "gpt-4o"
    same = create_agent(llm="openai:gpt-4o")
    assert isinstance(same.client, OpenAIChatClient)
    configured = create_agent(model={"model": "openai:gpt-4o", "base_url": "http://x/v1"})
    assert isinstance(configured.client, OpenAIChatClient)
    client = script_client([])
    assert create_agent(model=client).client is client


def test_giving_an_alias_and_its_name_together_is_a_config_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with pytest.raises(ConfigError, match=r"llm= is another name for model="):
        create_agent(model="openai:gpt-4o", llm="openai:gpt-4o")
    with pytest.raises(ConfigError, match=r"prompt= is another name for system_prompt="):
        create_agent(model=script_client([]), system_prompt="a", prompt="b")


def test_no_model_says_how_to_give_one() -> None:
    with pytest.raises(ConfigError, match=r"needs model="):
        create_agent()


def test_a_bare_string_system_prompt_is_one_layer() -> None:
    client = script_client([{"text": "ok"}])
    agent = create_agent(model=client, system_prompt="You are nice")
    assert len(agent.system_prompt) == 1 and isinstance(agent.system_prompt[0], PromptLayer)
    asyncio.run(agent.run_turn(agent.create_session(), "hi"))
    assert client.calls[0]["system"] == [{"type": "text", "text": "You are nice"}]
    # the seed's spelling is the same thing
    legacy = create_agent(llm=script_client([]), prompt="You are nice")
    assert [layer.source for layer in legacy.system_prompt] == ["You are nice"]
    layered = create_agent(
        model=script_client([]), system_prompt=[prompt_layer("a", "A", cache=True), "B"]
    )
    assert [layer.source for layer in layered.system_prompt] == ["A", "B"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"model": 3}, r"model= takes a 'provider:model' string.*; got int 3"),
        ({"system_prompt": 7}, r"system_prompt= takes a string, a PromptLayer.*; got int 7"),
        ({"system_prompt": ["ok", 1]}, r"system_prompt\[1\] must be a string or a PromptLayer"),
        ({"tools": "echo"}, r"tools= takes a list of a Tool.*; got str 'echo'"),
        ({"tools": [ECHO, "x"]}, r"tools\[1\] must be a Tool"),
        ({"max_tool_rounds": 0}, r"max_tool_rounds= takes an integer >= 1, or None.*; got int 0"),
        ({"max_tool_rounds": "3"}, r"max_tool_rounds= takes an integer >= 1"),
        ({"max_tool_result_chars": -1}, r"max_tool_result_chars= takes an integer >= 1"),
        ({"settings": {"temprature": 0.1}}, r"unknown setting 'temprature'"),
        ({"settings": {"temperature": "hot"}}, r"settings\['temperature'\] takes a number"),
        ({"settings": {"reasoning": {"effort": "max"}}}, r"settings\['reasoning'\] takes"),
        ({"settings": [("temperature", 1)]}, r"settings= takes a dict of model settings"),
        ({"stop_when": 5}, r"stop_when= takes a stop condition"),
        ({"services": ["db"]}, r"services= takes a dict"),
        ({"guardrails": [lambda c: None]}, r"guardrails\[0\] must be a Guardrail"),
        ({"workflows": [object()]}, r"workflows\[0\] must be a workflow"),
        ({"trace": "yes"}, r"trace= takes True, False or a sink function"),
    ],
)
def test_a_wrong_type_names_the_parameter_what_it_got_and_what_it_takes(
    kwargs: dict[str, Any], message: str
) -> None:
    config: dict[str, Any] = {"model": script_client([]), **kwargs}
    with pytest.raises(ConfigError, match=message):
        create_agent(**config)


def test_a_misspelt_parameter_is_a_type_error_at_run_time_and_for_mypy(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="max_tool_round"):
        create_agent(model=script_client([]), max_tool_round=3)  # type: ignore[call-arg]
    user = tmp_path / "user_code.py"
    user.write_text(
        textwrap.dedent(
            """
            from tether import create_agent

            agent = create_agent(model="openai:gpt-4o", max_tool_round=3)
            """
        )
    )
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(user)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert 'Unexpected keyword argument "max_tool_round"' in result.stdout


# -- model settings ----------------------------------------------------------------------


def test_settings_reach_the_request_merged_key_by_key_the_run_winning() -> None:
    client = script_client([{"text": "a"}, {"text": "b"}, {"text": "c"}])
    agent = create_agent(
        model=client, settings={"temperature": 0.2, "max_tokens": 100, "stop": ["END"]}
    )
    session = agent.create_session()
    asyncio.run(agent.run_turn(session, "one"))
    asyncio.run(
        agent.run_turn(session, "two", settings={"max_tokens": 50, "reasoning": {"effort": "low"}})
    )
    assert client.calls[0]["settings"] == {"temperature": 0.2, "max_tokens": 100, "stop": ["END"]}
    assert client.calls[1]["settings"] == {
        "temperature": 0.2,
        "max_tokens": 50,
        "stop": ["END"],
        "reasoning": {"effort": "low"},
    }
    assert agent.settings == {"temperature": 0.2, "max_tokens": 100, "stop": ["END"]}
    bare = script_client([{"text": "a"}])
    asyncio.run(create_agent(model=bare).run_turn(Session(), "x"))
    assert "settings" not in bare.calls[0]  # absent when empty: the byte-identity baseline


def test_a_bad_run_setting_fails_before_anything_runs() -> None:
    client = script_client([{"text": "a"}])
    agent = create_agent(model=client)
    session = agent.create_session()
    with pytest.raises(ConfigError, match="unknown setting 'temp'"):
        agent.send(session, "x", settings={"temp": 1})  # type: ignore[arg-type]
    assert client.calls == [] and session.messages == []


def test_a_setting_the_provider_cannot_honour_is_refused_when_the_agent_is_defined(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    with pytest.raises(ModelSettingError, match="anthropic cannot honour the model setting 'seed'"):
        create_agent(model="anthropic:claude-sonnet-4-6", settings={"seed": 7})
    lookup = define_tool(
        name="lookup", description="d", input_schema={"type": "object"}, execute=lambda a: "x"
    )
    with pytest.raises(ModelSettingError, match=r"'nope'.*neither"):
        create_agent(
            model="anthropic:claude-sonnet-4-6", tools=[lookup], settings={"tool_choice": "nope"}
        )
    agent = create_agent(
        model="anthropic:claude-sonnet-4-6", tools=[lookup], settings={"tool_choice": "lookup"}
    )
    assert agent.settings == {"tool_choice": "lookup"}


# -- limits ------------------------------------------------------------------------------


def test_max_tool_rounds_none_lets_stop_when_govern() -> None:
    agent = create_agent(
        model=script_client(calls_echo(12)),
        tools=[ECHO],
        max_tool_rounds=None,
        stop_when=step_count_is(11),
    )
    result = agent.run_turn_sync(agent.create_session(), "go")
    assert len(result.rounds) == 11 and result.finish_reason == "tool_calls"


def test_the_loop_ends_at_whichever_bound_comes_first() -> None:
    agent = create_agent(
        model=script_client(calls_echo(5)),
        tools=[ECHO],
        max_tool_rounds=2,
        stop_when=step_count_is(4),
    )
    result = agent.run_turn_sync(agent.create_session(), "go")
    assert (result.stop_reason, result.finish_reason) == ("max_tool_rounds", "max_tool_rounds")
    assert len(result.rounds) == 2


async def test_one_turn_options_object_serves_two_turns() -> None:
    # Each turn counts its own rounds: the options are never written to, so the second turn's
    # step_count_is(2) does not see the first turn's rounds (nor a keyword given beside them).
    agent = create_agent(model=script_client(calls_echo(4)), tools=[ECHO], max_tool_rounds=None)
    options = TurnOptions(stop_when=step_count_is(2))

    def state() -> dict[str, object]:
        return {f.name: getattr(options, f.name) for f in dataclasses.fields(options)}

    before = state()
    for prompt in ("one", "two"):
        session = agent.create_session()
        events = [e async for e in agent.send(session, prompt, options=options, context="c")]
        assert [e["type"] for e in events].count("tool_result") == 2, prompt
    assert state() == before
    assert not hasattr(options, "rounds")


# -- the one-call path -------------------------------------------------------------------


async def test_run_turn_folds_the_turn_and_returns_its_outcome() -> None:
    agent = create_agent(
        model=script_client(
            [
                {"tool_use": [{"name": "echo", "input": {}}]},
                {"text": "done", "usage": {"input_tokens": 5, "output_tokens": 2}},
            ]
        ),
        tools=[ECHO],
    )
    session = agent.create_session()
    seen: list[str] = []
    result = await agent.run_turn(session, "hi", on_event=lambda e: seen.append(e["type"]))
    assert isinstance(result, TurnResult)
    assert result.session is session and result.text == "done"
    assert result.finish_reason == "stop" and result.stop_reason == "end_turn"
    assert result.usage == {"input_tokens": 6, "output_tokens": 3}
    assert [r.tool_calls[0]["name"] if r.tool_calls else None for r in result.rounds] == [
        "echo",
        None,
    ]
    assert [m["role"] for m in session.messages] == ["user", "assistant", "tool", "assistant"]
    assert seen == [e["type"] for e in result.events] and seen[-1] == "done"


async def test_run_turn_raises_the_error_of_an_error_event_after_folding() -> None:
    from tether.errors import LLMError

    agent = create_agent(model=script_client([{"error": LLMError("provider down")}]))
    session = agent.create_session()
    with pytest.raises(LLMError, match="provider down"):
        await agent.run_turn(session, "hi")
    assert [m["role"] for m in session.messages] == ["user"]


def test_run_turn_sync_from_plain_synchronous_code() -> None:
    agent = create_agent(model=script_client([{"text": "sync"}]))
    result = agent.run_turn_sync(agent.create_session(), "hi")
    assert result.text == "sync" and result.finish_reason == "stop"


async def test_run_turn_sync_inside_a_running_loop_runs_in_a_worker_thread() -> None:
    # A notebook cell: synchronous code while the notebook's loop is running.
    agent = create_agent(model=script_client([{"text": "from a thread"}]))
    session = agent.create_session()
    result = agent.run_turn_sync(session, "hi")
    assert result.text == "from a thread"
    assert session.messages[-1]["content"] == [{"type": "text", "text": "from a thread"}]


# -- the session as plain data -----------------------------------------------------------


async def test_a_session_is_plain_json_data_and_its_json_is_a_session() -> None:
    client = script_client([{"text": "first"}, {"text": "second"}])
    agent = create_agent(model=client)
    session = agent.create_session()
    await agent.run_turn(session, "one")
    restored = json.loads(json.dumps(session))
    assert restored == session and type(restored) is dict
    # send() and reduce() take the plain dict; reduce() updates the dict it is given
    async for event in agent.send(restored, "two"):
        assert reduce(restored, event) is restored
    assert [m["role"] for m in restored["messages"]] == ["user", "assistant"] * 2
    assert client.calls[1]["messages"][:2] == session.messages
    # the one-call path folds into the plain dict too
    again = await create_agent(model=script_client([{"text": "third"}])).run_turn(restored, "3")
    assert again.session is restored and len(restored["messages"]) == 6


async def test_a_plain_dict_that_is_not_a_session_is_refused_before_the_turn() -> None:
    from tether import SessionFormatError

    agent = create_agent(model=script_client([]))
    with pytest.raises(SessionFormatError, match=r"session\.messages"):
        agent.send({"id": "s", "messages": "nope"}, "hi")


# -- the prepared turn -------------------------------------------------------------------


def test_plan_turn_resolves_the_agent_and_the_run_once() -> None:
    def guard(call: Any) -> None:
        return None

    agent = create_agent(
        model=script_client([]),
        system_prompt=["static", prompt_layer("now", lambda: "dynamic")],
        tools=[ECHO],
        settings={"temperature": 0.5},
        services={"db": "agent-db", "cache": "c"},
        on_tool_call=guard,
        max_tool_rounds=3,
    )
    session = Session(memory={"k": "v"})
    plan = agent.plan_turn(
        session, TurnOptions(services={"db": "run-db"}, settings={"seed": 7}, max_tool_rounds=None)
    )
    assert isinstance(plan, TurnPlan)
    assert plan.client is agent.client
    assert plan.static == [{"type": "text", "text": "static"}]
    assert [layer.name for layer in plan.dynamic] == ["now"]
    assert plan.tool_guards == (("on_tool_call", guard),)
    assert plan.settings == {"temperature": 0.5, "seed": 7}
    assert plan.max_tool_rounds is None and plan.max_tool_result_chars == 100_000
    assert plan.ctx.services == {"db": "run-db", "cache": "c"}
    assert plan.ctx.session_id == session.id and plan.ctx.memory == {"k": "v"}
    with pytest.raises(TypeError):
        plan.ctx.memory["k"] = "w"  # type: ignore[index]  # read-only: reduce() is the writer
    with pytest.raises(AttributeError):
        plan.client = None  # type: ignore[misc, assignment]
    assert agent.plan_turn(session).max_tool_rounds == 3


def test_one_name_per_thing_no_aliases_nobody_asked_for() -> None:
    import tether

    agent = create_agent(model=script_client([]), prompt="p")
    assert Agent is type(agent)
    assert not hasattr(tether, "StepResult") and RoundResult.__name__ == "RoundResult"
    for gone in ("close", "prompt"):
        assert not hasattr(agent, gone), gone
    assert not hasattr(TurnOptions(), "steps")


# -- closing -----------------------------------------------------------------------------


class SpyClient:
    model = "spy"

    def __init__(self) -> None:
        self.closed = 0

    async def chat(self, request: Any) -> Any:
        yield {"type": "finish", "content": [], "stop_reason": "end_turn", "usage": {}}

    async def aclose(self) -> None:
        self.closed += 1


async def test_aclose_closes_the_client_the_agent_built_and_never_one_it_was_given(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import tether.agent

    built = SpyClient()
    monkeypatch.setattr(tether.agent, "client_from_config", lambda config: built)
    owned = create_agent(model="openai:gpt-4o")
    async with owned:
        await owned.run_turn(owned.create_session(), "hi")
    assert built.closed == 1
    await owned.aclose()  # the agent stays usable afterwards
    assert built.closed == 2
    given = SpyClient()
    agent = create_agent(model=given)
    await agent.aclose()
    async with agent:
        pass
    assert given.closed == 0


@pytest.mark.parametrize(("param", "shown"), [("model", "model="), ("llm", "llm=")])
def test_a_model_string_without_a_provider_names_the_parameter_written(
    param: str, shown: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        kwargs: dict[str, Any] = {param: "gpt-4o"}
        create_agent(**kwargs)
    assert str(caught.value).startswith(f"{shown} must be 'provider:model'")
