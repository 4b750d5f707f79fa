from __future__ import annotations

import datetime
import math
from typing import Any

import pytest

from tether import Session, create_agent, frame_client_message, should_run_turn
from tether.client_messages import js_stringify
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
        should_run_turn({"kind": "poke"})  # type: ignore[misc, arg-type]
    with pytest.raises(ClientMessageError, match="lacks 'code'"):
        frame_client_message({"kind": "validation_rejection", "message": "m"})  # type: ignore[arg-type]


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
        (
            {"kind": "function_result", "call": "f", "value": {"at": datetime.date(2026, 1, 1)}},
            "value",
        ),
        (
            {"kind": "surface_action", "surface_id": "s", "action": "a", "context": {1, 2}},
            "context",
        ),
        ({"kind": "functionResult", "call": "f", "value": b"raw"}, "value"),
    ],
    ids=["date", "set", "bytes"],
)
def test_a_value_that_is_not_json_is_a_typed_error_naming_the_field(msg: Any, where: str) -> None:
    # A date or a set has no JSON form: refused rather than framed as something it is not.
    with pytest.raises(ClientMessageError, match=f"{msg['kind']} {where} is not JSON"):
        frame_client_message(msg)


# -- the seed's spellings ---------------------------------------------------------------------

SEED_SPELLING = [
    (
        {"kind": "surfaceAction", "surfaceId": "sf_1", "action": "submit", "context": {"n": 1.0}},
        'The user triggered the submit action on surface sf_1 with context {"n":1}.',
    ),
    (
        {"kind": "functionResult", "call": "get_time", "value": [9, 30.5]},
        "The function get_time returned: [9,30.5].",
    ),
    (
        {"kind": "validationRejection", "code": "E_SCHEMA", "message": "missing title"},
        "The previous surface was rejected (E_SCHEMA): missing title. Emit a corrected surface.",
    ),
]


@pytest.mark.parametrize(("msg", "framed"), SEED_SPELLING)
def test_the_seed_spelling_of_kinds_and_fields_is_accepted(msg: Any, framed: str) -> None:
    assert should_run_turn(msg)
    assert frame_client_message(msg) == framed


@pytest.mark.parametrize("msg", [{"kind": "dataModelUpdate", "surfaceId": "s", "patch": {}}])
def test_the_seed_spelling_of_silent_kinds(msg: Any) -> None:
    assert not should_run_turn(msg)
    with pytest.raises(ClientMessageError, match="applied silently"):
        frame_client_message(msg)


def test_a_surface_action_without_a_surface_names_the_seed_field() -> None:
    with pytest.raises(ClientMessageError, match="surfaceAction message lacks 'surfaceId'"):
        frame_client_message({"kind": "surfaceAction", "action": "a"})


async def test_send_client_message_takes_the_seed_spelling() -> None:
    client = script_client([{"text": "ok"}])
    agent = create_agent(llm=client)
    msg: Any = {"kind": "surfaceAction", "surfaceId": "sf_9", "action": "open"}
    events = [e async for e in agent.send_client_message(Session(), msg)]
    assert events[0]["text"] == (
        "The user triggered the open action on surface sf_9 with context null."
    )


# -- JSON.stringify ---------------------------------------------------------------------------

# What `JSON.stringify(value)` prints in a JavaScript engine, for the value Python holds.
STRINGIFY = [
    (1.0, "1"),
    (-0.0, "0"),
    (0.1, "0.1"),
    (12.5, "12.5"),
    (1e21, "1e+21"),
    (1e20, "100000000000000000000"),
    (1.5e-7, "1.5e-7"),
    (0.000001, "0.000001"),
    (5e-324, "5e-324"),
    (1.7976931348623157e308, "1.7976931348623157e+308"),
    (2**60, "1152921504606847000"),
    (2**53, "9007199254740992"),
    (math.nan, "null"),
    (-math.inf, "null"),
    (True, "true"),
    (None, "null"),
    ('Åsa "quoted" \\ back', '"Åsa \\"quoted\\" \\\\ back"'),
    ("tab\tnl\ncr\rbs\bff\f\x01\x1f\x7f", '"tab\\tnl\\ncr\\rbs\\bff\\f\\u0001\\u001f\x7f"'),
    ("\u2028 </script> /", '"\u2028 </script> /"'),
    ("lone \ud800 surrogate", '"lone \\ud800 surrogate"'),
    ("emoji \U0001f600", '"emoji \U0001f600"'),
    ({"b": 1, "a": [1.0, {"x": None}]}, '{"b":1,"a":[1,{"x":null}]}'),
    ({1: "one", 2.5: "x", None: "n"}, '{"1":"one","2.5":"x","null":"n"}'),
    ((), "[]"),
    ({}, "{}"),
]


@pytest.mark.parametrize(("value", "expected"), STRINGIFY, ids=[repr(v)[:30] for v, _ in STRINGIFY])
def test_js_stringify_matches_javascript(value: Any, expected: str) -> None:
    assert js_stringify(value) == expected


def test_js_stringify_refuses_what_has_no_json_form() -> None:
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(ValueError, match="circular"):
        js_stringify(loop)
    with pytest.raises(TypeError, match="set"):
        js_stringify({1, 2})
