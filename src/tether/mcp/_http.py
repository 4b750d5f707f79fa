"""Streamable HTTP: one POST per message, answered by a JSON body or an SSE stream.

Two eras share this channel. The stateless revision (2026-07-28) carries its version in the
`MCP-Protocol-Version` header of every request, has no session, no GET stream and no
resumption. The handshake era keeps a session (`Mcp-Session-Id`, ended with DELETE), may
resume an answer's stream with `Last-Event-ID`, and lets the server send requests on the POST
streams and on a GET stream of its own, which we answer.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from typing import Any

import httpx

from .._json import dumps
from .._sse import SSEDecoder
from ..errors import McpAuthError
from ._headers import encode_header_value
from ._protocol import (
    HEADER_VERSIONS,
    MODERN_VERSION,
    NAMED_METHODS,
    ChannelError,
    JsonObject,
    ServerRequestHandler,
    SessionLost,
    is_notification,
    is_response_to,
    is_server_request,
    parse_message,
)

__all__ = ["BorrowedTransport", "HttpChannel", "rpc_error_body"]

_ACCEPT = "application/json, text/event-stream"
_MAX_RESUMES = 100
"""Times one answer's event stream may be resumed before we call the server broken."""
_MAX_RETRY_MS = 30_000
"""The longest `retry:` we honour between resumptions (timeout_ms bounds the whole wait)."""
_CLOSE_TIMEOUT = 5.0
"""Seconds a session DELETE (or a fire-and-forget message) may take."""
_LISTEN_TIMEOUT = 10.0
"""Seconds the server may take to accept (or refuse) the GET stream of a session."""


class BorrowedTransport(httpx.AsyncBaseTransport):
    """A transport the caller passed in: used, never closed (it stays the caller's)."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self._inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        return None


class HttpChannel:
    """One MCP connection over streamable HTTP. The httpx client is shared by the reconnects
    of a source and owned by the caller of this class."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        url: str,
        headers: Mapping[str, str],
        on_request: ServerRequestHandler,
        *,
        authorized: bool = False,
    ) -> None:
        self._http = http
        self._url = url
        self._headers = dict(headers)
        self._on_request = on_request
        self._authorized = authorized
        self.session_id: str | None = None
        self.protocol_version: str | None = None
        self.lost = False
        self._background: set[asyncio.Task[None]] = set()
        self._listener: asyncio.Task[None] | None = None

    @property
    def modern(self) -> bool:
        return self.protocol_version == MODERN_VERSION

    @property
    def cancels_by_closing(self) -> bool:
        return self.modern

    async def open(self) -> None:
        return None

    def silence(self) -> str | None:
        return None

    def _base_headers(self) -> dict[str, str]:
        headers = dict(self._headers)
        if self.session_id is not None and not self.modern:
            headers["mcp-session-id"] = self.session_id
        version = self.protocol_version
        if version is not None and (version == MODERN_VERSION or version in HEADER_VERSIONS):
            headers["mcp-protocol-version"] = version
        return headers

    def _request_headers(
        self, message: JsonObject, extra: Mapping[str, str] | None = None
    ) -> dict[str, str]:
        headers = self._base_headers()
        headers["accept"] = _ACCEPT
        headers["content-type"] = "application/json"
        method = message.get("method")
        if isinstance(method, str):
            # Mirrored for intermediaries (SEP-2243); harmless to servers of the older era.
            headers["mcp-method"] = method
            key = NAMED_METHODS.get(method)
            params = message.get("params")
            if key is not None and isinstance(params, dict) and isinstance(params.get(key), str):
                headers["mcp-name"] = encode_header_value(params[key])
        if extra:
            headers.update(extra)
        return headers

    async def request(
        self, message: JsonObject, headers: Mapping[str, str] | None = None
    ) -> JsonObject:
        request_id = message["id"]
        initialize = message.get("method") == "initialize"
        try:
            async with self._http.stream(
                "POST",
                self._url,
                content=dumps(message),
                headers=self._request_headers(message, headers),
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
        """None for a 2xx. A JSON-RPC error in the body of an error status is the server's
        answer to the request (returned, to be read as one) when it is a 400, or any status in
        the stateless era; anything else non-2xx raises: `SessionLost` when the server no
        longer knows our session, else `ChannelError`."""
        status = resp.status_code
        if 200 <= status < 300:
            return None
        raw = await resp.aread()
        error = rpc_error_body(raw)
        if (
            self.session_id is not None
            and not self.modern
            and not initialize
            and _session_unknown(status, error)
        ):
            self.lost = True
            raise SessionLost(
                f"the server no longer knows session {self.session_id} (HTTP {status})",
                status=status,
            )
        if error is not None and (status == 400 or self.modern):
            return error
        if status == 401 and not self._authorized:
            raise ChannelError(
                "the server requires authorization (HTTP 401); give mcp_server(..., "
                "auth=OAuth(...)) or auth=ClientCredentials(...), or the header it expects",
                status=status,
            )
        body = raw.decode("utf-8", "replace")[:300]
        detail = f": {body}" if body.strip() else ""
        raise ChannelError(f"the server answered HTTP {status}{detail}", status=status)

    def _answer_from_json(self, raw: bytes, request_id: Any) -> JsonObject:
        message = parse_message(raw)
        candidates = message if isinstance(message, list) else [message]
        for item in candidates:
            if is_response_to(item, request_id):
                return item
        raise ChannelError(
            f"the server's JSON body is not the answer to request {request_id}: "
            f"{raw[:200].decode('utf-8', 'replace')!r}"
        )

    async def _answer_from_sse(self, resp: httpx.Response, request_id: Any) -> JsonObject:
        parser = SSEDecoder()
        answer, last_id = await self._read_events(resp, request_id, parser, None)
        retry = parser.retry
        resumes = 0
        while answer is None:
            # A server of the handshake era may end the stream before answering, having sent
            # an event id, and expect the client to resume it: GET with Last-Event-ID
            # (2025-11-25, "polling"). The stateless revision has no resumption.
            ended = f"the server ended the event stream without answering request {request_id}"
            if last_id is None or self.modern or resumes >= _MAX_RESUMES:
                raise ChannelError(ended)
            resumes += 1
            if retry:
                await asyncio.sleep(min(retry, _MAX_RETRY_MS) / 1000)
            headers = self._base_headers()
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
                parser = SSEDecoder()
                answer, last_id = await self._read_events(again, request_id, parser, last_id)
                retry = parser.retry if parser.retry is not None else retry
        return answer

    async def _read_events(
        self, resp: httpx.Response, request_id: Any, parser: SSEDecoder, last_id: str | None
    ) -> tuple[JsonObject | None, str | None]:
        """Read one SSE body until the answer to `request_id` (or its end)."""
        async for chunk in resp.aiter_bytes():
            for event in parser.feed(chunk):
                if event.id:
                    last_id = event.id
                if event.event != "message" or not event.data.strip():
                    continue  # a primer (empty data) or an event type we do not read
                message = parse_message(event.data)
                for item in message if isinstance(message, list) else [message]:
                    if request_id is not None and is_response_to(item, request_id):
                        return item, last_id
                    if is_server_request(item) or is_notification(item):
                        self._spawn(self._answer(item))
        return None, last_id

    async def _answer(self, message: JsonObject) -> None:
        """Answer a request the server sent us (an elicitation may wait on a person)."""
        reply = await self._on_request(message)
        if not reply:
            return  # a notification: nothing to answer
        with contextlib.suppress(ChannelError, McpAuthError, TimeoutError):
            async with asyncio.timeout(_CLOSE_TIMEOUT):
                await self.notify(reply)

    # -- the GET stream of a handshake-era session --------------------------------------------

    async def listen(self) -> None:
        """Open the session's GET stream, on which a server may send requests of its own (an
        elicitation, say). Returns once the server has accepted or refused it; a refusal
        (405, or anything else) just means there is none."""
        if self.modern or self._listener is not None:
            return
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._listener = asyncio.ensure_future(self._listen(ready))
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(_LISTEN_TIMEOUT):
                await asyncio.shield(ready)

    async def _listen(self, ready: asyncio.Future[None]) -> None:
        headers = self._base_headers()
        headers["accept"] = "text/event-stream"
        try:
            async with self._http.stream("GET", self._url, headers=headers) as resp:
                ctype = resp.headers.get("content-type", "").split(";")[0].strip().lower()
                if resp.status_code != 200 or ctype != "text/event-stream":
                    return
                if not ready.done():
                    ready.set_result(None)
                await self._read_events(resp, None, SSEDecoder(), None)
        except (httpx.HTTPError, McpAuthError):
            return  # the stream is a courtesy of the server; losing it loses nothing we sent
        finally:
            if not ready.done():
                ready.set_result(None)

    # -- notifications, closing ---------------------------------------------------------------

    async def notify(self, message: JsonObject) -> None:
        try:
            resp = await self._http.post(
                self._url, content=dumps(message), headers=self._request_headers(message)
            )
        except httpx.HTTPError as exc:
            raise _transport_error(self._url, exc) from exc
        if (
            self.session_id is not None
            and not self.modern
            and _session_unknown(resp.status_code, rpc_error_body(resp.content))
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

    def _spawn(self, coro: Any) -> None:
        task: asyncio.Task[None] = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def aclose(self) -> None:
        """End the session: DELETE it unless the server already dropped it (or the revision
        has none). Idempotent."""
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.cancel()
            await asyncio.gather(listener, return_exceptions=True)
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)
        session_id, self.session_id = self.session_id, None
        if session_id is None or self.lost or self.modern:
            return
        headers = self._base_headers()
        headers["mcp-session-id"] = session_id
        try:
            async with asyncio.timeout(_CLOSE_TIMEOUT):
                await self._http.delete(self._url, headers=headers)
        except (httpx.HTTPError, McpAuthError, TimeoutError):
            pass  # 405 (the server does not let clients end sessions) is fine too


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


def _transport_error(url: str, exc: httpx.HTTPError) -> ChannelError:
    if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout):
        return ChannelError(f"cannot reach {url}: {exc or type(exc).__name__}")
    return ChannelError(f"the connection to {url} failed: {type(exc).__name__}: {exc}")
