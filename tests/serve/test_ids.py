"""Ids and collisions on real `tether serve` processes over SQLite and PostgreSQL: one run id
is one kind of run with one starter (the others get 409 naming the run), client-chosen ids are
checked, the links handed back are percent-encoded, and NUL in an id or a filter is a 400 on
both stores, never a 500."""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from tests.postgres_server import postgres_url

from .conftest import Server, start_server, stream_all, write_project

JSON = {"content-type": "application/json"}


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    root = write_project(tmp_path_factory.mktemp(f"ids-{request.param}") / "project")
    store = f"sqlite:///{root / 'tether.db'}" if request.param == "sqlite" else postgres_url()
    env = {"TETHER_TEST_STORE": store, "TETHER_TEST_DELAY": "0", "TETHER_TEST_STEP_SECONDS": "1"}
    server = start_server(root, env)
    yield server
    server.stop()


def test_a_workflow_cannot_take_the_id_of_an_agent_run(server: Server) -> None:
    with server.client() as client:
        agent = client.post("/api/agents/chat/runs", json={"input": "hi"}).json()
        stream_all(client, agent["run_id"])
        before = client.get(f"/api/runs/{agent['run_id']}").json()["run"]
        taken = client.post(
            "/api/workflows/pipeline/runs", json={"input": 1, "run_id": agent["run_id"]}
        )
        assert taken.status_code == 409, taken.text
        error = taken.json()["error"]
        assert error["type"] == "run_id_taken" and agent["run_id"] in error["message"]
        assert "agent run of 'chat'" in error["message"]
        after = client.get(f"/api/runs/{agent['run_id']}").json()["run"]
        assert after == before


def test_concurrent_starts_of_one_run_id_have_one_winner_whose_cancel_holds(
    server: Server,
) -> None:
    run_id = f"race-{server.base.rsplit(':', 1)[1]}"

    def start(_: int) -> httpx.Response:
        with server.client() as client:
            return client.post("/api/workflows/pipeline/runs", json={"input": 1, "run_id": run_id})

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(start, range(8)))
    statuses = sorted(a.status_code for a in answers)
    assert statuses == [202] + [409] * 7, [a.text for a in answers]
    for lost in (a for a in answers if a.status_code == 409):
        assert run_id in lost.json()["error"]["message"]
    with server.client() as client:
        cancel = client.post(f"/api/runs/{run_id}/cancel")
        assert cancel.status_code == 202, cancel.text
        end = stream_all(client, run_id)[-1]
        assert end.event == "run_ended" and end.data["status"] == "cancelled"


BAD_IDS = ["", "a\x00b", "a/b", "a\\b", "line\u2028sep", "tab\there", "x" * 201, "\ud800"]


@pytest.mark.parametrize("bad", BAD_IDS, ids=[repr(b)[:12] for b in BAD_IDS])
def test_client_chosen_ids_are_checked(server: Server, bad: str) -> None:
    with server.client() as client:
        for path, body in [
            ("/api/agents/chat/runs", {"input": "hi", "scope": bad}),
            ("/api/workflows/pipeline/runs", {"input": 1, "run_id": bad}),
            (
                "/api/agents/chat/ag-ui",
                {
                    "threadId": bad,
                    "runId": "r",
                    "messages": [],
                    "tools": [],
                    "context": [],
                    "forwardedProps": {},
                    "state": {},
                },
            ),
        ]:
            answer = client.post(path, content=json.dumps(body), headers=JSON)
            assert answer.status_code == 400, (path, answer.text)
            assert answer.json()["error"]["type"] == "bad_request"
        if "/" not in bad and "\\" not in bad:
            tagged = client.post(
                "/api/agents/chat/runs",
                content=json.dumps({"input": "hi", "tags": [bad]}),
                headers=JSON,
            )
            assert tagged.status_code == 400, tagged.text


def test_the_links_handed_back_are_percent_encoded(server: Server) -> None:
    run_id = f"odd id?#%&{server.base.rsplit(':', 1)[1]}"
    with server.client() as client:
        started = client.post("/api/workflows/pipeline/runs", json={"input": 1, "run_id": run_id})
        assert started.status_code == 202, started.text
        link = started.json()["stream"]
        assert link.startswith("/api/runs/odd%20id%3F%23%25%26")
        with client.stream("GET", link) as response:
            assert response.status_code == 200
        assert client.get("/api/runs/" + link.split("/")[3]).status_code == 200


@pytest.mark.parametrize(
    "path",
    [
        "/api/runs/a%00b/stream",
        "/api/runs/a%00b/cancel",
        "/api/runs/a%00b",
        "/api/events/a%00b",
        "/api/scopes/a%00b",
        "/api/runs?q=%00",
        "/api/runs?agent=a%00",
        "/api/runs?tag=%00",
        "/api/scopes?q=a%00",
        "/runs?q=%00",
        "/runs/a%00b",
        "/conversations/a%00b",
    ],
)
def test_nul_in_an_id_or_a_filter_is_a_400(server: Server, path: str) -> None:
    with server.client() as client:
        method = "POST" if path.endswith("/cancel") else "GET"
        answer = client.request(method, path)
    assert answer.status_code == 400, answer.text
    assert "NUL" in answer.text


@pytest.mark.parametrize(
    "body",
    [
        {"input": "tool a\x00b"},
        {"input": "hi", "context": {"k\x00": 1}},
        {"input": {"messages": [{"role": "user", "content": [{"type": "text", "text": "\x00"}]}]}},
    ],
)
def test_nul_in_a_body_is_a_400_on_every_store(server: Server, body: object) -> None:
    with server.client() as client:
        answer = client.post("/api/agents/chat/runs", json=body)
    assert answer.status_code == 400, answer.text
    assert "NUL" in answer.json()["error"]["message"]
