"""Several `tether serve` workers on one PostgreSQL database serve one set of conversations: a
client that switches workers mid-stream gets every event once, a cancel sent to either worker
stops the run wherever it executes, turns on one scope wait for each other across workers, and a
worker killed with SIGKILL leaves its run interrupted and its durable workflow run to another."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from tests.postgres_server import postgres_url

from .conftest import Message, Server, read_sse, start_server, stream_all, write_project


@dataclass
class Workers:
    a: Server
    b: Server
    url: str


@pytest.fixture(scope="module")
def workers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workers]:
    url = postgres_url()
    root = write_project(tmp_path_factory.mktemp("workers") / "project")
    env = {"TETHER_TEST_STORE": url, "TETHER_TEST_DELAY": "0.01"}
    a = start_server(root, env)
    try:
        b = start_server(root, env)
    except BaseException:
        a.stop()
        raise
    yield Workers(a, b, url)
    a.stop()
    b.stop()


def ids(messages: list[Message]) -> list[int]:
    return [m.id for m in messages if m.id is not None]


def test_a_stream_switches_workers_mid_answer_without_loss_or_repeat(workers: Workers) -> None:
    with workers.a.client() as a, workers.b.client() as b:
        response = a.post("/api/agents/chat/runs", json={"input": "words 300"})
        assert response.status_code == 202, response.text
        run_id = response.json()["run_id"]
        seen: list[Message] = []
        with a.stream("GET", f"/api/runs/{run_id}/stream") as stream:
            for message in read_sse(stream):
                seen.append(message)
                if sum(1 for m in seen if m.event == "agent_text_delta") == 20:
                    break
        # Worker B does not execute the run: it follows the shared store.
        rest = stream_all(b, run_id, last_id=seen[-1].id)
        both = ids(seen) + ids(rest)
        assert both == list(range(1, len(both) + 1))
        text = "".join(m.data["data"]["text"] for m in seen + rest if m.event == "agent_text_delta")
        assert text == "".join(f"w{i} " for i in range(300))
        assert rest[-1].data["status"] == "completed"
        # And the whole stream, from either worker, is the same.
        assert ids(stream_all(a, run_id)) == ids(stream_all(b, run_id)) == both


def test_a_cancel_sent_to_the_other_worker_stops_the_run(workers: Workers) -> None:
    with workers.a.client() as a, workers.b.client() as b:
        run_id = a.post("/api/agents/chat/runs", json={"input": "words 5000"}).json()["run_id"]
        with b.stream("GET", f"/api/runs/{run_id}/stream") as stream:
            for message in read_sse(stream):
                if message.event == "agent_text_delta":
                    break
        answer = b.post(f"/api/runs/{run_id}/cancel")
        assert answer.status_code == 202, answer.text
        tail = stream_all(b, run_id)
        assert tail[-1].event == "run_ended" and tail[-1].data["status"] == "cancelled"
        text = "".join(m.data["data"]["text"] for m in tail if m.event == "agent_text_delta")
        assert "w4999" not in text
        assert b.post(f"/api/runs/{run_id}/cancel").status_code == 409


def test_a_workflow_run_started_on_one_worker_streams_from_the_other(workers: Workers) -> None:
    with workers.a.client() as a, workers.b.client() as b:
        response = a.post("/api/workflows/pipeline/runs", json={"input": "go"})
        run_id = response.json()["run_id"]
        messages = stream_all(b, run_id)
        kinds = [m.event for m in messages]
        assert kinds[0] == "workflow_started" and "workflow_finished" in kinds
        assert messages[-1].data["status"] == "completed"


def test_workers_started_together_share_one_port(
    workers: Workers, tmp_path_factory: pytest.TempPathFactory
) -> None:
    root = write_project(tmp_path_factory.mktemp("pool") / "project")
    server = start_server(root, {"TETHER_TEST_STORE": workers.url}, ["--workers", "2"])
    try:
        with server.client() as client:
            run_ids = [
                client.post("/api/agents/chat/runs", json={"input": f"words {n}"}).json()["run_id"]
                for n in (3, 4, 5, 6)
            ]
            for run_id, n in zip(run_ids, (3, 4, 5, 6), strict=True):
                messages = stream_all(client, run_id)
                deltas = [m for m in messages if m.event == "agent_text_delta"]
                assert len(deltas) == n and messages[-1].data["status"] == "completed"
        # Both workers started: wait for the second one's line, which may come after the
        # first worker already answered every request above.
        log = _wait_for_log(server.log, "Started server process", 2)
        assert log.count("Started server process") == 2
    finally:
        server.stop()


def _wait_for_log(path: Path, line: str, count: int, deadline_s: float = 120) -> str:
    """The log once it holds `line` `count` times (a worker writes it when it has started);
    fails after `deadline_s` seconds, a bound on a hang, not a timing the test relies on."""
    deadline = time.monotonic() + deadline_s
    while True:
        text = path.read_text(errors="replace")
        if text.count(line) >= count or time.monotonic() > deadline:
            return text
        time.sleep(0.05)


def test_turns_on_one_scope_are_serialized_across_workers(workers: Workers) -> None:
    with workers.a.client() as a, workers.b.client() as b:
        first = a.post("/api/agents/chat/runs", json={"input": "words 150", "scope": "shared"})
        assert first.status_code == 202, first.text
        # Started on the other worker while the first answer still streams.
        second = b.post("/api/agents/chat/runs", json={"input": "hi", "scope": "shared"})
        assert second.status_code == 202, second.text
        done = stream_all(b, second.json()["run_id"])
        # The second turn waited for the first to commit: its request held the first turn.
        assert done[-2].event == "agent_finished"
        assert done[-2].data["data"]["text"] == "Hello from turn 2."
        assert stream_all(a, first.json()["run_id"])[-1].data["status"] == "completed"
        scope = a.get("/api/scopes/shared").json()
        assert scope["info"]["length"] == 5  # one pinned prompt, then two whole turns
        roles = [r["record"]["role"] for t in scope["turns"] for r in t["records"]]
        assert roles == ["user", "assistant", "user", "assistant"]


@pytest.fixture
def doomed(workers: Workers, tmp_path: Path) -> Iterator[Server]:
    """A third worker on the same database, with a 2-second lease, to be killed."""
    root = write_project(tmp_path / "project")
    server = start_server(
        root,
        {
            "TETHER_TEST_STORE": workers.url,
            "TETHER_TEST_DELAY": "0.02",
            "TETHER_TEST_LEASE_TTL": "2",
            "TETHER_TEST_STEP_SECONDS": "1.5",
        },
        ["--takeover-every", "3600"],
    )
    yield server
    server.kill()


def test_a_worker_killed_mid_run_leaves_the_run_interrupted(
    workers: Workers, doomed: Server
) -> None:
    with doomed.client() as c, workers.b.client() as b:
        run_id = c.post("/api/agents/chat/runs", json={"input": "words 5000"}).json()["run_id"]
        seen: list[Message] = []
        with b.stream("GET", f"/api/runs/{run_id}/stream") as stream:
            for message in read_sse(stream):
                seen.append(message)
                if message.event == "agent_text_delta":
                    doomed.kill()  # SIGKILL: no cancel, no cleanup, no final status
                    break
        started = time.monotonic()
        rest = stream_all(b, run_id, last_id=seen[-1].id)
        assert rest[-1].event == "run_ended" and rest[-1].data["status"] == "interrupted"
        assert time.monotonic() - started < 20
        assert b.get(f"/api/runs/{run_id}").json()["run"]["status"] == "interrupted"
        assert b.post(f"/api/runs/{run_id}/cancel").status_code == 409


def test_a_durable_workflow_run_of_a_killed_worker_is_taken_over(
    workers: Workers, doomed: Server
) -> None:
    with doomed.client() as c, workers.b.client() as b:
        run_id = c.post("/api/workflows/pipeline/runs", json={"input": "go"}).json()["run_id"]
        seen: list[Message] = []
        with b.stream("GET", f"/api/runs/{run_id}/stream") as stream:
            for message in read_sse(stream):
                seen.append(message)
                if message.event == "workflow_step_finished":
                    doomed.kill()  # after the first step was journaled
                    break
        killed_pid = doomed.process.pid
        # A client following the run through the crash is not told it ended: its stream
        # waits for the takeover and goes on to the end.
        rest = stream_all(b, run_id, last_id=seen[-1].id)
        assert rest[-1].event == "run_ended" and rest[-1].data["status"] == "completed", rest[-1]
        assert "interrupted" not in [m.data.get("status") for m in rest if m.event == "run_ended"]
        messages = stream_all(b, run_id)
        finished = [m for m in messages if m.event == "workflow_finished"]
        steps = finished[-1].data["data"]["output"]["steps"]
        replayed = [
            m.data["data"]["step"]
            for m in messages
            if m.event == "workflow_step_finished" and m.data["data"]["replayed"]
        ]
        assert replayed == ["fetch"]
        # The step journaled before the kill is not run again; the rest ran on a live worker.
        assert steps[0] == f"fetch:{killed_pid}"
        assert not steps[-1].endswith(f":{killed_pid}")


def test_resuming_a_workflow_run_another_worker_runs_is_a_conflict(workers: Workers) -> None:
    with workers.a.client() as a, workers.b.client() as b:
        run_id = a.post("/api/workflows/pipeline/runs", json={"input": "x"}).json()["run_id"]
        again = b.post("/api/workflows/pipeline/runs", json={"run_id": run_id})
        assert again.status_code == 409, again.text
        error = again.json()["error"]
        assert error["type"] == "WorkflowRunBusyError" and run_id in error["message"]
        assert stream_all(b, run_id)[-1].data["status"] == "completed"
