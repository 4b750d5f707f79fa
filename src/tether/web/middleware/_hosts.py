"""The Host allow-list, as a plain ASGI middleware.

A request whose `Host` header is not one the server was started for gets 400. Without it, a
page on another site can point its own host name at 127.0.0.1 (DNS rebinding) and read every
answer of a server on loopback as same-origin.
"""

from __future__ import annotations

from collections.abc import Iterable

from starlette.types import ASGIApp, Receive, Scope, Send

from .._hostnames import host_name
from .._responses import send_plain
from ._scope import header

__all__ = ["HostAllowList"]


class HostAllowList:
    """Answers 400 to HTTP and WebSocket requests whose `Host` is not in `allowed`."""

    def __init__(self, app: ASGIApp, allowed: Iterable[str]) -> None:
        self.app = app
        self.allowed = frozenset(host_name(h) for h in allowed)
        self.any = "*" in self.allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or self.any:
            await self.app(scope, receive, send)
            return
        host = header(scope, b"host")
        if host is not None and host_name(host) in self.allowed:
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        shown = (host or "(none)")[:200]
        await send_plain(
            send,
            400,
            f"Host {shown!r} is not served here. Open the server by a name it was started "
            "for, or restart it with --allowed-host NAME.\n",
        )
