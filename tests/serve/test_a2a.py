"""`tether serve` as an A2A agent, driven by the official `a2a-sdk` 1.x client: a real server
process on loopback (started once for the module), the card read at the well-known path,
messages sent, streamed, read back, cancelled, and a second message on the same context."""

from __future__ import annotations

import asyncio
import base64
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

from .conftest import Server, start_server, write_project

TOKEN = "a2a-test-token"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = write_project(tmp_path_factory.mktemp("a2a") / "project")
    server = start_server(
        root,
        {"TETHER_TEST_STORE": f"sqlite:///{root / 'tether.db'}", "TETHER_TEST_DELAY": "0.01"},
        ["--token", TOKEN],
        headers={"Authorization": f"Bearer {TOKEN}"},
    )
    yield server
    server.stop()


def url_of(server: Server, agent: str = "chat") -> str:
    return f"{server.base}/a2a/{agent}"


async def sdk_client(server: Server, *, streaming: bool) -> tuple[Client, httpx.AsyncClient]:
    http = httpx.AsyncClient(headers=server.headers, timeout=30)
    factory = ClientFactory(ClientConfig(streaming=streaming, httpx_client=http))
    client = await factory.create_from_url(url_of(server))
    return client, http


@pytest.fixture
async def streaming(server: Server) -> AsyncIterator[Client]:
    client, http = await sdk_client(server, streaming=True)
    try:
        yield client
    finally:
        await client.close()
        await http.aclose()


@pytest.fixture
async def polling(server: Server) -> AsyncIterator[Client]:
    client, http = await sdk_client(server, streaming=False)
    try:
        yield client
    finally:
        await client.close()
        await http.aclose()


def user_message(*parts: pb.Part, context_id: str = "") -> pb.SendMessageRequest:
    message = pb.Message(
        message_id=uuid.uuid4().hex, role=pb.ROLE_USER, parts=list(parts), context_id=context_id
    )
    return pb.SendMessageRequest(message=message)


def text(value: str) -> pb.Part:
    return pb.Part(text=value)


def texts(parts: Any) -> str:
    return "".join(p.text for p in parts)


async def collect(client: Client, request: pb.SendMessageRequest) -> list[pb.StreamResponse]:
    return [event async for event in client.send_message(request)]


def test_the_card_is_at_the_well_known_path_under_the_agent_url(server: Server) -> None:
    with server.client() as client:
        card = client.get("/a2a/chat/.well-known/agent-card.json").json()
        missing = client.get("/a2a/nobody/.well-known/agent-card.json")
    assert card["name"] == "chat"
    assert card["description"] == "Answers by a rule, slowly."
    assert card["capabilities"]["streaming"] is True
    assert card["supportedInterfaces"] == [
        {"url": url_of(server), "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
    ]
    # One skill per tool of the agent's fixed tool list.
    assert [s["id"] for s in card["skills"]] == ["lookup", "note"]
    assert "bearer" in card["securitySchemes"]
    assert missing.status_code == 404
    # The token rule of the rest of serve: no token, no card (and no JSON-RPC).
    assert httpx.get(url_of(server) + "/.well-known/agent-card.json").status_code == 401
    assert httpx.post(url_of(server), json={}).status_code == 401


async def test_send_returns_the_completed_task_whose_id_is_the_run_id(
    server: Server, polling: Client
) -> None:
    (event,) = await collect(polling, user_message(text("hi")))
    task = event.task
    assert task.status.state == pb.TASK_STATE_COMPLETED
    assert texts(task.artifacts[0].parts) == "Hello from turn 1."
    assert [m.role for m in task.history] == [pb.ROLE_USER, pb.ROLE_AGENT]
    assert texts(task.history[0].parts) == "hi"
    # The task is the run, and its context the memory scope.
    with server.client() as client:
        run = client.get(f"/api/runs/{task.id}").json()
    assert run["run"]["memory_scope"] == task.context_id
    assert "a2a" in run["run"]["tags"]


async def test_a_second_message_on_the_same_context_continues_the_conversation(
    polling: Client,
) -> None:
    (first,) = await collect(polling, user_message(text("hi")))
    context = first.task.context_id
    (second,) = await collect(polling, user_message(text("again"), context_id=context))
    assert second.task.context_id == context
    assert second.task.id != first.task.id
    # The fake model counts the user messages it was sent: the scope held the first turn.
    assert texts(second.task.artifacts[0].parts) == "Hello from turn 2."
    got = await polling.get_task(pb.GetTaskRequest(id=second.task.id))
    assert texts(got.history[0].parts) == "again"


async def test_stream_yields_the_task_then_the_answer_as_it_is_made_then_the_end(
    streaming: Client,
) -> None:
    events = await collect(streaming, user_message(text("words 5")))
    assert events[0].HasField("task")
    assert events[0].task.status.state in (pb.TASK_STATE_SUBMITTED, pb.TASK_STATE_WORKING)
    chunks = [e.artifact_update for e in events if e.HasField("artifact_update")]
    assert [texts(c.artifact.parts) for c in chunks] == [f"w{i} " for i in range(5)]
    assert [c.append for c in chunks] == [False, True, True, True, True]
    assert events[-1].status_update.status.state == pb.TASK_STATE_COMPLETED
    task_id = events[0].task.id
    assert all(e.artifact_update.task_id == task_id for e in events[1:-1])
    got = await streaming.get_task(pb.GetTaskRequest(id=task_id, history_length=1))
    assert got.status.state == pb.TASK_STATE_COMPLETED
    assert texts(got.artifacts[0].parts) == "".join(f"w{i} " for i in range(5))
    assert [m.role for m in got.history] == [pb.ROLE_AGENT]


async def test_cancel_stops_a_working_task(server: Server, streaming: Client) -> None:
    request = user_message(text("words 5000"))
    request.configuration.return_immediately = True
    stream = streaming.send_message(request)
    first = await anext(stream)
    await anext(stream)  # it is answering
    cancelled = await streaming.cancel_task(pb.CancelTaskRequest(id=first.task.id))
    assert cancelled.status.state == pb.TASK_STATE_CANCELED
    rest = [e async for e in stream]
    assert rest[-1].status_update.status.state == pb.TASK_STATE_CANCELED
    again = await streaming.get_task(pb.GetTaskRequest(id=first.task.id))
    assert again.status.state == pb.TASK_STATE_CANCELED
    with pytest.raises(Exception, match="nothing to cancel"):
        await streaming.cancel_task(pb.CancelTaskRequest(id=first.task.id))


async def test_unknown_tasks_and_ended_tasks_are_a2a_errors(polling: Client) -> None:
    from a2a.utils.errors import TaskNotFoundError, UnsupportedOperationError

    with pytest.raises(TaskNotFoundError):
        await polling.get_task(pb.GetTaskRequest(id="no-such-task"))
    (done,) = await collect(polling, user_message(text("hi")))
    follow_up = user_message(text("more"), context_id=done.task.context_id)
    follow_up.message.task_id = done.task.id
    with pytest.raises(UnsupportedOperationError, match="without taskId"):
        await collect(polling, follow_up)


async def test_files_and_data_parts_reach_the_model(server: Server, polling: Client) -> None:
    png = base64.b64decode(
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
    )
    data = json_format.ParseDict({"city": "Oslo"}, pb.Part().data)
    parts = [text("look"), pb.Part(raw=png, media_type="image/png", filename="dot.png")]
    parts.append(pb.Part(data=data))
    (event,) = await collect(polling, user_message(*parts))
    user = event.task.history[0]
    assert user.parts[0].text == "look"
    assert user.parts[1].raw == png and user.parts[1].media_type == "image/png"
    assert user.parts[1].filename == "dot.png"
    assert user.parts[2].text == '{"city": "Oslo"}'
    # A file no model takes is refused before anything runs.
    from a2a.utils.errors import ContentTypeNotSupportedError

    zipped = pb.Part(raw=b"PK\x03\x04", media_type="application/zip")
    with pytest.raises(ContentTypeNotSupportedError):
        await collect(polling, user_message(zipped))


def test_json_rpc_envelope_errors(server: Server) -> None:
    with server.client() as client:
        legacy = client.post(
            "/a2a/chat", json={"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {}}
        ).json()
        unknown = client.post(
            "/a2a/chat", json={"jsonrpc": "2.0", "id": 2, "method": "Nope", "params": {}}
        ).json()
        old = client.post(
            "/a2a/chat",
            json={"jsonrpc": "2.0", "id": 3, "method": "GetTask", "params": {"id": "x"}},
            headers={"A2A-Version": "0.3"},
        ).json()
        broken = client.post(
            "/a2a/chat", content=b"{", headers={"content-type": "application/json"}
        ).json()
    assert legacy["id"] == 1 and legacy["error"]["code"] == -32009
    assert "SendMessage" in legacy["error"]["message"]
    assert unknown["error"]["code"] == -32601
    assert old["error"]["code"] == -32009
    assert broken["error"]["code"] == -32700


async def test_tether_calls_itself_over_loopback(server: Server) -> None:
    from tether import RunContext
    from tether.a2a import a2a_agent, context_id_for
    from tether.lab import Runtime

    # A remote agent as tools: the served agent answers, on the context of the conversation.
    (ask,) = await a2a_agent(url_of(server), headers=server.headers).get_tools(None)
    assert ask.name == "ask_chat"
    ctx = RunContext(session_id="loopback-tools")
    first = await ask.call({"message": "hi"}, ctx)
    second = await ask.call({"message": "hi"}, ctx)
    assert (first.output, second.output) == ("Hello from turn 1.", "Hello from turn 2.")
    # The served scope is the context the tool derived from the conversation.
    with server.client() as client:
        scope = context_id_for("loopback-tools", url_of(server))
        assert client.get(f"/api/scopes/{scope}").status_code == 200
        assert client.get("/api/scopes/not-a-scope-here").status_code == 404
    # A remote agent as a lab agent: its runs stream the served agent's answer.
    lab = Runtime(store="memory", version=False)
    remote = lab.remote_agent(url_of(server), headers=server.headers)
    assert remote.id == "chat"
    stream = remote.stream(memory_scope="here", user="words 3")
    assert [t async for t in stream.text_stream] == ["w0 ", "w1 ", "w2 "]
    again = await remote.run(memory_scope="here", user="hello").result
    assert again.text == "Hello from turn 2."
    await lab.aclose()


async def test_a_cancelled_tool_call_cancels_the_remote_task(server: Server) -> None:
    from tether import RunContext
    from tether.a2a import a2a_agent

    (ask,) = await a2a_agent(url_of(server), headers=server.headers).get_tools(None)
    marker = uuid.uuid4().hex
    call = asyncio.ensure_future(
        ask.call({"message": f"words 5000 {marker}"}, RunContext(session_id=marker))
    )
    with server.client() as client:
        # Until the served run has streamed a while: its task event (the id the client needs to
        # cancel it) went out before its first text, and this loop read it meanwhile.
        events: list[Any] = []
        for _ in range(600):
            runs = client.get("/api/runs", params={"q": marker}).json()["runs"]
            if runs:
                events = client.get(f"/api/events/{runs[0]['run_id']}").json()["events"]
                if sum(e["type"] == "agent_text_delta" for e in events) >= 20:
                    break
            await asyncio.sleep(0.05)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        for _ in range(600):  # until the cancel request reached it
            (run,) = client.get("/api/runs", params={"q": marker}).json()["runs"]
            if run["status"] != "running":
                break
            await asyncio.sleep(0.05)
    assert run["status"] == "cancelled"
