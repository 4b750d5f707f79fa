"""`Listener`: one `LISTEN` connection per pool, open while a waiter of its process waits.

The PostgreSQL stores `NOTIFY` when a holder lets something go — a workflow run ends or starts
to wait (`RUNS`), a scope lease is released (`SCOPES`) — in the same statement as the write
itself, so the notice is sent when that write commits and costs no round trip of its own. The
payload is the run's id or the scope (empty for one too long for a payload: then every waiter of
the channel looks again).

A waiter watches its key (`watch(channel, key)`) for as long as it waits. The first watch opens
the listening connection and the last one closes it, so a process that never waits holds no
extra connection. A notice sets the event of the waiters of its key; they look at the store
again. When the connection fails, every waiter is woken and the next watch opens a new one;
waiters that do not hear anything fall back to their own polling.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any, Final

import psycopg

from ..._wakeups import Wakeups
from ._connection import Connection

__all__ = ["RUNS", "SCOPES", "Listener", "notify_sql"]

logger = logging.getLogger("tether")

RUNS: Final = "tether_workflow_runs"
"""The channel of workflow runs let go (payload: the run's id)."""
SCOPES: Final = "tether_scope_leases"
"""The channel of scope leases released (payload: the scope)."""

_MAX_PAYLOAD: Final = 7999
"""Bytes a NOTIFY payload may hold (the server's limit is 8000)."""


def notify_sql(channel: str, key_sql: str) -> str:
    """A FROM item that sends `channel` a notice of the key `key_sql` evaluates to (one call per
    row of the items before it), or one with an empty payload when the key is too long."""
    return (
        f"pg_notify('{channel}', CASE WHEN octet_length({key_sql}) <= {_MAX_PAYLOAD}"
        f" THEN {key_sql} ELSE '' END)"
    )


class Listener:
    """Listens on `RUNS` and `SCOPES` for the waiters of one process (see the module
    docstring). `conninfo` and `kwargs` are the pool's, so it reaches the same server."""

    def __init__(self, conninfo: str, kwargs: Mapping[str, Any]) -> None:
        self._conninfo = conninfo
        self._kwargs = {**kwargs, "autocommit": True}
        self._wakeups = Wakeups()
        self._users = 0
        self._lock = asyncio.Lock()
        self._conn: Connection | None = None
        self._task: asyncio.Task[None] | None = None

    @asynccontextmanager
    async def watch(self, channel: str, key: str) -> AsyncIterator[asyncio.Event | None]:
        """An event set by each notice of `key` on `channel` while the block runs (the server
        listens before the block begins); None when no listening connection could be opened."""
        with self._wakeups.watch((channel, key)) as event:
            self._users += 1
            try:
                yield event if await self._start() else None
            finally:
                self._users -= 1
                if not self._users:
                    await self._stop()

    async def _start(self) -> bool:
        async with self._lock:
            if self._task is not None and not self._task.done():
                return True
            await self._close()
            try:
                conn = await psycopg.AsyncConnection.connect(self._conninfo, **self._kwargs)
                try:
                    await conn.execute(f"LISTEN {RUNS}")
                    await conn.execute(f"LISTEN {SCOPES}")
                except BaseException:
                    await conn.close()
                    raise
            except (psycopg.Error, OSError) as exc:
                logger.warning(
                    "PostgreSQL: cannot listen for notices (%s); waiters poll instead", exc
                )
                return False
            self._conn = conn
            self._task = asyncio.ensure_future(self._listen(conn))
            return True

    async def _listen(self, conn: Connection) -> None:
        try:
            async for notice in conn.notifies():
                if notice.payload:
                    self._wakeups.wake((notice.channel, notice.payload))
                else:
                    self._wakeups.wake_all()
        except psycopg.Error as exc:
            logger.warning("PostgreSQL: the connection listening for notices failed: %s", exc)
        finally:
            # Whatever was sent since is not known: every waiter looks again (and the next
            # watch listens on a new connection).
            self._wakeups.wake_all()

    async def _stop(self) -> None:
        async with self._lock:
            if not self._users:
                await self._close()

    async def _close(self) -> None:
        task, conn = self._task, self._conn
        self._task = self._conn = None
        if task is not None:
            task.cancel()
            await asyncio.wait([task])
        if conn is not None:
            await conn.close()

    async def aclose(self) -> None:
        """Stop listening now (the pool is closing)."""
        async with self._lock:
            await self._close()
