"""A tool call the output-token limit cut in the middle of its arguments is not executed: the
turn ends with the provider's stop reason, the partial call is on the event stream, and the
session stays a valid transcript (the project's own stream and the recorded one, each served over
a real socket)."""

from __future__ import annotations

from tests.conftest import provider_fixtures

from tether import Session, create_agent, define_tool

from .conftest import OWN_FIXTURES, Reply, WireServer, run_turn


async def test_a_call_cut_by_max_tokens_is_not_executed(wire: WireServer) -> None:
    recorded = provider_fixtures() / "anthropic" / "sdk_incomplete_tool_json_max_tokens.sse"
    body = recorded.read_bytes()
    wire.reply(Reply(200, body, headers={"content-type": "text/event-stream"}))
    ran: list[object] = []
    agent = create_agent(
        model={"model": "anthropic:claude-test", "base_url": wire.url, "api_key": "k"},
        tools=[define_tool(name="make_file", execute=lambda i: ran.append(i) or "written")],
    )
    session = Session()
    events = await run_turn(agent, session, "Write a tax guide to taxes.txt")
    assert ran == [] and len(wire.requests) == 1  # not executed, not re-asked
    kinds = [e["type"] for e in events]
    assert "tool_use" not in kinds and "tool_result" not in kinds
    partial = [e for e in events if e["type"] == "tool_input_delta"]
    assert partial and partial[-1]["name"] == "make_file"
    assert partial[-1]["snapshot"].startswith('{"filename": "taxes.txt"')
    done = events[-1]
    assert done["type"] == "done"
    assert (done["stop_reason"], done["finish_reason"]) == ("max_tokens", "length")
    assert done["text"].startswith("I'll create a comprehensive tax guide")
    # the transcript holds the user's question and the text, no dangling call
    assert [m["role"] for m in session.messages] == ["user", "assistant"]
    assert [p["type"] for p in session.messages[1]["content"]] == ["text"]
    await agent.aclose()


async def test_the_own_stream_of_a_call_cut_by_max_tokens_is_not_executed(wire: WireServer) -> None:
    body = (OWN_FIXTURES / "anthropic" / "tool_input_cut_by_max_tokens.sse").read_bytes()
    wire.reply(Reply(200, body, headers={"content-type": "text/event-stream"}))
    ran: list[object] = []
    agent = create_agent(
        model={"model": "anthropic:claude-test", "base_url": wire.url, "api_key": "k"},
        tools=[define_tool(name="make_file", execute=lambda i: ran.append(i) or "written")],
    )
    session = Session()
    events = await run_turn(agent, session, "Write my notes to notes.txt")
    assert ran == [] and len(wire.requests) == 1
    kinds = [e["type"] for e in events]
    assert "tool_use" not in kinds and "tool_result" not in kinds
    partial = [e for e in events if e["type"] == "tool_input_delta"]
    assert partial[-1]["name"] == "make_file"
    assert (
        partial[-1]["snapshot"]
        == '{"filename": "notes.txt", "content": "Chapter 1\\n\\nThe first rule of'
    )
    done = events[-1]
    assert (done["stop_reason"], done["finish_reason"]) == ("max_tokens", "length")
    assert done["text"] == "I'll write the file."
    assert [m["role"] for m in session.messages] == ["user", "assistant"]
    assert session.messages[1]["content"] == [{"type": "text", "text": "I'll write the file."}]
    await agent.aclose()
