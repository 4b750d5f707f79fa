"""Run the interop app (tests/mcp/mcp_interop_app.py) for real: uvicorn on 127.0.0.1 in a thread,
or a child process over stdio."""

from __future__ import annotations

import asyncio
import socket
import sys
import threading
import time
from pathlib import Path

import uvicorn
from mcp_interop_app import build_app

APP_SCRIPT = Path(__file__).with_name("mcp_interop_app.py")
STDIO_COMMAND = (sys.executable, [str(APP_SCRIPT)])


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class HttpAppServer:
    """The SDK app over streamable HTTP on 127.0.0.1:<port>. `restart()` replaces it with a
    fresh process-like instance (new app, no sessions) on the same port."""

    def __init__(self, *, json_response: bool = False) -> None:
        self.port = free_port()
        self.json_response = json_response
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        app = build_app().streamable_http_app(json_response=self.json_response)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self.port))
        config = uvicorn.Config(
            app, log_level="warning", lifespan="on", timeout_graceful_shutdown=2
        )
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
        thread.start()
        deadline = time.monotonic() + 15
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the interop HTTP server did not start")
            time.sleep(0.01)
        self._server, self._thread = server, thread

    def stop(self) -> None:
        server, thread = self._server, self._thread
        self._server = self._thread = None
        if server is not None and thread is not None:
            server.should_exit = True
            thread.join(15)

    async def astart(self) -> None:
        await asyncio.to_thread(self.start)

    async def astop(self) -> None:
        await asyncio.to_thread(self.stop)

    async def arestart(self) -> None:
        await self.astop()
        await self.astart()
