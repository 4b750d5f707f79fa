"""Every wait of a model call is bounded and named, against a loopback server that misbehaves the
way production servers do: no answer at all, keep-alives and no content, a stall mid-answer, an
answer that never ends, a connection that cannot be opened."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tether import Session, create_agent
from tether.errors import ConnectDeadlineError, DeadlineError, LLMConnectionError, LLMError
from tether.llm.anthropic import AnthropicClient
from tether.llm.openai_chat import OpenAIChatClient

from .conftest import Reply, Sleeps, WireServer, run_chat, run_turn, simple_request, sse

START = sse(
    ("message_start", {"type": "message_start", "message": {"usage": {"input_tokens": 3}}}),
    (
        "content_block_start",
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    ),
)


def text(piece: str) -> bytes:
    return sse(
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": piece},
            },
        )
    )


END = sse(
    ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"}}),
    ("message_stop", {"type": "message_stop"}),
)
PING = b'event: ping\ndata: {"type": "ping"}\n\n'
COMMENT = b": keep-alive\n\n"
EMPTY_DATA = b"data:\n\n"


def anthropic(wire: WireServer, **options: Any) -> AnthropicClient:
    return AnthropicClient("claude-test", base_url=wire.url, api_key="k", **options)


async def timed(client: AnthropicClient | OpenAIChatClient) -> tuple[Any, float]:
    started = time.monotonic()
    try:
        out = await run_chat(client, simple_request())
    finally:
        await client.aclose()
    return out, time.monotonic() - started


async def test_a_server_that_never_answers_hits_the_first_byte_deadline(
    wire: WireServer, sleeps: Sleeps
) -> None:
    wire.reply(Reply(silent=True), Reply(silent=True), Reply(silent=True))
    out, elapsed = await timed(anthropic(wire, first_byte_timeout=0.3, max_retries=2))
    err = out.error
    assert isinstance(err, DeadlineError) and err.deadline == "first_byte"
    assert err.seconds == 0.3 and "first_byte_timeout=0.3 s" in str(err)
    # The request may have been processed: it is not sent again, and the server that accepted
    # it is not said to be unreachable.
    assert "could not reach" not in str(err) and not isinstance(err, LLMConnectionError)
    assert len(wire.requests) == 1 and sleeps.waits == []
    assert err.retryable  # stream_retries may rerun the step
    assert elapsed < 3.0


@pytest.mark.parametrize("keepalive", [PING, COMMENT, EMPTY_DATA], ids=["ping", "comment", "data"])
async def test_keep_alives_do_not_hold_the_idle_deadline_open(
    keepalive: bytes, wire: WireServer
) -> None:
    wire.reply(Reply(body=[START, text("Hel")], keepalive=keepalive, every=0.05))
    out, elapsed = await timed(anthropic(wire, idle_timeout=0.5))
    err = out.error
    assert isinstance(err, DeadlineError) and err.deadline == "idle"
    assert "idle_timeout=0.5 s" in str(err) and err.seconds == 0.5
    assert out.text == "Hel"  # what came before the silence was streamed
    assert 0.45 < elapsed < 3.0
    await asyncio.wait_for(wire.disconnected.wait(), 5)  # and the connection was closed


async def test_a_stall_mid_answer_hits_the_idle_deadline(wire: WireServer) -> None:
    wire.reply(Reply(body=[START, text("The answer is")], hold=True))
    out, _ = await timed(anthropic(wire, idle_timeout=0.3))
    assert isinstance(out.error, DeadlineError) and out.error.deadline == "idle"
    assert out.text == "The answer is"


async def test_content_keeps_a_slow_stream_alive(wire: WireServer) -> None:
    # 12 pieces 0.1 s apart: 1.2 s in all, more than the idle deadline, but never idle.
    wire.reply(Reply(body=[START, *(text(f"{i} ") for i in range(12)), END], pace=0.1))
    out, elapsed = await timed(anthropic(wire, idle_timeout=0.5))
    assert out.error is None, out.error
    assert out.text == "".join(f"{i} " for i in range(12))
    assert elapsed > 1.0


async def test_an_answer_that_never_ends_hits_the_total_deadline(wire: WireServer) -> None:
    # Content every 50 ms keeps the idle deadline happy; only the total one can end this.
    wire.reply(Reply(body=[START], keepalive=text("la "), every=0.05))
    out, elapsed = await timed(anthropic(wire, idle_timeout=5, total_timeout=0.6))
    err = out.error
    assert isinstance(err, DeadlineError) and err.deadline == "total"
    assert "total_timeout=0.6 s" in str(err) and not err.retryable
    assert out.text.startswith("la la")
    assert 0.55 < elapsed < 3.0


async def test_the_total_deadline_counts_retry_waits(wire: WireServer, sleeps: Sleeps) -> None:
    # A 5 s retry-after cannot fit into a 1 s call: fail now rather than sleep into the deadline.
    wire.reply(Reply(503, b'{"error": {"message": "busy"}}', {"retry-after": "5"}))
    out, elapsed = await timed(anthropic(wire, total_timeout=1))
    err = out.error
    assert isinstance(err, DeadlineError) and err.deadline == "total"
    assert "busy" in str(err) and "5 s" in str(err)
    assert sleeps.waits == [] and len(wire.requests) == 1 and elapsed < 1.0


@pytest.fixture
def full_backlog() -> Iterator[int]:
    """A port whose listen queue is full: a connection attempt hangs until its deadline."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(0)
    port = server.getsockname()[1]
    fillers = []
    for _ in range(4):
        filler = socket.socket()
        filler.setblocking(False)
        try:
            filler.connect(("127.0.0.1", port))
        except BlockingIOError:
            pass
        fillers.append(filler)
    yield port
    for sock in [*fillers, server]:
        sock.close()


async def test_a_connection_that_cannot_be_opened_hits_the_connect_deadline(
    full_backlog: int, sleeps: Sleeps
) -> None:
    client = AnthropicClient(
        "claude-test",
        base_url=f"http://127.0.0.1:{full_backlog}",
        api_key="k",
        connect_timeout=0.2,
        max_retries=1,
    )
    out, elapsed = await timed(client)
    err = out.error
    assert isinstance(err, ConnectDeadlineError) and isinstance(err, LLMConnectionError)
    assert err.deadline == "connect" and "connect_timeout=0.2 s" in str(err)
    assert len(sleeps.waits) == 1  # a request that never left may be sent again
    assert elapsed < 10


# -- through the agent loop ----------------------------------------------------------------------


def chat_text(words: str) -> bytes:
    return sse(
        (None, {"choices": [{"index": 0, "delta": {"content": words}, "finish_reason": None}]}),
        (None, {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
        (None, "[DONE]"),
    )


async def test_a_deadline_ends_the_turn_with_an_error_and_the_session_stays_usable(
    wire: WireServer,
) -> None:
    wire.reply(Reply(silent=True), Reply(body=chat_text("Back again.")))
    agent = create_agent(
        llm={
            "model": "openai:gpt-test",
            "base_url": f"{wire.url}/v1",
            "first_byte_timeout": 0.3,
            "max_retries": 0,
        },
        prompt=["Be brief."],
    )
    session = Session(id="s")
    async with agent:
        failed = await run_turn(agent, session, "first")
        assert failed[-1]["type"] == "error"
        error = failed[-1]["error"]
        assert isinstance(error, DeadlineError) and error.deadline == "first_byte"
        assert isinstance(error, LLMError)
        done = await run_turn(agent, session, "second")
    assert done[-1]["type"] == "done" and done[-1]["text"] == "Back again."
    sent = wire.requests[1].json()["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "user"]


async def test_stream_retries_rerun_a_step_whose_first_byte_never_came(wire: WireServer) -> None:
    wire.reply(Reply(silent=True), Reply(body=chat_text("Second time lucky.")))
    agent = create_agent(
        llm={
            "model": "openai:gpt-test",
            "base_url": f"{wire.url}/v1",
            "first_byte_timeout": 0.3,
            "stream_retries": 1,
        },
        prompt=["Be brief."],
    )
    async with agent:
        events = await run_turn(agent, Session(id="s"), "hi")
    assert events[-1]["type"] == "done" and events[-1]["text"] == "Second time lucky."
    assert len(wire.requests) == 2
