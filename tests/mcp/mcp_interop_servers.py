"""Run the interop app (tests/mcp/mcp_interop_app.py) for real: uvicorn on 127.0.0.1 in a thread,
or a child process over stdio.

The SDK serves both protocol eras. For the handshake era alone (a server that predates
2026-07-28) it is put behind a shim: over HTTP, a request that claims 2026-07-28 in its header
loses that header, so the SDK's own session-era path answers it (a 400 "Missing session ID");
over stdio, `mcp_legacy_stdio_proxy.py` answers `server/discover` with "method not found", as a
server of that era does, and passes everything else through."""

from __future__ import annotations

import asyncio
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

import uvicorn
from mcp_interop_app import build_app

APP_SCRIPT = Path(__file__).with_name("mcp_interop_app.py")
STDIO_COMMAND = (sys.executable, [str(APP_SCRIPT)])
LEGACY_STDIO_COMMAND = (
    sys.executable,
    [str(Path(__file__).with_name("mcp_legacy_stdio_proxy.py")), str(APP_SCRIPT)],
)


def handshake_era_only(app: Any) -> Any:
    """The ASGI app as a server of the handshake era sees the stateless revision's requests."""

    async def shim(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = [
                (k, v)
                for k, v in scope["headers"]
                if not (k == b"mcp-protocol-version" and v == b"2026-07-28")
            ]
            scope = {**scope, "headers": headers}
        await app(scope, receive, send)

    return shim


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class HttpAppServer:
    """The SDK app over streamable HTTP on 127.0.0.1:<port>. `restart()` replaces it with a
    fresh process-like instance (new app, no sessions) on the same port."""

    def __init__(self, *, json_response: bool = False, legacy: bool = False) -> None:
        self.port = free_port()
        self.json_response = json_response
        self.legacy = legacy
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        app = build_app().streamable_http_app(json_response=self.json_response)
        if self.legacy:
            app = handshake_era_only(app)
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
