from __future__ import annotations

import datetime
import math
from typing import Any

import pytest

from tether import Session, create_agent, frame_client_message, should_run_turn
from tether.errors import ClientMessageError
from tether.testing import collect, script_client

FRAMED = [
    (
        {
            "kind": "surface_action",
            "surface_id": "sf_1",
            "action": "submit",
            "context": {"formId": "f1", "name": "Åsa"},
        },
        "The user triggered the submit action on surface sf_1 with context "
        '{"formId":"f1","name":"Åsa"}.',
    ),
    (
        {"kind": "function_result", "call": "get_time", "value": {"h": 9}},
        'The function get_time returned: {"h":9}.',
    ),
    (
        {"kind": "validation_rejection", "code": "E_SCHEMA", "message": "missing title"},
        "The previous surface was rejected (E_SCHEMA): missing title. Emit a corrected surface.",
    ),
]
SILENT = [{"kind": "data_model_update", "patch": {}}, {"kind": "ack"}]


@pytest.mark.parametrize(("msg", "framed"), FRAMED)
def test_turn_kinds_are_framed_with_the_seed_wording(msg: Any, framed: str) -> None:
    assert should_run_turn(msg)
    assert frame_client_message(msg) == framed


@pytest.mark.parametrize("msg", SILENT)
def test_silent_apply_kinds_do_not_run_a_turn_and_cannot_be_framed(msg: Any) -> None:
    assert not should_run_turn(msg)
    with pytest.raises(ClientMessageError, match="applied silently"):
        frame_client_message(msg)


def test_unknown_kinds_and_missing_fields_are_typed_errors() -> None:
    with pytest.raises(ClientMessageError, match="unknown client message kind 'poke'"):
        should_run_turn({"kind": "poke"})  # type: ignore[arg-type]
    with pytest.raises(ClientMessageError, match="lacks 'code'"):
        frame_client_message({"kind": "validation_rejection", "message": "m"})  # type: ignore[typeddict-item]


@pytest.mark.parametrize(("msg", "framed"), FRAMED)
async def test_send_client_message_runs_the_framed_turn(msg: Any, framed: str) -> None:
    client = script_client([{"text": "thanks"}])
    agent = create_agent(llm=client)
    session = Session()
    events = [e async for e in agent.send_client_message(session, msg)]
    assert events[0] == {"type": "message", "role": "user", "text": framed}
    assert events[-1]["text"] == "thanks"
    assert client.calls[0]["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": framed}]}
    ]


@pytest.mark.parametrize("msg", SILENT)
async def test_a_silent_apply_message_yields_nothing_and_never_reaches_the_provider(
    msg: Any,
) -> None:
    client = script_client([{"text": "never"}])
    agent = create_agent(llm=client)
    events = [e async for e in agent.send_client_message(Session(), msg)]
    assert events == [] and client.calls == []
    assert (await collect(agent, Session(), "still works"))[-1]["text"] == "never"


@pytest.mark.parametrize(
    ("msg", "where"),
    [
        ({"kind": "function_result", "call": "f", "value": math.nan}, "value"),
        (
            {"kind": "function_result", "call": "f", "value": {"at": datetime.date(2026, 1, 1)}},
            "value",
        ),
        (
            {"kind": "surface_action", "surface_id": "s", "action": "a", "context": {1, 2}},
            "context",
        ),
    ],
    ids=["nan", "date", "set"],
)
def test_a_value_that_is_not_json_is_a_typed_error_naming_the_field(msg: Any, where: str) -> None:
    # JSON(value) must be JSON: NaN would frame as the bare word NaN, a date would not frame at all.
    with pytest.raises(ClientMessageError, match=f"{msg['kind']} {where} is not JSON"):
        frame_client_message(msg)
