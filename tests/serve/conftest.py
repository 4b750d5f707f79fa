"""A real `tether serve` process for the serve tests: a project on disk, the command started
once per module on a free loopback port, and an SSE reader for its streams."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from starlette.applications import Starlette

HERE = Path(__file__).resolve().parent
LINE_END = re.compile("\r\n|\r|\n")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def write_project(root: Path) -> Path:
    """A project directory whose tether.toml lists the test project's agents and workflows."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "project_app.py").write_text(
        (HERE / "project_app.py").read_text(encoding="utf-8"), encoding="utf-8"
    )
    (root / "tether.toml").write_text(
        'runtime = "project_app:runtime"\n'
        'agents = ["project_app:chat"]\n'
        'workflows = ["project_app:pipeline"]\n',
        encoding="utf-8",
    )
    return root


@contextlib.asynccontextmanager
async def asgi_client(app: Starlette) -> AsyncIterator[httpx.AsyncClient]:
    """A client of `app` in this process, inside the app's lifespan."""
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
            yield http


@dataclass
class Server:
    """A `tether serve` process."""

    process: subprocess.Popen[bytes]
    base: str
    log: Path
    headers: dict[str, str] = field(default_factory=dict)

    def client(self, **kwargs: Any) -> httpx.Client:
        return httpx.Client(base_url=self.base, headers=self.headers, timeout=30, **kwargs)

    def kill(self) -> None:
        """SIGKILL: the process dies mid-whatever, as in a crash or power loss."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.kill()


def start_server(
    project: Path,
    env: dict[str, str],
    args: Sequence[str] = (),
    *,
    host: str = "127.0.0.1",
    port: int | None = None,
    headers: dict[str, str] | None = None,
    wait_for: str = "/api/runs",
    command: str = "serve",
    launcher: str = "from tether.cli import main; main()",
) -> Server:
    """`tether serve` (or `command`: ``"ui"``) on the project, once it answers `wait_for`
    (`launcher`: the Python code that runs the CLI, e.g. under a profiler)."""
    port = port or free_port()
    log = project / f"server-{port}.log"
    argv = [
        sys.executable,
        "-c",
        launcher,
        "--config",
        str(project / "tether.toml"),
        command,
        "--host",
        host,
        "--port",
        str(port),
        *args,
    ]
    with log.open("wb") as out:
        process = subprocess.Popen(
            argv, cwd=project, env={**os.environ, **env}, stdout=out, stderr=subprocess.STDOUT
        )
    server = Server(process, f"http://127.0.0.1:{port}", log, dict(headers or {}))
    deadline = time.monotonic() + 30
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited: {log.read_text(errors='replace')}")
        try:
            httpx.get(server.base + wait_for, headers=server.headers, timeout=2)
            return server
        except httpx.TransportError:
            if time.monotonic() > deadline:
                server.kill()
                raise RuntimeError(f"the server did not start: {log.read_text()}") from None
            time.sleep(0.1)


@dataclass
class Message:
    """One SSE message."""

    event: str
    data: Any
    id: int | None


def sse_lines(chunks: Iterable[str]) -> Iterator[str]:
    """The lines of an event stream as the SSE spec reads them: ended by CR LF, CR or LF and
    nothing else (httpx's `iter_lines` is `str.splitlines`, which also ends one at U+2028 ...)."""
    pending = ""
    for chunk in chunks:
        pending += chunk
        while True:
            match = LINE_END.search(pending)
            # A CR at the very end may be the first half of a CR LF.
            if match is None or (match.group() == "\r" and match.end() == len(pending)):
                break
            yield pending[: match.start()]
            pending = pending[match.end() :]
    if pending:
        yield pending.removesuffix("\r")


def parse_sse(lines: Iterable[str]) -> Iterator[tuple[str, str, str | None]]:
    """(event, data, id) of each message, by the SSE spec's field rules."""
    event: str | None = None
    data: list[str] = []
    ident: str | None = None
    for line in lines:
        if line == "":
            if data:
                yield event or "message", "\n".join(data), ident
            event, data, ident = None, [], None
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            data.append(value)
        elif name == "event":
            event = value
        elif name == "id":
            ident = value


def read_sse(response: httpx.Response) -> Iterator[Message]:
    """The messages of an event stream as they arrive (comments and `retry:` skipped)."""
    for event, data, ident in parse_sse(sse_lines(response.iter_text())):
        yield Message(event, json.loads(data), int(ident) if ident else None)


def stream_all(
    client: httpx.Client, run_id: str, *, after: int | None = None, last_id: int | None = None
) -> list[Message]:
    """Every message of a run's stream up to its end."""
    headers = {"Last-Event-ID": str(last_id)} if last_id is not None else {}
    params = {"after": str(after)} if after is not None else {}
    with client.stream(
        "GET", f"/api/runs/{run_id}/stream", headers=headers, params=params
    ) as response:
        assert response.status_code == 200, response.read()
        return list(read_sse(response))
