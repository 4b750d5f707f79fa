"""What every HTTP adapter shares: credentials, the httpx client, request retries, error mapping,
and the read loop that turns an SSE body into normalized chunks.

An adapter supplies three things: the URL and auth headers, `build_body(request)` (a pure function
of the request, so it can be pinned), and a fresh `StreamParser` per response, a synchronous state
machine fed one `ServerSentEvent` at a time. Keeping the parser free of I/O is what lets the tests
feed it recorded bytes split at every point.

Retries here are *request* retries (`max_retries`): a request that did not reach the server
whole (no connection, a write that failed), or a 408 / 409 / 429 / 5xx status (Anthropic's 529
included) before any of the body was read, waits and tries again; each wait is announced by a
`RetryChunk` first. A ``retry-after`` longer than `MAX_RETRY_AFTER` fails at once, saying how long
the server asked for. Once the request went out, nothing is sent twice here: a server that never
answers, or a 200 stream that breaks, raises `LLMStreamError(retryable=True)`, and the loop, which
owns `stream_retries`, decides whether to rerun the model step.

Every wait is bounded (the model config's deadlines, in seconds):

| deadline             | default | measured                                                      |
|----------------------|---------|---------------------------------------------------------------|
| `connect_timeout`    | 10      | opening one connection                                        |
| `first_byte_timeout` | 300     | from sending the request to the response's first byte         |
| `idle_timeout`       | 300     | the longest gap between two events that are not keep-alives   |
| `total_timeout`      | 1800    | the whole call, request retries and their waits included      |

Keep-alives are ``event: ping`` events, SSE comments and empty ``data:`` lines. A deadline that
fires raises `DeadlineError` naming it and its value.
"""

from __future__ import annotations

import asyncio
import datetime
import email.utils
import json
import math
import os
import random
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any, ClassVar, Protocol, Self

import httpx

from .._json import dumps
from ..errors import (
    AuthenticationError,
    ConfigError,
    ConnectDeadlineError,
    ContextLengthError,
    DeadlineError,
    LLMConnectionError,
    LLMError,
    LLMHTTPError,
    LLMStreamError,
    MissingKeyError,
    RateLimitError,
)
from ._sse import ServerSentEvent, SSEDecoder
from .base import ChatRequest, FinishChunk, ModelSettings, StreamChunk

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_FIRST_BYTE_TIMEOUT",
    "DEFAULT_IDLE_TIMEOUT",
    "DEFAULT_MAX_CONNECTIONS",
    "DEFAULT_TOTAL_TIMEOUT",
    "HTTPAdapter",
    "Sleep",
    "StreamParser",
    "backoff_delay",
    "end_of_stream",
    "loads",
    "parse_json_or_raw",
    "response_error",
    "retry_after",
    "retry_info",
    "stream_error",
]

Sleep = Callable[[float], Awaitable[None]]
"""How a retry waits; tests pass a recorder instead of `asyncio.sleep`."""

_sleep: Sleep = asyncio.sleep
"""The wait of adapters given no `sleep` (read at each wait, so a test can replace it)."""

DEFAULT_CONNECT_TIMEOUT = 10.0
DEFAULT_FIRST_BYTE_TIMEOUT = 300.0
"""Reasoning models can think for minutes before the first byte; a dead server is found in 5."""
DEFAULT_IDLE_TIMEOUT = 300.0
DEFAULT_TOTAL_TIMEOUT = 1800.0
DEFAULT_MAX_CONNECTIONS = 100
KEEPALIVE_EXPIRY = 30.0
"""Seconds an idle pooled connection stays open (providers keep theirs for about a minute)."""

INITIAL_BACKOFF = 0.5
MAX_BACKOFF = 8.0
MAX_RETRY_AFTER = 60.0
"""The longest retry-after tether waits; a server asking for longer fails the call at once."""
JITTER = 0.25
"""Each computed backoff is shortened by up to this fraction, so clients do not retry in step."""

_RETRY_STATUS = frozenset({408, 409, 429})
_MALFORMED = (ValueError, KeyError, TypeError, AttributeError, IndexError)
"""What a parser raises on an event that is not the shape its API documents."""

_CONTEXT_RE = re.compile(
    r"context.length|context.window|context size|context limit|maximum context|prompt is too long|"
    r"too many (input )?tokens|input token count|exceeds the maximum number of tokens|"
    r"maximum number of tokens|request_too_large|reduce the length",
    re.IGNORECASE,
)

_RETRYABLE_KINDS = frozenset(
    {
        "overloaded_error",
        "api_error",
        "rate_limit_error",
        "server_error",
        "internal_error",
        "rate_limit_exceeded",
        "timeout",
        "unavailable",
        "internal",
        "resource_exhausted",
        "deadline_exceeded",
        "cancelled",
        "aborted",
    }
)
_RETRYABLE_CODES = frozenset({408, 409, 429, 499, 500, 502, 503, 504, 529})


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


def retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds the server asked us to wait: ``retry-after-ms``, or ``retry-after`` as seconds or
    an HTTP date. None when absent or unreadable."""
    ms = _seconds(headers.get("retry-after-ms"))
    if ms is not None:
        return ms / 1000.0
    value = headers.get("retry-after")
    if value is None:
        return None
    seconds = _seconds(value)
    if seconds is not None:
        return seconds
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # "-0000" or no zone at all: HTTP dates are GMT, not local time
        when = when.replace(tzinfo=datetime.UTC)
    return max(0.0, when.timestamp() - time.time())


def _seconds(value: str | None) -> float | None:
    """A header's number, at least 0; None when absent or not a finite number ("nan")."""
    if value is None:
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return max(0.0, number) if math.isfinite(number) else None


def retry_info(body: Any) -> float | None:
    """Seconds a Google error body asks us to wait (``google.rpc.RetryInfo``'s ``retryDelay``,
    a duration like ``"3.5s"``): Gemini says it there rather than in a retry-after header."""
    err = _error_object(body)
    for detail in (err or {}).get("details") or ():
        if isinstance(detail, dict) and str(detail.get("@type", "")).endswith("rpc.RetryInfo"):
            delay = detail.get("retryDelay")
            if isinstance(delay, str) and delay.endswith("s"):
                return _seconds(delay[:-1])
    return None


def backoff_delay(
    attempt: int, headers: Mapping[str, str] | None, rng: random.Random, body: Any = None
) -> float:
    """The wait before retry number `attempt` (0-based): the server's retry-after (or the
    RetryInfo of its error body) when it gave one, capped at MAX_RETRY_AFTER, else exponential
    backoff with jitter."""
    asked = retry_after(headers) if headers is not None else None
    if asked is None and body is not None:
        asked = retry_info(body)
    if asked is not None:
        return min(asked, MAX_RETRY_AFTER)
    delay = min(INITIAL_BACKOFF * (2.0 ** min(attempt, 16)), MAX_BACKOFF)
    return delay * (1.0 - JITTER * rng.random())


def _error_object(body: Any) -> dict[str, Any] | None:
    """The error object of the bodies the four APIs send: ``{"error": {...}}``, Anthropic's
    ``{"type": "error", "error": {...}}``, Gemini's list-wrapped form, or the bare object."""
    if isinstance(body, list) and body:
        body = body[0]
    if not isinstance(body, dict):
        return None
    err = body.get("error", body)
    return err if isinstance(err, dict) else None


def _provider_message(body: Any) -> tuple[str | None, str | None]:
    """(message, kind) from a provider's error body (see `_error_object`)."""
    if isinstance(body, list) and body:
        body = body[0]
    if isinstance(body, dict) and isinstance(body.get("error"), str):
        return body["error"], None  # Ollama: {"error": "model 'x' not found"}
    err = _error_object(body)
    if err is None:
        return None, None
    message = err.get("message")
    kind = err.get("type") or err.get("status") or err.get("code")
    return (
        str(message) if message is not None else None,
        str(kind) if kind is not None else None,
    )


def _error_words(body: Any) -> str:
    """The machine-readable labels of an error (type, status, code, Google's ErrorInfo
    reasons) as one string to search, since the message alone is worded differently by each."""
    err = _error_object(body)
    if err is None:
        return ""
    words = [str(err.get(k)) for k in ("type", "status", "code") if err.get(k) is not None]
    for detail in err.get("details") or ():
        if isinstance(detail, dict) and isinstance(detail.get("reason"), str):
            words.append(detail["reason"])
    return " ".join(words)


def _decode_body(raw: bytes) -> Any:
    text = raw.decode("utf-8", "replace")
    try:
        return json.loads(text)
    except ValueError:
        return text


_HTML_RE = re.compile(r"^\s*(<!doctype html|<html|<head|<body|<title)", re.IGNORECASE)
_TITLE_RE = re.compile(r"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL)


def _html_page(text: str) -> str | None:
    """One line for an HTML error page (a proxy's, a web server's 404): "an HTML page" and its
    title, or None when `text` is not HTML. Its markup says nothing a terminal can show."""
    if not _HTML_RE.match(text):
        return None
    title = _TITLE_RE.search(text)
    words = " ".join(title.group(1).split())[:200] if title else ""
    return f"an HTML page ({words})" if words else "an HTML page"


def response_error(
    provider: str, status: int, raw: bytes, *, env_var: str | None, url: str | None = None
) -> LLMHTTPError:
    """The typed error for a non-2xx answer, carrying status, parsed body and provider message.
    `url` (the request's) is named when the body is not the provider's: a server of another
    kind answered, most often a wrong `base_url`."""
    body = _decode_body(raw)
    message, _kind = _provider_message(body)
    # A body of a shape we do not know (a proxy's, a compatible server's) is shown as it came.
    detail = message or raw.decode("utf-8", "replace").strip() or f"HTTP {status}"
    detail = detail[:2000]
    words = _error_words(body)
    retryable = status in _RETRY_STATUS or status >= 500
    text = f"{provider} returned {status}: {detail}"
    page = None if message else _html_page(detail)
    if page is not None:
        where = f" from {url}" if url else ""
        text = f"{provider} returned {status}{where}: {page}; check the model config's base_url"
    # Gemini answers a key it does not accept with 400 INVALID_ARGUMENT, reason API_KEY_INVALID.
    if status in (401, 403) or (status == 400 and "API_KEY_INVALID" in words):
        hint = (
            f"check {env_var} or model={{'model': ..., 'api_key': ...}}"
            if env_var
            else "check the API key"
        )
        return AuthenticationError(
            f"{text} ({hint})", status=status, body=body, provider=provider, retryable=False
        )
    if status == 429:
        return RateLimitError(text, status=status, body=body, provider=provider, retryable=True)
    if status in (400, 413, 422) and (_CONTEXT_RE.search(detail) or _CONTEXT_RE.search(words)):
        return ContextLengthError(
            f"{text} (shorten the conversation or the system prompt)",
            status=status,
            body=body,
            provider=provider,
            retryable=False,
        )
    return LLMHTTPError(text, status=status, body=body, provider=provider, retryable=retryable)


def stream_error(provider: str, payload: Any, *, what: str = "error event") -> LLMStreamError:
    """An error reported inside a 200 stream. Retryable when the provider calls it transient
    (overloaded, server error, unavailable, rate limit) or gives a 408/429/5xx-like code."""
    message, kind = _provider_message(payload)
    code: Any = None
    inner = payload.get("error") if isinstance(payload, dict) else None
    if isinstance(inner, dict):
        code = inner.get("code")
    retryable = (kind is not None and kind.lower() in _RETRYABLE_KINDS) or (
        isinstance(code, int) and code in _RETRYABLE_CODES
    )
    label = f" ({kind})" if kind else ""
    detail = message if message else repr(payload)
    return LLMStreamError(
        f"{provider} stream {what}{label}: {detail:.500}",
        provider=provider,
        retryable=retryable,
    )


# The decoder's scanner is public in CPython but missing from typeshed.
_scan_once: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def loads(text: str) -> Any:
    """`json.loads` for one event's data, minus the wrapper layers: the C scanner parses the value
    and only an unusual payload (leading whitespace, trailing garbage) takes the strict path."""
    try:
        value, end = _scan_once(text, 0)
    except StopIteration:
        return json.loads(text)  # raises the proper JSONDecodeError, or handles leading space
    if end != len(text) and not text[end:].isspace():
        return json.loads(text)  # raises "Extra data"
    return value


def parse_json_or_raw(raw: str, empty: Any) -> Any:
    """Tool arguments parsed once: `empty` for an empty string, the raw text if not JSON."""
    if not raw or raw.isspace():
        return empty
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def usage_int(value: Any) -> int | None:
    """A token count from a usage object, or None when absent or not a number."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value)
    return None


class HTTPAdapter:
    """Base of the four adapters: holds credentials and the httpx client, and streams.

    The httpx client is created on first use, in the event loop that uses it, and `aclose()`
    releases it; a later `chat()` opens a new one, so an agent stays usable after `aclose()`.
    A client passed in as `http_client` is the caller's and is never closed here.
    """

    provider: ClassVar[str]
    env_vars: ClassVar[tuple[str, ...]]
    """Where the API key is looked up, in order (the provider's own SDK's variables)."""
    base_url_env: ClassVar[str | None] = None
    """The variable the provider's own SDK reads its base URL from."""
    default_base_url: ClassVar[str]

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
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
        sleep: Sleep | None = None,
    ) -> None:
        """Args:
        model: The provider's model id (without the ``provider:`` prefix).
        api_key: Overrides the environment variable(s) in `env_vars`. Required (else
            MissingKeyError, raised here) unless the base URL points somewhere of your own.
        base_url: Where the API lives; default the SDK's environment variable (`base_url_env`),
            else the provider's own endpoint.
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
        sleep: How retry waits happen; `asyncio.sleep` unless a test injects a recorder.
        """
        for name, value in (("max_retries", max_retries), ("stream_retries", stream_retries)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ConfigError(f"{self.provider}: {name} must be an int >= 0, got {value!r}")
        deadlines = {
            "connect_timeout": connect_timeout,
            "first_byte_timeout": first_byte_timeout,
            "idle_timeout": idle_timeout,
            "total_timeout": total_timeout,
        }
        for name, seconds in deadlines.items():
            if seconds is not None and (
                not isinstance(seconds, int | float) or isinstance(seconds, bool) or not seconds > 0
            ):
                raise ConfigError(
                    f"{self.provider}: {name} must be a number of seconds > 0 (or None for no "
                    f"limit), got {seconds!r}"
                )
        if not isinstance(max_connections, int) or max_connections < 1:
            raise ConfigError(
                f"{self.provider}: max_connections must be an int >= 1, got {max_connections!r}"
            )
        self.model = model
        env_base = self.env_base_url()
        self.base_url = (base_url or env_base or self.default_base_url).rstrip("/")
        key = api_key
        if key is None:
            for var in self.env_vars:
                key = os.environ.get(var) or None
                if key:
                    break
        if key is None and self.base_url == self.default_base_url and not self.has_other_auth():
            raise MissingKeyError(self.provider, " or ".join(self.env_vars))
        self.api_key = key
        self.extra_headers = dict(headers or {})
        self.max_retries = max_retries
        self.stream_retries = stream_retries
        self.connect_timeout = connect_timeout
        self.first_byte_timeout = first_byte_timeout
        self.idle_timeout = idle_timeout
        self.total_timeout = total_timeout
        self.max_connections = max_connections
        self.extra_body = dict(extra_body or {})
        self._given_client = http_client
        self._client: httpx.AsyncClient | None = None
        self._client_loop: asyncio.AbstractEventLoop | None = None
        self._gate_lock = asyncio.Lock()
        self._gate_loop: asyncio.AbstractEventLoop | None = None
        self._sleep: Sleep | None = sleep
        self._rng = random.Random()
        self._headers = {
            "content-type": "application/json",
            "accept": "text/event-stream",
            **self.auth_headers(),
            **self.extra_headers,
        }

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, base_url={self.base_url!r})"

    # -- what an adapter provides ----------------------------------------------------------------

    @classmethod
    def env_base_url(cls) -> str | None:
        """The base URL from the environment, as the provider's own SDK reads it."""
        return os.environ.get(cls.base_url_env) or None if cls.base_url_env else None

    def has_other_auth(self) -> bool:
        """Credentials other than an API key (Anthropic's ANTHROPIC_AUTH_TOKEN)."""
        return False

    def auth_headers(self) -> dict[str, str]:
        raise NotImplementedError

    def url(self, request: ChatRequest) -> str:
        raise NotImplementedError

    def build_body(self, request: ChatRequest) -> dict[str, Any]:
        raise NotImplementedError

    def new_parser(self) -> StreamParser:
        raise NotImplementedError

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
        body = self.build_body(request)
        for key, value in self.extra_body.items():
            mine = body.get(key)
            # One level deep, so extra_body={"generationConfig": {...}} adds to ours.
            body[key] = (
                {**mine, **value} if isinstance(mine, dict) and isinstance(value, dict) else value
            )
        return dumps(body).encode("utf-8")

    def http(self) -> httpx.AsyncClient:
        """The httpx client for the running event loop."""
        if self._given_client is not None:
            return self._given_client
        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop:
            # A client bound to an earlier (now finished) loop cannot be reused or closed here.
            # Reads have no httpx timeout: the first-byte, idle and total deadlines are ours,
            # measured per event rather than per socket read. Every connection is kept alive,
            # so concurrent runs reuse the pool instead of reconnecting (httpx keeps only 20).
            self._client = httpx.AsyncClient(
                timeout=httpx.Timeout(None, connect=self.connect_timeout),
                limits=httpx.Limits(
                    max_connections=self.max_connections,
                    max_keepalive_connections=self.max_connections,
                    keepalive_expiry=KEEPALIVE_EXPIRY,
                ),
            )
            self._client_loop = loop
        return self._client

    def _gate(self) -> asyncio.Lock | None:
        """The lock that lets one request at a time into our pool (see `_attempt`), per loop;
        None for a caller's client, whose transport may not report when a request starts."""
        if self._given_client is not None:
            return None
        loop = asyncio.get_running_loop()
        if self._gate_loop is not loop:
            self._gate_lock = asyncio.Lock()
            self._gate_loop = loop
        return self._gate_lock

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
        content = self.encode(request)
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
                raise self._total_error(
                    f" before retry {attempt - 1} of {self.max_retries} could start "
                    f"(it would wait {delay:.3g} s after: {reason})"
                ) from error
            yield {"type": "retry", "attempt": attempt, "delay": delay, "reason": reason}
            await (self._sleep or _sleep)(delay)
        response = outcome
        try:
            async for chunk in self._read(response, loop, total_at):
                yield chunk
        finally:
            await response.aclose()

    async def _attempt(
        self, url: str, content: bytes, attempt: int, total_at: float
    ) -> httpx.Response | tuple[float, str, LLMError]:
        """One request: the 2xx response, or (wait, reason, error) for a retry the budget
        allows; anything else raises."""
        client = self.http()
        gate = self._gate()
        loop = asyncio.get_running_loop()
        first_byte = self.first_byte_timeout
        timer: asyncio.Timeout | None = None
        sent = False
        inside = False

        async def trace(name: str, info: Mapping[str, Any]) -> None:
            nonlocal sent, inside
            if inside and (
                name.endswith("send_request_headers.started")
                or name.endswith("connect_tcp.started")
            ):
                # The request holds its connection now (a pooled one turned active, or a new
                # one no other request can take): let the next request into the pool.
                inside = False
                gate.release()  # type: ignore[union-attr]  # inside implies a gate
            if not sent and name.endswith("send_request_headers.started"):
                # The first-byte clock starts when the request starts going out: waiting for
                # a pooled connection and connecting (bounded by connect_timeout) come before.
                sent = True
                if first_byte is not None and timer is not None:
                    timer.reschedule(min(loop.time() + first_byte, total_at))

        req = client.build_request(
            "POST", url, content=content, headers=self._headers, extensions={"trace": trace}
        )
        retries_left = attempt <= self.max_retries
        try:
            async with asyncio.timeout_at(total_at if total_at != math.inf else None) as timer:
                # One request at a time between entering the pool and holding a connection:
                # httpcore hands one idle connection to every request queued in the same pass,
                # and all but one then retry, which costs O(queued²) and opens fewer
                # connections than the pool allows (encode/httpcore#822, #1110).
                if gate is not None:
                    await gate.acquire()
                    inside = True
                try:
                    response = await client.send(req, stream=True)
                finally:
                    if inside:
                        inside = False
                        gate.release()  # type: ignore[union-attr]  # inside implies a gate
        except TimeoutError as exc:
            if sent and first_byte is not None and loop.time() < total_at:
                raise DeadlineError(
                    f"{self.provider} sent no answer within first_byte_timeout={first_byte:g} s "
                    f"of the request to {url} (the model config's first_byte_timeout raises it; "
                    "stream_retries reruns the step)",
                    deadline="first_byte",
                    seconds=first_byte,
                    provider=self.provider,
                    retryable=True,
                ) from exc
            raise self._total_error(f" waiting for {url} to answer") from exc
        except httpx.UnsupportedProtocol as exc:
            raise LLMConnectionError(
                f"{self.provider}: bad base_url {self.base_url!r}: {exc}", provider=self.provider
            ) from exc
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.WriteError) as exc:
            # The request did not reach the server whole: it cannot have been processed.
            what = type(exc).__name__
            if retries_left:
                return backoff_delay(attempt - 1, None, self._rng), f"{what}: {exc}", _unsent(exc)
            if isinstance(exc, httpx.ConnectTimeout) and self.connect_timeout is not None:
                raise ConnectDeadlineError(
                    f"could not connect to {self.provider} at {url} within connect_timeout="
                    f"{self.connect_timeout:g} s ({attempt} attempts)",
                    deadline="connect",
                    seconds=self.connect_timeout,
                    provider=self.provider,
                ) from exc
            raise LLMConnectionError(
                f"could not reach {self.provider} at {url}: {what}: {exc}",
                provider=self.provider,
                retryable=True,
            ) from exc
        except httpx.TransportError as exc:
            # The request went out and the answer never came (a read timeout of a caller's
            # client, a connection closed before the status line): the server may have acted
            # on it, so it is not sent again here; stream_retries may rerun the step.
            raise LLMStreamError(
                f"{self.provider} at {url} did not answer the request: {type(exc).__name__}: {exc}",
                provider=self.provider,
                retryable=True,
            ) from exc
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
            raw = b""
        finally:
            await response.aclose()
        env_var = " or ".join(self.env_vars) if self.env_vars else None
        error = response_error(
            self.provider, status, raw, env_var=env_var, url=str(response.request.url)
        )
        should = response.headers.get("x-should-retry")
        retry = error.retryable if should is None else should.lower() == "true"
        asked = retry_after(response.headers)
        if asked is None:
            asked = retry_info(error.body)
        error.retry_after = asked
        if retry and asked is not None and asked > MAX_RETRY_AFTER:
            # Sleeping the cap would only fail later without saying why: say it now.
            error.args = (
                f"{error} (the server asked to wait {asked:.0f} s before retrying, longer than "
                f"the {MAX_RETRY_AFTER:.0f} s tether waits; not retried)",
            )
            error.retryable = False
            raise error
        if retry and retries_left:
            delay = asked if asked is not None else backoff_delay(attempt - 1, None, self._rng)
            return delay, f"HTTP {status}: {_short(error)}", error
        raise error

    def _total_error(self, what: str) -> DeadlineError:
        seconds = self.total_timeout or 0.0
        return DeadlineError(
            f"{self.provider}: the model call passed total_timeout={seconds:g} s{what} (the "
            "model config's total_timeout raises it)",
            deadline="total",
            seconds=seconds,
            provider=self.provider,
        )

    async def _read(  # noqa: C901  # the per-chunk read loop: kept inline, no call per event
        self, response: httpx.Response, loop: asyncio.AbstractEventLoop, total_at: float
    ) -> AsyncIterator[StreamChunk]:
        """The body's events through the parser, every read bounded by the idle deadline (reset
        by each event that is not a keep-alive) and the total one."""
        parser = self.new_parser()
        decoder = SSEDecoder()
        provider = self.provider
        feed, handle = decoder.feed, parser.handle
        idle = self.idle_timeout
        watch = _Watch(loop, idle, total_at)
        current_task = asyncio.current_task
        it = _body(response)
        anext = it.__anext__
        try:
            while True:
                if watch.lapsed and watch.resume():
                    raise self._deadline_error(watch)
                task = watch.task = current_task()
                watch.reading = True
                try:
                    raw = await anext()
                except StopAsyncIteration:
                    break
                except asyncio.CancelledError:
                    if watch.fired and task is not None and task.uncancel() <= watch.cancelling:
                        raise self._deadline_error(watch) from None
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
            raise LLMStreamError(
                f"{provider} stream broke: {type(exc).__name__}: {exc}",
                provider=provider,
                retryable=True,
            ) from exc
        except _MALFORMED as exc:
            raise LLMStreamError(
                f"{provider} sent an event we could not read: {exc!r:.300}",
                provider=provider,
            ) from exc
        finally:
            watch.stop()
        yield end_of_stream(provider, decoder, parser)

    def _deadline_error(self, watch: _Watch) -> DeadlineError:
        idle = self.idle_timeout
        if idle is not None and watch.deadline < watch.total_at:
            return DeadlineError(
                f"{self.provider} sent no content for idle_timeout={idle:g} s (the stream stayed "
                "open; keep-alives do not count; the model config's idle_timeout raises it, "
                "stream_retries reruns the step)",
                deadline="idle",
                seconds=idle,
                provider=self.provider,
                retryable=True,
            )
        return self._total_error(" while the answer streamed")


class _Watch:
    """The idle and total deadlines of one streamed body, for the price of a float per content
    batch: one timer per idle period checks them and cancels the reading task only while it
    waits for the body (never while the consumer holds the stream between chunks)."""

    __slots__ = (
        "_handle",
        "_loop",
        "cancelling",
        "deadline",
        "fired",
        "idle",
        "lapsed",
        "reading",
        "task",
        "total_at",
    )

    def __init__(self, loop: asyncio.AbstractEventLoop, idle: float | None, total_at: float):
        self._loop = loop
        self.idle = idle
        self.total_at = total_at
        self.deadline = min(loop.time() + idle, total_at) if idle is not None else total_at
        self.reading = False
        self.fired = False
        self.lapsed = False
        self.task: asyncio.Task[Any] | None = None
        task = asyncio.current_task()
        self.cancelling = task.cancelling() if task is not None else 0
        self._handle: asyncio.TimerHandle | None = (
            loop.call_at(self.deadline, self._check) if self.deadline != math.inf else None
        )

    def reset(self) -> None:
        """Content arrived (and the consumer has taken it): the idle clock starts again."""
        if self.idle is not None:
            self.deadline = min(self._loop.time() + self.idle, self.total_at)

    def _check(self) -> None:
        self._handle = None
        if self._loop.time() < self.deadline:  # content moved it on since this was set
            self._handle = self._loop.call_at(self.deadline, self._check)
        elif self.reading and self.task is not None:
            self.fired = True
            self.task.cancel()
        else:
            # The consumer holds the stream: the next read looks again (content it is taking
            # resets the clock first).
            self.lapsed = True

    def resume(self) -> bool:
        """Before a read, after the timer lapsed outside one: True when the deadline has passed,
        else the timer is set again."""
        self.lapsed = False
        if self._loop.time() >= self.deadline:
            return True
        self._handle = self._loop.call_at(self.deadline, self._check)
        return False

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None


def _unsent(exc: httpx.TransportError) -> LLMError:
    return LLMConnectionError(f"{type(exc).__name__}: {exc}", retryable=True)


def _short(error: LLMError) -> str:
    text = str(error)
    return text if len(text) <= 200 else text[:197] + "..."


def _body(response: httpx.Response) -> AsyncIterator[bytes]:
    """The body's bytes as they arrive. Event streams are rarely compressed; when this one is
    not, read the response's byte stream itself and skip two generator layers per read (the
    response is closed by `open_stream` either way)."""
    if response.headers.get("content-encoding", "identity") != "identity":
        return response.aiter_bytes()
    stream = response.stream
    if isinstance(stream, httpx.AsyncByteStream):
        return stream.__aiter__()
    return response.aiter_raw()


def end_of_stream(provider: str, decoder: SSEDecoder, parser: StreamParser) -> FinishChunk:
    """After the body ended (and `decoder.flush()` was fed to the parser): the finish chunk, or
    the stream error the body amounts to. A 200 body that stops before the provider's terminal
    event is a retryable `LLMStreamError`: the loop's `stream_retries` rerun the step."""
    if decoder.stray:
        _raise_stray(provider, decoder.stray, parser.done)
    if not parser.done:
        raise LLMStreamError(
            f"{provider} stream ended before the response finished",
            provider=provider,
            retryable=True,
        )
    return parser.finish()


def _raise_stray(provider: str, lines: list[str], done: bool) -> None:
    """A body that carried non-SSE text. A JSON error object appended to (or sent instead of)
    the stream is a stream error; other noise after a finished response is ignored, and a body
    that was never an event stream says so."""
    text = "\n".join(lines).strip()
    try:
        payload: Any = json.loads(text) if text else None
    except ValueError:
        payload = None
    if isinstance(payload, list) and payload:
        payload = payload[0]
    if isinstance(payload, dict) and "error" in payload:
        raise stream_error(provider, payload, what="ended with an error")
    if not done and text:
        raise LLMStreamError(
            f"{provider} answered with something that is not an event stream: {text:.300}",
            provider=provider,
        )
