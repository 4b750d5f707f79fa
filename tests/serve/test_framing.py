"""SSE framing: a message's data comes back exactly as sent whatever its text holds — every
Unicode line-break class, lone surrogates, NUL — for serve's run streams, AG-UI and the UI's
live updates; fuzzed on the framer and checked end to end against a real `tether serve`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from ag_ui.core import TextMessageContentEvent
from hypothesis import given, settings
from hypothesis import strategies as st

from tether.serve._agui import _sse
from tether.serve._sse import sse_message

from .conftest import (
    Server,
    parse_sse,
    read_sse,
    sse_lines,
    start_server,
    stream_all,
    write_project,
)

BREAKS = "\n\r\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
"""Every character `str.splitlines()` ends a line at (only CR LF, CR and LF end an SSE line)."""
HOSTILE = f"a{BREAKS}b"
"""What a run's text may hold (a lone surrogate and NUL are refused as input)."""

ANY_TEXT = st.text(st.characters(codec=None, exclude_categories=()), max_size=40)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | ANY_TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(ANY_TEXT, inner, max_size=4),
    max_leaves=12,
)


def parse(wire: bytes) -> list[tuple[str, str, str | None]]:
    # The bytes a browser gets: UTF-8 (strict: a lone surrogate must not reach the wire raw).
    return list(parse_sse(sse_lines([wire.decode("utf-8")])))


@settings(max_examples=400, deadline=None)
@given(value=JSON_VALUES, event=st.sampled_from(["agent_text_delta", "run_ended"]))
def test_any_json_value_comes_back_whole(value: Any, event: str) -> None:
    [(kind, data, ident)] = parse(sse_message({"v": value}, event=event, id=7))
    assert (kind, ident) == (event, "7")
    assert json.loads(data) == {"v": value}


@settings(max_examples=300, deadline=None)
@given(text=st.text(st.characters(codec="utf-8"), max_size=60))
def test_a_string_payload_keeps_its_characters_and_only_its_real_line_breaks(text: str) -> None:
    [(_, data, _)] = parse(sse_message(text))
    # SSE hands back lines joined with LF: a CR or CR LF in the payload reads as LF.
    assert data == text.replace("\r\n", "\n").replace("\r", "\n")


@pytest.mark.parametrize("char", [*BREAKS, "\x00", "\ud800", "\udc00"])
def test_each_hostile_character_alone(char: str) -> None:
    [(_, data, _)] = parse(sse_message({"text": f"x{char}y"}, event="e"))
    assert json.loads(data) == {"text": f"x{char}y"}


@settings(max_examples=200, deadline=None)
@given(text=ANY_TEXT)
def test_ag_ui_events_come_back_whole(text: str) -> None:
    event = TextMessageContentEvent(message_id="m", delta=text or "x")
    [(_, data, _)] = parse(_sse(event))
    # json.loads, as a browser's JSON.parse: pydantic's parser refuses a lone surrogate escape.
    assert json.loads(data) == event.model_dump(mode="json", by_alias=True)


# -- end to end --------------------------------------------------------------------------------

JSON = {"content-type": "application/json"}


def post_json(client: httpx.Client, path: str, body: Any) -> httpx.Response:
    # JSON's escapes carry a lone surrogate, which UTF-8 (httpx's json=) cannot.
    return client.post(path, content=json.dumps(body), headers=JSON)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = write_project(tmp_path_factory.mktemp("framing") / "project")
    server = start_server(
        root, {"TETHER_TEST_STORE": f"sqlite:///{root / 'tether.db'}", "TETHER_TEST_DELAY": "0"}
    )
    yield server
    server.stop()


def test_a_served_run_streams_hostile_text_intact(server: Server) -> None:
    with server.client() as client:
        started = post_json(client, "/api/agents/chat/runs", {"input": f"tool {HOSTILE}"})
        assert started.status_code == 202, started.text
        run_id = started.json()["run_id"]
        messages = stream_all(client, run_id)
        assert messages[-1].event == "run_ended" and messages[-1].data["status"] == "completed"
        ids = [m.id for m in messages if m.id is not None]
        assert ids == list(range(1, len(ids) + 1))  # no event lost or split in two
        results = [m.data["data"] for m in messages if m.event == "agent_tool_result"]
        assert results and results[0]["output"] == f"found tool {HOSTILE}"
        # The UI's live updates (JSON polling) carry it whole too.
        polled = client.get(f"/api/events/{run_id}").json()["events"]
        assert next(e for e in polled if e["type"] == "agent_tool_result")["data"] == results[0]


def test_a_lone_surrogate_in_a_run_input_is_a_400(server: Server) -> None:
    with server.client() as client:
        answer = post_json(client, "/api/agents/chat/runs", {"input": "a\ud800b"})
    assert answer.status_code == 400
    assert answer.json()["error"]["type"] == "NotJSONSafeError"


def test_an_ag_ui_run_streams_hostile_text_intact(server: Server) -> None:
    body = {
        "threadId": "framing",
        "runId": "r1",
        "messages": [{"id": "u1", "role": "user", "content": f"tool {HOSTILE}"}],
        "state": {"note": HOSTILE},
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }
    with (
        server.client() as client,
        client.stream("POST", "/api/agents/chat/ag-ui", json=body) as response,
    ):
        assert response.status_code == 200, response.read()
        events = [m.data for m in read_sse(response)]
    assert events[-1]["type"] == "RUN_FINISHED"
    results = [e for e in events if e["type"] == "TOOL_CALL_RESULT"]
    assert results and results[0]["content"] == f"found tool {HOSTILE}"
    state = [e for e in events if e["type"] == "STATE_SNAPSHOT"]
    assert state[-1]["snapshot"] == {"note": HOSTILE}


def test_the_real_reader_sees_what_a_splitlines_reader_would_break(server: Server) -> None:
    # The check above would pass with a reader that splits like the old framer did only if
    # the framer were right: here the wire itself holds U+2028 inside one data line.
    with server.client() as client:
        started = client.post("/api/agents/chat/runs", json={"input": "tool a\u2028b"})
        run_id = started.json()["run_id"]
        stream_all(client, run_id)
        with client.stream("GET", f"/api/runs/{run_id}/stream") as response:
            wire = b"".join(response.iter_bytes())
    assert "a\u2028b".encode() in wire
    for line in sse_lines([wire.decode("utf-8")]):
        if "\u2028" in line:
            assert line.startswith("data: ") and json.loads(line[6:])
