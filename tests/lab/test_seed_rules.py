"""Seed 002 rules the first lab got wrong: the text of a loop that `stop_when` ended on a tool
call, titles after the first *successful* episode, another agent's unrenderable template on a
pinned scope, and one `done` per turn with a structured-output follow-up."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pydantic
import pytest

from tether import RoundResult, define_tool, has_tool_call, step_count_is
from tether.errors import LLMError, NoObjectGeneratedError, TemplateError
from tether.lab import Runtime

from .conftest import run_events, scripted
from .test_titles import conversation_title

NOOP = define_tool(name="noop", execute=lambda args: "ok")
DONE = define_tool(name="done", execute=lambda args: "finished")


def call(name: str, text: str) -> dict[str, Any]:
    return {"text": text, "tool_use": [{"name": name, "input": {}}]}


def says_answer(steps: Sequence[RoundResult]) -> bool:
    return any("ANSWER:" in step.text for step in steps)


@pytest.mark.parametrize(
    ("stop_when", "turns", "text"),
    [
        (has_tool_call("done"), 2, "ANSWER: 42, wrapping up"),
        (step_count_is(1), 1, "thinking about it"),
        (says_answer, 2, "ANSWER: 42, wrapping up"),
    ],
    ids=["has_tool_call", "step_count_is", "a callable over the steps"],
)
async def test_stop_when_on_a_tool_call_gives_the_last_steps_text(
    lab: Runtime, stop_when: Any, turns: int, text: str
) -> None:
    client = scripted(
        call("noop", "thinking about it"),
        call("done", "ANSWER: 42, wrapping up"),
        {"text": "never asked"},
    )
    agent = lab.create_agent(id="a", model=client, tools=[NOOP, DONE], stop_when=stop_when)
    handle = agent.stream(user="q")
    events = [e async for e in handle.full_stream]
    result = await handle.result
    assert (result.turns, result.text, result.output) == (turns, text, text)
    finished = [e for e in await run_events(lab, result.run_id) if e["type"] == "agent_finished"]
    assert finished[0]["data"]["text"] == text
    assert [e["type"] for e in events].count("done") == 1


async def test_a_title_starts_after_the_first_successful_episode_not_the_first_one(
    lab: Runtime,
) -> None:
    namer = scripted({"text": '{"title": "Recovered"}'}, {"text": '{"title": "Again"}'})
    client = scripted(
        call("noop", "step one"),
        {"error": LLMError("the provider is down", provider="script")},
        {"text": "second try works"},
        {"text": "a follow-up"},
    )
    agent = lab.create_agent(
        id="a", model=client, tools=[NOOP], title_workflow=conversation_title(lab, namer)
    )
    failed = agent.run(memory_scope="s", user="first")
    with pytest.raises(LLMError):
        await failed.result
    assert len(await lab.message_store.load("s")) == 3  # the failed episode stored a step
    await lab.wait_idle()
    assert namer.calls == []  # a failed episode is no success
    await agent.run(memory_scope="s", user="again").result
    await lab.wait_idle()
    assert await lab.message_store.get_title("s") == "Recovered"
    await agent.run(memory_scope="s", user="more").result
    await lab.wait_idle()
    assert len(namer.calls) == 1  # once per scope


async def test_a_failed_title_stays_absent_and_is_never_retried(lab: Runtime) -> None:
    namer = scripted({"text": "not JSON"}, {"text": '{"title": "Late"}'})
    client = scripted({"text": "one"}, {"text": "two"})
    agent = lab.create_agent(id="a", model=client, title_workflow=conversation_title(lab, namer))
    first = await agent.run(memory_scope="s", user="x").result
    await lab.wait_idle()
    warnings = [e for e in await run_events(lab, first.run_id) if e["type"] == "agent_warning"]
    assert warnings[0]["data"]["code"] == "title_failed"
    await agent.run(memory_scope="s", user="y").result
    await lab.wait_idle()
    assert await lab.message_store.get_title("s") is None
    assert len(namer.calls) == 1


async def test_an_unrenderable_template_on_a_scope_pinned_by_another_agent_runs_with_a_warning(
    lab: Runtime,
) -> None:
    client = scripted({"text": "1"}, {"text": "2"})
    writer = lab.create_agent(id="writer", model=client, system_prompt="You write.")
    editor = lab.create_agent(
        id="editor",
        model=client,
        system_prompt=lab.create_template(source="You edit for {{ audience }}."),
    )
    await writer.run(memory_scope="notes", user="draft").result
    result = await editor.run(memory_scope="notes", user="tighten").result
    assert result.text == "2"
    assert [b["text"] for b in client.calls[1]["system"]] == ["You write."]
    warnings = [
        e["data"] for e in await run_events(lab, result.run_id) if e["type"] == "agent_warning"
    ]
    assert [(w["code"], w["template"], w["variable"]) for w in warnings] == [
        ("template_unrendered", "<string>", "audience")
    ]
    assert "'audience' is undefined" in warnings[0]["message"]
    # Asked to use its own prompt, it cannot: that fails before anything is stored.
    with pytest.raises(TemplateError):
        await editor.run(
            memory_scope="notes", user="again", system_prompt_conflict="use-current"
        ).result
    assert len(await lab.message_store.load("notes")) == 5


class Answer(pydantic.BaseModel):
    value: int


async def test_a_structured_output_follow_up_is_one_turn_with_one_done(lab: Runtime) -> None:
    client = scripted(
        call("noop", "let me check"),
        {"text": "the value is 7"},
        {"text": '{"value": 7}'},
    )
    agent = lab.create_agent(id="a", model=client, tools=[NOOP], output_schema=Answer)
    handle = agent.stream(user="value?")
    events = [e async for e in handle.full_stream]
    result = await handle.result
    assert result.output == Answer(value=7) and result.turns == 3
    dones = [e for e in events if e["type"] == "done"]
    assert len(dones) == 1
    assert dones[0]["text"] == '{"value": 7}'
    assert dones[0]["usage"] == result.usage  # the turn's usage: every request of it
    assert events[-1] is dones[0]


async def test_a_structured_answer_stopped_on_a_tool_call_still_has_one_done(
    lab: Runtime,
) -> None:
    client = scripted(call("done", "stopping"))
    agent = lab.create_agent(
        id="a", model=client, tools=[DONE], output_schema=Answer, stop_when=has_tool_call("done")
    )
    handle = agent.stream(user="value?")
    events = [e async for e in handle.full_stream]
    with pytest.raises(NoObjectGeneratedError):
        await handle.result
    assert [e["type"] for e in events].count("done") == 1
