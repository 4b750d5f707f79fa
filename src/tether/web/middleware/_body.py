"""Request bodies limited in size, as a plain ASGI middleware."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .._errors import ApiError
from .._responses import send_error

__all__ = ["DEFAULT_MAX_BODY", "BodyLimit"]

DEFAULT_MAX_BODY = 1_048_576
"""Bytes a request body may have (1 MiB): a chat turn, a client message, an AG-UI run input."""


class _TooLarge(ApiError):
    """Raised from `receive` when the body passes the limit: a handler reading the body lets
    it through as its 413 answer."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, "payload_too_large", f"the request body is larger than {limit} bytes")


class BodyLimit:
    """Answers 413 to a request whose body is larger than `max_bytes`: at once when its
    `Content-Length` says so, else as soon as the bytes read pass it (nothing more is read)."""

    def __init__(self, app: ASGIApp, max_bytes: int = DEFAULT_MAX_BODY) -> None:
        if max_bytes < 1:
            raise ValueError("max_bytes must be positive")
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for key, value in scope.get("headers", ()):
            if key == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = 0
                if declared > self.max_bytes:
                    await self._refuse(send)
                    return
        seen = 0
        started = False

        async def limited_receive() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise _TooLarge(self.max_bytes)
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except _TooLarge:
            if not started:
                await self._refuse(send)

    async def _refuse(self, send: Send) -> None:
        await send_error(
            send,
            413,
            "payload_too_large",
            f"the request body is larger than {self.max_bytes} bytes",
            [(b"connection", b"close")],
        )
