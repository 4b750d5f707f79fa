"""Integration sources: tools and resources that arrive from elsewhere (an MCP server) instead of
being declared. A source is anything with `async connect(signal) -> SourceConnection`.

Connection is lazy and memoized: the first turn (or `Agent.connect()`) connects every source,
concurrently; a failed connect is not cached; a source that fails closes the ones that
succeeded; `aclose()` during an in-flight connect wins.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Protocol, runtime_checkable

from .errors import McpConnectionError

if TYPE_CHECKING:
    from .resources import Resource
    from .signals import AbortSignal
    from .tools import Tool
    from .tracing import Tracer

__all__ = ["MAX_INTEGRATIONS", "IntegrationSource", "Integrations", "SourceConnection"]

MAX_INTEGRATIONS: Final[int] = 16
"""The default cap on the tools one source may contribute (`max_tools=`)."""


@dataclass(slots=True, eq=False)
class SourceConnection:
    report: dict[str, Any]
    """What the source offered: url (or command), server_info, protocol_version, tools,
    resources, validation."""
    tools: list[Tool]
    attach: list[Resource] = field(default_factory=list)
    close: Callable[[], Awaitable[None]] | None = None
    notes: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    """Trace records (name, data) of the `mcp` phase the connect wants recorded after its
    `connect` record, e.g. a tool whose input cannot be checked locally."""

    @property
    def label(self) -> str:
        """How messages name this source: its URL or its command line."""
        return _report_label(self.report)


@runtime_checkable
class IntegrationSource(Protocol):
    async def connect(self, signal: AbortSignal | None) -> SourceConnection: ...


class Integrations:
    """The agent's connected sources."""

    def __init__(self, sources: Sequence[IntegrationSource], declared: Sequence[str]) -> None:
        self.sources = list(sources)
        self._declared = set(declared)
        self._connections: list[SourceConnection] | None = None
        self._none: list[SourceConnection] = []
        self._lock = asyncio.Lock()
        self._generation = 0

    @property
    def connected(self) -> list[SourceConnection] | None:
        return self._connections

    async def ensure(
        self, signal: AbortSignal | None = None, *, tracer: Tracer | None = None
    ) -> list[SourceConnection]:
        """Connect every source unless connected. Raises what a source raised (after closing
        every source that did connect); records `mcp` trace records (buffered) on `tracer`."""
        if self._connections is not None:
            return self._connections
        if not self.sources:
            return self._none  # the same object every turn, so the agent's tool index is reused
        async with self._lock:
            if self._connections is not None:
                return self._connections
            generation = self._generation
            opened = await self._connect_all(signal, tracer)
            try:
                if generation != self._generation:
                    raise McpConnectionError("the agent was closed while connecting")
                self._check_names(opened)
            except BaseException:
                await _close_all(opened)
                raise
            self._connections = opened
            return opened

    async def _connect_all(
        self, signal: AbortSignal | None, tracer: Tracer | None
    ) -> list[SourceConnection]:
        async def one(source: IntegrationSource) -> SourceConnection:
            started = time.perf_counter()
            try:
                conn = await source.connect(signal)
            except Exception as exc:
                if tracer is not None:
                    tracer.record(
                        "mcp",
                        "connect:failed",
                        {"source": _source_label(source), "error": str(exc)},
                        buffer=True,
                    )
                raise
            if tracer is not None:
                tracer.record(
                    "mcp",
                    "connect",
                    {
                        "source": conn.label,
                        "protocol_version": conn.report.get("protocol_version"),
                        "tools": len(conn.tools),
                        "attach": len(conn.attach),
                        "ms": round((time.perf_counter() - started) * 1000, 3),
                    },
                    buffer=True,
                )
                for name, data in conn.notes:
                    tracer.record("mcp", name, {"source": conn.label, **data}, buffer=True)
            return conn

        if len(self.sources) == 1:
            return [await one(self.sources[0])]
        tasks = [asyncio.ensure_future(one(s)) for s in self.sources]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        except BaseException:  # we were cancelled: so is every connect, and what opened closes
            await _settle(tasks)
            raise
        failed = [t for t in tasks if t.done() and not t.cancelled() and t.exception() is not None]
        if failed:
            await _settle(tasks)
            exc = failed[0].exception()
            assert exc is not None
            raise exc
        return [t.result() for t in tasks]

    def _check_names(self, opened: list[SourceConnection]) -> None:
        seen = {name: "a declared tool" for name in self._declared}
        for conn in opened:
            where = conn.label
            for t in conn.tools:
                if t.name in seen:
                    raise McpConnectionError(
                        f"tool name {t.name!r} from {where} collides with {seen[t.name]}; "
                        "give the source a prefix= to namespace its tools"
                    )
                seen[t.name] = f"the tool of {where}"

    async def aclose(self) -> None:
        """Close every session; a later turn reconnects."""
        self._generation += 1
        conns, self._connections = self._connections, None
        await _close_all(conns or [])


async def _settle(tasks: Sequence[asyncio.Future[SourceConnection]]) -> None:
    """Cancel the connects still running, wait for all, and close the ones that connected."""
    for task in tasks:
        if not task.done():
            task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await _close_all([t.result() for t in tasks if not t.cancelled() and t.exception() is None])


def _source_label(source: object) -> str:
    label = getattr(source, "label", None)
    return label if isinstance(label, str) else repr(source)


def _report_label(report: dict[str, Any]) -> str:
    url = report.get("url")
    if isinstance(url, str):
        return url
    command = report.get("command")
    if isinstance(command, list | tuple):
        return " ".join(str(c) for c in command)
    return str(command) if command else "a source"


async def _close_all(conns: Sequence[SourceConnection]) -> None:
    for conn in conns:
        if conn.close is not None:
            try:
                await conn.close()
            except Exception:
                pass
