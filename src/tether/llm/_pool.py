"""The pool gate: one request at a time between entering our connection pool and holding a
connection.

httpcore hands one idle connection to every request queued in the same pass, and all but one
then retry, which costs O(queued²) and opens fewer connections than the pool allows
(encode/httpcore#822, #1110). Letting one request in at a time, and the next one in as soon as
the first holds its connection (httpcore's trace reports it: the request headers start going out
on a pooled connection, or a new connection starts that no other request can take), keeps every
pool operation O(1) and the pool filled up to its limit.

The gate is per event loop (an `asyncio.Lock` belongs to one) and applies only to a client the
adapter created: a caller's client may use a transport that reports no trace events.
"""

from __future__ import annotations

import asyncio

__all__ = ["GateEntry", "PoolGate", "holds_connection"]


def holds_connection(trace_event: str) -> bool:
    """Whether an httpcore trace event means the request now holds its connection."""
    return trace_event.endswith("send_request_headers.started") or trace_event.endswith(
        "connect_tcp.started"
    )


class GateEntry:
    """One request's passage through the gate: `async with` waits for it; `release()` (idempotent)
    lets the next request in, at the latest when the block ends."""

    __slots__ = ("_held", "_lock")

    def __init__(self, lock: asyncio.Lock | None) -> None:
        self._lock = lock
        self._held: asyncio.Lock | None = None
        """The lock while this entry holds it."""

    async def __aenter__(self) -> GateEntry:
        if self._lock is not None:
            await self._lock.acquire()
            self._held = self._lock
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.release()

    def release(self) -> None:
        held = self._held
        if held is not None:
            self._held = None
            held.release()


class PoolGate:
    """The gate of one adapter's pool, for whichever event loop is running."""

    __slots__ = ("_lock", "_loop")

    def __init__(self) -> None:
        self._lock: asyncio.Lock | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def entry(self, *, gated: bool = True) -> GateEntry:
        """A passage for one request (one that waits for nothing when not `gated`)."""
        if not gated:
            return GateEntry(None)
        loop = asyncio.get_running_loop()
        if self._loop is not loop or self._lock is None:
            self._lock = asyncio.Lock()
            self._loop = loop
        return GateEntry(self._lock)
