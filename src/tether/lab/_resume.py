"""Resuming a paused lab run: check the decisions, take the run, and start the episode that
continues its turn.

A paused run lives in the run store alone (status "paused", its pending calls and its turn
stored with it), so any process with the same stores can resume it. Taking it is one
conditional write (`RunStore.resume_run`) that also records each decision as a `decision`
event: of two resumers, exactly one wins, and the other's `RunNotPausedError` names it.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping, Sequence
from typing import cast

from .._owners import owner_name
from ..approvals import Decision, check_decisions, check_edit
from ..errors import ConfigError
from ..events import PendingCall
from ..run_events import DECISION, DecisionData
from ..stores._codecs import not_paused
from ..stores.run_store import NewRunEvent, PausedRun, RunInfo, RunStore
from ..tools import Tool
from ._recorder import RunListener, notify

__all__ = ["check_listed_edits", "checked_run", "decision_events", "take_run"]


async def checked_run(
    store: RunStore, run_id: str, decisions: Mapping[str, Decision], agent_id: str | None
) -> tuple[RunInfo, list[tuple[PendingCall, Decision]]]:
    """The paused run and each pending call with its decision, checked before anything is
    written.

    Raises:
        RunNotFoundError: no such run.
        RunNotPausedError: the run is not paused (who resumed it, when another did).
        ConfigError: the run is not an episode of `agent_id`.
        DecisionError: a decision that does not fit the pending calls.
    """
    info = await store.get_run(run_id)
    if info is None:
        raise not_paused(run_id, None, None)
    if info.kind != "agent" or (agent_id is not None and info.name != agent_id):
        what = f"agent {agent_id!r}" if agent_id is not None else "an agent"
        raise ConfigError(
            f"run {run_id!r} is a run of {info.kind} {info.name!r}, not of {what}"
            + ("; runtime.resume(run_id, ...) finds a run's agent" if agent_id else "")
        )
    if info.status != "paused":
        raise not_paused(run_id, info.status, info.meta)
    return info, check_decisions(cast(list[PendingCall], info.pending), decisions)


def check_listed_edits(tools: Sequence[Tool], checked: list[tuple[PendingCall, Decision]]) -> None:
    """Each edited input for a tool the agent lists is one its schema takes (else
    DecisionError naming the call), checked before the run is taken. A tool of an MCP source
    or a provider is known only once the turn resumes, which checks it then."""
    index = {t.name: t for t in tools}
    for call, decision in checked:
        tool = index.get(call["name"])
        if tool is not None:
            check_edit(call, decision, tool)


def decision_events(
    checked: list[tuple[PendingCall, Decision]], decided_by: str | None
) -> list[NewRunEvent]:
    """One `decision` run event per call, in the pending order."""
    at = time.time()
    events: list[NewRunEvent] = []
    for call, decision in checked:
        data: DecisionData = {
            "call_id": call["id"],
            "name": call["name"],
            "action": decision["action"],
            "decided_by": decided_by,
            "at": at,
        }
        if decision["action"] == "deny":
            data["reason"] = decision["reason"]
        elif decision["action"] == "result":
            data["output"] = decision["output"]
            data["is_error"] = decision["is_error"]
        elif "input" in decision:
            data["input"] = decision["input"]
        events.append({"type": DECISION, "at": at, "data": dict(data)})
    return events


async def take_run(
    store: RunStore,
    listeners: Sequence[RunListener],
    run_id: str,
    checked: list[tuple[PendingCall, Decision]],
    decided_by: str | None,
    lease_ttl: float,
) -> PausedRun:
    """Take the paused run (one conditional write with its decisions); the winner's part.

    Raises:
        RunNotPausedError: another resumer took it first (named).
        RunNotFoundError: the run is gone.
    """
    events = decision_events(checked, decided_by)
    who = decided_by or owner_name(uuid.uuid4().hex[:8])
    taken = await store.resume_run(run_id, resumed_by=who, lease_ttl=lease_ttl, events=events)
    if listeners:
        seq = taken.seq - len(events)
        for event in events:
            seq += 1
            notify(
                listeners,
                {
                    "run_id": run_id,
                    "seq": seq,
                    "type": event["type"],
                    "at": event["at"],
                    "data": event["data"],
                },
            )
    return taken
