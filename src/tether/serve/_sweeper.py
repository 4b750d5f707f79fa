"""What every serve worker does in the background, so that no state lives only in one worker.

- **Cancel requests.** A client may ask any worker to cancel a run that executes in another one:
  that worker stores the request with the run (`CancelRequests`), and the executing worker finds
  it here, every `every` seconds, in one read for all the runs it executes, and cancels them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from ..stores.run_store import CancelRequests
from ._api import RunsApi

__all__ = ["SWEEP_EVERY", "Sweeper"]

logger = logging.getLogger("tether.serve")

SWEEP_EVERY = 0.5
"""Seconds between two sweeps."""


class Sweeper:
    """The background task of one worker (see the module docstring)."""

    def __init__(self, api: RunsApi, *, every: float = SWEEP_EVERY) -> None:
        self.api = api
        self.every = every
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._loop(), name="tether-serve:sweeper"
            )

    async def aclose(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.every)
            try:
                await self.sweep()
            except Exception:
                logger.exception("a sweep failed; the next one tries again")

    async def sweep(self) -> None:
        """One pass: cancel the runs of this worker that a client asked another to cancel."""
        handles = self.api.handles
        store = self.api.runtime.run_store
        if handles and isinstance(store, CancelRequests):
            for run_id in await store.cancel_requests(list(handles)):
                handle = handles.get(run_id)
                if handle is not None:
                    logger.info("cancelling run %s, as a client asked", run_id)
                    handle.cancel()
