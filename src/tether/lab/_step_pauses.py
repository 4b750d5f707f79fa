"""An episode inside a durable workflow run that pauses makes the workflow wait for it.

An episode started in a workflow run (in its body or one of its steps, not by another
episode's tool) reserves a place in the run's journal (`WorkflowContext.run_slot`, named
`run:<agent id>` and numbered like a step). When its turn pauses on calls that need a decision,
the episode's handle raises the workflow's suspension instead of handing the step a paused
result: the workflow run is stored `waiting` for that run (`WaitRecord.paused_run`), and its
process returns as at a `ctx.wait_for`.

Whoever ends the paused run — `runtime.resume` in any process, so also `tether runs resume`,
`POST /api/runs/{id}/decisions`, the UI and `expire_approvals` — journals its outcome at that
place (`outcome_of` / `failure_of`) and resumes the workflow from its journal in the same
process. On that replay the step runs again up to the episode, and `agent.run()` there hands
back the journaled outcome (`replayed`) instead of running anything: the approved tool ran once,
in the resumed turn. A run that pauses again leaves the workflow waiting.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast
from urllib.parse import quote

from ..errors import ResumedRunFailedError, StoreCorruptError
from ..events import Usage
from ..run_events import AGENT_FINISHED, AGENT_MESSAGES_COMMITTED
from ..session import Message
from ..stores.run_store import RunStore
from ..workflows import RunSlot, current_run
from ._callers import in_episode
from ._handles import AgentRunResult
from ._output import OutputSpec

__all__ = ["ended_outcome", "failure_of", "outcome_of", "replayed", "step_slot"]


def step_slot(agent_id: str, kw: Mapping[str, Any]) -> RunSlot | None:
    """The journal place of an episode `agent.run(**kw)` starts now, when a pause of it makes
    the workflow wait: inside a workflow run, not linked by hand (`workflow=`), and not started
    by another episode (a tool's episode pauses as its own run)."""
    ctx = current_run()
    if ctx is None or kw.get("workflow") is not None or in_episode():
        return None
    # Journal ids may not hold '#' or '/'; agent ids may.
    return ctx.run_slot("run:" + quote(agent_id, safe=""))


def outcome_of(result: AgentRunResult[Any]) -> dict[str, Any]:
    """What the workflow's journal keeps of a paused run that ended with `result`."""
    return {
        "paused_run": result.run_id,
        "status": "completed",
        "text": result.text,
        "turns": result.turns,
        "stop_reason": result.stop_reason,
    }


def failure_of(run_id: str, exc: BaseException) -> dict[str, Any]:
    """What the journal keeps of a paused run that failed once resumed."""
    return {"paused_run": run_id, "status": "failed", "error": f"{type(exc).__name__}: {exc}"}


async def ended_outcome(runs: RunStore, run_id: str) -> dict[str, Any] | None:
    """The outcome of paused run `run_id` read from its record when it ended without it being
    journaled (its resumer died between the two), or None while it is paused or running."""
    info = await runs.get_run(run_id)
    if info is None or info.status not in ("completed", "failed", "cancelled"):
        return None
    events = await runs.events(run_id)
    if info.status == "completed":
        finished = [e["data"] for e in events if e["type"] == AGENT_FINISHED]
        if finished:
            data = finished[-1]
            return {
                "paused_run": run_id,
                "status": "completed",
                "text": data.get("text", ""),
                "turns": data.get("turns", 0),
                "stop_reason": data.get("stop_reason"),
            }
    return {"paused_run": run_id, "status": info.status, "error": info.error or info.status}


async def replayed(
    runs: RunStore, outcome: Any, output: OutputSpec[Any] | None, scope: str
) -> AgentRunResult[Any]:
    """The result the episode at a journal place hands back on a replay: the journaled outcome
    of the run that paused there, its usage and the messages it stored (over every attempt)
    read from the run store, its output parsed again from its text.

    Raises:
        ResumedRunFailedError: the run failed (or was cancelled) after it was resumed.
        StoreCorruptError: the journal holds something else there (a step of the same name).
    """
    if not isinstance(outcome, dict) or not isinstance(outcome.get("paused_run"), str):
        raise StoreCorruptError(
            f"the workflow journal holds {outcome!r:.80} where an agent run paused, not that "
            "run's outcome (a ctx.step named like the agent's place, 'run:<agent id>'?)"
        )
    run_id = outcome["paused_run"]
    if outcome.get("status") != "completed":
        error = str(outcome.get("error"))
        raise ResumedRunFailedError(
            f"agent run {run_id!r}, which the workflow waited for, failed after it was "
            f"resumed: {error} (`tether runs show {run_id}` has its traceback)",
            run_id=run_id,
            error=error,
        )
    text = str(outcome.get("text", ""))
    info = await runs.get_run(run_id)
    messages: list[Message] = []
    for event in await runs.events(run_id):
        if event["type"] == AGENT_MESSAGES_COMMITTED:
            stored = event["data"].get("messages") or []
            # The scope's pin and the history policy's summaries are records, not messages.
            messages.extend(
                cast(Message, m) for m in stored if m.get("role") not in ("system", "summary")
            )
    return AgentRunResult(
        text=text,
        output=output.parse(text) if output is not None else text,
        turns=int(outcome.get("turns") or 0),
        memory_scope=info.memory_scope if info is not None and info.memory_scope else scope,
        new_messages=messages,
        usage=cast(Usage, dict(info.usage) if info is not None else {}),
        run_id=run_id,
        stop_reason=outcome.get("stop_reason"),
        cost_usd=info.cost_usd if info is not None else None,
        model=info.meta.get("model") if info is not None else None,
    )
