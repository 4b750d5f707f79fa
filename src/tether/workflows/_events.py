"""Workflow run events: what a durable run reports to its recorders, as JSON-safe dicts.

A recorder is any `on_event` callable, sync or async, given to `create_workflow(...)` or to
`Workflow.run(...)`; a run started inside another run inherits the enclosing run's recorders.
The lab's RunStore persists these to show runs in the CLI and the UI:

```python
async def record(event: WorkflowEvent) -> None:
    await run_store.append(event["root_run_id"], event)

review = create_workflow("literature-review", run, on_event=record)
```

Every event carries where it happened (`workflow_id`, `workflow_run_id`, `parent_run_id`,
`root_run_id`) and when (`at`, Unix seconds). A recorder that raises is reported once per run
as a RuntimeWarning and the run goes on: recording must not decide whether work succeeds.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal, NotRequired, TypeAlias, TypedDict

__all__ = [
    "WorkflowEvent",
    "WorkflowEventHandler",
    "WorkflowFailedEvent",
    "WorkflowFinishedEvent",
    "WorkflowStartedEvent",
    "WorkflowStepFailedEvent",
    "WorkflowStepFinishedEvent",
    "WorkflowStepStartedEvent",
    "WorkflowWaitingEvent",
]


class _RunEventBase(TypedDict):
    workflow_id: str
    workflow_run_id: str
    parent_run_id: str | None
    root_run_id: str
    at: float


class WorkflowStartedEvent(_RunEventBase):
    """A run started, or resumed (`attempt` > 1)."""

    type: Literal["workflow_started"]
    input: Any
    attempt: int


class WorkflowStepStartedEvent(_RunEventBase):
    """A step is about to execute (a journaled step is not executed and has no start event)."""

    type: Literal["workflow_step_started"]
    step_id: str
    step: str


class WorkflowStepFinishedEvent(_RunEventBase):
    """A step's output is journaled; `replayed` when it came from the journal of an earlier
    attempt instead of running."""

    type: Literal["workflow_step_finished"]
    step_id: str
    step: str
    output: Any
    replayed: bool


class WorkflowStepFailedEvent(_RunEventBase):
    """A step raised (or returned something that cannot be journaled); nothing was journaled."""

    type: Literal["workflow_step_failed"]
    step_id: str
    step: str
    error: dict[str, Any]
    """`{"type", "message"}`."""


class WorkflowFinishedEvent(_RunEventBase):
    """The run completed with `output`."""

    type: Literal["workflow_finished"]
    output: Any


class WorkflowFailedEvent(_RunEventBase):
    """The run failed (`status="failed"`) or was cancelled (`status="cancelled"`)."""

    type: Literal["workflow_failed"]
    status: Literal["failed", "cancelled"]
    error: dict[str, Any]
    """`{"type", "message"}`."""
    traceback: NotRequired[str]
    """Where the run's code raised (formatted, its last 20,000 characters), when it did."""


class WorkflowWaitingEvent(_RunEventBase):
    """The run stopped at a `ctx.wait_for(name)`, or at a lab episode that paused on calls
    needing a decision (`paused_run_id`): it is stored as waiting and its process holds nothing
    of it; a signal (or the wait's timeout), or deciding the paused run, resumes it. A tree
    waits as one: each run between the waiter and the root reports it, each naming the same
    wait."""

    type: Literal["workflow_waiting"]
    name: str
    """The signal's name."""
    step_id: str
    waiter_run_id: str
    """The run whose `ctx.wait_for` it is."""
    schema: dict[str, Any] | None
    deadline: float | None
    """When the wait times out (Unix time); None: never."""
    paused_run_id: NotRequired[str]
    """The paused agent run the workflow waits for: deciding it (`runtime.resume`) resumes the
    workflow. Absent for a wait for a signal."""


WorkflowEvent: TypeAlias = (
    WorkflowStartedEvent
    | WorkflowStepStartedEvent
    | WorkflowStepFinishedEvent
    | WorkflowStepFailedEvent
    | WorkflowFinishedEvent
    | WorkflowFailedEvent
    | WorkflowWaitingEvent
)

WorkflowEventHandler: TypeAlias = Callable[[WorkflowEvent], Awaitable[None] | None]
"""A run recorder: called with each event, in order; may be async."""
