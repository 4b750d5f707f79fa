"""RunRecorder: an episode's run events, to live listeners at once and to the RunStore in order.

`emit()` is synchronous and O(1): it numbers the event, hands it to the listeners and queues it.
A writer task drains the queue into the store, one `append_events` per batch, so a streamed
answer costs one write per batch instead of one per token, and a slow store never holds up the
model stream. `close()` flushes, then records the final status. Recording never decides whether
an episode succeeds: a store failure is logged once and the episode goes on.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeAlias

from ..stores.run_store import NewRunEvent, RunEvent, RunInfo, RunStore
from ..stores.workflow_store import RunStatus

__all__ = ["RunListener", "RunRecorder"]

logger = logging.getLogger("tether.lab")

RunListener: TypeAlias = Callable[[RunEvent], Any]
"""Called with every run event as it happens (sync; exceptions are logged and ignored)."""


def notify(listeners: Sequence[RunListener], event: RunEvent) -> None:
    for listener in listeners:
        try:
            listener(event)
        except Exception:
            logger.exception("a run listener raised; recording goes on")


class RunRecorder:
    """Records one run."""

    def __init__(self, store: RunStore, listeners: Sequence[RunListener], info: RunInfo) -> None:
        self.store = store
        self.info = info
        self.run_id = info.run_id
        self._listeners = listeners
        self._queue: list[NewRunEvent] = []
        self._seq = 0
        self._wake = asyncio.Event()
        self._writer: asyncio.Task[None] | None = None
        self._started = False
        self._failed = False
        self._closed = False

    async def start(self) -> None:
        """Create the run's summary and start the writer.

        Cancelled meanwhile, it lets the summary's write finish before the cancellation goes
        on, so that `close()` can still record that the run was cancelled.
        """
        write = asyncio.ensure_future(self.store.start_run(self.info))
        try:
            await asyncio.wait([write])  # wait() never cancels the write itself
        except asyncio.CancelledError:
            await asyncio.wait([write])
            self._begin(write)
            raise
        self._begin(write)

    def _begin(self, write: asyncio.Future[None]) -> None:
        error = None if write.cancelled() else write.exception()
        if write.cancelled() or error is not None:
            self._failed = True
            logger.error("could not record the start of run %s", self.run_id, exc_info=error)
            return
        self._started = True
        self._writer = asyncio.get_running_loop().create_task(self._drain())

    def emit(self, kind: str, data: dict[str, Any]) -> None:
        """Record one event: listeners now, the store soon."""
        if self._closed:
            raise RuntimeError(f"run {self.run_id} is already closed")
        self._seq += 1
        at = time.time()
        notify(
            self._listeners,
            {"run_id": self.run_id, "seq": self._seq, "type": kind, "at": at, "data": data},
        )
        self._queue.append({"type": kind, "at": at, "data": data})
        self._wake.set()

    async def _write(self) -> None:
        while self._queue:
            batch, self._queue = self._queue, []
            if self._started and not self._failed:
                try:
                    await self.store.append_events(self.run_id, batch)
                except Exception:
                    self._failed = True
                    logger.exception(
                        "could not record events of run %s; dropping them", self.run_id
                    )

    async def _drain(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            await self._write()
            if self._closed and not self._queue:
                return

    async def close(self, status: RunStatus, *, error: str | None = None) -> None:
        """Flush and record how the run ended. Idempotent.

        Cancelled meanwhile, it still writes the final events and status (the run ended as
        `status` says), then lets the cancellation through.
        """
        if self._closed:
            return
        self._closed = True
        self._wake.set()
        writer = self._writer
        cancelled: asyncio.CancelledError | None = None
        if writer is not None:
            try:
                await asyncio.shield(writer)
            except asyncio.CancelledError as exc:
                cancelled = exc
                await asyncio.wait([writer])
        await self._write()
        if self._started:
            try:
                await self.store.finish_run(self.run_id, status, error=error)
            except Exception:
                logger.exception("could not record the end of run %s", self.run_id)
        if cancelled is not None:
            raise cancelled
