"""`HTTPAdapter`, the base of the four adapters: one model call from request bytes to the finish
chunk, composed from one module per job —

| job                                  | module          |
|--------------------------------------|-----------------|
| where requests go, what authenticates them | `credentials` |
| the httpx client; transport errors mapped in one place | `_transport` |
| one request at a time into the pool  | `_pool`         |
| request retries and their waits      | `_retries`      |
| the four deadlines                   | `_deadlines`    |
| SSE framing                          | `tether._sse`   |
| provider errors (status, body, error events) | `_errors` |

An adapter supplies the wire mapping: `url(request)`, `build_body(request)` (a pure function of
the request, so it can be pinned), any headers its wire needs (`wire_headers()`), and a fresh
`StreamParser` per response, a synchronous state machine fed one `ServerSentEvent` at a time.
Keeping the parser free of I/O is what lets the tests feed it recorded bytes split at every point.

Retries here are *request* retries (`max_retries`, see `_retries`); each wait is announced by a
`RetryChunk` first. Once the request went out, nothing is sent twice here: a server that never
answers, or a 200 stream that breaks, raises `LLMStreamError(retryable=True)`, and the loop, which
owns `stream_retries`, decides whether to rerun the model step.
"""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, ClassVar, Protocol, Self

import httpx

from .._json import dumps
from .._sse import ServerSentEvent, SSEDecoder
from ..errors import ConfigError, LLMError, LLMStreamError
from . import _retries
from ._body import BodyEncoder, Pieces, carries_long_data
from ._deadlines import (
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_FIRST_BYTE_TIMEOUT,
    DEFAULT_IDLE_TIMEOUT,
    DEFAULT_TOTAL_TIMEOUT,
    StreamWatch,
    check_deadlines,
    first_byte_error,
    stream_deadline_error,
    total_error,
)
from ._errors import MALFORMED, malformed_event, response_error, stray_error
from ._pool import PoolGate, holds_connection
from ._retries import Sleep, backoff_delay, refusal_wait
from ._transport import DEFAULT_MAX_CONNECTIONS, body_bytes, is_unsent, new_client, transport_error
from .base import ChatRequest, FinishChunk, ModelSettings, StreamChunk
from .credentials import Credentials

__all__ = ["CloudAdapter", "FrameDecoder", "HTTPAdapter", "StreamParser", "end_of_stream"]


class FrameDecoder(Protocol):
    """Bytes in, whole events out, however the body is split: `SSEDecoder`, or the AWS event
    stream's (`tether.llm._eventstream`)."""

    stray: list[str]
    """Body text that was not framed (SSE only)."""

    def feed(self, chunk: bytes) -> list[ServerSentEvent]: ...

    def flush(self) -> list[ServerSentEvent]: ...


class StreamParser(Protocol):
    """One response's state machine: SSE events in, normalized chunks out."""

    done: bool
    """True once the provider's terminal event arrived."""

    def handle(self, event: ServerSentEvent) -> Sequence[StreamChunk]:
        """The chunks this event produces (often none). Raise LLMStreamError for an error event."""
        ...

    def finish(self) -> FinishChunk:
        """The assembled response; called once, after `done`."""
        ...


class HTTPAdapter:
    """Base of the four adapters: holds the credentials and the httpx client, and streams.

    The httpx client is created on first use, in the event loop that uses it, and `aclose()`
    releases it; a later `chat()` opens a new one, so an agent stays usable after `aclose()`.
    A client passed in as `http_client` is the caller's and is never closed here.
    """

    provider: ClassVar[str]
    """The provider's name: the prefix of its model strings, and what errors name."""
    credentials_class: ClassVar[type[Credentials]]
    """The credentials made from `api_key` / `base_url` when none are given."""
    wire: ClassVar[str | None] = None
    """The wire format, for provider-hosted tools and blocks (`tether.llm.builtin`): None for
    one that hosts no tools."""
    env_vars: ClassVar[tuple[str, ...]] = ()
    """Where the default credentials look up the API key (set from `credentials_class`)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "credentials_class" in cls.__dict__:
            cls.env_vars = cls.credentials_class.env_vars

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        credentials: Credentials | None = None,
        headers: Mapping[str, str] | None = None,
        max_retries: int = 2,
        stream_retries: int = 0,
        connect_timeout: float | None = DEFAULT_CONNECT_TIMEOUT,
        first_byte_timeout: float | None = DEFAULT_FIRST_BYTE_TIMEOUT,
        idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT,
        total_timeout: float | None = DEFAULT_TOTAL_TIMEOUT,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        http_client: httpx.AsyncClient | None = None,
        extra_body: Mapping[str, Any] | None = None,
        builtin_tools: Sequence[Any] = (),
        pricing: bool = True,
        sleep: Sleep | None = None,
    ) -> None:
        """Args:
        model: The provider's model id (without the ``provider:`` prefix).
        api_key: Overrides the environment variable(s) in `env_vars`. Required (else
            MissingKeyError, raised here) unless the base URL points somewhere of your own.
        base_url: Where the API lives; default the SDK's environment variable, else the
            provider's own endpoint.
        credentials: Where requests go and what authenticates them, instead of the default
            credentials made from `api_key` and `base_url` (which must then be absent).
        headers: Extra headers sent with every request (a proxy's auth, a beta flag).
        max_retries: Request retries before any body is read (connection error, 408, 409, 429,
            5xx), each announced by a `RetryChunk` before its wait.
        stream_retries: Read by the loop: reruns of a model step after a stream broke or went
            silent.
        connect_timeout: Seconds to open a connection (None: no limit).
        first_byte_timeout: Seconds from sending the request to the first byte of the answer.
        idle_timeout: Longest gap in seconds between two events that carry content; keep-alives
            (``event: ping``, SSE comments, empty ``data:`` lines) do not reset it.
        total_timeout: Seconds for the whole call, request retries and their waits included.
        max_connections: Connections kept to the provider (all of them kept alive between
            requests, so concurrent runs reuse them instead of reconnecting).
        http_client: An httpx.AsyncClient to use instead of our own (stays the caller's; its
            own connect timeout and pool limits apply).
        extra_body: Top-level keys merged into every request body after the settings.
        builtin_tools: Provider-hosted tools (`tether.llm.builtin`: `web_search()`,
            `code_execution()`, `file_search()`), declared on every request; one the provider
            does not host is a ConfigError here.
        pricing: False: the run records price no call of this client (a self-hosted server
            that reuses a known model name); read by the recorder, never sent.
        sleep: How retry waits happen; `asyncio.sleep` unless a test injects a recorder.
        """
        from .builtin import wire_tools

        self.builtin: list[dict[str, Any]] = wire_tools(self.wire, self.provider, builtin_tools)
        """The provider-hosted tools, in this wire's declaration shape."""
        for name, value in (("max_retries", max_retries), ("stream_retries", stream_retries)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ConfigError(f"{self.provider}: {name} must be an int >= 0, got {value!r}")
        check_deadlines(
            self.provider,
            {
                "connect_timeout": connect_timeout,
                "first_byte_timeout": first_byte_timeout,
                "idle_timeout": idle_timeout,
                "total_timeout": total_timeout,
            },
        )
        if not isinstance(max_connections, int) or max_connections < 1:
            raise ConfigError(
                f"{self.provider}: max_connections must be an int >= 1, got {max_connections!r}"
            )
        if not isinstance(pricing, bool):
            raise ConfigError(f"{self.provider}: pricing must be True or False, got {pricing!r}")
        if credentials is None:
            credentials = self.credentials_class(self.provider, api_key=api_key, base_url=base_url)
        elif api_key is not None or base_url is not None:
            raise ConfigError(
                f"{self.provider}: give credentials= or api_key= / base_url=, not both (the "
                "credentials carry their own key and base URL)"
            )
        self.model = model
        self.credentials = credentials
        self.base_url = credentials.base_url
        self.api_key = credentials.api_key
        self.extra_headers = dict(headers or {})
        self.max_retries = max_retries
        self.stream_retries = stream_retries
        self.connect_timeout = connect_timeout
        self.first_byte_timeout = first_byte_timeout
        self.idle_timeout = idle_timeout
        self.total_timeout = total_timeout
        self.max_connections = max_connections
        self.extra_body = dict(extra_body or {})
        self.pricing = pricing
        self._given_client = http_client
        self._client: httpx.AsyncClient | None = None
        self._client_loop: asyncio.AbstractEventLoop | None = None
        self._gate = PoolGate()
        self._body = BodyEncoder()
        self._sleep: Sleep | None = sleep
        self._rng = random.Random()
        self._signs = credentials.signs
        self._headers = {
            "content-type": "application/json",
            "accept": "text/event-stream",
            **self.wire_headers(),
            **credentials.headers(),
            **self.extra_headers,
        }

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, base_url={self.base_url!r})"

    # -- what an adapter provides ----------------------------------------------------------------

    def wire_headers(self) -> dict[str, str]:
        """Headers the wire format itself needs (an API version), apart from authentication."""
        return {}

    def url(self, request: ChatRequest) -> str:
        raise NotImplementedError

    def build_body(self, request: ChatRequest) -> dict[str, Any]:
        raise NotImplementedError

    def new_parser(self) -> StreamParser:
        raise NotImplementedError

    def parser_for(self, request: ChatRequest) -> StreamParser:
        """The parser for the response to `request` (`new_parser()` unless the reading depends
        on the request)."""
        return self.new_parser()

    def new_decoder(self) -> FrameDecoder:
        """The body's framing: SSE unless the wire says otherwise."""
        return SSEDecoder()

    # -- the shared machinery --------------------------------------------------------------------

    def validate_settings(self, settings: ModelSettings, tools: Sequence[str] = ()) -> None:
        """Raise `ModelSettingError` now for settings this provider cannot honour (or unknown or
        mistyped ones), as the first request would: lets an agent refuse them when it is
        defined rather than mid-turn. `tools` are the tool names the agent will declare."""
        request: ChatRequest = {
            "model": self.model,
            "system": [],
            "messages": [],
            "settings": settings,
        }
        if tools:
            request["tools"] = [
                {"name": name, "description": "", "input_schema": {"type": "object"}}
                for name in tools
            ]
        self.build_body(request)

    def encode(self, request: ChatRequest) -> bytes:
        """The exact bytes sent for `request`."""
        return b"".join(self.encode_pieces(request))  # one piece: that very bytes, no copy

    def encode_pieces(self, request: ChatRequest) -> list[bytes]:
        """`encode(request)` as the pieces it is sent in: one, unless the request carries long
        media data, whose JSON is encoded once and kept (`tether.llm._body`)."""
        body = self.build_body(request)
        for key, value in self.extra_body.items():
            mine = body.get(key)
            # One level deep, so extra_body={"generationConfig": {...}} adds to ours.
            body[key] = (
                {**mine, **value} if isinstance(mine, dict) and isinstance(value, dict) else value
            )
        if carries_long_data(request["messages"]):
            return self._body.pieces(body)
        return [dumps(body).encode("utf-8")]

    def http(self) -> httpx.AsyncClient:
        """The httpx client for the running event loop."""
        if self._given_client is not None:
            return self._given_client
        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop:
            # A client bound to an earlier (now finished) loop cannot be reused or closed here.
            self._client = new_client(self.connect_timeout, self.max_connections)
            self._client_loop = loop
        return self._client

    async def aclose(self) -> None:
        """Close the connections this adapter opened. Idempotent; a later chat() reopens."""
        client, self._client, self._client_loop = self._client, None, None
        if client is not None:
            await client.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def chat(self, request: ChatRequest) -> AsyncIterator[StreamChunk]:
        """Stream one response as normalized chunks, ending with exactly one `finish`.

        Before each request retry a `RetryChunk` says which attempt comes after how long a
        wait. The response is closed when the stream ends or its consumer stops, also on
        cancellation, which is how an aborted turn stops reading from the provider.
        """
        blobs = request.get("blobs")
        if blobs is not None:  # references in, base64 out: build_body sees only data parts
            request = {**request, "messages": await blobs.resolve(request["messages"])}
        pieces = self.encode_pieces(request)
        # Long media goes out as its kept bytes, not copied into one body; a signature covers
        # the whole body, so a signing wire (Bedrock) gets it joined.
        content = b"".join(pieces) if len(pieces) == 1 or self._signs else Pieces(pieces)
        url = self.url(request)
        loop = asyncio.get_running_loop()
        total = self.total_timeout
        total_at = loop.time() + total if total is not None else math.inf
        attempt = 1
        while True:
            outcome = await self._attempt(url, content, attempt, total_at)
            if isinstance(outcome, httpx.Response):
                break
            delay, reason, error = outcome
            attempt += 1
            if loop.time() + delay > total_at:
                raise total_error(
                    self.provider,
                    total,
                    f" before retry {attempt - 1} of {self.max_retries} could start "
                    f"(it would wait {delay:.3g} s after: {reason})",
                ) from error
            yield {"type": "retry", "attempt": attempt, "delay": delay, "reason": reason}
            await (self._sleep or _retries._sleep)(delay)
        response = outcome
        try:
            async for chunk in self._read(response, loop, total_at, request):
                yield chunk
        finally:
            await response.aclose()

    async def _attempt(
        self, url: str, content: bytes | Pieces, attempt: int, total_at: float
    ) -> httpx.Response | tuple[float, str, LLMError]:
        """One request: the 2xx response, or (wait, reason, error) for a retry the budget
        allows; anything else raises."""
        client = self.http()
        entry = self._gate.entry(gated=self._given_client is None)
        loop = asyncio.get_running_loop()
        first_byte = self.first_byte_timeout
        timer: asyncio.Timeout | None = None
        sent = False

        async def trace(name: str, info: Mapping[str, Any]) -> None:
            nonlocal sent
            if holds_connection(name):
                entry.release()  # the next request may enter the pool now
            if not sent and name.endswith("send_request_headers.started"):
                # The first-byte clock starts when the request starts going out: waiting for
                # a pooled connection and connecting (bounded by connect_timeout) come before.
                sent = True
                if first_byte is not None and timer is not None:
                    timer.reschedule(min(loop.time() + first_byte, total_at))

        headers = self._headers
        if isinstance(content, Pieces):
            headers = {**headers, "content-length": str(content.length)}
        elif self._signs:
            headers = await self.credentials.sign("POST", url, content, headers)
        req = client.build_request(
            "POST", url, content=content, headers=headers, extensions={"trace": trace}
        )
        retries_left = attempt <= self.max_retries
        try:
            async with asyncio.timeout_at(total_at if total_at != math.inf else None) as timer:
                async with entry:
                    response = await client.send(req, stream=True)
        except TimeoutError as exc:
            if sent and first_byte is not None and loop.time() < total_at:
                raise first_byte_error(self.provider, url, first_byte) from exc
            raise total_error(
                self.provider, self.total_timeout, f" waiting for {url} to answer"
            ) from exc
        except httpx.TransportError as exc:
            error = transport_error(
                exc,
                "send",
                provider=self.provider,
                url=url,
                base_url=self.base_url,
                connect_timeout=self.connect_timeout,
                attempts=attempt,
            )
            if retries_left and is_unsent(exc):
                reason = f"{type(exc).__name__}: {exc}"
                return backoff_delay(attempt - 1, None, self._rng), reason, error
            raise error from exc
        if response.status_code < 300:
            return response
        return await self._refused(response, attempt, retries_left)

    async def _refused(
        self, response: httpx.Response, attempt: int, retries_left: bool
    ) -> tuple[float, str, LLMError]:
        """A non-2xx answer: (wait, reason, error) for a retry the budget allows; else raises."""
        status = response.status_code
        try:
            raw = await response.aread()
        except httpx.TransportError:
            raw = b""  # the status says enough; a body cut short adds nothing to act on
        finally:
            await response.aclose()
        env_var = " or ".join(self.env_vars) if self.env_vars else None
        error = response_error(
            self.provider,
            status,
            raw,
            env_var=env_var,
            url=str(response.request.url),
            hint=self.credentials.auth_hint(),
        )
        delay = refusal_wait(error, response.headers, attempt, retries_left, self._rng)
        if delay is None:
            raise error
        return delay, f"HTTP {status}: {_short(error)}", error

    async def _read(  # noqa: C901  # the per-chunk read loop: kept inline, no call per event
        self,
        response: httpx.Response,
        loop: asyncio.AbstractEventLoop,
        total_at: float,
        request: ChatRequest,
    ) -> AsyncIterator[StreamChunk]:
        """The body's events through the parser, every read bounded by the idle deadline (reset
        by each event that is not a keep-alive) and the total one."""
        parser = self.parser_for(request)
        decoder = self.new_decoder()
        provider = self.provider
        feed, handle = decoder.feed, parser.handle
        watch = StreamWatch(loop, self.idle_timeout, total_at)
        current_task = asyncio.current_task
        anext = body_bytes(response).__anext__
        try:
            while True:
                if watch.lapsed and watch.resume():
                    raise stream_deadline_error(provider, watch, self.total_timeout)
                task = watch.task = current_task()
                watch.reading = True
                try:
                    raw = await anext()
                except StopAsyncIteration:
                    break
                except asyncio.CancelledError:
                    if watch.fired and task is not None and task.uncancel() <= watch.cancelling:
                        raise stream_deadline_error(provider, watch, self.total_timeout) from None
                    raise
                finally:
                    watch.reading = False
                events = feed(raw)
                if not events:
                    continue
                fresh = False
                for event in events:
                    data = event.data
                    if not data or event.event == "ping" or data.isspace():
                        continue  # keep-alives: they do not reset the idle clock
                    fresh = True
                    for chunk in handle(event):
                        yield chunk
                if fresh:
                    watch.reset()
            for event in decoder.flush():
                if event.data and event.event != "ping" and not event.data.isspace():
                    for chunk in handle(event):
                        yield chunk
        except httpx.TransportError as exc:
            raise transport_error(exc, "read", provider=provider, url=str(response.url)) from exc
        except MALFORMED as exc:
            raise malformed_event(provider, exc) from exc
        finally:
            watch.stop()
        yield end_of_stream(provider, decoder, parser)


class CloudAdapter(HTTPAdapter):
    """An adapter whose credentials take keywords of their own besides `api_key` and
    `base_url`: where and as whom it calls (a region, a project, an SDK credential; the
    credentials class's `keywords`). The client takes them too and hands them to its
    `credentials_class`, or refuses them beside `credentials=` (which carry their own)."""

    def __init__(self, model: str, *, credentials: Credentials | None = None, **options: Any):
        keywords = self.credentials_class.keywords
        where = {key: options.pop(key) for key in keywords if key in options}
        if credentials is None:
            api_key, base_url = options.pop("api_key", None), options.pop("base_url", None)
            credentials = self.new_credentials(api_key, base_url, where)
        elif any(value is not None for value in where.values()):
            raise ConfigError(
                f"{self.provider}: give credentials= or {' / '.join(f'{k}=' for k in where)}, "
                "not both (the credentials say where and as whom it calls)"
            )
        super().__init__(model, credentials=credentials, **options)

    def new_credentials(
        self, api_key: str | None, base_url: str | None, where: dict[str, Any]
    ) -> Credentials:
        """The credentials made when none are given."""
        return self.credentials_class(self.provider, api_key=api_key, base_url=base_url, **where)


def _short(error: LLMError) -> str:
    text = str(error)
    return text if len(text) <= 200 else text[:197] + "..."


def end_of_stream(provider: str, decoder: FrameDecoder, parser: StreamParser) -> FinishChunk:
    """After the body ended (and `decoder.flush()` was fed to the parser): the finish chunk, or
    the stream error the body amounts to. A 200 body that stops before the provider's terminal
    event is a retryable `LLMStreamError`: the loop's `stream_retries` rerun the step."""
    if decoder.stray:
        error = stray_error(provider, decoder.stray, parser.done)
        if error is not None:
            raise error
    if not parser.done:
        raise LLMStreamError(
            f"{provider} stream ended before the response finished",
            provider=provider,
            retryable=True,
        )
    return parser.finish()
