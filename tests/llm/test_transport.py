"""`tether.llm._transport`: every httpx failure becomes our error in one place, by when it
happened — the table of its docstring, row by row, and the two rows the adapter tests do not
reach over a socket (a bad base_url, a request sent that no answer followed)."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from tether.errors import (
    ConnectDeadlineError,
    LLMConnectionError,
    LLMError,
    LLMStreamError,
)
from tether.llm._transport import is_unsent, transport_error
from tether.llm.openai_chat import OpenAIChatClient

from .conftest import Sleeps, run_chat, simple_request

URL = "http://127.0.0.1:9/v1/chat/completions"


@pytest.mark.parametrize(
    ("exc", "phase", "connect_timeout", "kind", "retryable", "unsent", "words"),
    [
        (httpx.UnsupportedProtocol("no ftp"), "send", 10.0, LLMConnectionError, False, False,
         "bad base_url 'ftp://x'"),
        (httpx.ConnectTimeout("slow"), "send", 10.0, ConnectDeadlineError, False, True,
         "within connect_timeout=10 s (3 attempts)"),
        (httpx.ConnectTimeout("slow"), "send", None, LLMConnectionError, True, True,
         "could not reach openai at"),
        (httpx.ConnectError("refused"), "send", 10.0, LLMConnectionError, True, True,
         "ConnectError: refused"),
        (httpx.WriteError("reset"), "send", 10.0, LLMConnectionError, True, True,
         "WriteError: reset"),
        (httpx.RemoteProtocolError("closed"), "send", 10.0, LLMStreamError, True, False,
         "did not answer the request: RemoteProtocolError"),
        (httpx.ReadTimeout("quiet"), "send", 10.0, LLMStreamError, True, False,
         "did not answer the request: ReadTimeout"),
        (httpx.RemoteProtocolError("cut"), "read", 10.0, LLMStreamError, True, False,
         "stream broke: RemoteProtocolError: cut"),
        (httpx.ReadError("reset"), "read", 10.0, LLMStreamError, True, False,
         "stream broke: ReadError"),
    ],
)  # fmt: skip
def test_each_transport_failure_maps_to_one_error(
    exc: httpx.TransportError,
    phase: str,
    connect_timeout: float | None,
    kind: type[LLMError],
    retryable: bool,
    unsent: bool,
    words: str,
) -> None:
    error = transport_error(
        exc,
        "send" if phase == "send" else "read",
        provider="openai",
        url=URL,
        base_url="ftp://x",
        connect_timeout=connect_timeout,
        attempts=3,
    )
    assert type(error) is kind and error.retryable is retryable
    assert error.provider == "openai" and words in str(error)
    assert is_unsent(exc) is unsent


async def test_a_base_url_of_another_scheme_fails_at_once(sleeps: Sleeps) -> None:
    client = OpenAIChatClient("m", base_url="ftp://127.0.0.1/v1", api_key="k", sleep=sleeps)
    async with client:
        out = await run_chat(client, simple_request())
    assert type(out.error) is LLMConnectionError and not out.error.retryable
    assert "bad base_url 'ftp://127.0.0.1/v1'" in str(out.error)
    assert isinstance(out.error.__cause__, httpx.UnsupportedProtocol)
    assert sleeps.waits == []  # a wrong URL is not retried


async def test_a_request_answered_by_a_hang_up_is_not_sent_again(sleeps: Sleeps) -> None:
    # The server reads the whole request and closes the connection without a status line: it
    # may have acted on it, so no request retry sends it twice (stream_retries may rerun).
    requests: list[bytes] = []

    async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        size = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length")))  # fmt: skip
        requests.append(head + await reader.readexactly(size))
        writer.close()

    server = await asyncio.start_server(hang_up, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = OpenAIChatClient(
        "m", base_url=f"http://127.0.0.1:{port}/v1", api_key="k", sleep=sleeps, max_retries=3
    )
    try:
        async with client:
            out = await run_chat(client, simple_request())
    finally:
        server.close()
        await server.wait_closed()
    assert type(out.error) is LLMStreamError and out.error.retryable
    assert "did not answer the request: RemoteProtocolError" in str(out.error)
    assert len(requests) == 1 and sleeps.waits == []
