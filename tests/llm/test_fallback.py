"""Model fallback over real loopback servers: each failure kind before content moves to the next
model with the same request; a failure after content began, or a request the next model would
refuse too, does not; the switch is a trace record and `done` names the model that answered."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tether import create_agent, reduce
from tether.errors import (
    ConfigError,
    LLMHTTPError,
    LLMStreamError,
    ModelSettingError,
)
from tether.llm import FallbackClient, client_from_config, fallback
from tether.llm.anthropic import AnthropicClient
from tether.llm.openai_chat import OpenAIChatClient

from .conftest import Reply, WireServer, run_chat, simple_request, sse

ANSWER = sse(
    (None, {"id": "c", "choices": [{"index": 0, "delta": {"content": "from b"}}]}),
    (None, {"id": "c", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
    (None, "[DONE]"),
)
HALF = sse((None, {"id": "c", "choices": [{"index": 0, "delta": {"content": "half"}}]}))


@pytest.fixture
async def second() -> AsyncIterator[WireServer]:
    server = WireServer()
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


def chain(a_url: str, b: WireServer, **a_options: Any) -> FallbackClient:
    first = OpenAIChatClient("model-a", base_url=a_url, api_key="ka", max_retries=0, **a_options)
    return fallback(first, OpenAIChatClient("model-b", base_url=b.url, api_key="kb"))


async def close(client: FallbackClient) -> None:
    for inner in client.clients:  # given as clients: the caller's to close
        await inner.aclose()


async def closed_port() -> str:
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()
    return f"http://127.0.0.1:{port}"


@pytest.mark.parametrize(
    ("reply", "error"),
    [
        (Reply(500, b'{"error": {"message": "internal"}}'), "LLMHTTPError"),
        (Reply(503, b'{"error": {"message": "unavailable"}}'), "LLMHTTPError"),
        (Reply(429, b'{"error": {"message": "slow down"}}'), "RateLimitError"),
        (Reply(401, b'{"error": {"message": "bad key"}}'), "AuthenticationError"),
        (Reply(200, [], cut=True), "LLMStreamError"),
    ],
    ids=["500", "503", "429", "401", "cut-before-content"],
)
async def test_a_failure_before_content_moves_to_the_next_model(
    wire: WireServer, second: WireServer, reply: Reply, error: str
) -> None:
    wire.reply(reply)
    second.reply(Reply(body=ANSWER))
    client = chain(wire.url, second)
    out = await run_chat(client, simple_request("model-a"))
    assert out.error is None, out.error
    assert out.text == "from b"
    assert out.finish is not None and out.finish["model"] == "openai:model-b"
    (switch,) = [c for c in out.chunks if c["type"] == "fallback"]
    assert switch["after"] == "openai:model-a" and switch["model"] == "openai:model-b"
    assert switch["reason"].startswith(error)
    assert len(wire.requests) == 1
    (seen,) = second.requests
    sent_a, sent_b = wire.requests[0].json(), seen.json()
    assert sent_b["model"] == "model-b"  # the same request, for the next model
    assert {**sent_a, "model": "model-b"} == sent_b
    assert seen.headers["authorization"] == "Bearer kb"
    await close(client)


async def test_a_connection_error_moves_on(second: WireServer) -> None:
    second.reply(Reply(body=ANSWER))
    client = chain(await closed_port(), second)
    out = await run_chat(client, simple_request("model-a"))
    assert out.text == "from b"
    (switch,) = [c for c in out.chunks if c["type"] == "fallback"]
    assert switch["reason"].startswith("LLMConnectionError")
    await close(client)


async def test_a_deadline_moves_on(wire: WireServer, second: WireServer) -> None:
    wire.reply(Reply(silent=True))
    second.reply(Reply(body=ANSWER))
    client = chain(wire.url, second, first_byte_timeout=0.2)
    out = await run_chat(client, simple_request("model-a"))
    assert out.text == "from b"
    (switch,) = [c for c in out.chunks if c["type"] == "fallback"]
    assert switch["reason"].startswith("DeadlineError")
    await close(client)


async def test_no_fallback_once_content_began(wire: WireServer, second: WireServer) -> None:
    wire.reply(Reply(body=[HALF], cut=True))
    client = chain(wire.url, second)
    out = await run_chat(client, simple_request("model-a"))
    assert out.text == "half"
    assert isinstance(out.error, LLMStreamError)
    assert not [c for c in out.chunks if c["type"] == "fallback"]
    assert second.requests == []
    await close(client)


async def test_a_request_the_next_model_would_refuse_too_is_not_retried(
    wire: WireServer, second: WireServer
) -> None:
    wire.reply(Reply(400, b'{"error": {"message": "messages: bad role"}}'))
    client = chain(wire.url, second)
    out = await run_chat(client, simple_request("model-a"))
    assert isinstance(out.error, LLMHTTPError) and out.error.status == 400
    assert second.requests == []
    await close(client)


async def test_the_last_models_error_is_raised(wire: WireServer, second: WireServer) -> None:
    wire.reply(Reply(503, b'{"error": {"message": "a down"}}'))
    second.reply(Reply(503, b'{"error": {"message": "b down"}}'))
    client = fallback(
        OpenAIChatClient("model-a", base_url=wire.url, api_key="k", max_retries=0),
        OpenAIChatClient("model-b", base_url=second.url, api_key="k", max_retries=0),
    )
    out = await run_chat(client, simple_request("model-a"))
    assert isinstance(out.error, LLMHTTPError) and "b down" in str(out.error)
    await close(client)


async def test_an_agent_with_a_model_list_traces_the_switch_and_done_names_the_model(
    wire: WireServer, second: WireServer
) -> None:
    wire.reply(
        Reply(
            529,
            b'{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}',
        )
    )
    second.reply(Reply(body=ANSWER))
    records: list[Any] = []
    agent = create_agent(
        model=[
            {"model": "anthropic:claude-x", "base_url": wire.url, "api_key": "k", "max_retries": 0},
            {"model": "openai:model-b", "base_url": second.url, "api_key": "k"},
        ],
        trace=records.append,
    )
    assert isinstance(agent.client, FallbackClient)
    assert agent.client.models == ["anthropic:claude-x", "openai:model-b"]
    session = agent.create_session()
    events = []
    async for event in agent.send(session, "hi"):
        events.append(event)
        session = reduce(session, event)
    done = events[-1]
    assert done["type"] == "done" and done["text"] == "from b"
    assert done["model"] == "openai:model-b"
    switches = [r for r in records if r["name"] == "fallback"]
    assert len(switches) == 1 and switches[0]["phase"] == "request"
    assert switches[0]["data"]["model"] == "openai:model-b"
    assert switches[0]["data"]["after"] == "anthropic:claude-x"
    assert session.messages[-1]["content"] == [{"type": "text", "text": "from b"}]
    await agent.aclose()


def test_a_setting_a_later_model_cannot_honour_fails_at_definition() -> None:
    with pytest.raises(ModelSettingError, match="anthropic cannot honour the model setting 'seed'"):
        create_agent(
            model=[
                {"model": "openai:gpt-x", "api_key": "k"},
                {"model": "anthropic:claude-x", "api_key": "k"},
            ],
            settings={"seed": 7},
        )


def test_chains_need_two_models_and_do_not_nest() -> None:
    with pytest.raises(ConfigError, match="at least two models"):
        create_agent(model=[{"model": "openai:gpt-x", "api_key": "k"}])
    with pytest.raises(ConfigError, match="do not nest"):
        create_agent(model=["test", ["test", "test"]])  # type: ignore[list-item]
    with pytest.raises(ConfigError, match="at least two models"):
        fallback(AnthropicClient("c", api_key="k"))


async def test_clients_given_stay_the_callers(wire: WireServer) -> None:
    mine = OpenAIChatClient("a", base_url=wire.url, api_key="k")
    client = client_from_config([mine, {"model": "openai:b", "base_url": wire.url, "api_key": "k"}])
    assert isinstance(client, FallbackClient)
    wire.reply(Reply(body=ANSWER))
    await run_chat(client, simple_request("a"))
    await client.aclose()
    assert mine._client is not None  # the caller's: still open
    assert client.clients[1]._client is None  # type: ignore[attr-defined]  # ours: closed
    await mine.aclose()


async def test_the_chat_span_names_the_model_that_answered() -> None:
    pytest.importorskip("opentelemetry.sdk", reason="the OpenTelemetry SDK is not installed")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from tether.errors import LLMConnectionError
    from tether.otel import OtelSink
    from tether.testing import script_client

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    down = script_client(
        [{"error": LLMConnectionError("could not reach a", retryable=True)}], model="a"
    )
    up = script_client([{"text": "from b"}], model="b")
    agent = create_agent(model=fallback(down, up), trace=OtelSink(provider))
    async for _ in agent.send(agent.create_session(), "hi"):
        pass
    chats = [s for s in exporter.get_finished_spans() if s.name.startswith("chat")]
    assert [dict(s.attributes or {}).get("tether.fallback.model") for s in chats] == ["b"]
    provider.shutdown()
