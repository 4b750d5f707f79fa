"""What every serve worker does in the background, so that no state lives only in one worker.

- **Cancel requests.** A client may ask any worker to cancel a run that executes in another one:
  that worker stores the request with the run (`CancelRequests`), and the executing worker finds
  it here, every `every` seconds, in one read for all the runs it executes, and cancels them.
- **Takeover.** A durable workflow run whose worker died (killed, its machine gone) reads back
  as `interrupted` once its heartbeat lease expired. Every `takeover_every` seconds each worker
  looks for such root runs of the workflows it serves and resumes them: the resume takes the
  run's lease with one conditional update, so of several workers that try, exactly one runs it
  (the others get `WorkflowRunBusyError` and leave it), and the journal skips the steps that
  completed before the crash.
- **Timed-out waits.** On the same beat, a durable workflow run whose `ctx.wait_for(...,
  timeout=)` passed without its signal is resumed here (its wait raises
  `WorkflowWaitTimeoutError`): the timeout is journaled and the run taken in one write, so of
  several workers one resumes it.
- **Expired approvals.** On the same beat, a paused agent run whose `approval_timeout` passed
  is resumed here with its undecided calls denied as "expired" (`Runtime.expire_approvals`):
  the run is taken in one conditional write, so of several workers one resumes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time

from ..stores.run_store import CancelRequests, RunQuery
from ..workflows import resume_expired_waits
from ._api import RunsApi

__all__ = ["SWEEP_EVERY", "TAKEOVER_EVERY", "Sweeper"]

logger = logging.getLogger("tether.serve")

SWEEP_EVERY = 0.5
"""Seconds between two looks for cancel requests."""
TAKEOVER_EVERY = 5.0
"""Seconds between two looks for interrupted workflow runs (with some jitter, so that workers
started together do not all look at once)."""


class Sweeper:
    """The background task of one worker (see the module docstring)."""

    def __init__(
        self,
        api: RunsApi,
        *,
        every: float = SWEEP_EVERY,
        takeover_every: float | None = TAKEOVER_EVERY,
    ) -> None:
        self.api = api
        self.every = every
        self.takeover_every = takeover_every
        self._next_takeover = time.monotonic() + random.uniform(0, takeover_every or 0)
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
        """One pass: cancel the runs of this worker that a client asked another to cancel;
        when it is time, take over interrupted workflow runs."""
        await self.cancel_requested()
        if self.takeover_every is not None and time.monotonic() >= self._next_takeover:
            self._next_takeover = time.monotonic() + self.takeover_every * random.uniform(0.8, 1.2)
            await self.take_over()
            await self.expire_waits()
            await self.expire_approvals()

    async def cancel_requested(self) -> None:
        handles = self.api.handles
        store = self.api.runtime.run_store
        if handles and isinstance(store, CancelRequests):
            for run_id in await store.cancel_requests(list(handles)):
                handle = handles.get(run_id)
                if handle is not None:
                    logger.info("cancelling run %s, as a client asked", run_id)
                    handle.cancel()

    async def expire_waits(self) -> list[str]:
        """Resume the served workflows' runs whose wait timed out; the ids resumed here."""
        handles = await resume_expired_waits(
            self.api.workflows(), self.api.runtime.workflow_store, limit=20
        )
        for handle in handles:
            self.api.track(handle.workflow_run_id, handle, handle.result)
            logger.info("resuming workflow run %s: its wait timed out", handle.workflow_run_id)
        return [h.workflow_run_id for h in handles]

    async def expire_approvals(self) -> list[str]:
        """Resume the paused agent runs whose approval timeout passed (their undecided calls
        denied as "expired"); the ids resumed here."""
        handles = await self.api.runtime.expire_approvals(limit=20)
        for handle in handles:
            self.api.track(handle.run_id, handle, handle.result)
            logger.info("resuming run %s: its approvals expired", handle.run_id)
        return [h.run_id for h in handles]

    async def take_over(self) -> list[str]:
        """Resume the interrupted root runs of the served workflows; the ids this worker took."""
        store = self.api.runtime.run_store
        page = await store.query_runs(
            RunQuery(kind="workflow", status="interrupted", roots_only=True), limit=20
        )
        served = self.api.workflows()
        taken: list[str] = []
        for info in page.runs:
            workflow = served.get(info.name)
            if workflow is None or info.run_id in self.api.handles:
                continue
            # Another worker quicker to take it over holds it now: let it (no wait here).
            handle = workflow.run(workflow_run_id=info.run_id, wait=False)
            self.api.track(info.run_id, handle, handle.result)
            try:
                await self.api.started(info.run_id, handle.result)
            except Exception as exc:
                logger.info("not taking over workflow run %s: %s", info.run_id, exc)
                continue
            task = handle.result
            if task.done() and not task.cancelled() and task.exception() is not None:
                # Another worker took it first (WorkflowRunBusyError), or it cannot resume.
                logger.info("not taking over workflow run %s: %s", info.run_id, task.exception())
                continue
            logger.warning(
                "took over workflow run %s of %s: its worker stopped renewing its lease",
                info.run_id,
                info.name,
            )
            taken.append(info.run_id)
        return taken
