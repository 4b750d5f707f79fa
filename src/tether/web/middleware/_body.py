"""Request bodies limited in size and in time, as a plain ASGI middleware."""

from __future__ import annotations

import asyncio

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .._errors import ApiError
from .._responses import send_error

__all__ = ["BODY_TIMEOUT", "DEFAULT_MAX_BODY", "BodyLimit"]

DEFAULT_MAX_BODY = 1_048_576
"""Bytes a request body may have (1 MiB): a chat turn, a client message, an AG-UI run input."""
BODY_TIMEOUT = 30.0
"""Seconds a client has to send a whole request body, from the first read of it."""


class _TooLarge(ApiError):
    """Raised from `receive` when the body passes the limit: a handler reading the body lets
    it through as its 413 answer."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, "payload_too_large", f"the request body is larger than {limit} bytes")


class _TooSlow(ApiError):
    def __init__(self, timeout: float) -> None:
        super().__init__(
            408, "request_timeout", f"the request body did not arrive within {timeout:g} s"
        )


class BodyLimit:
    """Answers 413 to a request whose body is larger than `max_bytes`: at once when its
    `Content-Length` says so, else as soon as the bytes read pass it (nothing more is read)."""

    def __init__(
        self, app: ASGIApp, max_bytes: int = DEFAULT_MAX_BODY, *, timeout: float = BODY_TIMEOUT
    ) -> None:
        if max_bytes < 1:
            raise ValueError("max_bytes must be positive")
        if not timeout > 0:
            raise ValueError("timeout must be positive")
        self.app = app
        self.max_bytes = max_bytes
        self.timeout = timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for key, value in scope.get("headers", ()):
            if key == b"content-length" and value.isdigit() and int(value) > self.max_bytes:
                await _refuse(send, _TooLarge(self.max_bytes))
                return
        body = _Body(receive, self.max_bytes, self.timeout)
        started = False

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, body.receive, tracking_send)
        except (_TooLarge, _TooSlow) as exc:
            if not started:
                await _refuse(send, exc)


class _Body:
    """`receive` for the app: the body counted and timed until it is complete."""

    def __init__(self, receive: Receive, max_bytes: int, timeout: float) -> None:
        self._receive = receive
        self.max_bytes = max_bytes
        self.timeout = timeout
        self.seen = 0
        self.complete = False
        self.deadline: float | None = None

    async def receive(self) -> Message:
        if self.complete:
            return await self._receive()  # the body is in: what follows is the disconnect
        if self.deadline is None:
            self.deadline = asyncio.get_running_loop().time() + self.timeout
        # asyncio.timeout, not wait_for: wait_for may swallow a cancellation that meets a
        # message already there (the SSE response's listener would then wait forever).
        try:
            async with asyncio.timeout_at(self.deadline):
                message = await self._receive()
        except TimeoutError:
            raise _TooSlow(self.timeout) from None
        if message["type"] != "http.request":
            self.complete = True
            return message
        self.seen += len(message.get("body", b""))
        if self.seen > self.max_bytes:
            raise _TooLarge(self.max_bytes)
        self.complete = not message.get("more_body", False)
        return message


async def _refuse(send: Send, error: ApiError) -> None:
    await send_error(send, error.status, error.kind, error.message, [(b"connection", b"close")])
