"""Streamable HTTP: one POST per message, answered by a JSON body or an SSE stream."""

from __future__ import annotations

import asyncio
import codecs
from typing import Any

import httpx

from .._json import dumps
from ._protocol import (
    HEADER_VERSIONS,
    ChannelError,
    JsonObject,
    SessionLost,
    answer_server_request,
    is_response_to,
    is_server_request,
    parse_message,
)
from ._sse import SseParser

__all__ = ["BorrowedTransport", "HttpChannel"]

_ACCEPT = "application/json, text/event-stream"
_MAX_RESUMES = 100
"""Times one answer's event stream may be resumed before we call the server broken."""
_MAX_RETRY_MS = 30_000
"""The longest `retry:` we honour between resumptions (timeout_ms bounds the whole wait)."""
_CLOSE_TIMEOUT = 5.0
"""Seconds a session DELETE (or a fire-and-forget notification) may take."""


class BorrowedTransport(httpx.AsyncBaseTransport):
    """A transport the caller passed in: used, never closed (it stays the caller's)."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self._inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        return None


class HttpChannel:
    """One MCP session over streamable HTTP. The httpx client is shared by the reconnects of a
    connection and owned by the caller of this class."""

    def __init__(self, http: httpx.AsyncClient, url: str, headers: dict[str, str]) -> None:
        self._http = http
        self._url = url
        self._headers = dict(headers)
        self.session_id: str | None = None
        self.protocol_version: str | None = None
        self.lost = False
        self._background: set[asyncio.Task[None]] = set()

    async def open(self) -> None:
        return None

    def silence(self) -> str | None:
        return None

    def _request_headers(self) -> dict[str, str]:
        headers = {**self._headers, "accept": _ACCEPT, "content-type": "application/json"}
        if self.session_id is not None:
            headers["mcp-session-id"] = self.session_id
        if self.protocol_version is not None and self.protocol_version in HEADER_VERSIONS:
            headers["mcp-protocol-version"] = self.protocol_version
        return headers

    async def request(self, message: JsonObject) -> JsonObject:
        request_id = message["id"]
        initialize = message.get("method") == "initialize"
        try:
            async with self._http.stream(
                "POST", self._url, content=dumps(message), headers=self._request_headers()
            ) as resp:
                refusal = await self._check_status(resp, initialize=initialize)
                if refusal is not None:
                    return {**refusal, "id": request_id}
                if initialize:
                    self.session_id = resp.headers.get("mcp-session-id") or None
                ctype = resp.headers.get("content-type", "").split(";")[0].strip().lower()
                if ctype == "text/event-stream":
                    return await self._answer_from_sse(resp, request_id)
                if ctype == "application/json" or ctype.endswith("+json"):
                    return self._answer_from_json(await resp.aread(), request_id)
                if resp.status_code == 202:
                    raise ChannelError(
                        "the server accepted the request (202) without answering it", status=202
                    )
                raise ChannelError(
                    f"the server answered with content-type {ctype or 'none'!r}, "
                    "expected application/json or text/event-stream",
                    status=resp.status_code,
                )
        except httpx.HTTPError as exc:
            raise _transport_error(self._url, exc) from exc

    async def _check_status(self, resp: httpx.Response, *, initialize: bool) -> JsonObject | None:
        """None for a 2xx. A 400 whose body is a JSON-RPC error is the server's answer to the
        request (returned, to be read as one); anything else non-2xx raises: `SessionLost` when
        the server no longer knows our session, else `ChannelError`."""
        status = resp.status_code
        if 200 <= status < 300:
            return None
        raw = await resp.aread()
        error = rpc_error_body(raw)
        if self.session_id is not None and not initialize and _session_unknown(status, error):
            self.lost = True
            raise SessionLost(
                f"the server no longer knows session {self.session_id} (HTTP {status})",
                status=status,
            )
        if status == 400 and error is not None:
            return error
        body = raw.decode("utf-8", "replace")[:300]
        detail = f": {body}" if body.strip() else ""
        raise ChannelError(f"the server answered HTTP {status}{detail}", status=status)

    def _answer_from_json(self, raw: bytes, request_id: Any) -> JsonObject:
        message = parse_message(raw)
        candidates = message if isinstance(message, list) else [message]
        for item in candidates:
            if is_response_to(item, request_id):
                return item  # type: ignore[no-any-return]
        raise ChannelError(
            f"the server's JSON body is not the answer to request {request_id}: "
            f"{raw[:200].decode('utf-8', 'replace')!r}"
        )

    async def _answer_from_sse(self, resp: httpx.Response, request_id: Any) -> JsonObject:
        parser = SseParser()
        answer, last_id = await self._read_events(resp, request_id, parser, None)
        retry = parser.retry
        resumes = 0
        while answer is None:
            # A server may end the stream before answering, having sent an event id, and
            # expect the client to resume it: GET with Last-Event-ID (2025-11-25, "polling").
            ended = f"the server ended the event stream without answering request {request_id}"
            if last_id is None or resumes >= _MAX_RESUMES:
                raise ChannelError(ended)
            resumes += 1
            if retry:
                await asyncio.sleep(min(retry, _MAX_RETRY_MS) / 1000)
            headers = self._request_headers()
            del headers["content-type"]
            headers["accept"] = "text/event-stream"
            headers["last-event-id"] = last_id
            async with self._http.stream("GET", self._url, headers=headers) as again:
                try:
                    refusal = await self._check_status(again, initialize=False)
                    if refusal is not None:
                        raise ChannelError(_describe(refusal), status=again.status_code)
                except ChannelError as exc:
                    # The request was delivered and may be running: never resend it (a lost
                    # session stays marked lost, so the next request reconnects).
                    raise ChannelError(f"{ended}; resuming it failed: {exc}") from exc
                ctype = again.headers.get("content-type", "").split(";")[0].strip().lower()
                if ctype != "text/event-stream":
                    raise ChannelError(f"{ended}; resuming it got content-type {ctype or 'none'!r}")
                parser = SseParser()
                answer, last_id = await self._read_events(again, request_id, parser, last_id)
                retry = parser.retry if parser.retry is not None else retry
        return answer

    async def _read_events(
        self, resp: httpx.Response, request_id: Any, parser: SseParser, last_id: str | None
    ) -> tuple[JsonObject | None, str | None]:
        """Read one SSE body until the answer to `request_id` (or its end)."""
        # utf-8-sig: a byte-order mark opening the body is dropped, as the SSE rules say.
        decoder = codecs.getincrementaldecoder("utf-8-sig")(errors="replace")
        async for chunk in resp.aiter_bytes():
            for event in parser.feed(decoder.decode(chunk)):
                if event.id:
                    last_id = event.id
                if event.event != "message" or not event.data.strip():
                    continue  # a primer (empty data) or an event type we do not read
                message = parse_message(event.data)
                for item in message if isinstance(message, list) else [message]:
                    if is_response_to(item, request_id):
                        return item, last_id
                    if is_server_request(item):
                        self._spawn(self._post_quietly(answer_server_request(item)))
        return None, last_id

    async def notify(self, message: JsonObject) -> None:
        try:
            resp = await self._http.post(
                self._url, content=dumps(message), headers=self._request_headers()
            )
        except httpx.HTTPError as exc:
            raise _transport_error(self._url, exc) from exc
        if self.session_id is not None and _session_unknown(
            resp.status_code, rpc_error_body(resp.content)
        ):
            self.lost = True
            raise SessionLost(
                f"the server no longer knows session {self.session_id} (HTTP {resp.status_code})",
                status=resp.status_code,
            )
        if not 200 <= resp.status_code < 300:
            raise ChannelError(
                f"the server answered HTTP {resp.status_code}: {resp.text[:300]}",
                status=resp.status_code,
            )

    async def _post_quietly(self, message: JsonObject) -> None:
        try:
            async with asyncio.timeout(_CLOSE_TIMEOUT):
                await self.notify(message)
        except (ChannelError, TimeoutError):
            pass

    def _spawn(self, coro: Any) -> None:
        task: asyncio.Task[None] = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def aclose(self) -> None:
        """End the session: DELETE it unless the server already dropped it. Idempotent."""
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)
        session_id, self.session_id = self.session_id, None
        if session_id is None or self.lost:
            return
        headers = {**self._headers, "mcp-session-id": session_id}
        if self.protocol_version is not None and self.protocol_version in HEADER_VERSIONS:
            headers["mcp-protocol-version"] = self.protocol_version
        try:
            async with asyncio.timeout(_CLOSE_TIMEOUT):
                await self._http.delete(self._url, headers=headers)
        except (httpx.HTTPError, TimeoutError):
            pass  # 405 (the server does not let clients end sessions) is fine too


def _transport_error(url: str, exc: httpx.HTTPError) -> ChannelError:
    if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout):
        return ChannelError(f"cannot reach {url}: {exc or type(exc).__name__}")
    return ChannelError(f"the connection to {url} failed: {type(exc).__name__}: {exc}")


def rpc_error_body(raw: bytes) -> JsonObject | None:
    """The JSON-RPC error message `raw` holds, if it is one."""
    message = parse_message(raw)
    if (
        isinstance(message, dict)
        and isinstance(message.get("error"), dict)
        and "result" not in message
        and "method" not in message
    ):
        return message
    return None


def _session_unknown(status: int, error: JsonObject | None) -> bool:
    """Whether an error status says the server no longer knows our session (and so did not act
    on the request). 404 is the spec's answer. Some servers answer 400 instead: with no
    JSON-RPC body, or (servers built on the SDKs' example pattern) with an id-less JSON-RPC
    error about the session. A 400 that carries any other JSON-RPC error is the server's answer
    to the request itself, and resending the request could run it twice."""
    if status == 404:
        return True
    if status != 400:
        return False
    if error is None:
        return True
    message = error["error"].get("message")
    return error.get("id") is None and isinstance(message, str) and "session" in message.lower()


def _describe(error: JsonObject) -> str:
    body = error["error"]
    return f"{body.get('message', '')} (JSON-RPC error {body.get('code')})"
