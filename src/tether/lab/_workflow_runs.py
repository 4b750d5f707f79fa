"""Workflow runs in the run store: what a runtime's durable workflows record as they run.

Each workflow event (`tether.workflows.WorkflowEvent`) becomes a run event of the same kind
(`tether.run_events`), a run summary is started and finished around them, and the run holds a
heartbeat lease while it runs. An event the store cannot take fails the run.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol

from .._owners import owner_name
from ..errors import LeaseLostError, StoreError, WorkflowError
from ..run_events import WORKFLOW_FAILED, WORKFLOW_FINISHED, WORKFLOW_STARTED, WORKFLOW_WAITING
from ..stores.run_store import RunInfo, RunStore
from ..stores.workflow_store import WorkflowStore
from ..workflows import (
    Workflow,
    WorkflowEvent,
    WorkflowEventHandler,
    WorkflowHandle,
    answer_paused_run,
    current_run,
    resume_expired_waits,
)
from ._callers import caller
from ._host import TaskSet
from ._leases import Heartbeat
from ._recorder import RunListener, logger, notify
from ._tags import context_tags

__all__ = [
    "WorkflowRunHost",
    "WorkflowRunRecorder",
    "answer_waiting_workflow",
    "expire_waits",
    "signal_run",
    "store_signal",
]


class WorkflowRunHost(Protocol):
    """What the recorder needs of its runtime."""

    @property
    def run_store(self) -> RunStore: ...

    @property
    def heartbeat(self) -> Heartbeat: ...

    @property
    def listeners(self) -> Sequence[RunListener]: ...

    lease_ttl: float


class WorkflowRunRecorder:
    """Records the runs of a runtime's workflows (`handler()` is their `on_event`)."""

    def __init__(self, host: WorkflowRunHost, trace: Any) -> None:
        self.host = host
        self.trace = trace
        """The runtime's default trace sink (its workflow spans come first, when it has them)."""

    def handler(self) -> Callable[[WorkflowEvent], Awaitable[None]]:
        """The run store's recorder, after the default trace sink's workflow spans when it has
        them (`tether.otel.OtelSink.workflow_events`): a run and its steps are spans, current
        while they run, so the episodes they start are their children in one trace."""
        spans = getattr(self.trace, "workflow_events", None)
        if not callable(spans):
            return self._record
        workflow_events: Callable[[WorkflowEvent], object] = spans

        async def record(event: WorkflowEvent) -> None:
            try:
                workflow_events(event)
            except Exception:
                logger.exception("the trace sink could not take workflow event %s", event["type"])
            await self._record(event)

        return record

    async def _record(self, event: WorkflowEvent) -> None:
        # An event the run store could not take fails the run (StoreError: the engine lets it
        # through), rather than leave a gap in what the run's stream shows. The run's end
        # is the exception: the run has ended anyway, and its own outcome is kept.
        try:
            await self._write(event)
        except LeaseLostError:
            raise  # another process runs the run now: this one stops, and records nothing more
        except Exception as exc:
            kind = event.get("type")
            logger.exception("could not record workflow event %s", kind)
            if kind not in (WORKFLOW_FINISHED, WORKFLOW_FAILED):
                raise StoreError(
                    f"workflow run {event.get('workflow_run_id')} stopped: its event {kind} "
                    f"could not be recorded ({type(exc).__name__}: {exc})"
                ) from exc

    async def _write(self, event: WorkflowEvent) -> None:
        store = self.host.run_store
        kind = event["type"]
        run_id = event["workflow_run_id"]
        # The run's record is fenced by its workflow lease (recorded in the run's own task):
        # once another process took the run over, this one's writes to it are refused.
        ctx = current_run()
        lease = ctx.lease.owner if ctx is not None and ctx.workflow_run_id == run_id else None
        # A failure's traceback is kept with the run's error, not in its events.
        data = {k: v for k, v in event.items() if k not in ("type", "at", "traceback")}
        if kind == WORKFLOW_STARTED:
            existing = await store.get_run(run_id)
            if existing is None:
                # Recorded in the run's own task, whose context it inherited from where it was
                # started: the episode whose tool started it, if one did.
                parent = caller(event["parent_run_id"])
                await store.start_run(
                    RunInfo(
                        run_id=run_id,
                        kind="workflow",
                        name=event["workflow_id"],
                        started_at=event["at"],
                        tags=list(context_tags()),
                        workflow_run_id=event["parent_run_id"],
                        parent_run_id=parent.run_id if parent else None,
                        parent_tool_call_id=parent.tool_call_id if parent else None,
                        meta={"root_run_id": event["root_run_id"]},
                        input_text=_as_text(event.get("input")),
                    ),
                    lease_ttl=self.host.lease_ttl,
                    lease=lease,
                )
            else:
                await store.finish_run(
                    run_id, "running", lease_ttl=self.host.lease_ttl, lease=lease
                )
            # While it runs, the run's record is renewed with the runtime's other leases: if
            # this process dies, `tether runs list` shows the run interrupted.
            self.host.heartbeat.hold_run(store, run_id)
        elif kind in (WORKFLOW_FINISHED, WORKFLOW_FAILED, WORKFLOW_WAITING):
            self.host.heartbeat.drop_run(store, run_id)
        seq = await store.append_events(
            run_id, [{"type": kind, "at": event["at"], "data": data}], lease=lease
        )
        notify(
            self.host.listeners,
            {"run_id": run_id, "seq": seq, "type": kind, "at": event["at"], "data": data},
        )
        if kind == WORKFLOW_FINISHED:
            await store.finish_run(
                run_id,
                "completed",
                ended_at=event["at"],
                output_text=_as_text(event.get("output")),
                lease=lease,
            )
        elif kind == WORKFLOW_WAITING:
            # Nobody holds a waiting run: its record says so, and no heartbeat renews it.
            await store.finish_run(run_id, "waiting", lease=lease)
        elif kind == WORKFLOW_FAILED:
            fields: dict[str, Any] = dict(event)
            error = fields.get("error") or {}
            await store.finish_run(
                run_id,
                "cancelled" if fields.get("status") == "cancelled" else "failed",
                ended_at=event["at"],
                error=f"{error.get('type')}: {error.get('message')}",
                traceback=fields.get("traceback"),
                lease=lease,
            )


async def signal_run(
    workflows: Mapping[str, Workflow[Any, Any]],
    store: WorkflowStore,
    run_id: str,
    name: str,
    value: Any,
    on_event: WorkflowEventHandler | None = None,
) -> WorkflowHandle[Any]:
    """Signal a waiting run of one of `workflows` (by the workflow its root belongs to) and
    resume it here (`Workflow.signal`)."""
    workflow = await _workflow_of(workflows, store, run_id)
    return await workflow.signal(run_id, name, value, on_event=on_event)


async def store_signal(
    workflows: Mapping[str, Workflow[Any, Any]],
    stores: tuple[WorkflowStore, RunStore],
    run_id: str,
    name: str,
    value: Any,
) -> str:
    """Signal a waiting run and leave it to a worker (`Workflow.store_signal`): its run record
    reads as interrupted at once too, which is what a `tether serve` worker's sweep takes over."""
    store, runs = stores
    workflow = await _workflow_of(workflows, store, run_id)
    root = await workflow.store_signal(run_id, name, value, store=store)
    if await runs.get_run(root) is not None:
        # Running under a holder that is gone already: the first sweep that looks resumes it.
        await runs.finish_run(
            root, "running", lease_ttl=0.0, lease=owner_name(uuid.uuid4().hex[:8])
        )
    return root


async def _workflow_of(
    workflows: Mapping[str, Workflow[Any, Any]], store: WorkflowStore, run_id: str
) -> Workflow[Any, Any]:
    record = await store.get_run(run_id)
    if record is None:
        raise WorkflowError(
            f"there is no workflow run {run_id!r} (`tether runs list --kind workflow` lists "
            "the runs that wait for a signal)"
        )
    root = record if record.parent_run_id is None else await store.get_run(record.root_run_id)
    workflow_id = (root or record).workflow_id
    workflow = workflows.get(workflow_id)
    if workflow is None:
        known = ", ".join(sorted(workflows)) or "none"
        raise WorkflowError(
            f"workflow run {run_id!r} is a run of workflow {workflow_id!r}, which this runtime "
            f"does not have (it has: {known}); create it with runtime.create_workflow(...)"
        )
    return workflow


class WorkflowsHost(Protocol):
    """What resuming a workflow that waited for a paused run needs of the runtime."""

    @property
    def workflows(self) -> Mapping[str, Workflow[Any, Any]]: ...

    @property
    def workflow_store(self) -> WorkflowStore: ...

    @property
    def run_store(self) -> RunStore: ...

    @property
    def background(self) -> TaskSet: ...

    def resumed_here(self, run_id: str, handle: Any, task: asyncio.Task[Any]) -> None: ...


async def answer_waiting_workflow(
    host: WorkflowsHost, workflow_run_id: str, paused_run_id: str, outcome: dict[str, Any]
) -> None:
    """Journal the outcome of a paused run the workflow run `workflow_run_id` waits for and
    resume the workflow here, as background work; a workflow this runtime lacks is left
    interrupted for a worker that has it (`tether serve`). Nothing when no workflow waits for
    the run. A failure is logged, not raised: the paused run's own result stands."""
    try:
        # In a context of its own: the workflow resumes as a root run, nobody's child, whatever
        # runs around the resumed episode.
        answered = await asyncio.get_running_loop().create_task(
            answer_paused_run(
                host.workflows, host.workflow_store, workflow_run_id, paused_run_id, outcome
            ),
            context=contextvars.Context(),
        )
        if isinstance(answered, str):
            runs = host.run_store
            if await runs.get_run(answered) is not None:
                # Running under a holder that is gone already: the first sweep resumes it.
                await runs.finish_run(
                    answered, "running", lease_ttl=0.0, lease=owner_name(uuid.uuid4().hex[:8])
                )
            return
    except Exception:
        logger.exception(
            "could not resume workflow run %s, which waited for run %s",
            workflow_run_id,
            paused_run_id,
        )
        return
    if answered is not None:
        host.background.spawn(
            _follow(answered),
            name=f"tether-workflow:{answered.workflow_id}:{answered.workflow_run_id}",
        )
        host.resumed_here(answered.workflow_run_id, answered, answered.result)


async def _follow(handle: WorkflowHandle[Any]) -> Any:
    return await handle.result


async def expire_waits(
    workflows: Mapping[str, Workflow[Any, Any]], store: WorkflowStore, *, limit: int = 100
) -> list[WorkflowHandle[Any]]:
    """Resume the runs of `workflows` whose wait timed out (`resume_expired_waits`)."""
    return await resume_expired_waits(workflows, store, limit=limit)


def _as_text(value: Any) -> str:
    """A run's input or output as plain text for listing and search."""
    if isinstance(value, str):
        return value[:4000]
    try:
        return json.dumps(value, ensure_ascii=False, default=repr)[:4000]
    except (TypeError, ValueError):
        return repr(value)[:4000]
