"""AG-UI over a real `tether serve` process: RunAgentInput in, AG-UI events out (each one
validated with the ag-ui-protocol package's types), the thread as the memory scope, only new
messages appended, front-end tools answered in the client's next run."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pydantic
import pytest
from ag_ui.core import Event, EventType

from .conftest import Server, read_sse, start_server, write_project

EVENT = pydantic.TypeAdapter(Event)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = write_project(tmp_path_factory.mktemp("agui") / "project")
    server = start_server(
        root, {"TETHER_TEST_STORE": f"sqlite:///{root / 'tether.db'}", "TETHER_TEST_DELAY": "0"}
    )
    yield server
    server.stop()


@pytest.fixture
def client(server: Server) -> Iterator[httpx.Client]:
    with server.client() as client:
        yield client


def run(
    client: httpx.Client, thread: str, messages: list[dict[str, Any]], **extra: Any
) -> list[Any]:
    body = {"threadId": thread, "runId": f"r-{len(messages)}", "messages": messages, **extra}
    with client.stream("POST", "/api/agents/chat/ag-ui", json=body) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        events = [EVENT.validate_python(m.data) for m in read_sse(response)]
    check_order(events)
    return events


def check_order(events: list[Any]) -> None:
    """The protocol's ordering: started first, finished (or error) last, a text message ended
    before a tool call starts, nothing left open."""
    assert events[0].type == EventType.RUN_STARTED
    assert events[-1].type in (EventType.RUN_FINISHED, EventType.RUN_ERROR)
    text_open: str | None = None
    reasoning_open: str | None = None
    calls_open: set[str] = set()
    for event in events[1:-1]:
        kind = event.type
        if kind == EventType.REASONING_START:
            assert reasoning_open is None and text_open is None
            reasoning_open = event.message_id
        elif kind == EventType.REASONING_MESSAGE_CONTENT:
            assert event.message_id == reasoning_open and event.delta
        elif kind == EventType.REASONING_END:
            assert event.message_id == reasoning_open
            reasoning_open = None
        elif kind == EventType.TEXT_MESSAGE_START:
            assert text_open is None and reasoning_open is None
            text_open = event.message_id
        elif kind == EventType.TEXT_MESSAGE_CONTENT:
            assert event.message_id == text_open and event.delta
        elif kind == EventType.TEXT_MESSAGE_END:
            assert event.message_id == text_open
            text_open = None
        elif kind == EventType.TOOL_CALL_START:
            assert text_open is None, "text must end before a tool call starts"
            assert reasoning_open is None
            calls_open.add(event.tool_call_id)
        elif kind == EventType.TOOL_CALL_ARGS:
            assert event.tool_call_id in calls_open
        elif kind == EventType.TOOL_CALL_END:
            calls_open.remove(event.tool_call_id)
        assert kind not in (EventType.RUN_STARTED, EventType.RUN_FINISHED, EventType.RUN_ERROR)
    assert text_open is None and reasoning_open is None and not calls_open


def of(events: list[Any], kind: EventType) -> list[Any]:
    return [e for e in events if e.type == kind]


def wire(messages: list[Any]) -> list[dict[str, Any]]:
    return [m.model_dump(by_alias=True, mode="json") for m in messages]


def stored_roles(client: httpx.Client, scope: str) -> list[str]:
    turns = client.get(f"/api/scopes/{scope}").json()["turns"]
    return [r["record"]["role"] for t in turns for r in t["records"]]


def text_of(events: list[Any]) -> str:
    return "".join(e.delta for e in of(events, EventType.TEXT_MESSAGE_CONTENT))


def test_a_thread_is_a_scope_and_only_new_messages_are_appended(client: httpx.Client) -> None:
    first = run(client, "thread-1", [{"id": "u1", "role": "user", "content": "hi"}])
    assert text_of(first) == "Hello from turn 1."
    (snapshot,) = of(first, EventType.MESSAGES_SNAPSHOT)
    held = wire(snapshot.messages)
    # The client's own id, and the id the answer streamed under.
    [streamed] = of(first, EventType.TEXT_MESSAGE_START)
    assert [(m["role"], m["id"]) for m in held] == [
        ("user", "u1"),
        ("assistant", streamed.message_id),
    ]
    assert of(first, EventType.STATE_SNAPSHOT)[0].snapshot == {}
    second = run(client, "thread-1", [*held, {"id": "u2", "role": "user", "content": "again"}])
    assert text_of(second) == "Hello from turn 2."
    (snapshot,) = of(second, EventType.MESSAGES_SNAPSHOT)
    assert [m.role for m in snapshot.messages] == ["user", "assistant", "user", "assistant"]
    scope = client.get("/api/scopes/thread-1").json()
    assert scope["info"]["length"] == 5  # the pin, then two turns: nothing stored twice


def test_a_client_that_renamed_the_messages_is_matched_by_content(client: httpx.Client) -> None:
    first = run(client, "thread-2", [{"id": "a", "role": "user", "content": "hi"}])
    answer = text_of(first)
    messages = [
        {"id": "a", "role": "user", "content": "hi"},
        {"id": "b", "role": "assistant", "content": answer},
        {"id": "c", "role": "user", "content": "again"},
    ]
    second = run(client, "thread-2", messages)
    assert text_of(second) == "Hello from turn 2."
    assert client.get("/api/scopes/thread-2").json()["info"]["length"] == 5


def test_nothing_new_runs_nothing_and_sends_the_snapshots(client: httpx.Client) -> None:
    first = run(client, "thread-3", [{"id": "u1", "role": "user", "content": "hi"}])
    held = wire(of(first, EventType.MESSAGES_SNAPSHOT)[0].messages)
    again = run(client, "thread-3", held)
    assert [e.type for e in again] == [
        EventType.RUN_STARTED,
        EventType.MESSAGES_SNAPSHOT,
        EventType.STATE_SNAPSHOT,
        EventType.RUN_FINISHED,
    ]


def test_a_backend_tool_call_streams_after_the_text_ends(client: httpx.Client) -> None:
    events = run(client, "thread-4", [{"id": "u1", "role": "user", "content": "tool please"}])
    kinds = [e.type for e in events]
    start = kinds.index(EventType.TOOL_CALL_START)
    assert EventType.TEXT_MESSAGE_END in kinds[:start]
    args = "".join(e.delta for e in of(events, EventType.TOOL_CALL_ARGS))
    assert args == '{"q": "x"}'  # the provider's own fragments, as they streamed
    (result,) = of(events, EventType.TOOL_CALL_RESULT)
    assert result.content == "found tool please"
    assert text_of(events).endswith("The tool answered.")
    assert of(events, EventType.RUN_FINISHED)[0].outcome.pending_tool_call_ids is None


def test_a_front_end_tool_goes_to_the_client_and_its_result_comes_back(
    client: httpx.Client,
) -> None:
    tools = [
        {
            "name": "pick_color",
            "description": "Ask the user to pick a color.",
            "parameters": {"type": "object", "properties": {"hint": {"type": "string"}}},
        }
    ]
    first = run(
        client, "thread-5", [{"id": "u1", "role": "user", "content": "front end"}], tools=tools
    )
    (start,) = of(first, EventType.TOOL_CALL_START)
    assert start.tool_call_name == "pick_color"
    assert not of(first, EventType.TOOL_CALL_RESULT)  # the server never ran it
    finished = of(first, EventType.RUN_FINISHED)[0]
    assert finished.outcome.pending_tool_call_ids == [start.tool_call_id]
    held = wire(of(first, EventType.MESSAGES_SNAPSHOT)[0].messages)
    assert [m["role"] for m in held] == ["user", "assistant"]
    assert held[1]["toolCalls"][0]["id"] == start.tool_call_id
    # The episode paused on the client's call (not cancelled): it waits in the run store.
    (started,) = [e.value["run_id"] for e in of(first, EventType.CUSTOM)]
    paused = client.get(f"/api/runs/{started}").json()["run"]
    assert paused["status"] == "paused"
    assert [(p["id"], p["name"], p["kind"]) for p in paused["pending"]] == [
        (start.tool_call_id, "pick_color", "external")
    ]
    result = {"id": "t1", "role": "tool", "toolCallId": start.tool_call_id, "content": "red"}
    second = run(client, "thread-5", [*held, result], tools=tools)
    assert text_of(second) == "The tool answered."
    # The result resumed that same run; the client's result is not streamed back to it.
    assert [e.value["run_id"] for e in of(second, EventType.CUSTOM)] == [started]
    assert not of(second, EventType.TOOL_CALL_RESULT)
    resumed = client.get(f"/api/runs/{started}").json()["run"]
    assert (resumed["status"], resumed["pending"]) == ("completed", [])
    events = client.get(f"/api/events/{started}").json()["events"]
    decision = next(e["data"] for e in events if e["type"] == "decision")
    assert (decision["action"], decision["output"], decision["decided_by"]) == (
        "result",
        "red",
        "ag-ui",
    )
    assert [m.role for m in of(second, EventType.MESSAGES_SNAPSHOT)[0].messages] == [
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    assert stored_roles(client, "thread-5") == ["user", "assistant", "tool", "assistant"]


def test_session_memory_goes_out_as_a_state_snapshot(client: httpx.Client) -> None:
    events = run(
        client,
        "thread-6",
        [{"id": "u1", "role": "user", "content": "remember blue"}],
        state={"theme": "dark"},
    )
    (state,) = of(events, EventType.STATE_SNAPSHOT)
    assert state.snapshot == {"theme": "dark", "fact": "remember blue"}


def test_a_body_that_is_not_a_run_input_is_refused(client: httpx.Client) -> None:
    response = client.post("/api/agents/chat/ag-ui", json={"threadId": "x"})
    assert response.status_code == 400
    assert "RunAgentInput" in response.json()["error"]["message"]


def test_reasoning_streams_as_its_own_message_before_the_text(client: httpx.Client) -> None:
    events = run(client, "thread-7", [{"id": "u1", "role": "user", "content": "think first"}])
    kinds = [e.type for e in events]
    assert kinds.index(EventType.REASONING_END) < kinds.index(EventType.TEXT_MESSAGE_START)
    reasoning = "".join(e.delta for e in of(events, EventType.REASONING_MESSAGE_CONTENT))
    assert reasoning == "Pondering it."
    assert text_of(events) == "Thought through."


# -- a real @ag-ui/client ----------------------------------------------------------------------

AGUI_MODULES = os.environ.get("TETHER_TEST_AGUI_MODULES", "")
"""A node_modules directory holding @ag-ui/client (`npm install @ag-ui/client`)."""
needs_agui_client = pytest.mark.skipif(
    not (shutil.which("node") and AGUI_MODULES and Path(AGUI_MODULES, "@ag-ui/client").is_dir()),
    reason="needs node and TETHER_TEST_AGUI_MODULES=<a node_modules with @ag-ui/client> "
    "(npm install @ag-ui/client)",
)


@needs_agui_client
def test_the_ag_ui_client_keeps_its_ids_and_the_streamed_ones_in_order(server: Server) -> None:
    done = subprocess.run(
        [
            "node",
            str(Path(__file__).with_name("agui_client.mjs")),
            server.base + "/api/agents/chat/ag-ui",
            "thread-client",
            "hi",
            "tool x",
            "again",
        ],
        env={
            **os.environ,
            "AGUI_MODULES": AGUI_MODULES,
            "AGUI_HEADERS": json.dumps(server.headers),
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    runs = [json.loads(line) for line in done.stdout.splitlines()]
    last = runs[-1]["messages"]
    assert [(m["role"], m["content"]) for m in last] == [
        ("user", "hi"),
        ("assistant", "Hello from turn 1."),
        ("user", "tool x"),
        ("assistant", "Looking it up. "),
        ("tool", "found tool x"),
        ("assistant", "The tool answered."),
        ("user", "again"),
        ("assistant", "Hello from turn 3."),
    ]
    users = [m["id"] for m in last if m["role"] == "user"]
    assert users == ["client-user-1", "client-user-2", "client-user-3"]
    streamed = [i for run in runs for i in run["streamed"]]
    assert [m["id"] for m in last if m["role"] != "user"] == streamed
    assert len({m["id"] for m in last}) == len(last)
    # Each run's state is the previous one's plus what it added, in order.
    for before, after in itertools.pairwise(runs):
        assert after["messages"][: len(before["messages"])] == before["messages"]


PHOTO = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 400  # over the 64 KB threshold


def stored_user_records(client: httpx.Client, scope: str) -> list[Any]:
    turns = client.get(f"/api/scopes/{scope}").json()["turns"]
    records = [r["record"] for t in turns for r in t["records"]]
    return [r for r in records if r["role"] == "user"]


def test_image_and_document_content_becomes_media_parts(client: httpx.Client) -> None:
    import base64
    import hashlib

    photo = base64.b64encode(PHOTO).decode()
    content = [
        {"type": "text", "text": "what is this?"},
        {"type": "image", "source": {"type": "data", "value": photo, "mimeType": "image/png"}},
        {
            "type": "document",
            "source": {
                "type": "url",
                "value": "https://example.com/c.pdf",
                "mimeType": "application/pdf",
            },
        },
    ]
    events = run(client, "thread-media", [{"id": "u1", "role": "user", "content": content}])
    assert text_of(events) == "Hello from turn 1."
    (user,) = stored_user_records(client, "thread-media")
    text, image, document = user["content"]
    assert text == {"type": "text", "text": "what is this?"}
    assert image["type"] == "image" and image["media_type"] == "image/png"
    assert image["blob"] == hashlib.sha256(PHOTO).hexdigest()
    assert document == {
        "type": "document",
        "media_type": "application/pdf",
        "url": "https://example.com/c.pdf",
    }
    # The client sends the thread back with its binary content: matched, not appended again.
    (snapshot,) = of(events, EventType.MESSAGES_SNAPSHOT)
    held = wire(snapshot.messages)
    held[0]["content"] = content
    again = run(client, "thread-media", [*held, {"id": "u2", "role": "user", "content": "and?"}])
    assert text_of(again) == "Hello from turn 2."
    assert len(stored_user_records(client, "thread-media")) == 2


@pytest.mark.parametrize(
    ("part", "says"),
    [
        (
            {"type": "image", "source": {"type": "data", "value": "!!!", "mimeType": "image/png"}},
            "base64",
        ),
        (
            {"type": "video", "source": {"type": "data", "value": "AAAA", "mimeType": "video/mp4"}},
            "not supported",
        ),
        (
            {"type": "document", "source": {"type": "file", "value": "f-1", "mimeType": "x/y"}},
            "not one tether can read",
        ),
    ],
)
def test_content_tether_cannot_send_is_400(
    client: httpx.Client, part: dict[str, Any], says: str
) -> None:
    body = {
        "threadId": "thread-bad-media",
        "runId": "r",
        "messages": [{"id": "u1", "role": "user", "content": [part]}],
    }
    response = client.post("/api/agents/chat/ag-ui", json=body)
    assert response.status_code == 400, response.text
    assert says in response.text
