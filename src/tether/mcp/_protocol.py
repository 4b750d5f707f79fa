"""The JSON-RPC layer both transports share: versions, message shapes, and the internal errors a
transport raises (mapped to `McpConnectionError` / `McpCallError` by the client, never leaked)."""

from __future__ import annotations

import json
from typing import Any, Final, Protocol, TypeAlias

__all__ = [
    "DEFAULT_MCP_TIMEOUT_MS",
    "LATEST_PROTOCOL_VERSION",
    "PROTOCOL_VERSIONS",
    "Channel",
    "ChannelError",
    "JsonObject",
    "RpcError",
    "SessionLost",
    "answer_server_request",
    "content_text",
    "parse_message",
]

JsonObject: TypeAlias = dict[str, Any]

PROTOCOL_VERSIONS: Final[tuple[str, ...]] = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
"""The revisions of the initialize-handshake era we speak, newest first. We offer the first and
accept any of them; a server that answers anything else is refused at connect. (2026-07-28, the
stateless revision without `initialize`, is not spoken: such a server still negotiates one of
these when offered `initialize`.)"""

LATEST_PROTOCOL_VERSION: Final[str] = PROTOCOL_VERSIONS[0]

HEADER_VERSIONS: Final[frozenset[str]] = frozenset({"2025-11-25", "2025-06-18"})
"""Revisions whose HTTP transport requires the `mcp-protocol-version` header after initialize."""

DEFAULT_MCP_TIMEOUT_MS: Final[int] = 60_000
"""Per round trip, covering the request and the wait for an SSE answer. Generous because the
slowest legitimate answer is a tool that thinks."""


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
    """One session's wire: streamable HTTP or a child's stdio."""

    lost: bool
    """True once the server has dropped the session; the client reconnects before the next use."""
    protocol_version: str | None

    async def open(self) -> None: ...

    async def request(self, message: JsonObject) -> JsonObject:
        """Send a request and return the server's response message (result or error)."""
        ...

    async def notify(self, message: JsonObject) -> None: ...

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


def is_response_to(message: Any, request_id: Any) -> bool:
    return (
        isinstance(message, dict)
        and "method" not in message
        and ("result" in message or "error" in message)
        and message.get("id") == request_id
    )


def answer_server_request(message: JsonObject) -> JsonObject:
    """Our reply to a request the server sends us. We declare no client capabilities, so `ping`
    is the only one we serve."""
    if message.get("method") == "ping":
        return {"jsonrpc": "2.0", "id": message.get("id"), "result": {}}
    return {
        "jsonrpc": "2.0",
        "id": message.get("id"),
        "error": {"code": -32601, "message": f"Method not found: {message.get('method')}"},
    }


def is_server_request(message: Any) -> bool:
    return isinstance(message, dict) and "method" in message and "id" in message


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
