"""`POST /api/runs/{id}/decisions` against a real `tether serve`: a run that pauses on a call
waiting for a person ends its stream `paused`, `GET /api/runs/{id}` shows what it waits for, the
decisions resume it in the server and the same stream goes on (`Last-Event-ID`); refusals are
typed and store nothing."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from .conftest import HERE, Server, start_server, stream_all, write_project

ORIGIN = "https://elsewhere.example.com"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = write_project(tmp_path_factory.mktemp("decisions") / "project")
    (root / "hitl_app.py").write_text((HERE / "hitl_app.py").read_text(), encoding="utf-8")
    (root / "tether.toml").write_text(
        'runtime = "project_app:runtime"\n'
        'agents = ["project_app:chat", "hitl_app:clerk"]\n'
        'workflows = ["project_app:pipeline", "hitl_app:mailroom_workflow"]\n',
        encoding="utf-8",
    )
    server = start_server(
        root, {"TETHER_TEST_STORE": f"sqlite:///{root / 'tether.db'}", "TETHER_TEST_DELAY": "0"}
    )
    yield server
    server.stop()


@pytest.fixture
def client(server: Server) -> Iterator[httpx.Client]:
    with server.client() as client:
        yield client


def _paused_run(client: httpx.Client, text: str) -> tuple[str, dict[str, Any], int]:
    """A run of the clerk that paused: its id, its one pending call, its last event's id."""
    response = client.post("/api/agents/clerk/runs", json={"input": text})
    assert response.status_code == 202, response.text
    run_id = response.json()["run_id"]
    messages = stream_all(client, run_id)
    assert messages[-1].event == "run_ended"
    assert messages[-1].data["status"] == "paused"
    events = [m for m in messages if m.id is not None]
    assert events[-1].event == "agent_paused"
    assert events[-1].id is not None
    shown = client.get(f"/api/runs/{run_id}").json()["run"]
    assert shown["status"] == "paused"
    (call,) = shown["pending"]
    assert events[-1].data["data"]["pending"] == [call]
    return run_id, call, events[-1].id


def _resume(
    client: httpx.Client, run_id: str, decisions: dict[str, Any], last: int, **more: Any
) -> list[Any]:
    """Send the decisions; the rest of the run's stream (after event `last`)."""
    sent = client.post(f"/api/runs/{run_id}/decisions", json={"decisions": decisions, **more})
    assert sent.status_code == 202, sent.text
    assert sent.json()["run_id"] == run_id
    assert sent.json()["stream"] == f"/api/runs/{run_id}/stream"
    rest = stream_all(client, run_id, last_id=last)
    events = [m for m in rest if m.id is not None]
    assert all(m.id is not None and m.id > last for m in events)  # none twice
    assert rest[-1].event == "run_ended"
    return events


def _answer(events: list[Any]) -> str:
    assert events[-1].event == "agent_finished", events[-1]
    text: str = events[-1].data["data"]["text"]
    return text


def test_an_approval_resumes_the_run_and_its_stream_goes_on(client: httpx.Client) -> None:
    run_id, call, last = _paused_run(client, "mail ann@example.com")
    assert (call["name"], call["input"], call["kind"]) == (
        "send_email",
        {"to": "ann@example.com"},
        "approval",
    )
    events = _resume(client, run_id, {call["id"]: {"action": "approve"}}, last, decided_by="ann")
    decision = events[0]
    assert decision.event == "decision"
    assert decision.data["data"]["call_id"] == call["id"]
    assert (decision.data["data"]["action"], decision.data["data"]["decided_by"]) == (
        "approve",
        "ann",
    )
    assert "agent_started" not in [m.event for m in events]
    assert _answer(events) == "Done: sent to ann@example.com"
    shown = client.get(f"/api/runs/{run_id}").json()["run"]
    assert (shown["status"], shown["pending"]) == ("completed", [])
    # The run is no longer paused: a second decision is refused, naming who resumed it.
    again = client.post(
        f"/api/runs/{run_id}/decisions", json={"decisions": {call["id"]: {"action": "approve"}}}
    )
    assert again.status_code == 409, again.text
    assert again.json()["error"]["type"] == "RunNotPausedError"
    assert "ann" in again.json()["error"]["message"]


def test_an_edited_approval_runs_the_call_with_the_new_input(client: httpx.Client) -> None:
    run_id, call, last = _paused_run(client, "mail ann@example.com")
    edit = {call["id"]: {"action": "approve", "input": {"to": "bob@example.com"}}}
    events = _resume(client, run_id, edit, last)
    assert events[0].data["data"]["input"] == {"to": "bob@example.com"}
    assert _answer(events) == "Done: sent to bob@example.com"


def test_a_denial_tells_the_model_the_reason(client: httpx.Client) -> None:
    run_id, call, last = _paused_run(client, "mail ann@example.com")
    events = _resume(client, run_id, {call["id"]: {"action": "deny", "reason": "not her"}}, last)
    assert events[0].data["data"]["reason"] == "not her"
    assert "not her" in _answer(events)
    assert "sent to" not in _answer(events)


def test_an_external_call_takes_the_callers_result(client: httpx.Client) -> None:
    run_id, call, last = _paused_run(client, "color please")
    assert (call["name"], call["kind"]) == ("pick_color", "external")
    events = _resume(client, run_id, {call["id"]: {"action": "result", "output": "teal"}}, last)
    assert _answer(events) == "Done: teal"


def test_refused_decisions_are_typed_and_store_nothing(client: httpx.Client) -> None:
    run_id, call, last = _paused_run(client, "mail ann@example.com")
    url = f"/api/runs/{run_id}/decisions"
    unknown = client.post(url, json={"decisions": {"nope": {"action": "approve"}}})
    assert unknown.status_code == 422, unknown.text
    assert unknown.json()["error"]["type"] == "DecisionError"
    assert "'nope'" in unknown.json()["error"]["message"]
    kind = client.post(url, json={"decisions": {call["id"]: {"action": "result", "output": 1}}})
    assert kind.status_code == 422, kind.text
    assert kind.json()["error"]["call_id"] == call["id"]  # a page shows it under the call
    edit = {call["id"]: {"action": "approve", "input": {"to": 5}}}
    refused = client.post(url, json={"decisions": edit})
    assert refused.status_code == 422, refused.text
    assert refused.json()["error"]["call_id"] == call["id"]
    assert "does not match the tool's schema" in refused.json()["error"]["message"]
    bodies: list[dict[str, Any]] = [
        {},
        {"decisions": {}},
        {"decisions": {call["id"]: "yes"}},
        {"decisions": {call["id"]: {"action": "maybe"}}},
        {"decisions": {call["id"]: {"action": "deny", "output": "x"}}},
        {"decisions": {call["id"]: {"action": "deny", "reason": 3}}},
        {"decisions": {call["id"]: {"action": "approve"}}, "decided_by": ""},
        {"decisions": {call["id"]: {"action": "approve"}}, "extra": 1},
    ]
    for body in bodies:
        bad = client.post(url, json=body)
        assert bad.status_code == 400, (body, bad.text)
    missing = client.post(
        "/api/runs/nope/decisions", json={"decisions": {"x": {"action": "approve"}}}
    )
    assert missing.status_code == 404, missing.text
    # A page of another origin cannot decide (the CSRF rules of every POST).
    foreign = client.post(
        url, json={"decisions": {call["id"]: {"action": "approve"}}}, headers={"Origin": ORIGIN}
    )
    assert foreign.status_code == 403
    assert client.get(f"/api/runs/{run_id}").json()["run"]["status"] == "paused"
    assert [m.id for m in stream_all(client, run_id, last_id=last) if m.id is not None] == []


def test_a_run_that_is_not_paused_is_409(client: httpx.Client) -> None:
    response = client.post("/api/agents/clerk/runs", json={"input": "hello"})
    run_id = response.json()["run_id"]
    assert stream_all(client, run_id)[-1].data["status"] == "completed"
    refused = client.post(
        f"/api/runs/{run_id}/decisions", json={"decisions": {"x": {"action": "approve"}}}
    )
    assert refused.status_code == 409, refused.text
    assert refused.json()["error"]["type"] == "RunNotPausedError"
    assert "completed" in refused.json()["error"]["message"]


def test_a_workflow_waiting_for_a_paused_run_resumes_when_the_run_is_decided(
    client: httpx.Client,
) -> None:
    response = client.post("/api/workflows/mailroom/runs", json={"input": "cy@example.com"})
    assert response.status_code == 202, response.text
    workflow_run = response.json()["run_id"]
    messages = stream_all(client, workflow_run)
    assert messages[-1].data["status"] == "waiting"
    events = [m for m in messages if m.id is not None]
    waiting = events[-1]
    assert waiting.event == "workflow_waiting" and waiting.id is not None
    child = waiting.data["data"]["paused_run_id"]
    # The workflow run points at the paused run and shows the calls it waits for.
    shown = client.get(f"/api/runs/{workflow_run}").json()
    assert shown["run"]["status"] == "waiting"
    wait = shown["workflow"]["waiting_for"]
    assert wait["paused_run"] == child
    (call,) = wait["pending"]
    assert (call["name"], call["input"]) == ("send_email", {"to": "cy@example.com"})
    assert client.get(f"/api/runs/{child}").json()["run"]["pending"] == [call]
    listed = client.get("/api/runs", params={"status": "paused"}).json()
    assert child in [r["run_id"] for r in listed["runs"]]
    page = client.get(f"/runs/{workflow_run}").text
    assert "This run waits for a decision" in page and f'/runs/{child}"' in page
    assert "tether workflow signal" not in page

    _resume(client, child, {call["id"]: {"action": "approve"}}, 0)
    # Resumed in the server by that decision: the workflow's own stream goes on to its end.
    rest = stream_all(client, workflow_run, last_id=waiting.id)
    assert rest[-1].data["status"] == "completed"
    finished = [m for m in rest if m.event == "workflow_finished"]
    assert finished[0].data["data"]["output"] == "Done: sent to cy@example.com"
