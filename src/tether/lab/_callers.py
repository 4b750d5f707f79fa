"""Which episode started a run: the parent link of an agent or workflow used as a tool.

While an episode runs, the context holds it (`running_episode`); a run started in that context
— by `Runtime.tool_from_agent` / `tool_from_workflow`, or by any tool that calls `agent.run()` or
`workflow.run()` — is its child, unless a workflow run started inside the episode is closer (a
run inside that workflow run is that run's, named by `RunInfo.workflow_run_id`). The tools made
by `tool_from_agent` and `tool_from_workflow` also say which tool call started the run
(`tool_call`).

Reading the link is a context-variable lookup: nothing is read from a store.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass

from ..workflows import current_run

__all__ = [
    "Caller",
    "caller",
    "current_workflow_run",
    "detached",
    "in_episode",
    "running_episode",
    "tool_call",
]


@dataclass(slots=True, frozen=True)
class Caller:
    """The episode a new run is nested in, and the tool call that started it (when known)."""

    run_id: str
    tool_call_id: str | None = None


@dataclass(slots=True, frozen=True)
class _Episode:
    run_id: str
    workflow_run_id: str | None
    """The workflow run that was current when the episode started (None: none)."""


_EPISODE: ContextVar[_Episode | None] = ContextVar("tether_lab_episode", default=None)
_TOOL_CALL: ContextVar[tuple[str, str] | None] = ContextVar("tether_lab_tool_call", default=None)
"""(the episode's run id, the id of its tool call) while a run-starting tool starts its run."""


def current_workflow_run() -> str | None:
    """The id of the workflow run current in this context (what a run started here nests in)."""
    ctx = current_run()
    return ctx.workflow_run_id if ctx is not None else None


def in_episode() -> bool:
    """Whether this context runs inside an episode (its tools, the runs they start)."""
    return _EPISODE.get() is not None


@contextlib.contextmanager
def running_episode(run_id: str) -> Iterator[None]:
    """Mark this context as running the episode `run_id` (what it starts is its child)."""
    token = _EPISODE.set(_Episode(run_id, current_workflow_run()))
    try:
        yield
    finally:
        _EPISODE.reset(token)


@contextlib.contextmanager
def detached() -> Iterator[None]:
    """What starts in this block is nobody's child (background work such as a title
    workflow)."""
    token = _EPISODE.set(None)
    try:
        yield
    finally:
        _EPISODE.reset(token)


@contextlib.contextmanager
def tool_call(tool_call_id: str | None) -> Iterator[None]:
    """Say that the run started in this block is started by the tool call `tool_call_id` of
    the episode running in this context."""
    episode = _EPISODE.get()
    if episode is None or tool_call_id is None:
        yield
        return
    token = _TOOL_CALL.set((episode.run_id, tool_call_id))
    try:
        yield
    finally:
        _TOOL_CALL.reset(token)


def caller(workflow_run_id: str | None) -> Caller | None:
    """The episode whose tool starts a run now, or None.

    Args:
        workflow_run_id: The workflow run the new run is nested in (None: none). When it is not
            the one the episode itself ran in, a workflow run started inside the episode is
            between them: the new run is that workflow run's, not the episode's.
    """
    episode = _EPISODE.get()
    if episode is None or episode.workflow_run_id != workflow_run_id:
        return None
    call = _TOOL_CALL.get()
    # A tool call of an outer episode (the context is inherited) is not this one's.
    own = call[1] if call is not None and call[0] == episode.run_id else None
    return Caller(episode.run_id, own)
