"""A small answer leaves the guarded HTTP protocol in one socket write (head and body
together), and an event stream's head does not wait for its first event."""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.server import ServerState

from tether.web import GuardedConfig, GuardedH11Protocol


class Socket(asyncio.Transport):
    """A transport that notes each write (one write is one send on a real socket)."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []
        self.closing = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"sockname": ("127.0.0.1", 8000), "peername": ("127.0.0.1", 5000)}.get(name, default)

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if data:
            self.writes.append(bytes(data))

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.closing = True

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


async def small(scope: Any, receive: Any, send: Any) -> None:
    headers = [(b"content-type", b"application/json"), (b"content-length", b"15")]
    await send({"type": "http.response.start", "status": 202, "headers": headers})
    await send({"type": "http.response.body", "body": b'{"run_id":"r1"}'})


async def stream(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await asyncio.sleep(0.05)  # the first event is a while in coming
    await send({"type": "http.response.body", "body": b"data: 1\n\n", "more_body": True})
    await send({"type": "http.response.body", "body": b""})


async def serve(app: Any, wait: float) -> Socket:
    config = GuardedConfig(app, lifespan="off", access_log=False)
    config.load()
    protocol = GuardedH11Protocol(config, ServerState(), {})
    socket = Socket()
    protocol.connection_made(socket)
    protocol.data_received(b"POST /runs HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
    await asyncio.sleep(wait)
    protocol.connection_lost(None)
    return socket


def test_a_small_answer_is_one_write() -> None:
    socket = asyncio.run(serve(small, 0.05))
    assert len(socket.writes) == 1
    assert socket.writes[0].startswith(b"HTTP/1.1 202 ")
    assert socket.writes[0].endswith(b'\r\n\r\n{"run_id":"r1"}')


def test_a_streams_head_goes_before_its_first_event() -> None:
    socket = asyncio.run(serve(stream, 0.2))
    assert socket.writes[0].startswith(b"HTTP/1.1 200 ")
    assert socket.writes[0].endswith(b"\r\n\r\n")
    assert b"data: 1" in socket.writes[1]
