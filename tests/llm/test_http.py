"""The shared HTTP layer against a loopback server: request retries and their waits, typed errors,
broken streams, cancellation closing the response, and the client's lifecycle."""

from __future__ import annotations

import asyncio
import email.utils
import json
import re
import socket
import time
from typing import Any

import httpx
import pytest

from tether.errors import (
    AuthenticationError,
    ConfigError,
    ContextLengthError,
    LLMConnectionError,
    LLMHTTPError,
    LLMStreamError,
    RateLimitError,
)
from tether.llm import client_from_config
from tether.llm._adapter import HTTPAdapter
from tether.llm._retries import backoff_delay, retry_after
from tether.llm.anthropic import AnthropicClient
from tether.llm.gemini import GeminiClient
from tether.llm.openai_chat import OpenAIChatClient
from tether.llm.openai_responses import OpenAIResponsesClient

from .conftest import Reply, Seen, Sleeps, WireServer, run_chat, simple_request, sse

OK_CHAT = sse(
    (None, {"choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": None}]}),
    (None, {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
    (None, "[DONE]"),
)
OK_ANTHROPIC = sse(
    ("message_start", {"type": "message_start", "message": {"usage": {"input_tokens": 1}}}),
    (
        "content_block_start",
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    ),
    (
        "content_block_delta",
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "ok"}},
    ),
    ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"}}),
    ("message_stop", {"type": "message_stop"}),
)


def error_body(message: str, kind: str = "invalid_request_error", code: str | None = None) -> bytes:
    return json.dumps({"error": {"message": message, "type": kind, "code": code}}).encode()


def chat_client(wire: WireServer, sleeps: Sleeps, **options: Any) -> OpenAIChatClient:
    return OpenAIChatClient(
        "gpt-test", base_url=f"{wire.url}/v1", api_key="k", sleep=sleeps, **options
    )


def anthropic_client(wire: WireServer, sleeps: Sleeps, **options: Any) -> AnthropicClient:
    return AnthropicClient("claude-test", base_url=wire.url, api_key="k", sleep=sleeps, **options)


def make_client(provider: str, wire: WireServer, sleeps: Sleeps) -> HTTPAdapter:
    """The adapter for `provider`, pointed at the loopback server."""
    if provider == "anthropic":
        return anthropic_client(wire, sleeps)
    if provider == "openai":
        return chat_client(wire, sleeps)
    if provider == "openai-responses":
        return OpenAIResponsesClient(
            "gpt-test", base_url=f"{wire.url}/v1", api_key="k", sleep=sleeps
        )
    return GeminiClient("g", base_url=f"{wire.url}/v1beta", api_key="k", sleep=sleeps)


# -- request retries --------------------------------------------------------------------------


async def test_429_waits_as_long_as_retry_after_says(wire: WireServer, sleeps: Sleeps) -> None:
    wire.reply(
        Reply(
            429,
            error_body("Rate limit reached", "requests", "rate_limit_exceeded"),
            {"retry-after": "3"},
        ),
        Reply(body=OK_CHAT),
    )
    async with chat_client(wire, sleeps) as client:
        out = await run_chat(client, simple_request())
    assert out.error is None and out.text == "ok"
    assert len(wire.requests) == 2
    assert sleeps.waits == [3.0]
    assert wire.requests[0].body == wire.requests[1].body


OK_GEMINI = sse(
    (None, {"candidates": [{"content": {"parts": [{"text": "ok"}]}, "finishReason": "STOP"}]})
)


async def test_gemini_429_waits_as_long_as_its_retry_info_says(
    wire: WireServer, sleeps: Sleeps
) -> None:
    # Gemini says how long to wait in the body (google.rpc.RetryInfo), not in a header.
    quota = {
        "error": {
            "code": 429,
            "message": "You exceeded your current quota.",
            "status": "RESOURCE_EXHAUSTED",
            "details": [
                {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": []},
                {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "3.5s"},
            ],
        }
    }
    wire.reply(Reply(429, json.dumps(quota).encode()), Reply(body=OK_GEMINI))
    async with make_client("gemini", wire, sleeps) as client:
        out = await run_chat(client, simple_request())
    assert out.error is None and out.text == "ok"
    assert sleeps.waits == [3.5] and len(wire.requests) == 2
    # A retry-after header, when there is one, still decides.
    wire.reply(Reply(429, json.dumps(quota).encode(), {"retry-after": "1"}), Reply(body=OK_GEMINI))
    async with make_client("gemini", wire, sleeps) as client:
        assert (await run_chat(client, simple_request())).error is None
    assert sleeps.waits == [3.5, 1.0]


async def test_retry_after_ms_wins_over_retry_after(wire: WireServer, sleeps: Sleeps) -> None:
    wire.reply(
        Reply(429, error_body("slow down"), {"retry-after-ms": "1500", "retry-after": "2"}),
        Reply(body=OK_CHAT),
    )
    async with chat_client(wire, sleeps) as client:
        assert (await run_chat(client, simple_request())).error is None
    assert sleeps.waits == [1.5]


async def test_529_then_503_back_off_exponentially(wire: WireServer, sleeps: Sleeps) -> None:
    overloaded = json.dumps(
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    )
    wire.reply(
        Reply(529, overloaded.encode()),
        Reply(503, b"upstream unavailable"),
        Reply(body=OK_ANTHROPIC),
    )
    async with anthropic_client(wire, sleeps) as client:
        out = await run_chat(client, simple_request())
    assert out.error is None and out.text == "ok"
    assert len(wire.requests) == 3
    first, second = sleeps.waits
    assert 0.375 <= first <= 0.5  # 0.5 s less up to 25 % jitter
    assert 0.75 <= second <= 1.0


async def test_retries_run_out(wire: WireServer, sleeps: Sleeps) -> None:
    wire.reply(*(Reply(503, error_body("busy", "server_error")) for _ in range(3)))
    async with chat_client(wire, sleeps, max_retries=2) as client:
        out = await run_chat(client, simple_request())
    assert isinstance(out.error, LLMHTTPError) and type(out.error) is LLMHTTPError
    assert out.error.status == 503 and out.error.retryable
    assert "busy" in str(out.error) and out.error.body == {
        "error": {"message": "busy", "type": "server_error", "code": None}
    }
    assert len(wire.requests) == 3 and len(sleeps.waits) == 2


async def test_rate_limit_error_after_the_last_retry(wire: WireServer, sleeps: Sleeps) -> None:
    wire.reply(*(Reply(429, error_body("quota", "insufficient_quota")) for _ in range(2)))
    async with chat_client(wire, sleeps, max_retries=1) as client:
        out = await run_chat(client, simple_request())
    assert isinstance(out.error, RateLimitError) and out.error.status == 429
    assert "quota" in str(out.error)
    assert len(wire.requests) == 2


async def test_max_retries_zero_does_not_retry(wire: WireServer, sleeps: Sleeps) -> None:
    wire.reply(Reply(500, error_body("oops", "server_error")))
    async with chat_client(wire, sleeps, max_retries=0) as client:
        out = await run_chat(client, simple_request())
    assert isinstance(out.error, LLMHTTPError) and out.error.status == 500
    assert len(wire.requests) == 1 and sleeps.waits == []


async def test_x_should_retry_overrides_the_status(wire: WireServer, sleeps: Sleeps) -> None:
    wire.reply(Reply(503, error_body("no"), {"x-should-retry": "false"}))
    async with chat_client(wire, sleeps) as client:
        out = await run_chat(client, simple_request())
    assert isinstance(out.error, LLMHTTPError) and len(wire.requests) == 1
    wire.reply(Reply(400, error_body("try again"), {"x-should-retry": "true"}), Reply(body=OK_CHAT))
    async with chat_client(wire, sleeps) as client:
        assert (await run_chat(client, simple_request())).error is None
    assert len(wire.requests) == 3


async def test_408_and_409_are_retried(wire: WireServer, sleeps: Sleeps) -> None:
    wire.reply(Reply(408, b""), Reply(409, error_body("conflict")), Reply(body=OK_CHAT))
    async with chat_client(wire, sleeps) as client:
        assert (await run_chat(client, simple_request())).error is None
    assert len(wire.requests) == 3 and len(sleeps.waits) == 2


async def test_connection_refused_is_retried_then_raised(sleeps: Sleeps) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    client = OpenAIChatClient(
        "gpt-test", base_url=f"http://127.0.0.1:{port}/v1", sleep=sleeps, max_retries=1
    )
    async with client:
        out = await run_chat(client, simple_request())
    assert isinstance(out.error, LLMConnectionError)
    assert f"127.0.0.1:{port}" in str(out.error)
    assert isinstance(out.error.__cause__, httpx.ConnectError)
    assert len(sleeps.waits) == 1


def test_retry_after_forms() -> None:
    assert retry_after(httpx.Headers({"retry-after": "2.5"})) == 2.5
    assert retry_after(httpx.Headers({"retry-after-ms": "250"})) == 0.25
    assert retry_after(httpx.Headers({"retry-after": "soon"})) is None
    assert retry_after(httpx.Headers({})) is None
    # Numbers that are not a duration are unreadable (backoff applies), not "retry now".
    for junk in ("nan", "inf", "-inf", ""):
        assert retry_after(httpx.Headers({"retry-after": junk})) is None, junk
        assert retry_after(httpx.Headers({"retry-after-ms": junk})) is None, junk
    assert retry_after(httpx.Headers({"retry-after-ms": "nan", "retry-after": "2"})) == 2.0
    assert retry_after(httpx.Headers({"retry-after": "-3"})) == 0.0  # in the past: go now
    later = email.utils.formatdate(time.time() + 30, usegmt=True)
    value = retry_after(httpx.Headers({"retry-after": later}))
    assert value is not None and 25 <= value <= 31
    import random

    rng = random.Random(0)
    assert backoff_delay(0, httpx.Headers({"retry-after": "600"}), rng) == 60.0
    for attempt, top in [(0, 0.5), (1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0), (9, 8.0)]:
        assert top * 0.75 <= backoff_delay(attempt, None, rng) <= top


def test_retry_after_dates_without_a_zone_are_gmt(monkeypatch: pytest.MonkeyPatch) -> None:
    # HTTP dates are GMT. "-0000" and a date with no zone parse as naive datetimes, which must not
    # be read in the local zone (nine hours off in Tokyo).
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    time.tzset()
    try:
        later = time.gmtime(time.time() + 30)
        for zone in (" -0000", ""):
            value = retry_after(
                httpx.Headers({"retry-after": time.strftime("%a, %d %b %Y %H:%M:%S", later) + zone})
            )
            assert value is not None and 25 <= value <= 31, (zone, value)
    finally:
        monkeypatch.undo()
        time.tzset()


def test_backoff_of_a_huge_retry_budget_stays_capped() -> None:
    import random

    assert 6.0 <= backoff_delay(5000, None, random.Random(0)) <= 8.0


# -- typed errors -----------------------------------------------------------------------------


async def test_bad_key_is_an_authentication_error(wire: WireServer, sleeps: Sleeps) -> None:
    body = json.dumps(
        {"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}}
    )
    wire.reply(Reply(401, body.encode()))
    async with anthropic_client(wire, sleeps) as client:
        out = await run_chat(client, simple_request())
    assert isinstance(out.error, AuthenticationError)
    assert out.error.status == 401 and not out.error.retryable
    assert "invalid x-api-key" in str(out.error) and "ANTHROPIC_API_KEY" in str(out.error)
    assert len(wire.requests) == 1


@pytest.mark.parametrize(
    ("make", "status", "body"),
    [
        (
            "anthropic",
            400,
            {
                "type": "error",
                "error": {
                    "type": "invalid_request_error",
                    "message": "prompt is too long: 210000 tokens > 200000 maximum",
                },
            },
        ),
        (
            "openai",
            400,
            {
                "error": {
                    "message": "This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens.",
                    "type": "invalid_request_error",
                    "code": "context_length_exceeded",
                }
            },
        ),
        (
            "gemini",
            400,
            [
                {
                    "error": {
                        "code": 400,
                        "message": "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).",
                        "status": "INVALID_ARGUMENT",
                    }
                }
            ],
        ),
        (
            "anthropic",
            400,
            {
                "type": "error",
                "error": {
                    "type": "invalid_request_error",
                    "message": "input length and `max_tokens` exceed context limit: 188240 + 21333 > 200000, decrease input length or `max_tokens` and try again",
                },
            },
        ),
        (
            "openai-responses",
            400,
            {
                "error": {
                    "message": "Your input exceeds the context window of this model. Please adjust your input and try again.",
                    "type": "invalid_request_error",
                    "param": "input",
                    "code": "context_length_exceeded",
                }
            },
        ),
        (
            # The code says it when the message is worded in a way we do not know.
            "openai",
            400,
            {
                "error": {
                    "message": "Please reduce your prompt.",
                    "type": "invalid_request_error",
                    "code": "context_length_exceeded",
                }
            },
        ),
        (
            "anthropic",
            413,
            {
                "type": "error",
                "error": {
                    "type": "request_too_large",
                    "message": "Request exceeds the maximum allowed number of bytes.",
                },
            },
        ),
    ],
)
async def test_context_too_long(
    wire: WireServer, sleeps: Sleeps, make: str, status: int, body: Any
) -> None:
    wire.reply(Reply(status, json.dumps(body).encode()))
    client = make_client(make, wire, sleeps)
    async with client:
        out = await run_chat(client, simple_request())
    assert isinstance(out.error, ContextLengthError) and out.error.status == status
    assert out.error.body == body and len(wire.requests) == 1


@pytest.mark.parametrize(
    ("make", "status", "body", "message"),
    [
        (
            "openai",
            401,
            {
                "error": {
                    "message": "Incorrect API key provided: sk-xx.",
                    "type": "invalid_request_error",
                    "param": None,
                    "code": "invalid_api_key",
                }
            },
            "Incorrect API key provided",
        ),
        (
            "openai-responses",
            401,
            {
                "error": {
                    "message": "Incorrect API key provided: sk-xx.",
                    "type": "invalid_request_error",
                    "param": None,
                    "code": "invalid_api_key",
                }
            },
            "Incorrect API key provided",
        ),
        (
            # Gemini answers a wrong key with 400 INVALID_ARGUMENT; the reason says what it is.
            "gemini",
            400,
            {
                "error": {
                    "code": 400,
                    "message": "API key not valid. Please pass a valid API key.",
                    "status": "INVALID_ARGUMENT",
                    "details": [
                        {
                            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                            "reason": "API_KEY_INVALID",
                            "domain": "googleapis.com",
                            "metadata": {"service": "generativelanguage.googleapis.com"},
                        }
                    ],
                }
            },
            "API key not valid",
        ),
        (
            "gemini",
            403,
            {
                "error": {
                    "code": 403,
                    "message": "Method doesn't allow unregistered callers.",
                    "status": "PERMISSION_DENIED",
                }
            },
            "unregistered callers",
        ),
    ],
)
async def test_a_bad_key_of_each_api_is_an_authentication_error(
    wire: WireServer, sleeps: Sleeps, make: str, status: int, body: Any, message: str
) -> None:
    wire.reply(Reply(status, json.dumps(body).encode()))
    client = make_client(make, wire, sleeps)
    async with client:
        out = await run_chat(client, simple_request())
    assert isinstance(out.error, AuthenticationError), out.error
    assert out.error.status == status and not out.error.retryable
    assert message in str(out.error) and out.error.body == body
    assert " or ".join(type(client).env_vars) in str(out.error)
    assert len(wire.requests) == 1


async def test_an_error_body_of_an_unknown_shape_still_reaches_the_message(
    wire: WireServer, sleeps: Sleeps
) -> None:
    # A compatible server (FastAPI-based, say) with its own error shape: the text is all we have.
    wire.reply(Reply(404, b'{"detail": "Model llama9 not found"}'))
    async with chat_client(wire, sleeps) as client:
        out = await run_chat(client, simple_request())
    assert type(out.error) is LLMHTTPError and out.error.status == 404
    assert "Model llama9 not found" in str(out.error)


async def test_an_html_error_page_is_one_line_with_the_url_and_status(
    wire: WireServer, sleeps: Sleeps
) -> None:
    # A base_url that points at a web server rather than the API: nginx's 404 page.
    page = (
        b"<!DOCTYPE html>\n<html>\n<head><title>404 Not Found</title></head>\n<body>\n"
        b"<center><h1>404 Not Found</h1></center>\n<hr><center>nginx</center>\n</body>\n</html>\n"
    )
    wire.reply(Reply(404, page, headers={"content-type": "text/html"}))
    async with chat_client(wire, sleeps) as client:
        out = await run_chat(client, simple_request())
    assert type(out.error) is LLMHTTPError and out.error.status == 404
    message = str(out.error)
    assert "\n" not in message and "<" not in message
    assert f"{wire.url}/v1/chat/completions" in message
    assert "returned 404" in message and "404 Not Found" in message and "base_url" in message


async def test_other_client_errors_keep_the_provider_message(
    wire: WireServer, sleeps: Sleeps
) -> None:
    wire.reply(
        Reply(
            400, error_body("Invalid schema for function 'f'", code="invalid_function_parameters")
        )
    )
    async with chat_client(wire, sleeps) as client:
        out = await run_chat(client, simple_request())
    assert type(out.error) is LLMHTTPError
    assert out.error.status == 400 and not out.error.retryable
    assert "Invalid schema for function 'f'" in str(out.error)
    assert out.error.provider == "openai"


# -- broken streams ---------------------------------------------------------------------------


async def test_cut_mid_body_is_a_retryable_stream_error(wire: WireServer, sleeps: Sleeps) -> None:
    wire.reply(Reply(body=[OK_CHAT[:60]], cut=True))
    async with chat_client(wire, sleeps) as client:
        out = await run_chat(client, simple_request())
    assert isinstance(out.error, LLMStreamError) and out.error.retryable
    assert isinstance(out.error.__cause__, httpx.RemoteProtocolError)
    assert len(wire.requests) == 1 and sleeps.waits == []  # not a request retry


async def test_clean_end_before_the_terminal_event(wire: WireServer, sleeps: Sleeps) -> None:
    wire.reply(Reply(body=OK_ANTHROPIC[: OK_ANTHROPIC.index(b"event: message_delta")]))
    async with anthropic_client(wire, sleeps) as client:
        out = await run_chat(client, simple_request())
    assert isinstance(out.error, LLMStreamError) and out.error.retryable
    assert out.text == "ok"


async def test_anthropic_error_event_mid_stream(wire: WireServer, sleeps: Sleeps) -> None:
    cut = OK_ANTHROPIC.index(b"event: message_delta")
    error = sse(
        ("error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    )
    wire.reply(Reply(body=OK_ANTHROPIC[:cut] + error))
    async with anthropic_client(wire, sleeps) as client:
        out = await run_chat(client, simple_request())
    assert isinstance(out.error, LLMStreamError) and out.error.retryable
    assert "Overloaded" in str(out.error) and out.text == "ok"


# -- cancellation and lifecycle ---------------------------------------------------------------


FIRST_EVENT = {
    "anthropic": OK_ANTHROPIC[: OK_ANTHROPIC.index(b"event: message_delta")],
    "openai": OK_CHAT[: OK_CHAT.index(b"data:", 10)],
    "openai-responses": sse(
        (
            "response.output_text.delta",
            {"type": "response.output_text.delta", "item_id": "msg_1", "delta": "ok"},
        )
    ),
    "gemini": sse((None, {"candidates": [{"content": {"parts": [{"text": "ok"}]}}]})),
}
"""For each API, a body that streams some text and has not finished."""


@pytest.mark.parametrize("how", ["cancel", "aclose"])
@pytest.mark.parametrize("provider", list(FIRST_EVENT))
async def test_cancelling_the_consumer_closes_the_response(
    wire: WireServer, sleeps: Sleeps, provider: str, how: str
) -> None:
    wire.reply(Reply(body=[FIRST_EVENT[provider]], hold=True))
    first = asyncio.Event()

    async def consume(client: HTTPAdapter) -> None:
        async for _ in client.chat(simple_request()):
            first.set()

    async with make_client(provider, wire, sleeps) as client:
        if how == "cancel":  # the task is cancelled while the adapter waits for bytes
            task = asyncio.create_task(consume(client))
            await first.wait()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        else:  # the consumer stops between two chunks and closes the stream
            stream = client.chat(simple_request())
            await anext(stream)
            await stream.aclose()  # type: ignore[attr-defined]
        # The response was closed by the time the stream stopped, not left to the garbage
        # collector: the pool keeps nothing of it (a half-read stream cannot serve another
        # request), and the server sees the connection go away.
        pool = client.http()._transport._pool  # type: ignore[attr-defined]
        assert pool.connections == []
        await wire.disconnected.wait()
    assert wire.disconnects == 1


async def test_aclose_is_idempotent_and_the_client_reopens(
    wire: WireServer, sleeps: Sleeps
) -> None:
    wire.reply(Reply(body=OK_CHAT), Reply(body=OK_CHAT))
    client = chat_client(wire, sleeps)
    assert (await run_chat(client, simple_request())).text == "ok"
    await client.aclose()
    await client.aclose()
    assert (await run_chat(client, simple_request())).text == "ok"
    await client.aclose()


async def test_a_given_http_client_stays_the_callers(wire: WireServer, sleeps: Sleeps) -> None:
    wire.reply(Reply(body=OK_CHAT))
    async with httpx.AsyncClient() as http:
        client = chat_client(wire, sleeps, http_client=http)
        assert (await run_chat(client, simple_request())).text == "ok"
        await client.aclose()
        assert not http.is_closed


async def test_extra_headers_are_sent(wire: WireServer, sleeps: Sleeps) -> None:
    wire.reply(Reply(body=OK_CHAT))
    async with chat_client(wire, sleeps, headers={"x-proxy-token": "p"}) as client:
        await run_chat(client, simple_request())
    assert wire.requests[0].headers["x-proxy-token"] == "p"


def test_client_from_config_builds_each_adapter() -> None:
    for model, cls in [
        ("anthropic:claude-x", AnthropicClient),
        ("openai:gpt-x", OpenAIChatClient),
        ("openai-responses:gpt-x", OpenAIResponsesClient),
        ("gemini:gemini-x", GeminiClient),
    ]:
        client = client_from_config(
            {"model": model, "api_key": "k", "base_url": "http://h/v9", "stream_retries": 2}
        )
        assert isinstance(client, HTTPAdapter) and isinstance(client, cls)
        assert client.model == model.split(":", 1)[1]
        assert (
            client.base_url == "http://h/v9"
            and client.stream_retries == 2
            and client.max_retries == 2
        )


def test_negative_retry_budgets_are_refused() -> None:
    with pytest.raises(ConfigError, match="max_retries"):
        OpenAIChatClient("gpt-x", api_key="k", max_retries=-1)


# -- retry waits are announced; a wait longer than the cap is an answer --------------------------


async def test_each_retry_wait_is_announced_before_it_happens(
    wire: WireServer, sleeps: Sleeps
) -> None:
    wire.reply(
        Reply(503, error_body("busy", "server_error"), {"retry-after": "2"}),
        Reply(429, error_body("slow down", "rate_limit_exceeded")),
        Reply(body=OK_CHAT),
    )
    seen: list[tuple[str, int]] = []

    async def recording(seconds: float) -> None:
        seen.append(("sleep", len(sleeps.waits)))
        await sleeps(seconds)

    client = chat_client(wire, sleeps)
    client._sleep = recording
    chunks = []
    async with client:
        async for chunk in client.chat(simple_request()):
            chunks.append(chunk)
            if chunk["type"] == "retry":
                seen.append(("chunk", chunk["attempt"]))
    retries = [c for c in chunks if c["type"] == "retry"]
    assert [(c["attempt"], c["delay"]) for c in retries] == [
        (2, 2.0),
        (3, sleeps.waits[1]),
    ]
    assert retries[0]["reason"] == "HTTP 503: openai returned 503: busy"
    assert retries[1]["reason"].startswith("HTTP 429: ")
    assert seen == [("chunk", 2), ("sleep", 0), ("chunk", 3), ("sleep", 1)]
    assert chunks[-1]["type"] == "finish"


async def test_a_retry_after_longer_than_the_cap_fails_at_once(
    wire: WireServer, sleeps: Sleeps
) -> None:
    wire.reply(Reply(429, error_body("Rate limit reached", "requests"), {"retry-after": "120"}))
    started = time.monotonic()
    async with chat_client(wire, sleeps, max_retries=5) as client:
        out = await run_chat(client, simple_request())
    assert isinstance(out.error, RateLimitError)
    assert "asked to wait 120 s" in str(out.error) and "60 s" in str(out.error)
    assert out.error.retry_after == 120.0 and not out.error.retryable
    assert sleeps.waits == [] and len(wire.requests) == 1
    assert time.monotonic() - started < 5


async def test_a_connection_refused_retry_is_announced(sleeps: Sleeps) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    client = OpenAIChatClient(
        "gpt-test", base_url=f"http://127.0.0.1:{port}/v1", api_key="k", max_retries=1
    )
    chunks = []
    with pytest.raises(LLMConnectionError, match="could not reach"):
        async with client:
            async for chunk in client.chat(simple_request()):
                chunks.append(chunk)
    assert [c["type"] for c in chunks] == ["retry"]
    assert chunks[0]["attempt"] == 2 and chunks[0]["reason"].startswith("ConnectError")


# -- the connection pool ---------------------------------------------------------------------


async def run_many(client: HTTPAdapter, n: int) -> None:
    outs = await asyncio.gather(*(run_chat(client, simple_request()) for _ in range(n)))
    assert all(o.error is None for o in outs)


async def test_concurrent_calls_reuse_kept_alive_connections(wire: WireServer) -> None:
    # 40 calls at once, twice; the server answers none until all 40 of a wave have arrived, so
    # each wave needs 40 connections at the same time. The second wave reuses the first's
    # (httpx's own default keeps only 20 alive and reconnects the other 20).
    arrived = {"n": 0}
    waves = {1: asyncio.Event(), 2: asyncio.Event()}

    async def barrier(seen: Seen) -> Reply:
        arrived["n"] += 1
        wave = 1 if arrived["n"] <= 40 else 2
        if arrived["n"] == 40 * wave:
            waves[wave].set()
        await waves[wave].wait()
        return Reply(body=OK_CHAT)

    wire.handler = barrier
    async with OpenAIChatClient("gpt-test", base_url=f"{wire.url}/v1", api_key="k") as client:
        await run_many(client, 40)
        assert wire.connections == 40
        await run_many(client, 40)
    assert wire.connections == 40 and len(wire.requests) == 80


async def test_max_connections_bounds_the_pool(wire: WireServer) -> None:
    wire.handler = lambda seen: Reply(body=[OK_CHAT[:20], OK_CHAT[20:]], pace=0.02)
    async with OpenAIChatClient(
        "gpt-test", base_url=f"{wire.url}/v1", api_key="k", max_connections=4
    ) as client:
        await run_many(client, 30)
    assert wire.connections == 4 and len(wire.requests) == 30


def test_client_from_config_takes_the_deadlines_and_the_pool_size() -> None:
    client = client_from_config(
        {
            "model": "anthropic:claude-x",
            "api_key": "k",
            "connect_timeout": 3,
            "first_byte_timeout": 60,
            "idle_timeout": 90.5,
            "total_timeout": 600,
            "max_connections": 12,
            "headers": {"x-a": "b"},
            "extra_body": {"metadata": {"user_id": "u"}},
        }
    )
    assert isinstance(client, AnthropicClient)
    assert (
        client.connect_timeout,
        client.first_byte_timeout,
        client.idle_timeout,
        client.total_timeout,
        client.max_connections,
    ) == (3, 60, 90.5, 600, 12)
    default = client_from_config({"model": "openai:gpt-x", "api_key": "k"})
    assert isinstance(default, OpenAIChatClient)
    assert (
        default.connect_timeout,
        default.first_byte_timeout,
        default.idle_timeout,
        default.total_timeout,
        default.max_connections,
    ) == (10, 300, 300, 1800, 100)
    assert client_from_config(default) is default  # a client is used as it is


@pytest.mark.parametrize(
    ("config", "words"),
    [
        ({"temperature": 0.2}, "unknown key 'temperature' in the model config; the keys are model"),
        ({"max_retry": 3}, "unknown key 'max_retry'"),
        ({"sleep": None}, "unknown key 'sleep'"),
        ({"base_url": 3}, "base_url must be a string"),
        ({"headers": ["x"]}, "headers must be a dict"),
        ({"headers": {"x": 1}}, "headers must map strings to strings"),
        ({"extra_body": "x"}, "extra_body must be a dict"),
        ({"idle_timeout": 0}, "idle_timeout must be a number of seconds > 0"),
        ({"total_timeout": "1h"}, "total_timeout must be a number of seconds > 0"),
        ({"max_connections": 0}, "max_connections must be an int >= 1"),
        ({"stream_retries": -1}, "stream_retries must be an int >= 0"),
    ],
)
def test_a_bad_model_config_names_the_key(config: dict[str, Any], words: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(words)) as info:
        client_from_config({"model": "openai:gpt-x", "api_key": "k", **config})
    if "unknown key" in words:
        for key in ("base_url", "api_key", "idle_timeout", "max_connections", "extra_body"):
            assert key in str(info.value)


def test_a_model_string_is_a_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    client = client_from_config("openai:gpt-x")
    assert isinstance(client, OpenAIChatClient) and client.model == "gpt-x"


async def test_a_burst_onto_a_warm_pool_takes_each_connection_once(
    wire: WireServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # httpcore hands one idle connection to every request queued in the same pass; all but one
    # then fail with ConnectionNotAvailable and go round again (O(queued²) work, fewer
    # connections than allowed). The adapter lets one request at a time into the pool.
    from httpcore import ConnectionNotAvailable
    from httpcore._async.http11 import AsyncHTTP11Connection

    bounced = 0
    original = AsyncHTTP11Connection.handle_async_request

    async def counting(self: Any, request: Any) -> Any:
        nonlocal bounced
        try:
            return await original(self, request)
        except ConnectionNotAvailable:
            bounced += 1
            raise

    monkeypatch.setattr(AsyncHTTP11Connection, "handle_async_request", counting)
    wire.handler = lambda seen: Reply(body=[OK_CHAT[:20], OK_CHAT[20:]], pace=0.02)
    async with OpenAIChatClient("gpt-test", base_url=f"{wire.url}/v1", api_key="k") as client:
        await run_many(client, 10)  # ten idle connections
        await run_many(client, 60)
    assert bounced == 0
    assert len(wire.requests) == 70
