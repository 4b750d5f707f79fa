"""One heartbeat: a task that renews leases every sixth of how long they last, while any is held.

What a lease is belongs to its holder: `hold(key, renew, lost)` gives the beat a coroutine
function that renews it (True: still held) and one to call when a renewal finds it taken over
(the lease is then dropped). A renewal that fails (a store out of reach) is logged and tried
again at the next beat: a lease lasts six of them. The lab's runtime keeps one for the scope
and run leases of everything it runs (`tether.lab._leases`); the workflow engine one per root
workflow run, whose loss cancels the run (`tether.workflows._engine`).

Imports nothing of tether.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Hashable

__all__ = ["Heartbeat"]

logger = logging.getLogger("tether")

Renew = Callable[[], Awaitable[bool]]
"""Renews one lease: True while it is still the holder's."""
Lost = Callable[[], Awaitable[None]]
"""What a holder does once its lease was found taken over."""


class Heartbeat:
    """Renews the leases held (see the module docstring), every `ttl / 6` seconds."""

    def __init__(self, ttl: float, *, name: str = "tether-lab:heartbeat") -> None:
        self.ttl = ttl
        self.name = name
        self._held: dict[Hashable, tuple[Renew, Lost | None]] = {}
        self._task: asyncio.Task[None] | None = None

    def hold(self, key: Hashable, renew: Renew, lost: Lost | None = None) -> None:
        """Renew a lease (by `renew`) at every beat until `drop(key)` or its loss."""
        self._held[key] = (renew, lost)
        loop = asyncio.get_running_loop()
        task = self._task
        # A holder may be used from one event loop after another (a command, then its
        # teardown): the beat runs in the loop of the leases it renews.
        if task is None or task.done() or task.get_loop() is not loop:
            self._task = loop.create_task(self._beat(), name=self.name)

    def drop(self, key: Hashable) -> None:
        self._held.pop(key, None)

    def holds(self, key: Hashable) -> bool:
        return key in self._held

    def beating(self) -> bool:
        """Whether the beat runs in the running event loop now."""
        task = self._task
        return (
            task is not None and not task.done() and task.get_loop() is asyncio.get_running_loop()
        )

    async def _beat(self) -> None:
        while self._held:
            await asyncio.sleep(self.ttl / 6)
            await self.renew()

    async def renew(self) -> None:
        """Renew every lease held now (one beat)."""
        for key, entry in list(self._held.items()):
            renew, lost = entry
            try:
                held = await renew()
            except Exception:
                logger.warning("could not renew the lease of %s", key, exc_info=True)
                continue
            if not held and self._held.get(key) is entry:
                del self._held[key]
                if lost is not None:
                    await lost()

    async def aclose(self) -> None:
        """Stop renewing; returns once the beat has stopped (in its own loop)."""
        self._held.clear()
        task = self._task
        if task is None or task.done():
            self._task = None
            return
        loop = task.get_loop()
        if loop is asyncio.get_running_loop():
            task.cancel()
            # Forgotten only once stopped: a caller cancelled meanwhile calls again to wait.
            await asyncio.wait([task])
            self._task = None
        elif not loop.is_closed():
            self._task = None
            loop.call_soon_threadsafe(task.cancel)
