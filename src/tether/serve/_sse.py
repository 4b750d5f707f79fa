"""Server-sent events as a plain ASGI response.

One task writes the stream, one listens for the client going away, one sends a comment line when
the stream has been quiet for `ping` seconds (proxies close idle connections, and a write is how
a server learns that a client left); the first of the writer and the listener to finish cancels
the others, so a stream whose client disconnected stops reading the store at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import AsyncIterator, Mapping
from typing import Any

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

__all__ = ["EventStream", "sse_message"]

_LINE_BREAK = re.compile("\r\n|\r|\n")
_HEADERS: list[tuple[bytes, bytes]] = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-store"),
    # nginx and friends buffer responses unless told not to; an event stream must not wait.
    (b"x-accel-buffering", b"no"),
]


def sse_message(data: Any, *, event: str | None = None, id: int | str | None = None) -> bytes:
    """One SSE message: `id:`, `event:` and `data:` (the value as one line of JSON; a string
    as it is, one `data:` line per line of it).

    Raises:
        UnicodeEncodeError: a string `data` holding a lone surrogate (a value is escaped).
    """
    parts: list[str] = []
    if id is not None:
        parts.append(f"id: {id}\n")
    if event is not None:
        parts.append(f"event: {event}\n")
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    # SSE ends a line at CR LF, CR or LF and nowhere else: str.splitlines() would also split at
    # U+2028, U+2029, U+0085, form feeds ..., cutting a JSON string in two. JSON never holds a
    # raw CR or LF; a string payload could.
    for line in _LINE_BREAK.split(text):
        parts.append(f"data: {line}\n")
    parts.append("\n")
    try:
        return "".join(parts).encode("utf-8")
    except UnicodeEncodeError:
        if isinstance(data, str):
            raise
        # A lone surrogate (from a \\ud800 escape a model or tool wrote): JSON's own escape
        # keeps it, where UTF-8 has no bytes for it.
        return sse_message(json.dumps(data, ensure_ascii=True), event=event, id=id)


class EventStream(Response):
    """An ASGI response that sends what `messages` yields (encoded SSE messages) as
    `text/event-stream`, with a `retry:` hint first and a comment line after `ping` quiet
    seconds. `messages` is closed however the response ends."""

    def __init__(
        self,
        messages: AsyncIterator[bytes],
        *,
        ping: float = 15.0,
        retry_ms: int = 1000,
        headers: Mapping[str, str] | None = None,
        stopping: asyncio.Event | None = None,
        farewell: bytes = b"",
    ) -> None:
        super().__init__(status_code=200, media_type="text/event-stream")
        self.messages = messages
        self.stopping = stopping
        """Set when the server begins to stop: the stream sends `farewell` and ends."""
        self.farewell = farewell
        self.ping = ping
        self.retry_ms = retry_ms
        self.sse_headers = [*_HEADERS]
        for name, value in (headers or {}).items():
            self.sse_headers.append((name.lower().encode("latin-1"), value.encode("latin-1")))

    async def _stop(self) -> None:
        """Returns once the server begins to stop (never without `stopping`)."""
        await (self.stopping.wait() if self.stopping is not None else asyncio.Future())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        lock = asyncio.Lock()
        quiet = asyncio.Event()
        gone = False

        async def write(body: bytes) -> None:
            nonlocal gone
            async with lock:
                try:
                    await send({"type": "http.response.body", "body": body, "more_body": True})
                except OSError:
                    gone = True
                    raise

        async def produce() -> None:
            await send({"type": "http.response.start", "status": 200, "headers": self.sse_headers})
            await write(f"retry: {self.retry_ms}\n\n".encode("ascii"))
            async for message in self.messages:
                await write(message)
                quiet.clear()

        async def pinger() -> None:
            while True:
                quiet.set()
                await asyncio.sleep(self.ping)
                if quiet.is_set():
                    await write(b": ping\n\n")

        async def listen() -> None:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return

        tasks = [
            asyncio.ensure_future(produce()),
            asyncio.ensure_future(listen()),
            asyncio.ensure_future(self._stop()),
        ]
        ping_task = asyncio.ensure_future(pinger())
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (*tasks, ping_task):
                task.cancel()
            await asyncio.wait([*tasks, ping_task])
            await _close(self.messages)
        producer, stopper = tasks[0], tasks[2]
        if producer in done and not producer.cancelled():
            await _finish(producer.exception(), gone, lock, send)
        elif stopper in done:
            # The producer is stopped by now: the farewell is the stream's last message.
            if self.farewell and not gone:
                with contextlib.suppress(OSError):
                    await write(self.farewell)
            await _finish(None, gone, lock, send)


async def _close(messages: AsyncIterator[bytes]) -> None:
    aclose = getattr(messages, "aclose", None)
    if aclose is not None:
        with contextlib.suppress(Exception):
            await aclose()


async def _finish(error: BaseException | None, gone: bool, lock: asyncio.Lock, send: Send) -> None:
    """After the messages ran out (or the server began to stop): re-raise what broke them
    (unless the client left), else end the body."""
    if error is not None and not gone and not isinstance(error, OSError):
        raise error
    if not gone:
        with contextlib.suppress(OSError):
            async with lock:
                await send({"type": "http.response.body", "body": b"", "more_body": False})
