"""The JSON-RPC layer both transports share: versions, message shapes, and the internal errors a
transport raises (mapped to `McpConnectionError` / `McpCallError` by the client, never leaked)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextvars import ContextVar
from typing import Any, Final, Protocol, TypeAlias, TypeGuard

__all__ = [
    "DEFAULT_MCP_TIMEOUT_MS",
    "HANDSHAKE_VERSIONS",
    "LATEST_PROTOCOL_VERSION",
    "MODERN_VERSION",
    "PROTOCOL_VERSIONS",
    "Channel",
    "ChannelError",
    "JsonObject",
    "RpcError",
    "ServerRequestHandler",
    "SessionLost",
    "content_text",
    "method_not_found",
    "parse_message",
    "paused_clock",
    "request_clock",
]

JsonObject: TypeAlias = dict[str, Any]

MODERN_VERSION: Final[str] = "2026-07-28"
"""The stateless revision: no `initialize`, no session; every request carries its protocol
version, client info and capabilities in `_meta` (and, over HTTP, in headers)."""

HANDSHAKE_VERSIONS: Final[tuple[str, ...]] = (
    "2025-11-25",
    "2025-06-18",
    "2025-03-26",
    "2024-11-05",
)
"""The revisions of the `initialize`-handshake era, newest first: we offer the first when a
server does not speak the stateless revision, and accept any of them."""

PROTOCOL_VERSIONS: Final[tuple[str, ...]] = (MODERN_VERSION, *HANDSHAKE_VERSIONS)
"""Every revision tether speaks, newest first. It speaks 2026-07-28 first and falls back to the
`initialize` handshake for a server that does not."""

LATEST_PROTOCOL_VERSION: Final[str] = MODERN_VERSION

HEADER_VERSIONS: Final[frozenset[str]] = frozenset({"2025-11-25", "2025-06-18"})
"""Handshake revisions whose HTTP transport requires the `mcp-protocol-version` header after
initialize (the stateless revision requires it on every request)."""

DEFAULT_MCP_TIMEOUT_MS: Final[int] = 60_000
"""Per round trip, covering the request and the wait for an SSE answer. Generous because the
slowest legitimate answer is a tool that thinks."""

META_PROTOCOL_VERSION: Final[str] = "io.modelcontextprotocol/protocolVersion"
META_CLIENT_INFO: Final[str] = "io.modelcontextprotocol/clientInfo"
META_CLIENT_CAPABILITIES: Final[str] = "io.modelcontextprotocol/clientCapabilities"
META_SERVER_INFO: Final[str] = "io.modelcontextprotocol/serverInfo"

HEADER_MISMATCH: Final[int] = -32020
MISSING_CAPABILITY: Final[int] = -32021
UNSUPPORTED_VERSION: Final[int] = -32022
MODERN_ERRORS: Final[frozenset[int]] = frozenset(
    {HEADER_MISMATCH, MISSING_CAPABILITY, UNSUPPORTED_VERSION}
)
"""Error codes only a server of the stateless era answers: positive evidence of its era."""

NAMED_METHODS: Final[dict[str, str]] = {
    "tools/call": "name",
    "prompts/get": "name",
    "resources/read": "uri",
}
"""Methods whose request names its target (mirrored into `Mcp-Name`), and which may answer
with an input-required result (multi round-trip requests, SEP-2322)."""

ServerRequestHandler: TypeAlias = Callable[[JsonObject], Awaitable[JsonObject]]
"""Answers a request the server sends us (handshake era), returning the JSON-RPC response."""


class ChannelError(Exception):
    """The transport failed: unreachable, an error status, a body that is not JSON-RPC, a child
    process that could not start."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class SessionLost(ChannelError):
    """The server no longer knows the session and did not act on the request (HTTP 404/400 on
    a session id, or a child process that had already ended), so resending it after a reconnect
    is safe. A session lost while a request was in flight is a plain `ChannelError` for that
    request (it may have run) and marks the channel `lost` for the next one."""


class RpcError(Exception):
    """The server answered a request with a JSON-RPC error."""

    def __init__(self, code: Any, message: str, data: Any = None) -> None:
        super().__init__(f"{message} (JSON-RPC error {code})")
        self.code = code
        self.message = message
        self.data = data


class Channel(Protocol):
    """One connection's wire: streamable HTTP or a child's stdio."""

    lost: bool
    """True once the server has dropped the session; the client reconnects before the next use."""
    protocol_version: str | None
    """The revision this channel speaks: `MODERN_VERSION`, a negotiated handshake revision, or
    None before either."""

    @property
    def cancels_by_closing(self) -> bool:
        """Whether closing a request's response stream cancels it (HTTP in the stateless
        revision), so no `notifications/cancelled` is sent."""
        ...

    async def open(self) -> None: ...

    async def request(
        self, message: JsonObject, headers: Mapping[str, str] | None = None
    ) -> JsonObject:
        """Send a request and return the server's response message (result or error).
        `headers` are extra HTTP headers for this request (ignored by stdio)."""
        ...

    async def notify(self, message: JsonObject) -> None: ...

    async def listen(self) -> None:
        """Open the server-to-client stream of the handshake era, where the transport has one."""
        ...

    def silence(self) -> str | None:
        """What explains a server that has not answered (None when nothing does)."""
        ...

    async def aclose(self) -> None: ...


def parse_message(raw: str | bytes) -> Any:
    """Parse one JSON-RPC message (or batch); None when the text is not JSON."""
    try:
        return json.loads(raw)
    except ValueError:
        return None


def is_response_to(message: Any, request_id: Any) -> TypeGuard[JsonObject]:
    return (
        isinstance(message, dict)
        and "method" not in message
        and ("result" in message or "error" in message)
        and message.get("id") == request_id
    )


def method_not_found(message: JsonObject) -> JsonObject:
    """The JSON-RPC answer to a request we do not serve."""
    return {
        "jsonrpc": "2.0",
        "id": message.get("id"),
        "error": {"code": -32601, "message": f"Method not found: {message.get('method')}"},
    }


def is_server_request(message: Any) -> bool:
    return isinstance(message, dict) and "method" in message and "id" in message


def is_notification(message: Any) -> bool:
    return isinstance(message, dict) and "method" in message and "id" not in message


def content_text(items: Any) -> str:
    """Flatten tool-result content (or resource contents) to the text the model reads.

    Text passes through as is; binary parts are described, not inlined, since a base64 blob is
    noise to a model and can be enormous.
    """
    if not isinstance(items, list):
        return ""
    out: list[str] = []
    for item in items:
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if "text" in item and isinstance(item["text"], str) and kind in (None, "text"):
            out.append(item["text"])
        elif kind == "resource" and isinstance(item.get("resource"), dict):
            out.append(content_text([item["resource"]]))
        elif kind == "resource_link":
            out.append(f"[resource link: {item.get('name') or ''} {item.get('uri') or ''}]")
        elif "blob" in item or "data" in item:
            data = item.get("blob") or item.get("data") or ""
            what = kind or "binary"
            mime = item.get("mimeType") or "unknown type"
            out.append(f"[{what} content: {mime}, {len(data)} base64 characters]")
    return "\n".join(out)


_CLOCK: ContextVar[asyncio.Timeout | None] = ContextVar("tether_mcp_request_clock", default=None)


@contextlib.asynccontextmanager
async def request_clock(seconds: float | None) -> AsyncIterator[None]:
    """`asyncio.timeout(seconds)` for one round trip, which `paused_clock()` can stop while a
    person is at work (logging in, answering an elicitation)."""
    async with asyncio.timeout(seconds) as clock:
        token = _CLOCK.set(clock)
        try:
            yield
        finally:
            _CLOCK.reset(token)


@contextlib.asynccontextmanager
async def paused_clock() -> AsyncIterator[None]:
    """Stop the deadline of the round trip in progress (if any) for the duration: a login in
    the browser or an answer from a person takes as long as it takes; the rest of the round
    trip keeps what was left of its budget."""
    clock = _CLOCK.get()
    when = clock.when() if clock is not None else None
    if clock is None or when is None:
        yield
        return
    loop = asyncio.get_running_loop()
    left = when - loop.time()
    try:
        clock.reschedule(None)
    except RuntimeError:  # the round trip already ended
        yield
        return
    try:
        yield
    finally:
        with contextlib.suppress(RuntimeError):
            if not clock.expired():
                clock.reschedule(loop.time() + max(left, 0.0))
