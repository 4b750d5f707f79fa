"""NUL in a request's path or query string, refused before any handler: a plain ASGI middleware.

No id or filter holds NUL, and PostgreSQL's text cannot: a lookup by such an id would fail in
the store (a 500) instead of answering "no such run". So it is a 400 here, on every backend.
"""

from __future__ import annotations

from urllib.parse import unquote_to_bytes

from starlette.types import ASGIApp, Receive, Scope, Send

from .._responses import send_error

__all__ = ["NulRefusal"]


class NulRefusal:
    """Answers 400 to an HTTP request whose path or query string holds NUL (raw or `%00`)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            raw = scope.get("raw_path") or scope.get("path", "").encode("utf-8", "replace")
            query = scope.get("query_string", b"")
            if b"\x00" in unquote_to_bytes(raw) + unquote_to_bytes(query.replace(b"+", b" ")):
                await send_error(
                    send,
                    400,
                    "bad_request",
                    "the request's path or query holds NUL (%00), which no id or filter may hold",
                )
                return
        await self.app(scope, receive, send)
