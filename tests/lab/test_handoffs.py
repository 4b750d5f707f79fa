"""Handoffs between lab agents: the turn goes on as a nested run of the target on the same
scope, the scope remembers who holds it, and the pin stays the entry agent's."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from tests.helpers import texts

from tether import ConfigError, handoff_filters
from tether.lab import LabHandoff, Runtime
from tether.run_events import AGENT_HANDOFF, typed

from .conftest import event_types, pin, run_events, scripted, system_of


def transfer(to: str, reason: str = "an invoice") -> dict[str, Any]:
    return {"tool_use": [{"name": f"transfer_to_{to}", "input": {"reason": reason}}]}


async def test_the_target_answers_in_the_same_turn_as_a_nested_run(
    lab: Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    bc = scripted({"text": "Your invoice is 42 EUR."})
    billing = lab.create_agent(id="billing", model=bc, system_prompt="You are billing.")
    tc = scripted(transfer("billing"))
    triage = lab.create_agent(
        id="triage", model=tc, system_prompt="You are triage.", handoffs=[billing]
    )
    with caplog.at_level(logging.WARNING, logger="tether.lab"):
        handle = triage.run(memory_scope="s", user="Where is my invoice?")
        result = await handle.result
    assert result.text == "Your invoice is 42 EUR."
    assert result.turns == 2 and result.run_id == handle.run_id
    assert system_of(bc.calls[0]) == "You are billing."  # its own prompt ("use-current")
    assert not caplog.records  # a declared handoff is no conflict
    stored = await lab.message_store.load("s")
    assert stored[0] == pin("You are triage.", "triage")  # the pin is not rewritten
    assert [(r["role"], r.get("agent")) for r in stored[1:]] == [
        ("user", None),
        ("assistant", "triage"),
        ("tool", None),
        ("assistant", "billing"),
    ]
    assert [m.get("agent") for m in result.new_messages] == [None, "triage", None, "billing"]
    # The run tree: billing's run is nested under the transfer call.
    events = await run_events(lab, handle.run_id)
    (handed,) = [typed(e) for e in events if e["type"] == AGENT_HANDOFF]
    assert handed["type"] == AGENT_HANDOFF
    data = handed["data"]
    assert (data["from_agent"], data["to_agent"], data["reason"]) == (
        "triage",
        "billing",
        "an invoice",
    )
    child = await lab.run_store.get_run(data["run_id"])
    assert child is not None
    assert (child.name, child.parent_run_id, child.status) == (
        "billing",
        handle.run_id,
        "completed",
    )
    assert child.parent_tool_call_id == data["tool_call_id"]
    assert child.memory_scope == "s"
    assert "agent_finished" in await event_types(lab, child.run_id)


async def test_the_next_turn_goes_to_the_holder_unless_the_caller_names_another(
    lab: Runtime,
) -> None:
    bc = scripted({"text": "42 EUR."}, {"text": "Paid."})
    billing = lab.create_agent(id="billing", model=bc, system_prompt="You are billing.")
    tc = scripted(transfer("billing"), {"text": "Triage here."})
    triage = lab.create_agent(
        id="triage", model=tc, system_prompt="You are triage.", handoffs=[billing]
    )
    await triage.run(memory_scope="s", user="Invoice?").result
    second = triage.run(memory_scope="s", user="Pay it")
    assert (await second.result).text == "Paid."
    run = await lab.run_store.get_run(second.run_id)
    assert run is not None and run.name == "billing" and run.parent_run_id is None
    assert system_of(bc.calls[1]) == "You are billing."
    third = await triage.run(memory_scope="s", user="Other", agent="triage").result
    assert third.text == "Triage here."
    assert texts(tc.calls[1]["messages"])[-1] == ("user", "Other")
    with pytest.raises(ConfigError, match="agent='nobody'"):
        triage.run(memory_scope="s", user="x", agent="nobody")


async def test_an_input_filter_chooses_what_the_target_is_sent(lab: Runtime) -> None:
    bc = scripted({"text": "ok"})
    billing = lab.create_agent(id="billing", model=bc)
    triage = lab.create_agent(
        id="triage",
        model=scripted({"text": "Hello"}, transfer("billing")),
        handoffs=[
            LabHandoff(
                billing, description="Invoices.", input_filter=handoff_filters.last_user_message
            )
        ],
    )
    await triage.run(memory_scope="s", user="Hi").result
    await triage.run(memory_scope="s", user="Invoice?").result
    assert texts(bc.calls[0]["messages"]) == [("user", "Invoice?")]
    assert len(await lab.message_store.load("s")) == 6  # everything is stored


async def test_agents_hand_back_by_id_and_the_chain_is_bounded(lab: Runtime) -> None:
    ping = lab.create_agent(
        id="ping",
        model=scripted(transfer("pong"), transfer("pong"), {"text": "ping answers"}),
        handoffs=["pong"],
        max_handoffs=2,
    )
    lab.create_agent(id="pong", model=scripted(transfer("ping")), handoffs=["ping"])
    handle = ping.run(memory_scope="s", user="go")
    result = await handle.result
    # ping -> pong -> ping; ping's next transfer is past max_handoffs: its tool error.
    assert result.text == "ping answers"
    stored = await lab.message_store.load("s")
    outputs = [p for r in stored for p in r["content"] if p.get("type") == "tool_result"]
    assert outputs[-1]["is_error"] and "max_handoffs=2" in outputs[-1]["output"]
    runs = await lab.run_store.list_runs(memory_scope="s")
    assert sorted(r.name for r in runs) == ["ping", "ping", "pong"]
    assert stored[-1]["agent"] == "ping"


async def test_stream_readers_see_the_handoff_and_the_targets_text(lab: Runtime) -> None:
    billing = lab.create_agent(id="billing", model=scripted({"text": ["4", "2"]}))
    triage = lab.create_agent(id="triage", model=scripted(transfer("billing")), handoffs=[billing])
    handle = triage.stream(memory_scope="s", user="Invoice?")
    seen = [event async for event in handle.full_stream]
    kinds = [e["type"] for e in seen]
    assert kinds.count("done") == 1 and kinds[-1] == "done"
    (handoff,) = [e for e in seen if e["type"] == "handoff"]
    assert handoff["to_agent"] == "billing"
    assert "".join(e["text"] for e in seen if e["type"] == "text") == "42"
    assert (await handle.result).text == "42"


def test_bad_handoffs_are_config_errors(lab: Runtime) -> None:
    with pytest.raises(ConfigError, match="handoffs"):
        lab.create_agent(id="a", model=scripted(), handoffs="billing")
    with pytest.raises(ConfigError, match="cannot name a handoff target"):
        lab.create_agent(id="a", model=scripted(), handoffs=["bad name!"])
    with pytest.raises(ConfigError, match="twice"):
        lab.create_agent(id="a", model=scripted(), handoffs=["b", "b"])
