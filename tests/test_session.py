from __future__ import annotations

import datetime as dt
import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tether import NotJSONSafeError, Session, SessionFormatError, reduce, remember
from tether.events import RENDER_ONLY


def test_render_only_events_return_the_same_session_unchanged() -> None:
    s = Session(id="s1")
    before = s.to_json()
    samples: list[Any] = [
        {"type": "text", "text": "a", "snapshot": "a"},
        {"type": "thinking", "text": "hmm"},
        {"type": "tool_input_delta", "id": "c", "name": "t", "partial": "{", "snapshot": "{"},
        {"type": "partial_output", "output": {"a": "b"}},
        {"type": "step", "workflow": "w", "step": "s"},
        {"type": "progress", "stage": "sent"},
        {"type": "surface", "surface_id": "sf", "line": "{}"},
        {"type": "guardrail", "name": "g", "target": "output", "action": "deny"},
        {"type": "trace", "record": {"phase": "tool", "name": "x", "at": 0.0}},
        {"type": "error", "error": RuntimeError("x")},
        {
            "type": "handoff",
            "from_agent": "a",
            "to_agent": "b",
            "reason": None,
            "tool_call_id": "c",
        },
    ]
    assert {e["type"] for e in samples} == RENDER_ONLY
    for event in samples:
        assert reduce(s, event) is s
    assert s.to_json() == before


def test_reduce_folds_message_tool_use_tool_result_and_done() -> None:
    s = Session(id="s1")
    for event in [
        {"type": "message", "role": "user", "text": "hi"},
        {
            "type": "tool_use",
            "id": "a",
            "name": "t",
            "input": {"x": 1},
            "preamble": [{"type": "thinking", "text": "plan", "signature": "sig"}],
        },
        {"type": "tool_use", "id": "b", "name": "t", "input": {"x": 2}},
        {"type": "tool_result", "id": "a", "name": "t", "output": "1"},
        {"type": "tool_result", "id": "b", "name": "t", "output": "boom", "is_error": True},
        {"type": "done", "text": "ok", "usage": {}, "stop_reason": "end_turn"},
    ]:
        s = reduce(s, event)  # type: ignore[arg-type]
    assert s.messages == [
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "text": "plan", "signature": "sig"},
                {"type": "tool_call", "id": "a", "name": "t", "input": {"x": 1}},
                {"type": "tool_call", "id": "b", "name": "t", "input": {"x": 2}},
            ],
        },
        {
            "role": "tool",
            "content": [
                {"type": "tool_result", "id": "a", "name": "t", "output": "1", "is_error": False},
                {"type": "tool_result", "id": "b", "name": "t", "output": "boom", "is_error": True},
            ],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "ok"}]},
    ]


def test_the_calls_of_a_later_round_join_that_rounds_assistant_message() -> None:
    s = Session(id="s1")
    for event in [
        {"type": "message", "role": "user", "text": "hi"},
        {"type": "tool_use", "id": "a", "name": "t", "input": {}, "preamble": []},
        {"type": "tool_result", "id": "a", "name": "t", "output": "1"},
        {"type": "tool_use", "id": "b", "name": "t", "input": {}, "preamble": []},
        {"type": "tool_use", "id": "c", "name": "t", "input": {}},
    ]:
        reduce(s, event)  # type: ignore[arg-type]
    assert [(m["role"], [p.get("id") for p in m["content"]]) for m in s.messages] == [
        ("user", [None]),
        ("assistant", ["a"]),
        ("tool", ["a"]),
        ("assistant", ["b", "c"]),
    ]


def test_a_tool_use_opens_an_assistant_message_unless_its_round_has_one_open() -> None:
    # Hand-built event streams may leave `preamble` out: a call after a user or tool message
    # still opens an assistant message, and a call carrying a preamble opens a new round.
    s = Session(id="s1")
    for event in [
        {"type": "message", "role": "user", "text": "hi"},
        {"type": "tool_use", "id": "a", "name": "t", "input": {}},
        {"type": "tool_use", "id": "b", "name": "t", "input": {}},
        {"type": "tool_use", "id": "c", "name": "t", "input": {}, "preamble": []},
    ]:
        reduce(s, event)  # type: ignore[arg-type]
    assert [(m["role"], [p.get("id") for p in m["content"]]) for m in s.messages] == [
        ("user", [None]),
        ("assistant", ["a", "b"]),
        ("assistant", ["c"]),
    ]


def test_done_with_empty_text_adds_no_message() -> None:
    s = Session()
    reduce(s, {"type": "done", "text": "", "usage": {}, "stop_reason": "max_tool_rounds"})
    assert s.messages == []


def test_remember_sets_keys_and_none_deletes() -> None:
    s = Session()
    s = reduce(s, remember({"patient_id": "p_7", "tone": "brief"}))
    assert s.memory == {"patient_id": "p_7", "tone": "brief"}
    s = reduce(s, remember({"tone": None}))
    assert s.memory == {"patient_id": "p_7"}
    s = reduce(s, remember({"never_set": None}))  # deleting a missing key is a no-op
    assert s.memory == {"patient_id": "p_7"}


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        ({"when": dt.datetime(2026, 1, 1)}, "memory.when: datetime is not JSON-safe"),
        ({"a": {"b": [1, {1, 2}]}}, "memory.a.b[1]: set is not JSON-safe"),
        ({"t": (1, 2)}, "memory.t: tuple is not JSON-safe"),
        ({"f": math.nan}, "memory.f: float nan is not JSON-safe"),
        ({"fn": len}, "memory.fn: builtin_function_or_method is not JSON-safe"),
        ({"k": {1: "x"}}, "memory.k[1]: int key is not JSON-safe"),
        ({"s": ["ok ø", "bad \udc80"]}, "memory.s[1]: str with a lone surrogate is not JSON-safe"),
    ],
)
def test_a_patch_that_is_not_json_safe_raises_at_the_write_naming_the_path(
    patch: dict[str, Any], message: str
) -> None:
    with pytest.raises(NotJSONSafeError) as info:
        remember(patch)
    assert str(info.value) == message


def test_reduce_over_a_turn_costs_the_same_on_a_long_session() -> None:
    # reduce appends in place: the session list object is the one that grows, never copied.
    long = Session(
        messages=[
            {"role": "user", "content": [{"type": "text", "text": str(i)}]} for i in range(10_000)
        ]
    )
    messages = long.messages
    reduce(long, {"type": "message", "role": "user", "text": "x"})
    assert long.messages is messages and len(messages) == 10_001


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=10,
)
parts = st.one_of(
    st.builds(lambda t: {"type": "text", "text": t}, st.text()),
    st.builds(lambda t, s: {"type": "thinking", "text": t, "signature": s}, st.text(), st.text()),
    st.builds(
        lambda i, n, v: {"type": "tool_call", "id": i, "name": n, "input": v},
        st.text(min_size=1),
        st.text(min_size=1),
        json_values,
    ),
    st.builds(
        lambda i, n, o, e: {"type": "tool_result", "id": i, "name": n, "output": o, "is_error": e},
        st.text(),
        st.text(),
        st.text(),
        st.booleans(),
    ),
)
sessions = st.builds(
    lambda sid, msgs, mem: Session(id=sid, messages=msgs, memory=mem),
    st.text(),
    st.lists(
        st.fixed_dictionaries(
            {
                "role": st.sampled_from(["user", "assistant", "tool"]),
                "content": st.lists(parts, max_size=3),
            }
        ),
        max_size=5,
    ),
    st.dictionaries(st.text(max_size=8), json_values, max_size=4),
)


@settings(max_examples=200, deadline=None)
@given(sessions)
def test_any_session_survives_to_json_from_json(session: Session) -> None:
    again = Session.from_json(session.to_json())
    assert again == session
    assert again.to_json() == session.to_json()


def _one_message(message: Any) -> str:
    return json.dumps({"id": "s", "messages": [message]})


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            "{not json",
            "session is not JSON: Expecting property name enclosed in double quotes: "
            "line 1 column 2 (char 1)",
        ),
        ("[]", "session must be an object, got list"),
        (json.dumps({"messages": []}), "session.id must be a string"),
        (json.dumps({"id": "s", "messages": {}}), "session.messages must be a list"),
        (
            _one_message({"role": "system", "content": []}),
            "session.messages[0]: a message needs role user, assistant or tool",
        ),
        (
            _one_message({"role": "user", "content": "hi"}),
            "session.messages[0].content must be a list of parts",
        ),
        (
            _one_message({"role": "user", "content": [{"type": "img"}]}),
            "session.messages[0].content[0]: unknown part {'type': 'img'}",
        ),
        (
            _one_message({"role": "user", "content": ["hi"]}),
            "session.messages[0].content[0]: unknown part 'hi'",
        ),
        (
            _one_message(
                {"role": "tool", "content": [{"type": "tool_result", "id": "a", "name": "t"}]}
            ),
            "session.messages[0].content[0]: tool_result part lacks 'output'",
        ),
        (json.dumps({"id": "s", "memory": []}), "session.memory must be an object"),
        (
            _one_message({"role": "user", "content": [{"type": "text", "text": 5}]}),
            "session.messages[0].content[0].text must be str, got int",
        ),
        (
            _one_message(
                {
                    "role": "tool",
                    "content": [
                        {
                            "type": "tool_result",
                            "id": "a",
                            "name": "t",
                            "output": "o",
                            "is_error": "no",
                        }
                    ],
                }
            ),
            "session.messages[0].content[0].is_error must be bool, got str",
        ),
        (
            _one_message(
                {
                    "role": "assistant",
                    "content": [{"type": "thinking", "text": "t", "signature": 1}],
                }
            ),
            "session.messages[0].content[0].signature must be str",
        ),
    ],
)
def test_a_corrupt_session_raises_a_typed_error_naming_what_is_wrong(
    data: str, message: str
) -> None:
    with pytest.raises(SessionFormatError) as info:
        Session.from_json(data)
    assert str(info.value) == message


def test_messages_and_memory_may_be_left_out_of_a_stored_session() -> None:
    assert Session.from_json('{"id": "s"}') == Session(id="s", messages=[], memory={})


def test_to_json_is_compact_and_keeps_non_ascii_text() -> None:
    # What the stores write and the UI shows: no padding, and text as the user typed it.
    s = reduce(Session(id="s"), {"type": "message", "role": "user", "text": "Grüße, 東京"})
    reduce(s, remember({"city": "Zürich"}))
    assert s.to_json() == (
        '{"id":"s","messages":[{"role":"user","content":[{"type":"text","text":"Grüße, 東京"}]}],'
        '"memory":{"city":"Zürich"}}'
    )


def test_remember_refuses_a_patch_that_is_not_a_dict() -> None:
    with pytest.raises(TypeError) as info:
        remember([("tone", "brief")])  # type: ignore[arg-type]
    assert str(info.value) == "remember() takes a dict patch, got list"


def test_a_patch_changed_after_the_write_does_not_change_the_memory() -> None:
    tags: list[Any] = ["a"]
    s = reduce(Session(), remember({"tags": tags}))
    tags.append(dt.datetime(2026, 1, 1))
    assert s.memory == {"tags": ["a"]}


def test_a_session_shows_its_fields_when_printed() -> None:
    assert repr(Session(id="s")) == "Session({'id': 's', 'messages': [], 'memory': {}})"


def test_a_plain_dict_session_is_checked_once_and_then_written_in_place() -> None:
    from tether.session import as_session

    stored: dict[str, Any] = {"id": "s"}  # e.g. a row the caller keeps, messages and memory not yet
    session = as_session(stored)
    reduce(session, {"type": "message", "role": "user", "text": "hi"})
    reduce(session, remember({"tone": "brief"}))
    assert stored == {
        "id": "s",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
        "memory": {"tone": "brief"},
    }


def test_reduce_gives_a_plain_dict_without_memory_one() -> None:
    plain: dict[str, Any] = {"id": "s", "messages": []}
    assert reduce(plain, remember({"tone": "brief"})) is plain
    assert plain["memory"] == {"tone": "brief"}
