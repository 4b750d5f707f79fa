"""Structured output: response format without tools, the tool loop and its one follow-up with
tools, and what counts as an object."""

from __future__ import annotations

from typing import Any

import pydantic
import pytest
from tests.helpers import texts

from tether import define_tool, step_count_is
from tether.errors import ConfigError, NoObjectGeneratedError
from tether.lab import JSON_REQUEST, Runtime

from .conftest import scripted


class Summary(pydantic.BaseModel):
    summary: str


class Review(pydantic.BaseModel):
    verdict: str = "pending"
    score: int = 0


def search_tool() -> Any:
    return define_tool(
        name="search",
        description="Search for papers",
        input_schema={"type": "object", "properties": {"query": {"type": "string"}}},
        execute=lambda v: {"papers": ["CRISPR delivery review"]},
    )


async def test_without_tools_the_request_carries_the_response_format(lab: Runtime) -> None:
    client = scripted({"text": '{"summary": "Lipid nanoparticles lead."}'})
    agent = lab.create_agent(id="researcher", model=client, output_schema=Summary)
    result = await agent.run(user="Summarize").result
    assert result.output == Summary(summary="Lipid nanoparticles lead.")
    assert result.text == '{"summary": "Lipid nanoparticles lead."}'
    request = client.calls[0]
    assert request["response_format"]["name"] == "Summary"
    assert request["response_format"]["schema"]["required"] == ["summary"]
    assert "tools" not in request
    finished = [
        e for e in await lab.run_store.events(result.run_id) if e["type"] == "agent_finished"
    ]
    assert finished[0]["data"]["output"] == {"summary": "Lipid nanoparticles lead."}


async def test_without_tools_prose_fails_with_the_text_on_the_error_and_event(
    lab: Runtime,
) -> None:
    client = scripted({"text": "Sure! Lipid nanoparticles lead."})
    agent = lab.create_agent(id="researcher", model=client, output_schema=Summary)
    handle = agent.run(memory_scope="s", user="Summarize")
    with pytest.raises(NoObjectGeneratedError) as info:
        await handle.result
    assert info.value.text == "Sure! Lipid nanoparticles lead."
    failed = [e for e in await lab.run_store.events(handle.run_id) if e["type"] == "agent_failed"]
    assert failed[0]["data"]["text"] == "Sure! Lipid nanoparticles lead."
    assert failed[0]["data"]["error"]["type"] == "NoObjectGeneratedError"
    # No follow-up without tools: the one request already asked for JSON.
    assert len(client.calls) == 1
    # The completed step stays stored.
    assert texts(await lab.message_store.load("s"))[-1] == (
        "assistant",
        "Sure! Lipid nanoparticles lead.",
    )


async def test_with_tools_the_loop_runs_without_a_response_format(lab: Runtime) -> None:
    client = scripted(
        {"tool_use": [{"name": "search", "input": {"query": "CRISPR"}}]},
        {"text": '{"summary": "One review found."}'},
    )
    agent = lab.create_agent(
        id="researcher", model=client, tools=[search_tool()], output_schema=Summary
    )
    result = await agent.run(user="Summarize").result
    assert result.output == Summary(summary="One review found.")
    assert result.turns == 2
    assert all("response_format" not in c for c in client.calls)
    assert all("tools" in c for c in client.calls)


async def test_with_tools_prose_gets_one_follow_up_without_tools(lab: Runtime) -> None:
    client = scripted(
        {"tool_use": [{"name": "search", "input": {"query": "CRISPR"}}]},
        {"text": "I found one review about delivery."},
        {"text": '{"summary": "One review about delivery."}'},
    )
    agent = lab.create_agent(
        id="researcher",
        model=client,
        tools=[search_tool()],
        output_schema=Summary,
        stop_when=step_count_is(2),
    )
    result = await agent.run(memory_scope="s", user="Summarize").result
    assert result.output == Summary(summary="One review about delivery.")
    # The follow-up is an extra request beyond stop_when.
    assert len(client.calls) == 3 and result.turns == 3
    follow_up = client.calls[2]
    assert "tools" not in follow_up
    assert follow_up["response_format"]["name"] == "Summary"
    assert texts(follow_up["messages"])[-2:] == [
        ("assistant", "I found one review about delivery."),
        ("user", JSON_REQUEST),
    ]
    # The user message asking for JSON is stored ahead of the follow-up's reply.
    assert texts(await lab.message_store.load("s"))[-3:] == [
        ("assistant", "I found one review about delivery."),
        ("user", JSON_REQUEST),
        ("assistant", '{"summary": "One review about delivery."}'),
    ]
    assert texts(result.new_messages)[-2:] == [
        ("user", JSON_REQUEST),
        ("assistant", '{"summary": "One review about delivery."}'),
    ]


async def test_a_follow_up_that_is_still_not_json_fails_with_its_text(lab: Runtime) -> None:
    client = scripted(
        {"tool_use": [{"name": "search", "input": {}}]},
        {"text": "Prose."},
        {"text": "Still prose."},
    )
    agent = lab.create_agent(id="r", model=client, tools=[search_tool()], output_schema=Summary)
    with pytest.raises(NoObjectGeneratedError) as info:
        await agent.run(user="Summarize").result
    assert info.value.text == "Still prose."
    assert len(client.calls) == 3


async def test_a_loop_stopped_on_a_tool_call_fails_without_a_follow_up(lab: Runtime) -> None:
    client = scripted(
        {"text": '{"summary": "partial"}', "tool_use": [{"name": "search", "input": {}}]},
        {"text": '{"summary": "should never be asked"}'},
    )
    agent = lab.create_agent(
        id="r",
        model=client,
        tools=[search_tool()],
        output_schema=Summary,
        stop_when=step_count_is(1),
    )
    with pytest.raises(NoObjectGeneratedError, match="stopped on a tool call"):
        await agent.run(user="Summarize").result
    assert len(client.calls) == 1


async def test_defaults_fill_in_only_after_a_json_object_parsed(lab: Runtime) -> None:
    client = scripted(
        {"text": "{}"},
        {"text": "Looks good to me."},
        {"text": '{"verdict": "accept"'},
        {"text": '["accept"]'},
    )
    agent = lab.create_agent(id="r", model=client, output_schema=Review)
    assert (await agent.run(user="a").result).output == Review(verdict="pending", score=0)
    for text in ("Looks good to me.", '{"verdict": "accept"', '["accept"]'):
        with pytest.raises(NoObjectGeneratedError) as info:
            await agent.run(user="b").result
        assert info.value.text == text


async def test_a_partial_object_from_an_earlier_step_is_not_the_result(lab: Runtime) -> None:
    client = scripted(
        {"text": '{"verdict": "accept"}', "tool_use": [{"name": "search", "input": {}}]},
        {"text": "Done searching."},
        {"text": "No JSON from me."},
    )
    agent = lab.create_agent(id="r", model=client, tools=[search_tool()], output_schema=Review)
    with pytest.raises(NoObjectGeneratedError) as info:
        await agent.run(user="Review").result
    assert info.value.text == "No JSON from me."


async def test_the_schema_on_the_call_overrides_the_agents(lab: Runtime) -> None:
    client = scripted({"text": '{"verdict": "reject", "score": 2}'}, {"text": "plain text"})
    agent = lab.create_agent(id="r", model=client, output_schema=Summary)
    review = await agent.run(user="a", output_schema=Review).result
    assert review.output == Review(verdict="reject", score=2)
    assert client.calls[0]["response_format"]["name"] == "Review"
    plain = lab.create_agent(id="p", model=client)
    assert (await plain.run(user="b").result).output == "plain text"
    assert "response_format" not in client.calls[1]


async def test_a_schema_that_is_not_an_object_is_refused(lab: Runtime) -> None:
    with pytest.raises(ConfigError, match="JSON object"):
        lab.create_agent(id="r", model=scripted(), output_schema=list[int])


TICKET = {
    "title": "Ticket",
    "type": "object",
    "properties": {"priority": {"enum": ["low", "high"]}, "summary": {"type": "string"}},
    "required": ["priority", "summary"],
}


async def test_a_json_schema_dict_is_an_output_schema_and_the_answer_its_dict(
    lab: Runtime,
) -> None:
    client = scripted({"text": '{"priority": "high", "summary": "down"}'})
    agent = lab.create_agent(id="t", model=client, output_schema=TICKET)
    result = await agent.run(user="The site is down").result
    assert result.output == {"priority": "high", "summary": "down"}
    assert client.calls[0]["response_format"] == {"name": "Ticket", "schema": TICKET}


async def test_an_answer_off_the_json_schema_fails_saying_where(lab: Runtime) -> None:
    client = scripted({"text": '{"priority": "urgent", "summary": "down"}'})
    agent = lab.create_agent(id="t", model=client, output_schema=TICKET)
    with pytest.raises(NoObjectGeneratedError, match="priority: 'urgent' is not one of"):
        await agent.run(user="The site is down").result


def test_a_json_schema_dict_that_is_not_an_object_or_not_a_schema_is_refused(
    lab: Runtime,
) -> None:
    with pytest.raises(ConfigError, match='needs "type": "object"'):
        lab.create_agent(id="a", model=scripted(), output_schema={"type": "array"})
    with pytest.raises(ConfigError, match="output_schema is not a valid JSON Schema"):
        lab.create_agent(
            id="b", model=scripted(), output_schema={"type": "object", "required": "x"}
        )
