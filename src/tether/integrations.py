"""Integration sources: tools and resources that arrive from elsewhere (an MCP server) instead of
being declared. A source is anything with `async connect(signal) -> SourceConnection`.

Connection is lazy and memoized: the first turn (or `Agent.connect()`) connects every source;
a failed connect is not cached; `aclose()` during an in-flight connect wins.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from .errors import McpConnectionError

if TYPE_CHECKING:
    from .resources import Resource
    from .signals import AbortSignal
    from .tools import Tool

__all__ = ["IntegrationSource", "Integrations", "SourceConnection"]


@dataclass(slots=True, eq=False)
class SourceConnection:
    report: dict[str, Any]
    """What the source offered: url, server_info, protocol_version, tools, resources."""
    tools: list[Tool]
    attach: list[Resource] = field(default_factory=list)
    close: Callable[[], Awaitable[None]] | None = None


@runtime_checkable
class IntegrationSource(Protocol):
    async def connect(self, signal: AbortSignal | None) -> SourceConnection: ...


class Integrations:
    """The agent's connected sources."""

    def __init__(self, sources: Sequence[IntegrationSource], declared: Sequence[str]) -> None:
        self.sources = list(sources)
        self._declared = set(declared)
        self._connections: list[SourceConnection] | None = None
        self._lock = asyncio.Lock()
        self._generation = 0

    @property
    def connected(self) -> list[SourceConnection] | None:
        return self._connections

    async def ensure(self, signal: AbortSignal | None = None) -> list[SourceConnection]:
        if self._connections is not None or not self.sources:
            return self._connections or []
        async with self._lock:
            if self._connections is not None:
                return self._connections
            generation = self._generation
            opened: list[SourceConnection] = []
            try:
                for source in self.sources:
                    opened.append(await source.connect(signal))
                if generation != self._generation:
                    raise McpConnectionError("the agent was closed while connecting")
                self._check_names(opened)
            except BaseException:
                await _close_all(opened)
                raise
            self._connections = opened
            return opened

    def _check_names(self, opened: list[SourceConnection]) -> None:
        seen = {name: "a declared tool" for name in self._declared}
        for conn in opened:
            where = conn.report.get("url") or conn.report.get("command") or "a source"
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


async def _close_all(conns: Sequence[SourceConnection]) -> None:
    for conn in conns:
        if conn.close is not None:
            try:
                await conn.close()
            except Exception:
                pass
