"""`POST /api/runs/{id}/signals/{name}` against a real `tether serve`: a waiting run's stream ends
`waiting`, a signal resumes it in the server and the same stream goes on (`Last-Event-ID`);
refusals are typed; a wait that times out is resumed by the server's sweep."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
import pytest

from .conftest import HERE, Server, start_server, stream_all, write_project

ORIGIN = "https://elsewhere.example.com"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = write_project(tmp_path_factory.mktemp("signals") / "project")
    (root / "signal_app.py").write_text((HERE / "signal_app.py").read_text(), encoding="utf-8")
    (root / "tether.toml").write_text(
        'runtime = "project_app:runtime"\n'
        'agents = ["project_app:chat"]\n'
        'workflows = ["project_app:pipeline", "signal_app:review", "signal_app:deadline"]\n',
        encoding="utf-8",
    )
    server = start_server(
        root,
        {"TETHER_TEST_STORE": f"sqlite:///{root / 'tether.db'}", "TETHER_TEST_DELAY": "0"},
        ["--takeover-every", "0.2"],
    )
    yield server
    server.stop()


@pytest.fixture
def client(server: Server) -> Iterator[httpx.Client]:
    with server.client() as client:
        yield client


def _waiting_run(client: httpx.Client) -> tuple[str, int]:
    response = client.post("/api/workflows/review/runs", json={"input": {"doc": "spec"}})
    assert response.status_code == 202, response.text
    run_id = response.json()["run_id"]
    messages = stream_all(client, run_id)
    assert messages[-1].event == "run_ended"
    assert messages[-1].data["status"] == "waiting"
    events = [m for m in messages if m.id is not None]
    assert events[-1].event == "workflow_waiting"
    assert events[-1].data["data"]["name"] == "verdict"
    assert events[-1].id is not None
    return run_id, events[-1].id


def test_a_signal_resumes_the_run_and_its_stream_goes_on(client: httpx.Client) -> None:
    run_id, last = _waiting_run(client)
    shown = client.get(f"/api/runs/{run_id}").json()
    assert shown["run"]["status"] == "waiting"
    wait = shown["workflow"]["waiting_for"]
    assert (wait["name"], wait["run_id"], wait["deadline"]) == ("verdict", run_id, None)
    assert wait["schema"]["required"] == ["ok"]
    page = client.get(f"/runs/{run_id}").text
    assert "This run waits for a signal" in page
    assert f"tether workflow signal {run_id} verdict JSON" in page
    sent = client.post(f"/api/runs/{run_id}/signals/verdict", json={"value": {"ok": True}})
    assert sent.status_code == 202, sent.text
    assert sent.json()["run_id"] == run_id
    # Reconnected after the last event it saw: the resumed run's events, none twice.
    rest = stream_all(client, run_id, last_id=last)
    events = [m for m in rest if m.id is not None]
    assert all(m.id is not None and m.id > last for m in events)
    assert events[0].event == "workflow_started" and events[0].data["data"]["attempt"] == 2
    assert events[-1].event == "workflow_finished"
    assert events[-1].data["data"]["output"] == {"draft": "draft of spec", "ok": True}
    assert rest[-1].data["status"] == "completed"
    assert client.get(f"/api/runs/{run_id}").json()["run"]["status"] == "completed"


def test_refused_signals_are_typed_and_store_nothing(client: httpx.Client) -> None:
    run_id, last = _waiting_run(client)
    bad = client.post(f"/api/runs/{run_id}/signals/verdict", json={"value": {"ok": 1}})
    assert bad.status_code == 400, bad.text
    assert bad.json()["error"]["type"] == "WorkflowSignalError"
    assert "value['ok']" in bad.json()["error"]["message"]
    wrong = client.post(f"/api/runs/{run_id}/signals/approval", json={"value": 1})
    assert wrong.status_code == 409, wrong.text
    assert wrong.json()["error"]["type"] == "WorkflowNotWaitingError"
    assert "it waits for 'verdict'" in wrong.json()["error"]["message"]
    shapeless = client.post(f"/api/runs/{run_id}/signals/verdict", json={"ok": True})
    assert shapeless.status_code == 400
    missing = client.post("/api/runs/nope/signals/verdict", json={"value": 1})
    assert missing.status_code == 404
    # A page of another origin cannot send one (the CSRF rules of every POST).
    foreign = client.post(
        f"/api/runs/{run_id}/signals/verdict",
        json={"value": {"ok": True}},
        headers={"Origin": ORIGIN},
    )
    assert foreign.status_code == 403
    assert client.get(f"/api/runs/{run_id}").json()["run"]["status"] == "waiting"
    assert [m.id for m in stream_all(client, run_id, last_id=last) if m.id is not None] == []


def test_a_wait_that_times_out_is_resumed_by_the_server(client: httpx.Client) -> None:
    response = client.post("/api/workflows/deadline/runs", json={"input": {"timeout": 0.3}})
    assert response.status_code == 202, response.text
    run_id = response.json()["run_id"]
    deadline = time.monotonic() + 20
    while client.get(f"/api/runs/{run_id}").json()["run"]["status"] != "completed":
        assert time.monotonic() < deadline, "the timed-out wait was not resumed"
        time.sleep(0.1)
    events = [m for m in stream_all(client, run_id) if m.id is not None]
    assert [m.event for m in events].count("workflow_waiting") == 1
    assert events[-1].data["data"]["output"] == "timed out"


def test_a_signal_stored_by_the_cli_is_resumed_by_the_server(
    server: Server, client: httpx.Client
) -> None:
    run_id, last = _waiting_run(client)
    root = server.log.parent
    sent = subprocess.run(
        [
            sys.executable,
            "-c",
            "from tether.cli import main; main()",
            "--config",
            str(root / "tether.toml"),
            "workflow",
            "signal",
            run_id,
            "verdict",
            '{"ok": false}',
            "--no-run",
            "--json",
        ],
        cwd=root,
        env={**os.environ, "TETHER_TEST_STORE": f"sqlite:///{root / 'tether.db'}"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert sent.returncode == 0, sent.stderr
    assert json.loads(sent.stdout)["workflow_run_id"] == run_id
    # The CLI ran nothing: the server's sweep took the run over and finished it.
    rest = [m for m in stream_all(client, run_id, last_id=last) if m.id is not None]
    assert rest[-1].event == "workflow_finished"
    assert rest[-1].data["data"]["output"] == {"draft": "draft of spec", "ok": False}
    log = server.log.read_text(errors="replace")
    assert f"took over workflow run {run_id}" in log
