"""tether's A2A client against an agent built with the official a2a-sdk 1.x (served by uvicorn
on loopback, once for the module): the card, streamed and plain answers, the remote context
that follows the local conversation, failed and input-required tasks, bad cards and servers
that cannot be reached, all as typed errors; `a2a_agent` as tools and `remote_agent` as a lab
agent whose runs stream the remote answer."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip(
    "a2a.server",
    reason="the A2A client is tested against the official a2a-sdk: pip install 'tether[a2a]'",
)

from tether import (
    A2ACardError,
    A2AConnectionError,
    A2AProtocolError,
    A2ATaskError,
    LLMError,
    RunContext,
)
from tether.a2a import A2AClient, Delta, Reply, a2a_agent, context_id_for
from tether.lab import Runtime
from tether.testing import script_client

HERE = Path(__file__).resolve().parent
TOKEN = "sdk-token"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def sdk_url() -> Iterator[str]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(HERE / "sdk_server.py"), str(port), TOKEN],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"the a2a-sdk server exited with {process.returncode}")
        try:
            httpx.get(url + "/.well-known/agent-card.json", timeout=2)
            break
        except httpx.TransportError:
            if time.monotonic() > deadline:
                process.kill()
                raise RuntimeError("the a2a-sdk server did not start") from None
            time.sleep(0.1)
    yield url
    process.terminate()
    process.wait(10)


AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
async def client(sdk_url: str) -> AsyncIterator[A2AClient]:
    async with A2AClient(sdk_url, headers=AUTH) as client:
        yield client


async def answer(client: A2AClient, text: str, context_id: str | None = None) -> list[Any]:
    return [item async for item in client.send(text, context_id=context_id)]


async def test_a_streamed_answer_comes_in_pieces_then_the_reply(client: A2AClient) -> None:
    card = await client.card()
    assert card["name"] == "Echo Agent"
    items = await answer(client, "hello", context_id="ctx-stream")
    assert items[:-1] == [Delta("echo "), Delta("1: hello")]
    reply = items[-1]
    assert isinstance(reply, Reply)
    assert reply.text == "echo 1: hello"
    assert reply.context_id == "ctx-stream" and reply.state == "completed"
    assert reply.task_id
    # The same context goes on: the remote agent counts its messages.
    (*_, again) = await answer(client, "more", context_id="ctx-stream")
    assert again.text == "echo 2: more"
    task = await client.get_task(reply.task_id)
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_a_media_answer_becomes_media_parts(client: A2AClient) -> None:
    (*_, reply) = await answer(client, "picture")
    assert reply.text == "a dot"
    assert reply.parts[1]["type"] == "image" and reply.parts[1]["media_type"] == "image/png"


async def test_failed_and_input_required_tasks_are_task_errors(client: A2AClient) -> None:
    with pytest.raises(A2ATaskError, match="failed: cannot do that") as failed:
        await answer(client, "fail now")
    assert failed.value.state == "failed" and failed.value.task_id
    with pytest.raises(A2ATaskError, match="which city") as asked:
        await answer(client, "ask me")
    assert asked.value.state == "input-required"


async def test_bad_cards_missing_tokens_and_dead_servers_are_typed(sdk_url: str) -> None:
    async with A2AClient(sdk_url) as no_token:
        with pytest.raises(A2ACardError, match=r"HTTP 401.*headers="):
            await no_token.card()
    async with A2AClient(sdk_url + "/nowhere", headers=AUTH) as wrong:
        with pytest.raises(A2ACardError, match="no agent card"):
            await wrong.card()
    async with A2AClient(f"http://127.0.0.1:{free_port()}") as dead:
        with pytest.raises(A2AConnectionError, match="could not reach"):
            await dead.card()
    with pytest.raises(A2ACardError):
        A2AClient("ftp://example.com")


async def test_a_json_rpc_error_is_a_protocol_error(client: A2AClient) -> None:
    with pytest.raises(A2AProtocolError) as raised:
        await client.get_task("no-such-task")
    assert raised.value.code == -32001


async def test_a2a_agent_tools_call_the_remote_agent_on_the_conversation_s_context(
    sdk_url: str,
) -> None:
    provider = a2a_agent(sdk_url, headers=AUTH)
    (ask,) = await provider.get_tools(None)
    assert ask.name == "ask_echo_agent"
    assert "Echo: Says it back." in ask.description
    ctx = RunContext(session_id="conversation-1")
    first = await ask.call({"message": "one"}, ctx)
    second = await ask.call({"message": "two"}, ctx)
    other = await ask.call({"message": "three"}, RunContext(session_id="conversation-2"))
    assert (first.output, second.output, other.output) == (
        "echo 1: one",
        "echo 2: two",
        "echo 1: three",
    )
    failed = await ask.call({"message": "fail"}, ctx)
    assert failed.is_error and "A2ATaskError" in failed.output and "cannot do that" in failed.output
    picture = await ask.call({"message": "picture"}, ctx)
    assert picture.parts and picture.parts[0]["type"] == "image"
    skills = await a2a_agent(sdk_url, headers=AUTH, tools="skills", name="echo").get_tools(None)
    assert [t.name for t in skills] == ["echo_echo", "echo_draw"]
    await provider.aclose()
    assert context_id_for("conversation-1", sdk_url) != context_id_for("conversation-2", sdk_url)


async def test_the_model_sees_a_failed_remote_task_as_a_tool_error(sdk_url: str) -> None:
    lab = Runtime(store="memory", version=False)
    model = script_client(
        [{"tool_use": [{"name": "ask_echo_agent", "input": {"message": "fail"}}]}, {"text": "ok"}]
    )
    caller = lab.create_agent(id="caller", model=model, tools=a2a_agent(sdk_url, headers=AUTH))
    result = await caller.run(memory_scope="s", user="go").result
    assert result.text == "ok"
    (tool_record,) = [m for m in result.new_messages if m["role"] == "tool"]
    (part,) = tool_record["content"]
    assert part["is_error"] is True
    assert "A2ATaskError" in part["output"] and "cannot do that" in part["output"]
    # A provider whose card cannot be read fails the episode naming what is wrong.
    dead = lab.create_agent(
        id="dead",
        model=script_client([{"text": "x"}]),
        tools=a2a_agent(f"http://127.0.0.1:{free_port()}"),
    )
    with pytest.raises(A2AConnectionError, match="could not reach"):
        await dead.run(user="go").result
    await lab.aclose()


async def test_remote_agent_is_a_lab_agent_whose_runs_stream_the_remote_answer(
    sdk_url: str,
) -> None:
    lab = Runtime(store="memory", version=False)
    echo = lab.remote_agent(sdk_url, id="echo", headers=AUTH)
    stream = echo.stream(memory_scope="talk", user="first")
    texts = [t async for t in stream.text_stream]
    result = await stream.result
    assert texts == ["echo ", "1: first"]
    assert result.text == "echo 1: first"
    # The next turn on the scope continues the remote context.
    second = await echo.run(memory_scope="talk", user="second").result
    assert second.text == "echo 2: second"
    other = await echo.run(memory_scope="elsewhere", user="hi").result
    assert other.text == "echo 1: hi"
    stored = await lab.message_store.load("talk")
    assert [r["role"] for r in stored if r["role"] != "system"] == [
        "user",
        "assistant",
        "user",
        "assistant",
    ]
    # The loop reports a model client's own error inside an LLMError, the A2A error its cause.
    with pytest.raises(LLMError, match=r"A2ATaskError.*cannot do that") as failed:
        await echo.run(memory_scope="talk", user="fail").result
    assert isinstance(failed.value.__cause__, A2ATaskError)
    info = (await lab.run_store.list_runs(memory_scope="talk"))[0]
    assert info.status == "failed" and "A2ATaskError" in (info.error or "")
    await lab.aclose()
