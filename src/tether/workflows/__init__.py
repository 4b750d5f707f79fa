"""Workflows: one durable engine, and the cascade ladder on top of it.

- `create_workflow(id, run)` declares a durable workflow: `async def run(input, ctx)` whose
  `ctx.step(name, fn)` outputs are journaled in a WorkflowStore, so a failed, cancelled or crashed
  run resumes where it stopped. Runs nest into trees; `current_run()` / `current_step()` tell
  code inside a run (an agent, a tool) where it is. `value = await ctx.wait_for(name)` stops the
  run until `Workflow.signal(run_id, name, value)` (or `runtime.signal`) resumes it, in any
  process; no process holds the run while it waits. A lab episode inside a run that pauses on
  calls needing a decision makes the run wait the same way, until that episode is decided
  (`RunSlot`, `answer_paused_run`).
- `define_workflow(name, steps, exit_gate=…)` declares a cascade ladder (until / when / retry /
  verdicts / feedback / attempts), run with `agent.run_workflow(...)` or `run_ladder(...)`.
  Inside a durable run each ladder round is a journaled step.
"""

from __future__ import annotations

from ._engine import (
    RunSlot,
    StepLink,
    Workflow,
    WorkflowContext,
    WorkflowHandle,
    answer_paused_run,
    create_workflow,
    current_run,
    current_step,
    resume_expired_waits,
)
from ._events import (
    WorkflowEvent,
    WorkflowEventHandler,
    WorkflowFailedEvent,
    WorkflowFinishedEvent,
    WorkflowStartedEvent,
    WorkflowStepFailedEvent,
    WorkflowStepFinishedEvent,
    WorkflowStepStartedEvent,
    WorkflowWaitingEvent,
)
from ._ladder import (
    Attempt,
    LadderContext,
    LadderEventHandler,
    LadderOutcome,
    LadderStep,
    LadderWorkflow,
    Retry,
    Verdict,
    define_workflow,
    read_verdict,
    run_ladder,
)

__all__ = [
    "Attempt",
    "LadderContext",
    "LadderEventHandler",
    "LadderOutcome",
    "LadderStep",
    "LadderWorkflow",
    "Retry",
    "RunSlot",
    "StepLink",
    "Verdict",
    "Workflow",
    "WorkflowContext",
    "WorkflowEvent",
    "WorkflowEventHandler",
    "WorkflowFailedEvent",
    "WorkflowFinishedEvent",
    "WorkflowHandle",
    "WorkflowStartedEvent",
    "WorkflowStepFailedEvent",
    "WorkflowStepFinishedEvent",
    "WorkflowStepStartedEvent",
    "WorkflowWaitingEvent",
    "answer_paused_run",
    "create_workflow",
    "current_run",
    "current_step",
    "define_workflow",
    "read_verdict",
    "resume_expired_waits",
    "run_ladder",
]
