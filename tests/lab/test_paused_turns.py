"""A lab episode whose turn pauses on calls that wait for a decision: the run ends "paused"
with its pending calls, frees its scope, and `resume()` continues it in any runtime on the
same stores (one resumer wins; the decisions are run events)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from tests.helpers import texts

from tether import (
    DecisionError,
    RunNotFoundError,
    RunNotPausedError,
    approve,
    define_tool,
    deny,
    result,
)
from tether.lab import Runtime

from .conftest import event_types, run_events, scripted


def _tools(ran: list[Any]) -> list[Any]:
    wipe = define_tool(
        name="wipe",
        input_schema={"type": "object", "properties": {"path": {"type": "string"}}},
        execute=lambda value: ran.append(value) or f"wiped {value.get('path', '')}",
        approval=True,
    )
    look = define_tool(
        name="look", input_schema={"type": "object"}, execute=lambda v: ran.append("look") or "seen"
    )
    ask = define_tool(name="ask_user", input_schema={"type": "object"}, external=True)
    return [wipe, look, ask]


MIXED = {
    "tool_use": [
        {"id": "b", "name": "wipe", "input": {"path": "/tmp"}},
        {"id": "c", "name": "look", "input": {}},
    ]
}


async def test_a_paused_turn_ends_the_run_paused_with_its_calls_and_frees_the_scope(
    lab: Runtime,
) -> None:
    ran: list[Any] = []
    client = scripted(
        {"tool_use": [{"id": "a", "name": "look", "input": {}}]}, MIXED, {"text": "tidied"}
    )
    agent = lab.create_agent(id="janitor", system_prompt="Tidy.", model=client, tools=_tools(ran))
    paused = await agent.run(memory_scope="room", user="clean up").result
    assert paused.paused and paused.text == ""
    assert paused.pending == [
        {"id": "b", "name": "wipe", "input": {"path": "/tmp"}, "kind": "approval"}
    ]
    assert ran == ["look", "look"]  # the call that needs no decision ran; wipe did not
    run = await lab.run_store.get_run(paused.run_id)
    assert run is not None and run.status == "paused" and run.ended_at is None
    assert run.pending == paused.pending and run.lease_expires_at is None
    listed = await lab.run_store.list_runs()
    assert [(r.run_id, r.status, r.pending) for r in listed] == [
        (paused.run_id, "paused", paused.pending)
    ]
    assert (await event_types(lab, paused.run_id))[-1] == "agent_paused"
    # The scope holds the first round only, and is free: nothing waits on it.
    stored = await lab.message_store.load("room")
    assert [p["id"] for m in stored for p in m["content"] if p["type"] == "tool_call"] == ["a"]
    chat = lab.create_agent(id="chat", model=scripted({"text": "meanwhile"}))
    # (a held scope would keep this episode waiting: the guard only ends a hang)
    between = await asyncio.wait_for(chat.run(memory_scope="room", user="hi").result, 60)
    assert between.text == "meanwhile"

    done = await agent.resume(paused.run_id, {"b": approve()}, decided_by="ann")
    assert done.text == "tidied" and not done.paused
    assert ran == ["look", "look", {"path": "/tmp"}]
    assert done.turns == 3
    run = await lab.run_store.get_run(paused.run_id)
    assert run is not None and run.status == "completed" and run.pending == []
    events = await run_events(lab, paused.run_id)
    decisions = [e["data"] for e in events if e["type"] == "decision"]
    assert [(d["call_id"], d["action"], d["decided_by"]) for d in decisions] == [
        ("b", "approve", "ann")
    ]
    assert isinstance(decisions[0]["at"], float)
    assert events[-1]["type"] == "agent_finished"
    # The whole paused round and its end are in the scope now, in order.
    stored = await lab.message_store.load("room")
    ids = [(p["type"], p["id"]) for m in stored for p in m["content"] if "id" in p]
    assert ids == [
        ("tool_call", "a"),
        ("tool_result", "a"),
        ("tool_call", "b"),
        ("tool_call", "c"),
        ("tool_result", "c"),
        ("tool_result", "b"),
    ]
    assert texts(stored)[-1] == ("assistant", "tidied")


async def test_a_denial_and_an_edit_and_an_external_result_reach_the_model(lab: Runtime) -> None:
    ran: list[Any] = []
    client = scripted(
        {
            "tool_use": [
                {"id": "b", "name": "wipe", "input": {"path": "/"}},
                {"id": "q", "name": "ask_user", "input": {"question": "which?"}},
            ]
        },
        {"tool_use": [{"id": "d", "name": "wipe", "input": {"path": "/etc"}}]},
        {"text": "ok"},
    )
    agent = lab.create_agent(id="janitor", model=client, tools=_tools(ran))
    first = await agent.run(user="go").result
    assert [(p["id"], p["kind"]) for p in first.pending] == [("b", "approval"), ("q", "external")]
    second = await lab.resume(
        first.run_id, {"b": deny("not the root"), "q": result("the attic")}, decided_by="bo"
    )
    assert second.paused and [p["id"] for p in second.pending] == ["d"]
    assert ran == []
    sent = client.calls[1]["messages"]
    outputs = {
        p["id"]: p["output"] for m in sent for p in m["content"] if p["type"] == "tool_result"
    }
    assert "not the root" in outputs["b"] and outputs["q"] == "the attic"
    last = await agent.resume(first.run_id, {"d": approve(input={"path": "/tmp/x"})})
    assert last.text == "ok" and ran == [{"path": "/tmp/x"}]
    decisions = [e["data"] for e in await run_events(lab, first.run_id) if e["type"] == "decision"]
    assert [(d["call_id"], d["action"]) for d in decisions] == [
        ("b", "deny"),
        ("q", "result"),
        ("d", "approve"),
    ]
    assert decisions[0]["reason"] == "not the root" and decisions[2]["input"] == {"path": "/tmp/x"}


async def test_two_resumers_one_wins_and_the_other_is_told_who(lab: Runtime) -> None:
    ran: list[Any] = []
    client = scripted(MIXED, {"text": "done"})
    agent = lab.create_agent(id="janitor", model=client, tools=_tools(ran))
    paused = await agent.run(user="go").result
    outcomes = await asyncio.gather(
        agent.resume(paused.run_id, {"b": approve()}, decided_by="ann"),
        agent.resume(paused.run_id, {"b": approve()}, decided_by="bo"),
        return_exceptions=True,
    )
    errors = [o for o in outcomes if isinstance(o, BaseException)]
    wins = [o for o in outcomes if not isinstance(o, BaseException)]
    assert len(errors) == 1 and len(wins) == 1, outcomes
    error = errors[0]
    assert isinstance(error, RunNotPausedError)
    assert error.winner in ("ann", "bo") and error.winner in str(error)
    assert ran.count({"path": "/tmp"}) == 1
    decisions = [e for e in await run_events(lab, paused.run_id) if e["type"] == "decision"]
    assert [d["data"]["decided_by"] for d in decisions] == [error.winner]
    with pytest.raises(RunNotPausedError, match="is not paused") as again:
        await agent.resume(paused.run_id, {"b": approve()})
    assert again.value.status == "completed"


async def test_bad_resumes_are_typed_errors_and_write_nothing(lab: Runtime) -> None:
    client = scripted(MIXED, {"text": "done"})
    agent = lab.create_agent(id="janitor", model=client, tools=_tools([]))
    with pytest.raises(RunNotFoundError, match="no run 'nope'"):
        await lab.resume("nope", {})
    paused = await agent.run(user="go").result
    before = await event_types(lab, paused.run_id)
    with pytest.raises(DecisionError, match="no decision for pending call 'b'"):
        await agent.resume(paused.run_id, {})
    with pytest.raises(DecisionError, match="'zz' is not a pending call"):
        await agent.resume(paused.run_id, {"b": approve(), "zz": approve()})
    with pytest.raises(DecisionError, match="takes approve"):
        await agent.resume(paused.run_id, {"b": result("x")})
    other = lab.create_agent(id="other", model=scripted())
    with pytest.raises(Exception, match="not of agent 'other'"):
        await other.resume(paused.run_id, {"b": approve()})
    assert await event_types(lab, paused.run_id) == before
    run = await lab.run_store.get_run(paused.run_id)
    assert run is not None and run.status == "paused"


async def test_a_refused_edit_leaves_the_run_paused(lab: Runtime) -> None:
    client = scripted(MIXED, {"text": "done"})
    agent = lab.create_agent(id="janitor", model=client, tools=_tools([]))
    paused = await agent.run(user="go").result
    before = await event_types(lab, paused.run_id)
    with pytest.raises(DecisionError, match="does not match the tool's schema") as refused:
        await agent.resume(paused.run_id, {"b": approve(input={"path": 3})})
    assert refused.value.call_id == "b"
    # A tool the agent lists is checked before the run is taken: nothing is written.
    assert await event_types(lab, paused.run_id) == before
    run = await lab.run_store.get_run(paused.run_id)
    assert run is not None and run.status == "paused" and run.pending == paused.pending
    done = await agent.resume(paused.run_id, {"b": approve()})
    assert done.text == "done"


async def test_a_run_paused_in_one_runtime_resumes_in_another(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'lab.db'}"
    ran: list[Any] = []
    first = Runtime(store=store, version=False)
    agent = first.create_agent(id="janitor", model=scripted(MIXED), tools=_tools(ran))
    stream = agent.stream(memory_scope="room", user="go")
    kinds = [event["type"] async for event in stream.full_stream]
    assert "paused" in kinds and kinds[-1] == "done"
    paused = await stream.result
    await first.aclose()
    second = Runtime(store=store, version=False)
    second.create_agent(id="janitor", model=scripted({"text": "all clean"}), tools=_tools(ran))
    handle = await second.resume_stream(paused.run_id, {"b": approve()}, decided_by="cy")
    streamed = [event["type"] async for event in handle.full_stream]
    assert streamed[0] == "resumed" and streamed[-1] == "done"
    assert (await handle.result).text == "all clean"
    assert ran.count({"path": "/tmp"}) == 1
    stored = await second.message_store.load("room")
    assert texts(stored)[-1] == ("assistant", "all clean")
    await second.aclose()


async def test_a_resumed_turn_that_fails_after_the_decided_calls_keeps_their_results(
    lab: Runtime,
) -> None:
    ran: list[Any] = []

    def broken(request: Any) -> Any:
        raise RuntimeError("the model is gone")

    client = scripted(MIXED, broken, {"text": "as you asked, it is wiped"})
    agent = lab.create_agent(id="janitor", model=client, tools=_tools(ran))
    paused = await agent.run(memory_scope="room", user="clean up").result
    assert ran == ["look"]
    with pytest.raises(Exception, match="the model is gone"):
        await agent.resume(paused.run_id, {"b": approve()})
    assert ran == ["look", {"path": "/tmp"}]
    run = await lab.run_store.get_run(paused.run_id)
    assert run is not None and run.status == "failed"
    # The paused round is in the scope, whole: the approved call's result with it.
    stored = await lab.message_store.load("room")
    results = {
        p["id"]: p["output"] for m in stored for p in m["content"] if p["type"] == "tool_result"
    }
    assert results == {"c": "seen", "b": "wiped /tmp"}
    assert texts(stored)[0] == ("user", "clean up")
    # A later turn on the scope goes on from it: the model sees the result, the tool does not
    # run again.
    later = await agent.run(memory_scope="room", user="is it done?").result
    assert later.text == "as you asked, it is wiped"
    sent = client.calls[-1]["messages"]
    assert "wiped /tmp" in [p.get("output") for m in sent for p in m["content"]]
    assert ran == ["look", {"path": "/tmp"}]
