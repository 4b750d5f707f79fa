"""A paused run over A2A, driven by the official `a2a-sdk` 1.x client against a real `tether
serve`: a run whose tool waits for a person is an input-required task that says what it waits
for; a message on that task carrying the decisions (a data part, the body of `POST
/api/runs/{id}/decisions`) resumes it, polling or streaming; a message without them, or with
a wrong call id, is refused and the task stays paused."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

pytest.importorskip(
    "a2a.client", reason="the A2A tests drive the official a2a-sdk: pip install 'tether[a2a]'"
)

from a2a.client import ClientConfig, ClientFactory
from a2a.client.client import Client
from a2a.types import a2a_pb2 as pb
from google.protobuf import json_format

from .conftest import HERE, Server, start_server, stream_all, write_project


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = write_project(tmp_path_factory.mktemp("a2a-paused") / "project")
    (root / "hitl_app.py").write_text((HERE / "hitl_app.py").read_text(), encoding="utf-8")
    (root / "tether.toml").write_text(
        'runtime = "project_app:runtime"\nagents = ["project_app:chat", "hitl_app:clerk"]\n',
        encoding="utf-8",
    )
    server = start_server(
        root, {"TETHER_TEST_STORE": f"sqlite:///{root / 'tether.db'}", "TETHER_TEST_DELAY": "0"}
    )
    yield server
    server.stop()


async def _client(server: Server, *, streaming: bool) -> AsyncIterator[Client]:
    http = httpx.AsyncClient(timeout=30)
    factory = ClientFactory(ClientConfig(streaming=streaming, httpx_client=http))
    client = await factory.create_from_url(f"{server.base}/a2a/clerk")
    try:
        yield client
    finally:
        await client.close()
        await http.aclose()


@pytest.fixture
async def polling(server: Server) -> AsyncIterator[Client]:
    async for client in _client(server, streaming=False):
        yield client


@pytest.fixture
async def streaming(server: Server) -> AsyncIterator[Client]:
    async for client in _client(server, streaming=True):
        yield client


def message(*parts: pb.Part, task: pb.Task | None = None) -> pb.SendMessageRequest:
    found = pb.Message(message_id=uuid.uuid4().hex, role=pb.ROLE_USER, parts=list(parts))
    if task is not None:
        found.task_id, found.context_id = task.id, task.context_id
    return pb.SendMessageRequest(message=found)


def data(value: Any) -> pb.Part:
    part = pb.Part()
    json_format.ParseDict(value, part.data)
    return part


async def collect(client: Client, request: pb.SendMessageRequest) -> list[pb.StreamResponse]:
    return [event async for event in client.send_message(request)]


def pending_of(status: pb.TaskStatus) -> list[dict[str, Any]]:
    parts = [json_format.MessageToDict(p) for p in status.message.parts]
    (given,) = [p["data"] for p in parts if "data" in p]
    pending: list[dict[str, Any]] = given["pending"]
    return pending


def answer(task: pb.Task) -> str:
    return "".join(p.text for p in task.artifacts[0].parts)


async def test_a_paused_run_is_an_input_required_task_that_the_decisions_resume(
    server: Server, polling: Client
) -> None:
    (event,) = await collect(polling, message(pb.Part(text="mail ann")))
    task = event.task
    assert task.status.state == pb.TASK_STATE_INPUT_REQUIRED
    assert "send_email (approval)" in task.status.message.parts[0].text
    (call,) = pending_of(task.status)
    assert (call["name"], call["input"], call["kind"]) == ("send_email", {"to": "ann"}, "approval")
    again = await polling.get_task(pb.GetTaskRequest(id=task.id))
    assert again.status.state == pb.TASK_STATE_INPUT_REQUIRED
    decisions = {"decisions": {call["id"]: {"action": "approve"}}, "decided_by": "ann"}
    (resumed,) = await collect(polling, message(data(decisions), task=task))
    assert resumed.task.id == task.id
    assert resumed.task.status.state == pb.TASK_STATE_COMPLETED
    assert answer(resumed.task) == "Done: sent to ann"
    with server.client() as client:
        run = client.get(f"/api/runs/{task.id}").json()["run"]
        events = stream_all(client, task.id)
    assert (run["status"], run["pending"]) == ("completed", [])
    (decided,) = [m.data["data"] for m in events if m.event == "decision"]
    assert (decided["call_id"], decided["decided_by"]) == (call["id"], "ann")


async def test_an_external_call_takes_its_result_over_a_stream(streaming: Client) -> None:
    events = await collect(streaming, message(pb.Part(text="color please")))
    end = events[-1].status_update
    assert end.status.state == pb.TASK_STATE_INPUT_REQUIRED
    (call,) = pending_of(end.status)
    assert call["kind"] == "external"
    answer_it = {"decisions": {call["id"]: {"action": "result", "output": "teal"}}}
    rest = await collect(
        streaming, message(data(answer_it), task=pb.Task(id=end.task_id, context_id=end.context_id))
    )
    assert rest[-1].status_update.status.state == pb.TASK_STATE_COMPLETED
    got = await streaming.get_task(pb.GetTaskRequest(id=end.task_id))
    assert answer(got) == "Done: teal"


async def test_a_message_without_decisions_or_with_a_wrong_id_leaves_the_task_paused(
    polling: Client,
) -> None:
    (event,) = await collect(polling, message(pb.Part(text="mail bob")))
    task = event.task
    (call,) = pending_of(task.status)
    with pytest.raises(Exception, match=f"waits for decisions on {call['id']} \\(send_email"):
        await collect(polling, message(pb.Part(text="yes please"), task=task))
    wrong = {"decisions": {"no-such-call": {"action": "approve"}}}
    with pytest.raises(Exception, match="no-such-call"):
        await collect(polling, message(data(wrong), task=task))
    still = await polling.get_task(pb.GetTaskRequest(id=task.id))
    assert still.status.state == pb.TASK_STATE_INPUT_REQUIRED
    assert pending_of(still.status) == [call]
