"""`tether serve` as a client sees it: a real server process on loopback (started once for the
module), runs started over HTTP, streams read as SSE, dropped and resumed, cancelled."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tether.lab import Runtime
from tether.testing import script_client
from tether.ui import create_app as create_ui_app

from .conftest import Message, Server, read_sse, start_server, stream_all, write_project


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = write_project(tmp_path_factory.mktemp("serve") / "project")
    server = start_server(
        root, {"TETHER_TEST_STORE": f"sqlite:///{root / 'tether.db'}", "TETHER_TEST_DELAY": "0.01"}
    )
    yield server
    server.stop()


@pytest.fixture
def client(server: Server) -> Iterator[httpx.Client]:
    with server.client() as client:
        yield client


def start(client: httpx.Client, text: str, **body: object) -> dict[str, str]:
    response = client.post("/api/agents/chat/runs", json={"input": text, **body})
    assert response.status_code == 202, response.text
    started: dict[str, str] = response.json()
    return started


def events_of(messages: list[Message]) -> list[Message]:
    return [m for m in messages if m.id is not None]


def test_a_run_streams_every_event_numbered_from_one_and_ends(client: httpx.Client) -> None:
    started = start(client, "hi", scope="greeting", tags=["api"])
    assert started["scope"] == "greeting"
    messages = stream_all(client, started["run_id"])
    events = events_of(messages)
    assert [m.id for m in events] == list(range(1, len(events) + 1))
    assert events[0].event == "agent_started"
    assert events[-1].event == "agent_finished"
    assert events[-1].data["data"]["text"] == "Hello from turn 1."
    assert all(m.data["seq"] == m.id and m.data["type"] == m.event for m in events)
    assert messages[-1].event == "run_ended" and messages[-1].id is None
    assert messages[-1].data == {"run_id": started["run_id"], "status": "completed", "error": None}
    # The same events the store holds, in the same order.
    stored = client.get(f"/api/events/{started['run_id']}").json()["events"]
    assert [(e["seq"], e["type"]) for e in stored] == [(m.id, m.event) for m in events]
    info = client.get(f"/api/runs/{started['run_id']}").json()["run"]
    assert "api" in info["tags"]


def test_turns_on_one_scope_continue_the_conversation(client: httpx.Client) -> None:
    first = start(client, "hi")
    stream_all(client, first["run_id"])
    second = start(client, "again", scope=first["scope"])
    events = events_of(stream_all(client, second["run_id"]))
    assert events[-1].data["data"]["text"] == "Hello from turn 2."


def test_a_dropped_stream_resumes_with_last_event_id_without_loss_or_repeat(
    client: httpx.Client,
) -> None:
    started = start(client, "words 80")
    seen: list[Message] = []
    with client.stream("GET", f"/api/runs/{started['run_id']}/stream") as response:
        for message in read_sse(response):
            seen.append(message)
            if sum(1 for m in seen if m.event == "agent_text_delta") == 10:
                break  # the connection closes here, mid-answer
    last = seen[-1].id
    assert last is not None
    rest = stream_all(client, started["run_id"], last_id=last)
    ids = [m.id for m in events_of(seen + rest)]
    assert ids == list(range(1, len(ids) + 1))
    text = "".join(m.data["data"]["text"] for m in seen + rest if m.event == "agent_text_delta")
    assert text == "".join(f"w{i} " for i in range(80))
    assert rest[-1].data["status"] == "completed"


def test_after_resumes_a_finished_run_from_any_point(client: httpx.Client) -> None:
    started = start(client, "words 5")
    everything = events_of(stream_all(client, started["run_id"]))
    tail = stream_all(client, started["run_id"], after=3)
    assert [m.id for m in events_of(tail)] == [m.id for m in everything[3:]]
    # Last-Event-ID (what a browser sends on reconnect) wins over the URL's after=.
    header = stream_all(client, started["run_id"], after=0, last_id=len(everything))
    assert [m.event for m in header] == ["run_ended"]


def test_cancel_ends_the_run_cancelled_with_its_completed_steps_kept(
    client: httpx.Client,
) -> None:
    started = start(client, "tool, then answer slowly")
    run_id = started["run_id"]
    with client.stream("GET", f"/api/runs/{run_id}/stream") as response:
        seen: list[Message] = []
        for message in read_sse(response):
            seen.append(message)
            if message.event == "agent_text_delta" and any(
                m.event == "agent_messages_committed" for m in seen
            ):
                break  # the tool round is stored; the long answer is streaming
    answer = client.post(f"/api/runs/{run_id}/cancel")
    assert answer.status_code == 202, answer.text
    tail = stream_all(client, run_id, last_id=seen[-1].id)
    assert tail[-1].data["status"] == "cancelled"
    failed = [m for m in tail if m.event == "agent_failed"]
    assert failed and failed[0].data["data"]["cancelled"] is True
    again = client.post(f"/api/runs/{run_id}/cancel")
    assert again.status_code == 409
    assert again.json()["error"]["type"] == "run_ended"
    turns = client.get(f"/api/scopes/{started['scope']}").json()["turns"]
    roles = [r["record"]["role"] for t in turns for r in t["records"]]
    # The completed tool round stays; the answer cut by the cancel is not stored.
    assert roles == ["user", "assistant", "tool"]


def test_a_workflow_run_streams_to_its_end(client: httpx.Client) -> None:
    response = client.post("/api/workflows/pipeline/runs", json={"input": {"n": 1}})
    assert response.status_code == 202, response.text
    run_id = response.json()["run_id"]
    messages = stream_all(client, run_id)
    kinds = [m.event for m in events_of(messages)]
    assert kinds[0] == "workflow_started" and kinds[-1] == "workflow_finished"
    assert messages[-1].data["status"] == "completed"
    # Resuming a completed run starts nothing new; its stream replays and ends.
    again = client.post("/api/workflows/pipeline/runs", json={"run_id": run_id})
    assert again.status_code == 202
    assert [m.event for m in stream_all(client, run_id)][-1] == "run_ended"


def test_a_client_message_starts_a_framed_turn_and_a_silent_one_starts_none(
    client: httpx.Client,
) -> None:
    first = start(client, "hi")
    stream_all(client, first["run_id"])
    action = {"kind": "surfaceAction", "surfaceId": "sf_1", "action": "submit", "context": {"a": 1}}
    response = client.post(f"/api/scopes/{first['scope']}/client-messages", json=action)
    assert response.status_code == 202, response.text
    run_id = response.json()["run_id"]
    events = events_of(stream_all(client, run_id))
    committed = [m for m in events if m.event == "agent_messages_committed"]
    user = committed[0].data["data"]["messages"][0]
    assert user["content"][0]["text"] == (
        'The user triggered the submit action on surface sf_1 with context {"a":1}.'
    )
    ack = client.post(f"/api/scopes/{first['scope']}/client-messages", json={"kind": "ack"})
    assert ack.status_code == 200 and ack.json()["run_id"] is None
    bad = client.post(f"/api/scopes/{first['scope']}/client-messages", json={"kind": "nope"})
    assert bad.status_code == 400 and bad.json()["error"]["type"] == "ClientMessageError"
    unknown = client.post("/api/scopes/never-used/client-messages", json=action)
    assert unknown.status_code == 400
    named = client.post(
        "/api/scopes/never-used/client-messages", json={"agent": "chat", "message": action}
    )
    assert named.status_code == 202


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "kind"),
    [
        ("POST", "/api/agents/nobody/runs", {"input": "x"}, 404, "not_found"),
        ("POST", "/api/agents/chat/runs", {"input": 3}, 400, "bad_request"),
        ("POST", "/api/agents/chat/runs", {"input": "x", "colour": 1}, 400, "bad_request"),
        ("POST", "/api/agents/chat/runs", {"input": "x", "scope": ""}, 400, "bad_request"),
        ("POST", "/api/agents/chat/runs", {"input": {"messages": "no"}}, 400, "ConfigError"),
        ("POST", "/api/workflows/nothing/runs", {"input": 1}, 404, "not_found"),
        ("POST", "/api/workflows/pipeline/runs", {}, 400, "bad_request"),
        ("POST", "/api/workflows/pipeline/runs", {"run_id": "never"}, 404, "not_found"),
        ("GET", "/api/runs/never/stream", None, 404, "not_found"),
        ("POST", "/api/runs/never/cancel", None, 404, "not_found"),
        ("GET", "/api/runs/never/stream?after=-1", None, 400, "bad_request"),
    ],
)
def test_errors_are_json_with_a_type_a_message_and_a_fitting_status(
    client: httpx.Client, method: str, path: str, body: object, status: int, kind: str
) -> None:
    response = client.request(method, path, json=body)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["type"] == kind and error["message"]


def test_malformed_and_oversized_bodies_are_refused(client: httpx.Client) -> None:
    bad = client.post(
        "/api/agents/chat/runs", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert bad.status_code == 400 and bad.json()["error"]["type"] == "bad_request"
    big = client.post("/api/agents/chat/runs", json={"input": "x" * 1_100_000})
    assert big.status_code == 413 and big.json()["error"]["type"] == "payload_too_large"


def test_the_inspection_pages_are_served_beside_the_api(client: httpx.Client) -> None:
    page = client.get("/agents", headers={"accept": "text/html"})
    assert page.status_code == 200 and "chat" in page.text
    assert '<a href="/chat">Chat</a>' in page.text
    agent = client.get("/agents/chat", headers={"accept": "text/html"})
    assert 'href="/chat/chat"' in agent.text


async def test_the_read_only_ui_links_to_no_chat() -> None:
    runtime = Runtime(store="memory", version=False)
    runtime.create_agent(id="solo", model=script_client([]))
    app = create_ui_app(runtime)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as ui:
        page = await ui.get("/agents/solo")
    assert page.status_code == 200 and "/chat" not in page.text
    await runtime.aclose()


def test_an_unexpected_host_is_refused(client: httpx.Client) -> None:
    response = client.get("/api/runs", headers={"host": "attacker.example"})
    assert response.status_code == 400


def test_serving_off_loopback_without_a_token_is_refused(tmp_path: Path, server: Server) -> None:
    root = write_project(tmp_path / "project")
    import subprocess
    import sys

    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "from tether.cli import main; main()",
            "--config",
            str(root / "tether.toml"),
            "serve",
            "--host",
            "0.0.0.0",
        ],
        capture_output=True,
        text=True,
        env={"TETHER_TEST_STORE": "memory", "PATH": "/usr/bin:/bin"},
        timeout=60,
    )
    assert result.returncode == 2, result.stderr
    assert "--token" in result.stderr
