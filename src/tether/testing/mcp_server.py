"""`create_test_mcp_server()`: an in-process MCP server behind an httpx transport.

It speaks real JSON-RPC over the streamable HTTP shapes — session ids, the protocol-version
header, cursor pagination, `isError` results, JSON or SSE bodies (CRLF, an empty priming
event, split chunks) — with no network, no ports and no SDK. Pass it as the `transport=` of
`tether.mcp.mcp_server`:

```python
server = create_test_mcp_server(tools=[{"name": "add", "run": lambda a: a["x"] + a["y"]}])
agent = create_agent(llm=..., integrations=[mcp_server(server.url, transport=server)])
...
await server.aclose()   # cancels handlers still running
```

Everything the client sent is recorded (`requests`, `cancelled`, `deleted`), and failures are
injected by setting attributes (`http_errors`, `rpc_errors`, `down`) or calling `restart()`.

By default it is a server of the `initialize`-handshake era (2025-11-25 and earlier);
`modern=True` makes it serve the stateless revision (2026-07-28) as well, checking the
per-request `_meta` and the `MCP-Protocol-Version` / `Mcp-Method` / `Mcp-Name` / `Mcp-Param-*`
headers the way the revision requires, and `legacy=False` makes it serve that revision only.
A tool whose `run` takes a second argument gets a `TestMcpCall` and can ask the user for input
(`await call.elicit(message, schema)`): an `elicitation/create` request on the answer's event
stream in the handshake era (`sse=True`), an input-required result in the stateless one.
"""

from __future__ import annotations

import asyncio
import base64
import inspect
import json
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, NotRequired, TypedDict

import httpx

__all__ = [
    "DropConnection",
    "McpRpcError",
    "RecordedRequest",
    "TestMcpCall",
    "TestMcpResource",
    "TestMcpServer",
    "TestMcpTool",
    "create_test_mcp_server",
]

SPOKEN_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
MODERN_VERSION = "2026-07-28"
_HEADER_VERSIONS = frozenset({"2025-11-25", "2025-06-18"})
_NAMED = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}


class TestMcpTool(TypedDict):
    """A tool the test server lists. `run(arguments)` (or `run(arguments, call)`, to elicit)
    may be sync or async and returns a str (one text block), a dict with "content" (a raw
    result), or anything JSON (text of it). Raising any exception answers `isError: true` with
    its message; raising `McpRpcError` answers a JSON-RPC error; raising `DropConnection` drops
    the connection unanswered."""

    name: str
    run: Callable[[dict[str, Any]], Any]
    description: NotRequired[str]
    input_schema: NotRequired[dict[str, Any]]


class TestMcpResource(TypedDict):
    """A resource the test server lists: a fixed `text`, or `read()` (sync or async; raising
    answers a JSON-RPC error)."""

    name: str
    uri: str
    text: NotRequired[str]
    read: NotRequired[Callable[[], Any]]
    description: NotRequired[str]
    mime_type: NotRequired[str]


class McpRpcError(Exception):
    """Raise in a handler to answer with this JSON-RPC error."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


class DropConnection(Exception):
    """Raise in a handler to make the server go away mid-request: the connection breaks and
    no answer is ever sent."""


class _NeedInput(Exception):
    def __init__(self, requests: dict[str, Any], answers: dict[str, Any]) -> None:
        super().__init__("input required")
        self.requests = requests
        self.answers = answers


class TestMcpCall:
    """What a tool's `run(arguments, call)` gets: a way to ask the user for input."""

    __test__ = False

    def __init__(
        self,
        server: TestMcpServer,
        events: asyncio.Queue[dict[str, Any]] | None,
        modern: bool,
        answers: dict[str, Any],
    ) -> None:
        self._server = server
        self._events = events
        self._modern = modern
        self._answers = answers
        self._asked = 0
        self.elicitations: list[dict[str, Any]] = []
        """The answers this call got."""

    async def elicit(self, message: str, schema: dict[str, Any]) -> dict[str, Any]:
        """Ask the user (through the client) and return its answer (`action`, `content`)."""
        key = f"ask-{self._asked}"
        self._asked += 1
        params = {"mode": "form", "message": message, "requestedSchema": schema}
        if self._modern:
            if key not in self._answers:
                raise _NeedInput(
                    {key: {"method": "elicitation/create", "params": params}}, self._answers
                )
            answer: dict[str, Any] = self._answers[key]
        else:
            if self._events is None:
                raise RuntimeError("the test server elicits in the handshake era with sse=True")
            answer = await self._server._ask(self._events, "elicitation/create", params)
        self.elicitations.append(answer)
        return answer


@dataclass(slots=True)
class RecordedRequest:
    """One HTTP request the server received."""

    http_method: str
    method: str | None
    """The JSON-RPC method (None for a DELETE, or a response the client sent us)."""
    id: Any
    params: Any
    session_id: str | None
    protocol_version_header: str | None
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class _Session:
    id: str
    protocol_version: str
    initialized: bool = False


class TestMcpServer(httpx.AsyncBaseTransport):
    """An in-process MCP server speaking real JSON-RPC over an httpx transport (no network);
    `create_test_mcp_server` is this class.

    Args:
        tools: What `tools/list` lists and `tools/call` runs (see `TestMcpTool`).
        resources: What `resources/list` lists and `resources/read` reads.
        sse: Answer requests with an SSE body instead of a JSON one.
        crlf: End SSE lines with CRLF.
        prime: Open each SSE body with an event whose data is empty.
        chunk_size: Deliver SSE bodies in chunks of this many bytes (splitting lines and CRLFs).
        notify_first: Send a notification on the SSE body before the answer.
        ping_first: Send a `ping` request on the SSE body before the answer (the client's reply
            lands in `client_responses`).
        disconnect_first: End each request's SSE body after an event id and a `retry:`, before
            the answer; the answer comes on the client's GET with `Last-Event-ID`.
        page_size: Paginate `tools/list` and `resources/list` with cursors, this many per page.
        versions: Protocol versions the server negotiates (it echoes the client's offer when it
            is one of them, else answers the first).
        answer_version: Answer `initialize` with this version regardless of the offer.
        sessions: Issue an `mcp-session-id` and require it on later requests.
        unknown_session_status: The HTTP status for an unknown session: 404 (the spec's, with
            a JSON-RPC error body) or 400 (with a plain-text body, as some servers answer).
        unknown_session_rpc: With 400, answer an id-less JSON-RPC error about the session
            instead (the pattern of servers built on the SDKs' examples).
        server_info: `serverInfo` of the initialize result.
        instructions: `instructions` of the initialize result.
        capabilities: Override the advertised capabilities (default: tools and/or resources
            when there are any).
        modern: Serve the stateless revision (2026-07-28) too.
        legacy: Serve the handshake era (False: `initialize` is refused, naming 2026-07-28).
    """

    __test__ = False  # not a pytest test class, despite the name

    url = "http://mcp.test/mcp"

    def __init__(
        self,
        *,
        tools: Sequence[TestMcpTool] = (),
        resources: Sequence[TestMcpResource] = (),
        sse: bool = False,
        crlf: bool = False,
        prime: bool = False,
        chunk_size: int | None = None,
        notify_first: bool = False,
        ping_first: bool = False,
        disconnect_first: bool = False,
        page_size: int | None = None,
        versions: Sequence[str] = SPOKEN_VERSIONS,
        answer_version: str | None = None,
        sessions: bool = True,
        unknown_session_status: int = 404,
        unknown_session_rpc: bool = False,
        server_info: dict[str, Any] | None = None,
        instructions: str | None = None,
        capabilities: dict[str, Any] | None = None,
        modern: bool = False,
        legacy: bool = True,
    ) -> None:
        self.modern = modern
        self.legacy = legacy
        self.tools = list(tools)
        self.resources = list(resources)
        self.sse = sse
        self.crlf = crlf
        self.prime = prime
        self.chunk_size = chunk_size
        self.notify_first = notify_first
        self.ping_first = ping_first
        self.disconnect_first = disconnect_first
        self.page_size = page_size
        self.versions = list(versions)
        self.answer_version = answer_version
        self.use_sessions = sessions
        self.unknown_session_status = unknown_session_status
        self.unknown_session_rpc = unknown_session_rpc
        self.server_info = server_info or {"name": "tether-test-mcp", "version": "1.0.0"}
        self.instructions = instructions
        self.capabilities = capabilities
        self.http_errors: dict[str, int] = {}
        """JSON-RPC method -> HTTP status to answer it with (a non-2xx failure)."""
        self.http_rpc_errors: dict[str, tuple[int, int, str]] = {}
        """JSON-RPC method -> (HTTP status, code, message): answer it with that status and a
        JSON-RPC error body (some servers answer invalid params with a 400 that way)."""
        self.rpc_errors: dict[str, tuple[int, str]] = {}
        """JSON-RPC method -> (code, message) to answer it with."""
        self.down = False
        """True: every request fails to connect, as if nothing listened."""
        self.hold: dict[str, asyncio.Event] = {}
        """JSON-RPC method -> an event the server waits for before answering it (a server that
        accepted the request, or notification, and says nothing until the test lets it)."""
        self.requests: list[RecordedRequest] = []
        self.cancelled: list[Any] = []
        """Request ids named by the client's `notifications/cancelled`."""
        self.cancelled_handlers: list[Any] = []
        """Request ids whose handler was still running when cancelled (and so was stopped)."""
        self.client_responses: list[dict[str, Any]] = []
        """Answers the client sent to our own requests (the ping of `ping_first`)."""
        self.deleted: list[str] = []
        self.sessions: dict[str, _Session] = {}
        self.restarts = 0
        self._inflight: dict[tuple[str | None, Any], asyncio.Task[dict[str, Any]]] = {}
        self._arrival = asyncio.Event()
        self._resumable: dict[str, asyncio.Task[dict[str, Any]]] = {}
        self._asks: dict[str, asyncio.Future[dict[str, Any]]] = {}

    # -- what tests read ---------------------------------------------------------------------

    @property
    def methods(self) -> list[str]:
        """The JSON-RPC methods received, in order (DELETEs appear as "DELETE")."""
        return [r.method or r.http_method for r in self.requests]

    async def received(self, method: str, nth: int = 1) -> RecordedRequest:
        """Wait until `nth` requests for `method` (or "DELETE") have arrived; return the last."""
        while True:
            seen = [r for r in self.requests if (r.method or r.http_method) == method]
            if len(seen) >= nth:
                return seen[nth - 1]
            await self._arrival.wait()

    def _record(self, request: RecordedRequest) -> None:
        self.requests.append(request)
        arrival, self._arrival = self._arrival, asyncio.Event()
        arrival.set()

    def restart(self) -> None:
        """Forget every session and stop every handler, as a restarted server would."""
        self.restarts += 1
        self.sessions.clear()
        for task in self._inflight.values():
            task.cancel()

    async def aclose(self) -> None:
        """Stop handlers still running. (Safe to call more than once.)"""
        tasks = list(self._inflight.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def __aenter__(self) -> TestMcpServer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- HTTP --------------------------------------------------------------------------------

    # C901 allowed: the streamable-HTTP protocol state machine, one branch per request kind.
    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:  # noqa: C901
        if self.down:
            raise httpx.ConnectError(
                "connection refused (the test server is down)", request=request
            )
        sid = request.headers.get("mcp-session-id")
        pv = request.headers.get("mcp-protocol-version")
        headers = {k.lower(): v for k, v in request.headers.items()}
        if request.method == "DELETE":
            self._record(RecordedRequest("DELETE", None, None, None, sid, pv, headers))
            if sid is not None and self.sessions.pop(sid, None) is not None:
                self.deleted.append(sid)
                return httpx.Response(200)
            return httpx.Response(404)
        if request.method == "GET":
            return self._resume(request, sid, pv, headers)
        if request.method != "POST":
            return httpx.Response(405, headers={"allow": "GET, POST, DELETE"})
        message = _loads(await request.aread())
        if not isinstance(message, dict):
            return _rpc_error_response(400, None, -32700, "Parse error")
        method = message.get("method")
        rid = message.get("id")
        self._record(RecordedRequest("POST", method, rid, message.get("params"), sid, pv, headers))
        accept = request.headers.get("accept", "")
        if "application/json" not in accept or "text/event-stream" not in accept:
            return _rpc_error_response(406, rid, -32600, "Accept must list both content types")
        if isinstance(method, str) and method in self.http_errors:
            return httpx.Response(self.http_errors[method], text=f"injected failure of {method}")
        if isinstance(method, str) and method in self.http_rpc_errors:
            status, code, text = self.http_rpc_errors[method]
            return _rpc_error_response(status, rid, code, text)
        if pv == MODERN_VERSION and self.modern:
            return await self._modern_request(message, headers)
        if method == "initialize" and not self.legacy:
            return _rpc_error_response(
                400,
                rid,
                -32022,
                "Unsupported protocol version: this server speaks 2026-07-28 only",
                {"supported": [MODERN_VERSION], "requested": _offered(message)},
            )
        session: _Session | None = None
        if method != "initialize" and self.use_sessions:
            if sid is None:
                return _rpc_error_response(400, rid, -32600, "Bad Request: missing session id")
            session = self.sessions.get(sid)
            if session is None:
                return self._unknown_session(rid)
            if session.protocol_version in _HEADER_VERSIONS and pv != session.protocol_version:
                return _rpc_error_response(
                    400, rid, -32600, f"Bad mcp-protocol-version header: {pv!r}"
                )
        if method is None:  # the client answering a request of ours
            self.client_responses.append(message)
            waiting = self._asks.pop(str(rid), None)
            if waiting is not None and not waiting.done():
                waiting.set_result(message)
            return httpx.Response(202)
        if rid is None:
            if method in self.hold:
                await self.hold[method].wait()
            await self._notification(method, message.get("params"), sid, session)
            return httpx.Response(202)
        if method == "initialize":
            if "initialize" in self.hold:
                await self.hold["initialize"].wait()
            if "initialize" in self.rpc_errors:
                code, text = self.rpc_errors["initialize"]
                error = {"code": code, "message": text}
                return self._answer({"jsonrpc": "2.0", "id": rid, "error": error}, {})
            session, result = self._initialize(message.get("params"))
            response_headers = {"mcp-session-id": session.id} if self.use_sessions else {}
            return self._answer({"jsonrpc": "2.0", "id": rid, "result": result}, response_headers)
        events: asyncio.Queue[dict[str, Any]] | None = asyncio.Queue() if self.sse else None
        task = asyncio.ensure_future(
            self._dispatch(method, message.get("params"), rid, events=events)
        )
        key = (sid, rid)
        self._inflight[key] = task
        task.add_done_callback(lambda _t: self._inflight.pop(key, None))
        response_headers = {"mcp-session-id": sid} if sid else {}
        if self.sse:
            event_id = None
            if self.disconnect_first:
                event_id = f"{sid}:{rid}:0"
                self._resumable[event_id] = task
            return httpx.Response(
                200,
                headers={"content-type": "text/event-stream", **response_headers},
                stream=_SseBody(self, task, stop_after=event_id, events=events),
            )
        answer = await self._await_handler(task)
        return self._answer(answer, response_headers)

    def _resume(
        self, request: httpx.Request, sid: str | None, pv: str | None, headers: dict[str, str]
    ) -> httpx.Response:
        last = request.headers.get("last-event-id")
        self._record(RecordedRequest("GET", None, None, {"last_event_id": last}, sid, pv, headers))
        if self.use_sessions and (sid is None or sid not in self.sessions):
            return self._unknown_session(None)
        task = self._resumable.pop(last, None) if last is not None else None
        if task is None:  # no standalone server-to-client stream here
            return httpx.Response(405, headers={"allow": "POST, DELETE"})
        return httpx.Response(
            200,
            headers={"content-type": "text/event-stream", "mcp-session-id": sid or ""},
            stream=_SseBody(self, task, resumed=True),
        )

    def _unknown_session(self, rid: Any) -> httpx.Response:
        if self.unknown_session_status != 400:
            return _rpc_error_response(
                self.unknown_session_status, rid, -32001, "Session not found"
            )
        if self.unknown_session_rpc:
            return _rpc_error_response(
                400, None, -32000, "Bad Request: No valid session ID provided"
            )
        return httpx.Response(400, text="Bad Request: unknown session")

    def _answer(self, message: dict[str, Any], headers: dict[str, str]) -> httpx.Response:
        if self.sse:
            return httpx.Response(
                200,
                headers={"content-type": "text/event-stream", **headers},
                stream=_SseBody(self, None, message),
            )
        return httpx.Response(200, json=message, headers=headers)

    async def _await_handler(self, task: asyncio.Task[dict[str, Any]]) -> dict[str, Any]:
        # The handler outlives a client that stops waiting; only `notifications/cancelled`
        # (or aclose/restart) stops it, as with a real server.
        try:
            return await asyncio.shield(task)
        except DropConnection:
            raise httpx.RemoteProtocolError("the server went away without answering") from None
        except asyncio.CancelledError:
            if task.cancelled() and not _cancelling():
                raise httpx.RemoteProtocolError("the server stopped the request") from None
            raise

    async def _notification(
        self, method: str, params: Any, sid: str | None, session: _Session | None
    ) -> None:
        if method == "notifications/initialized" and session is not None:
            session.initialized = True
        elif method == "notifications/cancelled" and isinstance(params, dict):
            request_id = params.get("requestId")
            self.cancelled.append(request_id)
            task = self._inflight.get((sid, request_id))
            if task is not None and not task.done():
                task.cancel()
                # Settle the handler before answering, so a test that saw the 202 also sees
                # the handler stopped (`cancelled_handlers`).
                await asyncio.wait([task])

    def _initialize(self, params: Any) -> tuple[_Session, dict[str, Any]]:
        offered = params.get("protocolVersion") if isinstance(params, dict) else None
        if self.answer_version is not None:
            version = self.answer_version
        elif offered in self.versions:
            version = offered
        else:
            version = self.versions[0]
        session = _Session(uuid.uuid4().hex, version)
        if self.use_sessions:
            self.sessions[session.id] = session
        result: dict[str, Any] = {
            "protocolVersion": version,
            "capabilities": self._capabilities(),
            "serverInfo": self.server_info,
        }
        if self.instructions is not None:
            result["instructions"] = self.instructions
        return session, result

    def _capabilities(self) -> dict[str, Any]:
        if self.capabilities is not None:
            return self.capabilities
        caps: dict[str, Any] = {}
        if self.tools:
            caps["tools"] = {"listChanged": False}
        if self.resources:
            caps["resources"] = {}
        return caps

    # -- the stateless revision --------------------------------------------------------------

    async def _modern_request(
        self, message: dict[str, Any], headers: dict[str, str]
    ) -> httpx.Response:
        """One request of the 2026-07-28 revision: checked the way the revision requires
        (the `_meta` envelope, then the headers against the body, then the version)."""
        method = message.get("method")
        rid = message.get("id")
        params = message.get("params")
        params = params if isinstance(params, dict) else {}
        if rid is None:
            return httpx.Response(202)  # no client notifications in this revision: dropped
        meta = params.get("_meta")
        meta = meta if isinstance(meta, dict) else {}
        missing = [
            k
            for k in (
                "io.modelcontextprotocol/protocolVersion",
                "io.modelcontextprotocol/clientCapabilities",
            )
            if k not in meta
        ]
        if missing:
            return _rpc_error_response(400, rid, -32602, f"Invalid params: _meta lacks {missing}")
        version = meta["io.modelcontextprotocol/protocolVersion"]
        mismatch = _header_mismatch(self, message, params, headers, version)
        if mismatch is not None:
            return _rpc_error_response(400, rid, -32020, f"Header mismatch: {mismatch}")
        if version != MODERN_VERSION:
            return _rpc_error_response(
                400,
                rid,
                -32022,
                "Unsupported protocol version",
                {"supported": [MODERN_VERSION], "requested": version},
            )
        if method == "server/discover":
            result: dict[str, Any] = {
                "resultType": "complete",
                "supportedVersions": [MODERN_VERSION],
                "capabilities": self._capabilities(),
                "_meta": {"io.modelcontextprotocol/serverInfo": self.server_info},
                "ttlMs": 0,
                "cacheScope": "private",
            }
            if self.instructions is not None:
                result["instructions"] = self.instructions
            return self._answer({"jsonrpc": "2.0", "id": rid, "result": result}, {})
        task = asyncio.ensure_future(self._dispatch(str(method), params, rid, modern=True))
        key = (None, rid)
        self._inflight[key] = task
        task.add_done_callback(lambda _t: self._inflight.pop(key, None))
        if self.sse:
            return httpx.Response(
                200,
                headers={"content-type": "text/event-stream"},
                stream=_SseBody(self, task, cancel_on_close=True),
            )
        try:
            answer = await self._await_handler(task)
        except asyncio.CancelledError:
            task.cancel()  # the client closed the request: in this revision, that cancels it
            raise
        error = answer.get("error")
        status = 200
        if isinstance(error, dict):
            statuses = {-32601: 404, -32602: 400, -32600: 400, -32603: 500}
            status = statuses.get(int(error.get("code") or 0), 400)
        return httpx.Response(status, json=answer)

    async def _ask(
        self, events: asyncio.Queue[dict[str, Any]], method: str, params: dict[str, Any]
    ) -> dict[str, Any]:
        """Send a request of ours on the answer's event stream and wait for the client's
        answer (the handshake era)."""
        rid = f"srv-{uuid.uuid4().hex[:8]}"
        waiting: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._asks[rid] = waiting
        await events.put({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        answer = await waiting
        if "error" in answer:
            raise McpRpcError(-32603, f"the client answered {method} with an error: {answer}")
        result = answer.get("result")
        return result if isinstance(result, dict) else {}

    # -- JSON-RPC ----------------------------------------------------------------------------

    async def _dispatch(
        self,
        method: str,
        params: Any,
        rid: Any,
        *,
        events: asyncio.Queue[dict[str, Any]] | None = None,
        modern: bool = False,
    ) -> dict[str, Any]:
        params = params if isinstance(params, dict) else {}
        try:
            if method in self.hold:
                await self.hold[method].wait()
            if method in self.rpc_errors:
                code, text = self.rpc_errors[method]
                raise McpRpcError(code, text)
            if method == "tools/call":
                result = await self._call_tool(params, events, modern)
            else:
                result = await self._result(method, params)
            if modern:
                result.setdefault("resultType", "complete")
        except McpRpcError as exc:
            error: dict[str, Any] = {"code": exc.code, "message": exc.message}
            if exc.data is not None:
                error["data"] = exc.data
            return {"jsonrpc": "2.0", "id": rid, "error": error}
        except asyncio.CancelledError:
            self.cancelled_handlers.append(rid)
            raise
        return {"jsonrpc": "2.0", "id": rid, "result": result}

    async def _result(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == "ping":
            return {}
        if method == "tools/list":
            items = [
                {
                    "name": t["name"],
                    "description": t.get("description", ""),
                    "inputSchema": t.get("input_schema", {"type": "object", "properties": {}}),
                }
                for t in self.tools
            ]
            return self._page(items, "tools", params)
        if method == "tools/call":
            return await self._call_tool(params)
        if method == "resources/list":
            items = []
            for r in self.resources:
                item: dict[str, Any] = {"name": r["name"], "uri": r["uri"]}
                if "description" in r:
                    item["description"] = r["description"]
                if "mime_type" in r:
                    item["mimeType"] = r["mime_type"]
                items.append(item)
            return self._page(items, "resources", params)
        if method == "resources/read":
            return await self._read_resource(params)
        raise McpRpcError(-32601, f"Method not found: {method}")

    def _page(
        self, items: list[dict[str, Any]], key: str, params: dict[str, Any]
    ) -> dict[str, Any]:
        if self.page_size is None:
            return {key: items}
        cursor = params.get("cursor")
        start = 0
        if cursor is not None:
            if not isinstance(cursor, str) or not cursor.startswith("page:"):
                raise McpRpcError(-32602, f"Invalid cursor: {cursor!r}")
            start = int(cursor[5:])
        end = start + self.page_size
        page: dict[str, Any] = {key: items[start:end]}
        if end < len(items):
            page["nextCursor"] = f"page:{end}"
        return page

    async def _call_tool(
        self,
        params: dict[str, Any],
        events: asyncio.Queue[dict[str, Any]] | None = None,
        modern: bool = False,
    ) -> dict[str, Any]:
        name = params.get("name")
        tool = next((t for t in self.tools if t["name"] == name), None)
        if tool is None:
            raise McpRpcError(-32602, f"Unknown tool: {name}")
        arguments = params.get("arguments")
        arguments = arguments if isinstance(arguments, dict) else {}
        run: Any = tool["run"]
        try:
            if _arity(run) >= 2:
                answers = _answers(params) if modern else {}
                value = run(arguments, TestMcpCall(self, events, modern, answers))
            else:
                value = run(arguments)
            if inspect.isawaitable(value):
                value = await value
        except _NeedInput as need:
            # The stateless revision: ask in the result; what was answered so far rides in the
            # request state, since the server keeps nothing between the rounds.
            state = base64.b64encode(json.dumps(need.answers).encode()).decode()
            return {
                "resultType": "input_required",
                "inputRequests": need.requests,
                "requestState": state,
            }
        except (McpRpcError, DropConnection, asyncio.CancelledError):
            raise
        except Exception as exc:
            return {"content": [{"type": "text", "text": str(exc)}], "isError": True}
        if isinstance(value, str):
            return {"content": [{"type": "text", "text": value}]}
        if isinstance(value, dict) and "content" in value:
            return value
        return {"content": [{"type": "text", "text": json.dumps(value)}]}

    async def _read_resource(self, params: dict[str, Any]) -> dict[str, Any]:
        uri = params.get("uri")
        res = next((r for r in self.resources if r["uri"] == uri), None)
        if res is None:
            raise McpRpcError(-32002, f"Resource not found: {uri}")
        if "read" in res:
            try:
                text = res["read"]()
                if inspect.isawaitable(text):
                    text = await text
            except (McpRpcError, DropConnection, asyncio.CancelledError):
                raise
            except Exception as exc:
                raise McpRpcError(-32603, f"Reading {uri} failed: {exc}") from exc
        else:
            text = res.get("text", "")
        content: dict[str, Any] = {"uri": uri, "text": str(text)}
        if "mime_type" in res:
            content["mimeType"] = res["mime_type"]
        return {"contents": [content]}


@dataclass(eq=False)
class _SseBody(httpx.AsyncByteStream):
    """One POST's event stream: optional primer / notification / ping, then the answer."""

    server: TestMcpServer
    task: asyncio.Task[dict[str, Any]] | None
    answer: dict[str, Any] | None = None
    _: KW_ONLY
    stop_after: str | None = None
    resumed: bool = False
    events: asyncio.Queue[dict[str, Any]] | None = None
    cancel_on_close: bool = False

    def _event(self, data: str, event_id: str | None = None) -> str:
        nl = "\r\n" if self.server.crlf else "\n"
        head = f"id: {event_id}{nl}" if event_id is not None else ""
        return f"{head}event: message{nl}data: {data}{nl}{nl}" if data else f"{head}data:{nl}{nl}"

    async def _text(self) -> AsyncIterator[str]:
        server = self.server
        if self.stop_after is not None:
            # An id, a retry hint, and goodbye: the client resumes with GET + Last-Event-ID.
            nl = "\r\n" if server.crlf else "\n"
            yield f"id: {self.stop_after}{nl}retry: 1{nl}data:{nl}{nl}"
            return
        if server.prime and not self.resumed:
            yield self._event("", "0")  # the empty-data primer resumable servers send first
        if server.notify_first and not self.resumed:
            note = {
                "jsonrpc": "2.0",
                "method": "notifications/message",
                "params": {"level": "info", "data": "working on it"},
            }
            yield self._event(json.dumps(note))
        if server.ping_first and not self.resumed:
            ping = {"jsonrpc": "2.0", "id": f"srv-{uuid.uuid4().hex[:8]}", "method": "ping"}
            yield self._event(json.dumps(ping))
        if self.answer is not None:
            answer = self.answer
        else:
            assert self.task is not None
            while self.events is not None and not self.task.done():
                # Requests of ours (an elicitation) go out on this stream while the tool runs.
                asking = asyncio.ensure_future(self.events.get())
                asked = False
                try:
                    await asyncio.wait([asking, self.task], return_when=asyncio.FIRST_COMPLETED)
                    asked = asking.done()
                finally:
                    # A client that abandons the call closes this body mid-wait: the queue
                    # read must not outlive it (a pending task at the loop's end).
                    if not asking.done():
                        asking.cancel()
                if asked:
                    yield self._event(json.dumps(asking.result()))
            try:
                answer = await server._await_handler(self.task)
            except httpx.RemoteProtocolError:
                raise httpx.ReadError("the server went away mid-stream") from None
        yield self._event(json.dumps(answer), "1")

    async def __aiter__(self) -> AsyncIterator[bytes]:
        size = self.server.chunk_size
        async for text in self._text():
            data = text.encode("utf-8")
            if size is None:
                yield data
            else:
                for i in range(0, len(data), size):
                    yield data[i : i + size]

    async def aclose(self) -> None:
        if self.cancel_on_close and self.task is not None and not self.task.done():
            self.task.cancel()  # 2026-07-28: closing the response stream cancels the request


def _answers(params: dict[str, Any]) -> dict[str, Any]:
    """The answers of an input-required round so far: the request state's and the new ones."""
    answers: dict[str, Any] = {}
    state = params.get("requestState")
    if isinstance(state, str):
        try:
            decoded = json.loads(base64.b64decode(state))
        except ValueError as exc:
            raise McpRpcError(-32602, "Invalid params: requestState was tampered with") from exc
        if isinstance(decoded, dict):
            answers.update(decoded)
    given = params.get("inputResponses")
    if isinstance(given, dict):
        answers.update(given)
    return answers


def _arity(fn: Any) -> int:
    try:
        return len(
            [
                p
                for p in inspect.signature(fn).parameters.values()
                if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
                and p.default is inspect.Parameter.empty
            ]
        )
    except (TypeError, ValueError):
        return 1


def _offered(message: dict[str, Any]) -> Any:
    params = message.get("params")
    return params.get("protocolVersion") if isinstance(params, dict) else None


def _decode_header(value: str | None) -> str | None:
    if value is not None and value.startswith("=?base64?") and value.endswith("?="):
        return base64.b64decode(value[9:-2]).decode("utf-8")
    return value


def _header_mismatch(
    server: TestMcpServer,
    message: dict[str, Any],
    params: dict[str, Any],
    headers: dict[str, str],
    version: Any,
) -> str | None:
    """What the request's headers say differently from its body (SEP-2243), if anything."""
    if headers.get("mcp-protocol-version") != version:
        return "MCP-Protocol-Version does not match _meta"
    method = message.get("method")
    if headers.get("mcp-method") != method:
        return f"Mcp-Method {headers.get('mcp-method')!r} is not {method!r}"
    key = _NAMED.get(str(method))
    if key is not None and _decode_header(headers.get("mcp-name")) != params.get(key):
        return f"Mcp-Name {headers.get('mcp-name')!r} is not {params.get(key)!r}"
    if method == "tools/call":
        tool = next((t for t in server.tools if t["name"] == params.get("name")), None)
        schema = tool.get("input_schema", {}) if tool is not None else {}
        arguments = params.get("arguments")
        arguments = arguments if isinstance(arguments, dict) else {}
        for name, spec in (schema.get("properties") or {}).items():
            header = spec.get("x-mcp-header") if isinstance(spec, dict) else None
            if not isinstance(header, str) or arguments.get(name) is None:
                continue
            value = arguments[name]
            text = ("true" if value else "false") if isinstance(value, bool) else str(value)
            got = _decode_header(headers.get(f"mcp-param-{header.lower()}"))
            if got != text:
                return f"Mcp-Param-{header} {got!r} is not {text!r}"
    return None


def _loads(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return None


def _cancelling() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _rpc_error_response(
    status: int, rid: Any, code: int, message: str, data: Any = None
) -> httpx.Response:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return httpx.Response(status, json={"jsonrpc": "2.0", "id": rid, "error": error})


create_test_mcp_server = TestMcpServer
"""An in-process MCP server; pass it as `mcp_server(server.url, transport=server)`. The
options are `TestMcpServer`'s."""
