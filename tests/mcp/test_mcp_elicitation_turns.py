"""An MCP elicitation pauses the turn like an approval: against the official `mcp` SDK's server
(tests/mcp/mcp_interop_app.py, whose `whoami` tool asks "Who are you?") speaking 2026-07-28, a
source with `elicitation="pause"` turns the server's input request into a pending call of kind
"input" (the schema, the message and the state to go on with, all in the session), the turn
ends paused, and `resume()` with `result(value)` (or `deny()`, a decline) re-issues the call
carrying the answer, so the server's final result reaches the model — from a stored session,
over a fresh connection. A server of the handshake era keeps the `on_elicitation` callback."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from mcp_interop_servers import HttpAppServer
from mcp_kit import Kit, call, results

from tether import (
    DecisionError,
    Session,
    create_agent,
    deny,
    reduce,
    result,
)
from tether.mcp import Elicitation, mcp_server
from tether.testing import script_client
from tether.testing.script_client import ScriptClient


@pytest.fixture(params=["http-sse", "http-json"])
async def official(request: pytest.FixtureRequest) -> AsyncIterator[HttpAppServer]:
    server = HttpAppServer(json_response=request.param == "http-json")
    await server.astart()
    try:
        yield server
    finally:
        await server.astop()


def agent_on(url: str, turns: list[Any], **source: Any) -> tuple[Any, ScriptClient]:
    client = script_client(turns)
    agent = create_agent(model=client, integrations=[mcp_server(url, **source)], tools=[])
    return agent, client


def whoami_then_echo() -> list[Any]:
    def echo(request: dict[str, Any]) -> dict[str, Any]:
        [part] = [
            p for m in request["messages"] for p in m["content"] if p["type"] == "tool_result"
        ]
        return {"text": "server said " + part["output"]}

    return [call("whoami"), echo]


async def fold(stream: Any, session: Any) -> list[Any]:
    events = []
    async for event in stream:
        reduce(session, event)
        events.append(event)
    return events


def sent_results(client: ScriptClient, request: int) -> list[Any]:
    return [
        p
        for m in client.calls[request]["messages"]
        if m["role"] == "tool"
        for p in m["content"]
        if p["type"] == "tool_result"
    ]


async def test_an_elicitation_pauses_the_turn_and_the_answer_reaches_the_server(
    official: HttpAppServer,
) -> None:
    first, client = agent_on(official.url, whoami_then_echo(), elicitation="pause")
    session = first.create_session()
    try:
        events = await fold(first.send(session, "who am I?"), session)
    finally:
        await first.aclose()
    [paused] = [e for e in events if e["type"] == "paused"]
    [pending] = paused["pending"]
    assert pending["kind"] == "input" and pending["name"] == "whoami"
    assert pending["message"] == "Who are you?"
    assert pending["source"] == official.url
    assert set(pending["schema"]["properties"]) == {"name", "age", "verified"}
    assert "requestState" in pending["state"]
    assert events[-1]["type"] == "done" and events[-1]["finish_reason"] == "paused"
    assert results(events) == [] and len(client.calls) == 1  # the model waits too
    assert session.pending == [pending]

    # The session is all there is: JSON, then another agent (a fresh connection) resumes it.
    stored = Session.from_json(json.loads(json.dumps(session.to_json())))
    assert stored.pending == [pending]
    second, client = agent_on(official.url, whoami_then_echo()[1:], elicitation="pause")
    try:
        events = await fold(second.resume(stored, {pending["id"]: result({"name": "Ada"})}), stored)
    finally:
        await second.aclose()
    assert events[0]["type"] == "resumed"
    [done] = results(events)
    # What the server answered once it had the person's answer, defaults filled (SEP-1034).
    assert json.loads(done["output"]) == {
        "action": "accept",
        "content": {"name": "Ada", "age": 30, "verified": True},
    }
    assert not done.get("is_error")
    assert sent_results(client, 0) == [
        {
            "type": "tool_result",
            "id": pending["id"],
            "name": "whoami",
            "output": done["output"],
            "is_error": False,
        }
    ]
    assert events[-1]["finish_reason"] == "stop" and "pending" not in stored.to_json()
    assert events[-1]["text"].startswith('server said {"action": "accept"')


async def test_a_denial_declines_and_the_server_answer_reaches_the_model(
    official: HttpAppServer,
) -> None:
    agent, _ = agent_on(official.url, whoami_then_echo(), elicitation="pause")
    session = agent.create_session()
    try:
        await fold(agent.send(session, "who am I?"), session)
        [pending] = session.pending
        events = await fold(agent.resume(session, {pending["id"]: deny("not telling")}), session)
    finally:
        await agent.aclose()
    [done] = results(events)
    assert json.loads(done["output"]) == {"action": "decline", "content": None}
    assert events[-1]["text"] == 'server said {"action": "decline", "content": null}'
    assert events[0]["decisions"] == {pending["id"]: {"action": "deny", "reason": "not telling"}}


async def test_an_answer_that_is_not_what_was_asked_is_refused_before_the_turn(
    official: HttpAppServer,
) -> None:
    agent, client = agent_on(official.url, whoami_then_echo(), elicitation="pause")
    session = agent.create_session()
    try:
        await fold(agent.send(session, "who am I?"), session)
        [pending] = session.pending
        cid = pending["id"]
        with pytest.raises(DecisionError, match="does not match the schema asked for") as bad:
            await fold(agent.resume(session, {cid: result({"age": 3})}), session)
        assert bad.value.call_id == cid
        with pytest.raises(DecisionError, match="must be the object asked for"):
            await fold(agent.resume(session, {cid: result("Ada")}), session)
        with pytest.raises(DecisionError, match="cannot be an error"):
            await fold(
                agent.resume(session, {cid: result({"name": "Ada"}, is_error=True)}), session
            )
        with pytest.raises(DecisionError, match="takes result\\(\\) or deny\\(\\)"):
            await fold(agent.resume(session, {cid: {"action": "approve"}}), session)
        assert session.pending == [pending] and len(client.calls) == 1  # nothing lost
        events = await fold(agent.resume(session, {cid: result({"name": "Bo"})}), session)
    finally:
        await agent.aclose()
    assert json.loads(results(events)[0]["output"])["content"]["name"] == "Bo"


async def test_an_input_call_needs_its_tool_to_go_on(official: HttpAppServer) -> None:
    agent, _ = agent_on(official.url, whoami_then_echo(), elicitation="pause")
    session = agent.create_session()
    try:
        await fold(agent.send(session, "who am I?"), session)
    finally:
        await agent.aclose()
    [pending] = session.pending
    # The same server, but a source that cannot pause: its tools cannot take the answer.
    callback, _ = agent_on(official.url, [{"text": "?"}])
    try:
        with pytest.raises(DecisionError, match="elicitation='pause'"):
            await fold(callback.resume(session, {pending["id"]: result({"name": "Ada"})}), session)
    finally:
        await callback.aclose()
    assert session.pending == [pending]


async def test_a_new_message_supersedes_the_input_without_calling_the_server(
    official: HttpAppServer,
) -> None:
    agent, client = agent_on(official.url, [call("whoami"), {"text": "fine"}], elicitation="pause")
    session = agent.create_session()
    try:
        await fold(agent.send(session, "who am I?"), session)
        assert [p["kind"] for p in session.pending] == ["input"]
        events = await fold(agent.send(session, "never mind"), session)
    finally:
        await agent.aclose()
    [done] = results(events)
    assert done["output"] == "The call to whoami was denied: superseded"
    assert events[-1]["text"] == "fine" and "pending" not in session.to_json()
    assert len(client.calls) == 2


async def test_a_server_of_the_handshake_era_keeps_the_callback_in_a_turn() -> None:
    server = HttpAppServer(legacy=True)
    await server.astart()
    asked: list[Elicitation] = []

    async def on_elicitation(request: Elicitation) -> dict[str, Any]:
        asked.append(request)
        return {"action": "accept", "content": {"name": "Cy"}}

    agent, _ = agent_on(
        server.url, whoami_then_echo(), elicitation="pause", on_elicitation=on_elicitation
    )
    session = agent.create_session()
    try:
        events = await fold(agent.send(session, "who am I?"), session)
    finally:
        await agent.aclose()
        await server.astop()
    assert not [e for e in events if e["type"] == "paused"] and len(asked) == 1
    assert asked[0].message == "Who are you?"
    [done] = results(events)
    assert json.loads(done["output"])["content"]["name"] == "Cy"
    assert events[-1]["finish_reason"] == "stop"


# -- a call that asks more than once (the repository's test server) ---------------------------

PROFILE: dict[str, Any] = {
    "type": "object",
    "properties": {"name": {"type": "string"}},
    "required": ["name"],
}
CITY: dict[str, Any] = {
    "type": "object",
    "properties": {"city": {"type": "string", "default": "Oslo"}},
}


async def test_a_call_that_asks_again_pauses_again_under_the_same_id(kit: Kit) -> None:
    async def greet(arguments: dict[str, Any], asking: Any) -> str:
        who = await asking.elicit("Who are you?", PROFILE)
        where = await asking.elicit("Where are you?", CITY)
        return f"hello {who['content']['name']} in {where['content']['city']}"

    server = kit.server(tools=[{"name": "greet", "run": greet}], modern=True, sse=True)
    agent, client = kit.agent(server, [call("greet"), {"text": "done"}], elicitation="pause")
    session = agent.create_session()
    await fold(agent.send(session, "hi"), session)
    [first] = session.pending
    assert first["message"] == "Who are you?"
    events = await fold(agent.resume(session, {first["id"]: result({"name": "Di"})}), session)
    [second] = session.pending
    assert events[-1]["finish_reason"] == "paused" and results(events) == []
    assert (second["id"], second["message"], second["schema"]) == (
        first["id"],
        "Where are you?",
        CITY,
    )
    events = await fold(agent.resume(session, {second["id"]: result({})}), session)
    [done] = results(events)
    assert done["output"] == "hello Di in Oslo"  # the default filled in what was left out
    assert events[-1]["text"] == "done" and len(client.calls) == 2
