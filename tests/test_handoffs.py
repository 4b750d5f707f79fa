"""Handoffs between harness agents: one turn goes on with the target, the conversation stays
with whoever holds it, filters choose what the target sees, and a chain is bounded."""

from __future__ import annotations

from typing import Any

import pytest
from tests.helpers import texts

from tether import (
    ConfigError,
    Handoff,
    HandoffLimitError,
    Session,
    create_agent,
    define_tool,
    handoff_filters,
)
from tether.testing import ScriptClient, script_client


def transfer(to: str, reason: str = "billing question") -> dict[str, Any]:
    return {"tool_use": [{"name": f"transfer_to_{to}", "input": {"reason": reason}}]}


def pair(
    triage_turns: list[Any], billing_turns: list[Any], **handoff: Any
) -> tuple[Any, Any, ScriptClient, ScriptClient]:
    bc = script_client(billing_turns)
    lookup = define_tool(
        name="invoice",
        description="The invoice.",
        input_schema={"type": "object"},
        execute=lambda _: "42 EUR",
    )
    billing = create_agent(
        name="billing", model=bc, system_prompt="You are billing.", tools=[lookup]
    )
    tc = script_client(triage_turns)
    target: Any = Handoff(billing, **handoff) if handoff else billing
    triage = create_agent(
        name="triage", model=tc, system_prompt="You are triage.", handoffs=[target]
    )
    return triage, billing, tc, bc


async def test_a_handoff_ends_the_round_and_the_target_answers_in_the_same_turn() -> None:
    triage, _, tc, bc = pair(
        [transfer("billing")],
        [{"tool_use": [{"name": "invoice", "input": {}}]}, {"text": "Your invoice is 42 EUR."}],
    )
    session = Session()
    result = await triage.run_turn(session, "Where is my invoice?")
    assert result.text == "Your invoice is 42 EUR."
    assert len(tc.calls) == 1  # triage's round ended with the transfer
    # The target ran as itself: its own system prompt and tools.
    assert [b["text"] for b in bc.calls[0]["system"]] == ["You are billing."]
    assert [t["name"] for t in bc.calls[0]["tools"]] == ["invoice"]
    assert [t["name"] for t in tc.calls[0]["tools"]] == ["transfer_to_billing"]
    types = [e["type"] for e in result.events]
    assert types.count("done") == 1 and types[-1] == "done"
    (handoff,) = [e for e in result.events if e["type"] == "handoff"]
    assert (handoff["from_agent"], handoff["to_agent"], handoff["reason"]) == (
        "triage",
        "billing",
        "billing question",
    )
    assert result.usage == {"input_tokens": 3, "output_tokens": 3}  # all three requests
    # Each assistant message says which agent wrote it; the session stays JSON data.
    authors = [(m["role"], m.get("agent")) for m in session.messages]
    assert authors == [
        ("user", None),
        ("assistant", "triage"),
        ("tool", None),
        ("assistant", "billing"),
        ("tool", None),
        ("assistant", "billing"),
    ]
    assert Session.from_json(session.to_json()) == session


async def test_the_next_turn_goes_to_the_agent_holding_the_conversation() -> None:
    triage, _, tc, bc = pair([transfer("billing")], [{"text": "42 EUR."}, {"text": "Paid."}])
    session = Session()
    await triage.run_turn(session, "Invoice?")
    result = await triage.run_turn(session, "Can I pay now?")
    assert result.text == "Paid."
    assert len(tc.calls) == 1
    assert texts(bc.calls[1]["messages"])[-1] == ("user", "Can I pay now?")
    # A session loaded from JSON knows the holder too.
    again = Session.from_json(session.to_json())
    assert triage.turn_agent(again).name == "billing"


async def test_the_caller_names_another_agent_of_the_handoffs() -> None:
    triage, _, _, _ = pair([transfer("billing"), {"text": "Triage again."}], [{"text": "42."}])
    session = Session()
    await triage.run_turn(session, "Invoice?")
    result = await triage.run_turn(session, "Something else", agent="triage")
    assert result.text == "Triage again."
    assert session.messages[-1]["agent"] == "triage"
    with pytest.raises(ConfigError, match="'nobody' is not this agent"):
        await triage.run_turn(session, "x", agent="nobody")


async def test_input_filters_choose_what_the_target_sees() -> None:
    history = [("user", "Earlier"), ("assistant", "Earlier answer")]
    seen: dict[str, list[Any]] = {}
    for name, chosen in (
        ("all", handoff_filters.all),
        ("last", handoff_filters.last_user_message),
        ("no_tools", handoff_filters.no_tool_calls),
    ):
        triage, _, _, bc = pair(
            [{"text": "Earlier answer"}, transfer("billing")],
            [{"text": "ok"}],
            input_filter=chosen,
        )
        session = Session()
        await triage.run_turn(session, "Earlier")
        await triage.run_turn(session, "Invoice?")
        seen[name] = bc.calls[0]["messages"]
        # What is kept is always everything, whatever the target was sent.
        assert len(session.messages) == 6
    assert texts(seen["all"])[:2] == history
    assert [m["role"] for m in seen["all"]] == ["user", "assistant", "user", "assistant", "tool"]
    assert texts(seen["last"]) == [("user", "Invoice?")]
    assert texts(seen["no_tools"]) == [*history, ("user", "Invoice?")]
    assert [m["role"] for m in seen["no_tools"]] == ["user", "assistant", "user"]


async def test_a_chain_past_max_handoffs_is_the_models_tool_error() -> None:
    refunds = create_agent(name="refunds", model=script_client([]))
    billing_client = script_client([transfer("refunds"), {"text": "billing answers"}])
    billing = create_agent(name="billing", model=billing_client, handoffs=[refunds])
    triage = create_agent(
        name="triage",
        model=script_client([transfer("billing")]),
        handoffs=[billing],
        max_handoffs=1,
    )
    session = Session()
    result = await triage.run_turn(session, "go")
    # triage -> billing, then billing's transfer is past the entry agent's bound: it is the
    # model's tool error, and billing answers itself.
    assert result.text == "billing answers"
    assert [e["to_agent"] for e in result.events if e["type"] == "handoff"] == ["billing"]
    refused = [p for m in session.messages for p in m["content"] if p["type"] == "tool_result"]
    assert refused[-1]["is_error"] and "max_handoffs=1" in refused[-1]["output"]
    assert session.messages[-1]["agent"] == "billing"
    # Without the bound the same chain reaches refunds.
    assert triage.max_handoffs == 1 and billing.max_handoffs == 5
    assert issubclass(HandoffLimitError, Exception)


def test_handoffs_need_names() -> None:
    nameless = create_agent(model=script_client([]))
    with pytest.raises(ConfigError, match="needs a name"):
        Handoff(nameless)
    billing = create_agent(name="billing", model=script_client([]))
    with pytest.raises(ConfigError, match="needs the agent's own name"):
        create_agent(model=script_client([]), handoffs=[billing])
    with pytest.raises(ConfigError, match="twice"):
        create_agent(name="t", model=script_client([]), handoffs=[billing, Handoff(billing)])
    with pytest.raises(ConfigError, match="max_handoffs"):
        create_agent(name="t", model=script_client([]), max_handoffs=-1)
