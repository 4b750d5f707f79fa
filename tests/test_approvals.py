"""Tools that wait for a decision: approval, external tools, a guardrail's ask; the turn pauses,
the session keeps what it waits for, and `resume()` continues the same turn."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tether import (
    DecisionError,
    NotPausedError,
    RunContext,
    Session,
    ToolDefinitionError,
    approve,
    create_agent,
    define_guardrail,
    define_tool,
    deny,
    reduce,
    result,
    tool,
)
from tether.testing import script_client

EMAIL_SCHEMA = {
    "type": "object",
    "properties": {"to": {"type": "string"}, "body": {"type": "string"}},
    "required": ["to"],
    "additionalProperties": False,
}


def email_tool(sent: list[Any], **kwargs: Any) -> Any:
    def send(value: dict[str, Any]) -> str:
        sent.append(value)
        return f"sent to {value['to']}"

    return define_tool(
        name="send_email",
        description="Send an email.",
        input_schema=EMAIL_SCHEMA,
        execute=send,
        **kwargs,
    )


def calls(*uses: tuple[str, str, Any]) -> dict[str, Any]:
    return {"tool_use": [{"id": cid, "name": name, "input": value} for cid, name, value in uses]}


async def fold(stream: Any, session: Any) -> list[Any]:
    events = []
    async for event in stream:
        reduce(session, event)
        events.append(event)
    return events


def results_of(client: Any, request: int) -> list[dict[str, Any]]:
    """The tool results the model was sent in request `request` (0-based), in order."""
    return [
        p
        for m in client.calls[request]["messages"]
        if m["role"] == "tool"
        for p in m["content"]
        if p["type"] == "tool_result"
    ]


async def test_an_approval_pauses_the_turn_and_approve_runs_the_call_once() -> None:
    sent: list[Any] = []
    client = script_client([calls(("c1", "send_email", {"to": "ana"})), {"text": "Done."}])
    agent = create_agent(model=client, tools=[email_tool(sent, approval=True)])
    session = agent.create_session()
    events = await fold(agent.send(session, "mail ana"), session)
    paused = [e for e in events if e["type"] == "paused"]
    assert paused == [
        {
            "type": "paused",
            "pending": [
                {"id": "c1", "name": "send_email", "input": {"to": "ana"}, "kind": "approval"}
            ],
        }
    ]
    assert events[-1]["type"] == "done" and events[-1]["finish_reason"] == "paused"
    assert sent == []  # nothing ran
    assert session.pending == paused[0]["pending"]
    # A stored session knows what it waits for: JSON round trip, then resume from that.
    stored = json.loads(json.dumps(session))
    assert stored["pending"][0]["id"] == "c1"
    events = await fold(agent.resume(stored, {"c1": approve()}), stored)
    assert events[0] == {"type": "resumed", "decisions": {"c1": {"action": "approve"}}}
    assert sent == [{"to": "ana"}]
    assert "pending" not in stored
    assert events[-1]["text"] == "Done." and events[-1]["finish_reason"] == "stop"
    assert results_of(client, 1) == [
        {
            "type": "tool_result",
            "id": "c1",
            "name": "send_email",
            "output": "sent to ana",
            "is_error": False,
        }
    ]


async def test_an_edited_approval_runs_with_the_new_input_checked_against_the_schema() -> None:
    sent: list[Any] = []
    client = script_client([calls(("c1", "send_email", {"to": "ana"})), {"text": "ok"}])
    agent = create_agent(model=client, tools=[email_tool(sent, approval=True)])
    session = agent.create_session()
    await fold(agent.send(session, "mail"), session)
    with pytest.raises(DecisionError, match="does not match the tool's schema") as info:
        await fold(agent.resume(session, {"c1": approve(input={"to": 5})}), session)
    assert info.value.call_id == "c1"
    assert session.pending[0]["id"] == "c1" and sent == []  # nothing lost, nothing ran
    await fold(agent.resume(session, {"c1": approve(input={"to": "bo", "body": "hi"})}), session)
    assert sent == [{"to": "bo", "body": "hi"}]
    assert results_of(client, 1)[0]["output"] == "sent to bo"


async def test_a_denial_gives_the_model_an_error_result_with_the_reason() -> None:
    sent: list[Any] = []
    client = script_client([calls(("c1", "send_email", {"to": "ana"})), {"text": "ok"}])
    agent = create_agent(model=client, tools=[email_tool(sent, approval=True)])
    session = agent.create_session()
    await fold(agent.send(session, "mail"), session)
    res = await agent.run_turn(session, decisions={"c1": deny("not to ana")})
    assert sent == [] and res.text == "ok"
    (part,) = results_of(client, 1)
    assert part["is_error"] is True and "not to ana" in part["output"]


async def test_an_external_tool_pauses_until_its_result_is_given() -> None:
    client = script_client([calls(("c1", "pick_color", {})), {"text": "blue it is"}])
    picker = define_tool(
        name="pick_color", input_schema={"type": "object", "properties": {}}, external=True
    )
    agent = create_agent(model=client, tools=[picker])
    session = Session()
    res = await agent.run_turn(session, "pick")
    assert res.finish_reason == "paused"
    assert res.pending == [{"id": "c1", "name": "pick_color", "input": {}, "kind": "external"}]
    with pytest.raises(DecisionError, match="takes result"):
        await agent.run_turn(session, decisions={"c1": approve()})
    res = await agent.run_turn(session, decisions={"c1": result({"color": "blue"})})
    assert res.text == "blue it is"
    assert results_of(client, 1)[0]["output"] == '{"color":"blue"}'
    assert results_of(client, 1)[0]["is_error"] is False


async def test_a_mixed_round_runs_the_calls_that_need_no_decision_then_pauses() -> None:
    sent: list[Any] = []
    ran: list[Any] = []

    def lookup(value: dict[str, Any]) -> str:
        ran.append(value)
        return "ana@example.org"

    look = define_tool(name="lookup", input_schema={"type": "object"}, execute=lookup)
    client = script_client(
        [
            calls(("a", "send_email", {"to": "ana"}), ("b", "lookup", {"q": "ana"})),
            {"text": "sent"},
        ]
    )
    agent = create_agent(model=client, tools=[email_tool(sent, approval=True), look])
    session = agent.create_session()
    events = await fold(agent.send(session, "go"), session)
    assert ran == [{"q": "ana"}] and sent == []
    assert [e["id"] for e in events if e["type"] == "tool_result"] == ["b"]
    assert [p["id"] for p in session.pending] == ["a"]
    await fold(agent.resume(session, {"a": approve()}), session)
    assert sent == [{"to": "ana"}] and ran == [{"q": "ana"}]  # the lookup did not run again
    assert {p["id"] for p in results_of(client, 1)} == {"a", "b"}


async def test_an_approval_function_decides_per_call_with_the_context() -> None:
    seen: list[Any] = []

    def risky(value: dict[str, Any], ctx: RunContext) -> bool:
        seen.append(ctx.session_id)
        return not value["to"].endswith("@us.org")

    sent: list[Any] = []
    client = script_client(
        [
            calls(("a", "send_email", {"to": "me@us.org"}), ("b", "send_email", {"to": "x@y"})),
            {"text": "ok"},
        ]
    )
    agent = create_agent(model=client, tools=[email_tool(sent, approval=risky)])
    session = Session(id="s1")
    res = await agent.run_turn(session, "go")
    assert seen == ["s1", "s1"]
    assert sent == [{"to": "me@us.org"}]
    assert [p["id"] for p in res.pending] == ["b"]


async def test_a_typed_function_tool_takes_approval() -> None:
    @tool(approval=True)
    def wipe(path: str) -> str:
        """Delete a path."""
        return f"wiped {path}"

    client = script_client([calls(("c", "wipe", {"path": "/tmp/x"})), {"text": "ok"}])
    agent = create_agent(model=client, tools=[wipe])
    session = Session()
    res = await agent.run_turn(session, "go")
    assert res.pending[0]["kind"] == "approval"
    await agent.run_turn(session, decisions={"c": approve()})
    assert results_of(client, 1)[0]["output"] == "wiped /tmp/x"


async def test_a_guardrail_may_ask_and_its_reason_is_on_the_pending_call() -> None:
    sent: list[Any] = []

    def outside(call: Any) -> Any:
        if not call["input"]["to"].endswith("@us.org"):
            return {"action": "ask", "reason": "external recipient"}
        return None

    guard = define_guardrail(name="recipients", tool_call=outside)
    client = script_client(
        [
            calls(("a", "send_email", {"to": "me@us.org"}), ("b", "send_email", {"to": "x@y"})),
            {"text": "ok"},
        ]
    )
    agent = create_agent(model=client, tools=[email_tool(sent)], guardrails=[guard])
    session = Session()
    events = await fold(agent.send(session, "go"), session)
    assert sent == [{"to": "me@us.org"}]
    assert session.pending == [
        {
            "id": "b",
            "name": "send_email",
            "input": {"to": "x@y"},
            "kind": "approval",
            "reason": "external recipient",
        }
    ]
    (g,) = [e for e in events if e["type"] == "guardrail"]
    assert g["action"] == "ask" and g["tool_use_id"] == "b"
    await fold(agent.resume(session, {"b": approve()}), session)
    assert sent == [{"to": "me@us.org"}, {"to": "x@y"}]  # approved: the guardrail asks no more


async def test_resume_errors_name_the_call_and_leave_the_session_as_it_was() -> None:
    client = script_client([calls(("a", "send_email", {"to": "x"})), {"text": "ok"}])
    agent = create_agent(model=client, tools=[email_tool([], approval=True)])
    session = Session()
    with pytest.raises(NotPausedError):
        agent.resume(session, {"a": approve()})
    await fold(agent.send(session, "go"), session)
    before = json.dumps(session)
    with pytest.raises(DecisionError, match="no decision for pending call 'a'") as info:
        agent.resume(session, {})
    assert info.value.call_id == "a"
    with pytest.raises(DecisionError, match="'zz' is not a pending call") as info:
        agent.resume(session, {"a": approve(), "zz": approve()})
    assert info.value.call_id == "zz"
    with pytest.raises(DecisionError, match="takes approve"):
        agent.resume(session, {"a": result("x")})
    assert json.dumps(session) == before
    await fold(agent.resume(session, {"a": deny("no")}), session)
    with pytest.raises(NotPausedError):
        agent.resume(session, {"a": approve()})


async def test_an_id_decided_before_is_named_as_already_decided() -> None:
    client = script_client(
        [calls(("a", "send_email", {"to": "x"})), calls(("b", "send_email", {"to": "y"}))]
    )
    agent = create_agent(model=client, tools=[email_tool([], approval=True)])
    session = Session()
    await agent.run_turn(session, "go")
    res = await agent.run_turn(session, decisions={"a": approve()})
    assert [p["id"] for p in res.pending] == ["b"]  # the turn went on and paused again
    with pytest.raises(DecisionError, match="'a' was already decided"):
        agent.resume(session, {"a": approve(), "b": approve()})


async def test_a_new_message_on_a_paused_session_denies_the_pending_calls_as_superseded() -> None:
    sent: list[Any] = []
    client = script_client([calls(("a", "send_email", {"to": "x"})), {"text": "fine"}])
    agent = create_agent(model=client, tools=[email_tool(sent, approval=True)])
    session = Session()
    await agent.run_turn(session, "go")
    events = await fold(agent.send(session, "never mind"), session)
    assert events[0] == {
        "type": "resumed",
        "decisions": {"a": {"action": "deny", "reason": "superseded"}},
    }
    assert events[1]["type"] == "tool_result" and "superseded" in events[1]["output"]
    assert events[2]["type"] == "message"
    assert sent == [] and "pending" not in session
    roles = [m["role"] for m in client.calls[1]["messages"]]
    assert roles == ["user", "assistant", "tool", "user"]  # a valid transcript for the model


async def test_a_session_without_pending_stays_byte_identical() -> None:
    client = script_client([{"text": "hi"}])
    agent = create_agent(model=client)
    session = Session(id="s")
    await agent.run_turn(session, "hello")
    assert set(session) == {"id", "messages", "memory"}
    assert Session.from_json(json.dumps(session)).to_dict().keys() == {"id", "messages", "memory"}


def test_declaring_approval_and_external_tools_is_checked() -> None:
    with pytest.raises(ToolDefinitionError, match="external tool is run by its caller"):
        define_tool(name="x", external=True, execute=lambda v: v)
    with pytest.raises(ToolDefinitionError, match="or external=True"):
        define_tool(name="x")
    with pytest.raises(ToolDefinitionError, match="approval= must be"):
        define_tool(name="x", execute=lambda v: v, approval="yes")  # type: ignore[arg-type]
    with pytest.raises(ToolDefinitionError, match="approval_timeout="):
        define_tool(name="x", execute=lambda v: v, approval=True, approval_timeout=0)


def test_a_stored_session_with_bad_pending_is_refused_naming_the_path() -> None:
    from tether import SessionFormatError

    with pytest.raises(SessionFormatError, match=r"session.pending\[0\].kind"):
        Session.from_json(
            {
                "id": "s",
                "messages": [],
                "pending": [{"id": "a", "name": "t", "input": 1, "kind": "x"}],
            }
        )
    # An input call keeps what it asks for and what its tool needs to go on.
    asked = {"id": "a", "name": "t", "input": {}, "kind": "input", "schema": {}}
    with pytest.raises(SessionFormatError, match=r"session.pending\[0\].state must be an object"):
        Session.from_json({"id": "s", "messages": [], "pending": [asked]})
    kept = Session.from_json({"id": "s", "messages": [], "pending": [{**asked, "state": {}}]})
    assert kept.pending[0]["kind"] == "input"


async def test_a_guardrail_ask_on_an_mcp_tool_pauses_and_the_approved_call_runs_live() -> None:
    from tether import mcp_server
    from tether.testing.mcp_server import create_test_mcp_server

    seen: list[Any] = []

    def search(args: dict[str, Any]) -> str:
        seen.append(args)
        return f"found {args['q']}"

    server = create_test_mcp_server(
        tools=[
            {
                "name": "search",
                "description": "search",
                "input_schema": {
                    "type": "object",
                    "properties": {"q": {"type": "string"}},
                    "required": ["q"],
                },
                "run": search,
            }
        ]
    )
    ask = define_guardrail(name="ask_all", tool_call=lambda call: {"action": "ask"})
    client = script_client([calls(("c1", "search", {"q": "x"})), {"text": "ok"}])
    agent = create_agent(
        model=client,
        integrations=[mcp_server("http://mcp.test/mcp", transport=server)],
        guardrails=[ask],
    )
    try:
        session = Session()
        res = await agent.run_turn(session, "look")
        assert (
            res.pending == [{"id": "c1", "name": "search", "input": {"q": "x"}, "kind": "approval"}]
            and seen == []
        )
        res = await agent.run_turn(session, decisions={"c1": approve(input={"q": "y"})})
        assert seen == [{"q": "y"}] and res.text == "ok"
        assert results_of(client, 1)[0]["output"] == "found y"
    finally:
        await agent.aclose()
