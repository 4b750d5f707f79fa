"""A real HTTP/1.1 server on 127.0.0.1 for the adapter tests, and helpers to drive adapters.

The server is a small asyncio one rather than a framework so a test can script exactly what goes
on the wire: a status with headers, a body sent in chosen pieces (chunked encoding), a connection
cut mid-body, or a response held open until the client hangs up.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import tether.llm._retries
from tether import Agent, AgentEvent, Session, create_agent, define_tool, prompt_layer, reduce
from tether._json import dumps
from tether._sse import SSEDecoder
from tether.errors import LLMError
from tether.events import Part
from tether.llm._adapter import StreamParser, end_of_stream
from tether.llm.base import ChatRequest, FinishChunk, LLMClient, StreamChunk

_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 408: "Timeout"}


@dataclass
class Reply:
    """What the server answers to one request."""

    status: int = 200
    body: bytes | Sequence[bytes] = b""
    """The body, or the pieces to send it in (each written and drained on its own)."""
    headers: dict[str, str] = field(default_factory=dict)
    cut: bool = False
    """Close the connection after the pieces, without ending the chunked body."""
    hold: bool = False
    """After the pieces, keep the response open until the client closes the connection."""
    silent: bool = False
    """Read the request and answer nothing at all (not even a status line) until the client
    hangs up."""
    pace: float = 0.0
    """Seconds to wait after each piece."""
    keepalive: bytes = b""
    """After the pieces, send this every `every` seconds until the client hangs up."""
    every: float = 0.05


@dataclass
class Seen:
    """One request the server received."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


Handler = Callable[[Seen], Reply | Awaitable[Reply]]


class WireServer:
    """Answers queued `Reply`s in order, or asks `handler`; records every request in `requests`."""

    def __init__(self) -> None:
        self.requests: list[Seen] = []
        self.handler: Handler | None = None
        self.disconnects = 0
        self.connections = 0
        """Connections accepted so far."""
        self.disconnected = asyncio.Event()
        self._queue: list[Reply] = []
        self._server: asyncio.Server | None = None
        self._open: dict[asyncio.Task[None], asyncio.StreamWriter] = {}
        self.url = ""

    def reply(self, *replies: Reply) -> None:
        self._queue.extend(replies)

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._connection, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        # Closing the sockets ends each connection's read loop; cancelling the handler tasks
        # instead would make asyncio log their CancelledError.
        for writer in list(self._open.values()):
            writer.close()
        await asyncio.gather(*self._open, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    async def _next(self, seen: Seen) -> Reply:
        if self._queue:
            return self._queue.pop(0)
        if self.handler is not None:
            reply = self.handler(seen)
            if inspect.isawaitable(reply):
                reply = await reply
            return reply
        return Reply(500, b'{"error": {"message": "the test queued no reply"}}')

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._open[task] = writer
        self.connections += 1
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                headers: dict[str, str] = {}
                for line in lines[1:]:
                    if line:
                        name, value = line.split(":", 1)
                        headers[name.strip().lower()] = value.strip()
                size = int(headers.get("content-length", "0"))
                body = await reader.readexactly(size) if size else b""
                seen = Seen(method, path, headers, body)
                self.requests.append(seen)
                if not await self._send(await self._next(seen), reader, writer):
                    return
        finally:
            self._open.pop(task, None)
            writer.close()
            with suppress(Exception):
                await writer.wait_closed()

    async def _until_hangup(self, reader: asyncio.StreamReader) -> None:
        with suppress(ConnectionError):
            while await reader.read(1024):
                pass
        self.disconnects += 1
        self.disconnected.set()

    async def _send(
        self, reply: Reply, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> bool:
        if reply.silent:
            await self._until_hangup(reader)
            return False
        kind = "text/event-stream" if reply.status < 300 else "application/json"
        head = [f"HTTP/1.1 {reply.status} {_REASONS.get(reply.status, 'Status')}"]
        headers = {"content-type": kind, "transfer-encoding": "chunked", **reply.headers}
        head.extend(f"{k}: {v}" for k, v in headers.items())
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
        pieces = [reply.body] if isinstance(reply.body, bytes) else list(reply.body)
        for piece in pieces:
            if piece:
                writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                await writer.drain()
                if reply.pace:
                    await asyncio.sleep(reply.pace)
        if reply.cut:
            await writer.drain()
            return False
        if reply.hold:
            await writer.drain()
            await self._until_hangup(reader)
            return False
        if reply.keepalive:
            hangup = asyncio.ensure_future(self._until_hangup(reader))
            try:
                while not hangup.done():
                    writer.write(b"%x\r\n%s\r\n" % (len(reply.keepalive), reply.keepalive))
                    with suppress(ConnectionError):
                        await writer.drain()
                    await asyncio.wait([hangup], timeout=reply.every)
            finally:
                hangup.cancel()
            return False
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return True


@pytest.fixture
async def wire() -> AsyncIterator[WireServer]:
    server = WireServer()
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


class Sleeps:
    """An injected `sleep` that records the waits instead of waiting."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> Sleeps:
    """Records retry waits instead of waiting: for adapters given it as `sleep`, and for those
    built from a model config (which takes no `sleep`)."""
    recorder = Sleeps()
    monkeypatch.setattr(tether.llm._retries, "_sleep", recorder)
    return recorder


# -- running a client ------------------------------------------------------------------------


@dataclass
class Outcome:
    """Everything one `chat()` produced, in a shape tests compare."""

    chunks: list[StreamChunk] = field(default_factory=list)
    finish: FinishChunk | None = None
    error: LLMError | None = None

    @property
    def text(self) -> str:
        return "".join(c["text"] for c in self.chunks if c["type"] == "text")

    @property
    def thinking(self) -> str:
        return "".join(c["text"] for c in self.chunks if c["type"] == "thinking")

    def partials(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for c in self.chunks:
            if c["type"] == "tool_input_delta":
                out[c["id"]] = out.get(c["id"], "") + c["partial"]
        return out

    @property
    def content(self) -> list[Part]:
        assert self.finish is not None, self.error
        return self.finish["content"]

    def parts(self, kind: str) -> list[Any]:
        return [p for p in self.content if p["type"] == kind]


async def run_chat(client: LLMClient, request: ChatRequest) -> Outcome:
    out = Outcome()
    try:
        async for chunk in client.chat(request):
            assert out.finish is None, "a chunk after finish"
            if chunk["type"] == "finish":
                out.finish = chunk
            else:
                out.chunks.append(chunk)
    except LLMError as exc:
        out.error = exc
    return out


def simple_request(model: str = "m", text: str = "hi") -> ChatRequest:
    return {
        "model": model,
        "system": [{"type": "text", "text": "Be brief."}],
        "messages": [{"role": "user", "content": [{"type": "text", "text": text}]}],
    }


def sse(*events: tuple[str | None, Any]) -> bytes:
    """SSE bytes for (event name or None, JSON-able data or a raw string) pairs."""
    out = []
    for name, data in events:
        text = data if isinstance(data, str) else json.dumps(data)
        out.append((f"event: {name}\n" if name else "") + f"data: {text}\n\n")
    return "".join(out).encode()


# -- the recorded wire fixtures ---------------------------------------------------------------


def _root_conftest(config: pytest.Config) -> ModuleType:
    target = (Path(__file__).resolve().parents[1] / "conftest.py").resolve()
    for plugin in config.pluginmanager.get_plugins():
        file = getattr(plugin, "__file__", None)
        if isinstance(plugin, ModuleType) and file and Path(file).resolve() == target:
            return plugin
    raise RuntimeError(f"{target} is not loaded as a conftest")


OWN_FIXTURES = Path(__file__).parent / "wire"
"""The project's own wire fixtures: stream bodies written from each API's public reference (see
the README beside them), so a clone without ../shared tests every adapter."""


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """`wire_case` parametrizes a test over the `.sse` files of the API named by the module's
    `API` (or over all of them): the project's own (`tests/llm/wire/`), then the shared recorded
    corpus (../shared, a second and larger check); where ../shared is absent it adds one case
    that skips, saying so."""
    if "wire_case" not in metafunc.fixturenames:
        return
    root: Path = _root_conftest(metafunc.config).FIXTURES
    api = getattr(metafunc.module, "API", None)
    pattern = f"{api}/*.sse" if api else "*/*.sse"
    own = sorted(OWN_FIXTURES.glob(pattern))
    shared = sorted(root.glob(pattern)) if root.is_dir() else []
    cases: list[Path | None] = [*own, *shared]
    ids = [f"own/{p.parent.name}/{p.stem}" for p in own]
    ids += [f"shared/{p.parent.name}/{p.stem}" for p in shared]
    if not shared:
        cases.append(None)
        ids.append("shared-fixtures-missing")
    metafunc.parametrize("wire_case", cases, ids=ids)


@dataclass
class WireCase:
    path: Path
    sse: bytes
    expected: dict[str, Any]

    @property
    def name(self) -> str:
        return self.path.stem


@pytest.fixture
def case(wire_case: Path | None, pytestconfig: pytest.Config) -> WireCase:
    """The case, read where it lies (the shared one skips when ../shared is absent)."""
    if wire_case is None:
        _root_conftest(pytestconfig).provider_fixtures()  # skips, naming where it looked
        raise AssertionError("the shared fixtures are missing but did not skip")
    shared: Path = _root_conftest(pytestconfig).FIXTURES
    assert wire_case.is_relative_to(OWN_FIXTURES) or wire_case.is_relative_to(shared)
    expected = json.loads(wire_case.with_name(wire_case.stem + ".expected.json").read_text())
    return WireCase(wire_case, wire_case.read_bytes(), expected)


def parse_pieces(provider: str, parser: StreamParser, pieces: Iterable[bytes]) -> Outcome:
    """What an adapter makes of a body arriving in `pieces`, with no I/O: the SSE decoder and the
    adapter's parser, then the same end-of-stream rules `chat()` applies."""
    decoder = SSEDecoder()
    out = Outcome()
    try:
        for piece in pieces:
            for event in decoder.feed(piece):
                out.chunks.extend(parser.handle(event))
        for event in decoder.flush():
            out.chunks.extend(parser.handle(event))
        out.finish = end_of_stream(provider, decoder, parser)
    except LLMError as exc:
        out.error = exc
    return out


def split_at(data: bytes, cuts: Iterable[int]) -> list[bytes]:
    points = sorted({c for c in cuts if 0 < c < len(data)})
    bounds = [0, *points, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds)]


def same_outcome(a: Outcome, b: Outcome) -> None:
    """Two runs over the same bytes agree on every chunk, the finish and the error."""
    assert a.chunks == b.chunks
    assert a.finish == b.finish
    assert (type(a.error), str(a.error), getattr(a.error, "retryable", None)) == (
        type(b.error),
        str(b.error),
        getattr(b.error, "retryable", None),
    )


# -- an agent that exercises every part of a request ------------------------------------------

PINNED = Path(__file__).parent / "pinned"
_VOLATILE_HEADERS = frozenset(
    {"host", "content-length", "user-agent", "accept-encoding", "connection"}
)


def representative_agent(llm: dict[str, Any]) -> Agent:
    """Three prompt layers (a cached static one, a static one, a dynamic one) and a tool."""

    def add(args: dict[str, int]) -> str:
        return str(args["a"] + args["b"])

    return create_agent(
        llm=llm,
        prompt=[
            prompt_layer("identity", "You are a careful arithmetic assistant.", cache=True),
            prompt_layer("style", "Answer in one short sentence."),
            prompt_layer("today", lambda: "Today is 2025-01-01."),
        ],
        tools=[
            define_tool(
                name="add",
                description="Add two integers.",
                input_schema={
                    "type": "object",
                    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                    "required": ["a", "b"],
                },
                execute=add,
            )
        ],
        max_tool_rounds=4,
    )


async def run_turn(agent: Agent, session: Session, text: str) -> list[AgentEvent]:
    events: list[AgentEvent] = []
    async for event in agent.send(session, text):
        reduce(session, event)
        events.append(event)
    return events


def check_pinned(name: str, seen: Seen) -> None:
    """The request as it reached the wire equals tests/llm/pinned/<name>.json, byte for byte in
    the body. Regenerate deliberately with ``TETHER_REGEN=1 pytest tests/llm`` and review the diff."""
    record = {
        "method": seen.method,
        "path": seen.path,
        "headers": {k: v for k, v in sorted(seen.headers.items()) if k not in _VOLATILE_HEADERS},
        "body": seen.json(),
    }
    path = PINNED / f"{name}.json"
    if os.environ.get("TETHER_REGEN") == "1":
        PINNED.mkdir(exist_ok=True)
        path.write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    assert path.exists(), f"{path} is missing: run TETHER_REGEN=1 pytest tests/llm and review it"
    pinned = json.loads(path.read_text(encoding="utf-8"))
    assert record == pinned
    assert seen.body == dumps(pinned["body"]).encode("utf-8")
