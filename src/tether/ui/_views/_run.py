"""One run's page: its timeline items, workflow steps, the tree of nested runs, totals."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...lab import Runtime
from ...run_events import (
    AGENT_MESSAGES_COMMITTED,
    AGENT_TEXT_DELTA,
    MODEL_CALL_FAILED,
    MODEL_CALL_FINISHED,
    WORKFLOW_STEP_FAILED,
    WORKFLOW_STEP_FINISHED,
    WORKFLOW_STEP_STARTED,
)
from ...stores.run_store import RunEvent, RunInfo, RunQuery
from .._timeline import Timeline, build_timeline
from ._catalog import Catalog
from ._common import TREE_DEPTH, TREE_NODES, Unreadable, guarded_read
from ._runs import runs_where

# -- the timeline of one run -----------------------------------------------------------------


def timeline(events: Sequence[RunEvent]) -> list[dict[str, Any]]:
    """The run's events as display items: consecutive text deltas collapse into one text item;
    every other event is one item. Each item has `kind` (the event type, or "text"), `seq`
    (its first event), `at` and `data`."""
    items: list[dict[str, Any]] = []
    text: list[str] = []

    def close_text() -> None:
        # Joined once per text item: joining at every delta is quadratic in a long answer.
        if text:
            items[-1]["data"]["text"] = "".join(text)
            text.clear()

    for event in events:
        kind = event["type"]
        if kind == AGENT_TEXT_DELTA:
            chunk = event["data"].get("text")
            piece = chunk if isinstance(chunk, str) else json.dumps(chunk)
            if text:
                items[-1]["last_seq"] = event["seq"]
            else:
                items.append(
                    {
                        "kind": "text",
                        "seq": event["seq"],
                        "last_seq": event["seq"],
                        "at": event["at"],
                        "data": {"text": ""},
                    }
                )
            text.append(piece)
            continue
        close_text()
        items.append(
            {
                "kind": kind,
                "seq": event["seq"],
                "last_seq": event["seq"],
                "at": event["at"],
                "data": event["data"],
            }
        )
    close_text()
    return items


# -- workflow steps and trees ----------------------------------------------------------------


@dataclass(slots=True)
class StepView:
    """One step of a workflow run, from its events and the journal."""

    step_id: str
    name: str
    status: str
    """"running", "completed", "replayed" or "failed"."""
    output: Any = None
    has_output: bool = False
    error: Any = None
    children: list[TreeNode] = field(default_factory=list)


@dataclass(slots=True)
class TreeNode:
    """A run in a workflow tree, with its steps (workflow runs) and the runs nested in it."""

    info: RunInfo
    parent_step_id: str | None
    steps: list[StepView] = field(default_factory=list)
    loose: list[TreeNode] = field(default_factory=list)
    """Nested runs that did not start inside one of this run's steps."""
    errors: list[str] = field(default_factory=list)
    truncated: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.info.run_id,
            "kind": self.info.kind,
            "name": self.info.name,
            "status": self.info.status,
            "parent_step_id": self.parent_step_id,
            "steps": [
                {
                    "step_id": s.step_id,
                    "name": s.name,
                    "status": s.status,
                    "output": s.output,
                    "error": s.error,
                    "children": [c.to_json() for c in s.children],
                }
                for s in self.steps
            ],
            "children": [c.to_json() for c in self.loose],
            "errors": list(self.errors),
            "truncated": self.truncated,
        }


def steps_from_events(events: Sequence[RunEvent]) -> list[StepView]:
    steps: dict[str, StepView] = {}
    for event in events:
        data = event["data"]
        step_id = data.get("step_id")
        if not isinstance(step_id, str):
            continue
        name = str(data.get("step", step_id))
        kind = event["type"]
        if kind == WORKFLOW_STEP_STARTED:
            steps.setdefault(step_id, StepView(step_id, name, "running"))
        elif kind == WORKFLOW_STEP_FINISHED:
            step = steps.setdefault(step_id, StepView(step_id, name, "running"))
            step.status = "replayed" if data.get("replayed") else "completed"
            step.output = data.get("output")
            step.has_output = True
        elif kind == WORKFLOW_STEP_FAILED:
            step = steps.setdefault(step_id, StepView(step_id, name, "running"))
            step.status = "failed"
            step.error = data.get("error")
    return list(steps.values())


async def _workflow_steps(
    runtime: Runtime, run_id: str, events: Sequence[RunEvent]
) -> list[StepView]:
    """Steps from the run's events, plus any the journal holds that no event mentions (a run
    recorded by another process, or events that were lost)."""
    steps = steps_from_events(events)
    seen = {s.step_id for s in steps}
    journal = await runtime.workflow_store.list_steps(run_id)
    for record in journal:
        if record.step_id not in seen:
            steps.append(StepView(record.step_id, record.name, "completed", record.output, True))
        else:
            step = next(s for s in steps if s.step_id == record.step_id)
            if not step.has_output:
                step.output, step.has_output = record.output, True
                if step.status == "running":
                    step.status = "completed"
    return steps


async def build_tree(catalog: Catalog, info: RunInfo) -> TreeNode:
    """The run and everything nested under it: steps, child workflow runs and episodes."""
    budget = [TREE_NODES]
    return await _node(catalog.runtime, info, None, 0, budget, set())


async def _node(
    runtime: Runtime,
    info: RunInfo,
    parent_step_id: str | None,
    depth: int,
    budget: list[int],
    seen: set[str],
) -> TreeNode:
    node = TreeNode(info, parent_step_id)
    seen.add(info.run_id)
    budget[0] -= 1
    if info.kind == "agent":
        await _called(runtime, node, depth, budget, seen)
        return node
    if info.kind != "workflow":
        return node
    try:
        events = await guarded_read(runtime.run_store.events(info.run_id))
    except Unreadable as exc:
        node.errors.append(str(exc))
        events = []
    try:
        node.steps = await guarded_read(_workflow_steps(runtime, info.run_id, events))
    except Unreadable as exc:
        node.errors.append(str(exc))
        node.steps = steps_from_events(events)
    children, errors = await runs_where(runtime, workflow_run_id=info.run_id)
    node.errors.extend(errors)
    if depth >= TREE_DEPTH:
        node.truncated = bool(children)
        return node
    by_step = {s.step_id: s for s in node.steps}
    for child in _unseen(children, node, budget, seen):
        step_id = child.step_id
        if child.kind == "workflow":
            try:
                record = await guarded_read(runtime.workflow_store.get_run(child.run_id))
            except Unreadable as exc:
                node.errors.append(str(exc))
                record = None
            step_id = record.parent_step_id if record is not None else None
        sub = await _node(runtime, child, step_id, depth + 1, budget, seen)
        step = by_step.get(step_id) if step_id is not None else None
        if step is None and step_id is not None:
            # A step that is still running has no journal entry or event yet in some stores;
            # show it so its children sit under it.
            step = by_step[step_id] = StepView(step_id, step_id.split("/")[-1], "running")
            node.steps.append(step)
        (step.children if step is not None else node.loose).append(sub)
    return node


def _unseen(
    children: Sequence[RunInfo], node: TreeNode, budget: list[int], seen: set[str]
) -> Iterator[RunInfo]:
    """The children of `node` the tree does not show yet, while its node budget lasts (read
    as each is taken: the caller's `_node` spends it); `node` is marked truncated when the
    budget runs out first."""
    for child in children:
        if child.run_id in seen:
            continue
        if budget[0] <= 0:
            node.truncated = True
            return
        yield child


async def _called(
    runtime: Runtime, node: TreeNode, depth: int, budget: list[int], seen: set[str]
) -> None:
    """The runs an episode's tools started (agents and workflows used as tools), oldest
    first, as the node's nested runs."""
    query = RunQuery(parent_run_id=node.info.run_id)
    children: list[RunInfo] = []
    cursor: str | None = None
    while len(children) < TREE_NODES:
        try:
            page = await guarded_read(runtime.run_store.query_runs(query, limit=200, cursor=cursor))
        except Unreadable as exc:
            node.errors.append(str(exc))
            break
        children.extend(page.runs)
        cursor = page.next_cursor
        if cursor is None:
            break
    if not children:
        return
    if depth >= TREE_DEPTH:
        node.truncated = True
        return
    children.reverse()
    for child in _unseen(children, node, budget, seen):
        node.loose.append(await _node(runtime, child, None, depth + 1, budget, seen))


@dataclass(slots=True)
class RunView:
    """Everything the run page shows."""

    info: RunInfo
    items: list[dict[str, Any]]
    last_seq: int
    events_error: str | None
    parent: RunInfo | None
    workflow: dict[str, Any] | None
    """The journal's record of a workflow run: input, output, error, attempts."""
    tree: TreeNode | None
    errors: list[str]
    timeline: Timeline | None = None
    storage_rows: int = 0
    """How many internal `agent_messages_committed` rows the event list holds."""
    calls: dict[Any, dict[str, Any]] = field(default_factory=dict)
    """Model call number -> its `model_call_finished` / `_failed` data."""
    caller: RunInfo | None = None
    """The episode whose tool call started this run (`RunInfo.parent_run_id`), if readable."""
    totals: TreeTotals | None = None
    """Tokens and cost of the run with every run nested in it (None: nothing is nested)."""


@dataclass(slots=True, frozen=True)
class TreeTotals:
    """The tokens and cost of a run and the runs nested in it (its tools' episodes, a workflow's
    steps' episodes), each counted once."""

    runs: int
    usage: dict[str, int]
    cost_usd: float | None
    """None when some run with usage has no known price, or the tree was too big to read whole
    (nothing rather than a wrong number)."""


def tree_totals(info: RunInfo, tree: TreeNode | None) -> TreeTotals | None:
    nested = _nested(tree)
    if not nested:
        return None
    usage: dict[str, int] = {}
    cost = 0.0
    known = not _truncated(tree)
    for run in [info, *(r for r, _ in nested)]:
        for key, n in (run.usage or {}).items():
            usage[key] = usage.get(key, 0) + n
        if run.usage:
            if run.cost_usd is None:
                known = False
            else:
                cost += run.cost_usd
    return TreeTotals(len(nested), usage, cost if known and usage else None)


def _truncated(node: TreeNode | None) -> bool:
    if node is None:
        return False
    if node.truncated:
        return True
    children = [c for step in node.steps for c in step.children] + list(node.loose)
    return any(_truncated(c) for c in children)


def _nested(node: TreeNode | None, depth: int = 1) -> list[tuple[RunInfo, int]]:
    """Every run in a tree below its root, with its depth."""
    if node is None:
        return []
    out: list[tuple[RunInfo, int]] = []
    children = [c for step in node.steps for c in step.children] + list(node.loose)
    for child in children:
        out.append((child.info, depth))
        out.extend(_nested(child, depth + 1))
    return out


async def build_run(catalog: Catalog, run_id: str) -> RunView | None:
    """The run page's data, or None for an unknown run.

    Raises:
        Unreadable: the run's summary cannot be read.
    """
    runtime = catalog.runtime
    info = await guarded_read(runtime.run_store.get_run(run_id))
    if info is None:
        return None
    errors: list[str] = []
    events_error = None
    try:
        events = await guarded_read(runtime.run_store.events(run_id))
    except Unreadable as exc:
        events, events_error = [], str(exc)
    parent = None
    if info.workflow_run_id is not None:
        try:
            parent = await guarded_read(runtime.run_store.get_run(info.workflow_run_id or ""))
        except Unreadable as exc:
            errors.append(str(exc))
    caller = None
    if info.parent_run_id is not None:
        try:
            caller = await guarded_read(runtime.run_store.get_run(info.parent_run_id))
        except Unreadable as exc:
            errors.append(str(exc))
    workflow = None
    tree = None
    if info.kind == "agent":
        node = await build_tree(catalog, info)
        # An episode shows a tree only when its tools started runs.
        tree = node if node.loose or node.errors else None
    if info.kind == "workflow":
        try:
            record = await guarded_read(runtime.workflow_store.get_run(run_id))
        except Unreadable as exc:
            errors.append(str(exc))
            record = None
        waiting_for = (
            record.waiting_for.to_json()
            if record is not None and record.status == "waiting" and record.waiting_for
            else None
        )
        paused = waiting_for.get("paused_run") if waiting_for is not None else None
        if waiting_for is not None and isinstance(paused, str):
            # A workflow that waits for a paused agent run points at it, with the calls that
            # run waits for as they are now (deciding them, on that run, resumes both).
            try:
                child = await guarded_read(runtime.run_store.get_run(paused))
            except Unreadable as exc:
                errors.append(str(exc))
                child = None
            waiting_for["pending"] = list(child.pending) if child is not None else []
        if record is not None:
            workflow = {
                "workflow_id": record.workflow_id,
                "status": record.status,
                "input": record.input,
                "output": record.output,
                "error": record.error,
                "attempts": record.attempts,
                "root_run_id": record.root_run_id,
                "parent_step_id": record.parent_step_id,
                # What a waiting run waits for: the signal's name, its schema and deadline;
                # or the paused agent run (`paused_run`) and its `pending` calls.
                "waiting_for": waiting_for,
            }
        tree = await build_tree(catalog, info)
    calls = {
        e["data"].get("call"): {**e["data"], "failed": e["type"] == MODEL_CALL_FAILED}
        for e in events
        if e["type"] in (MODEL_CALL_FINISHED, MODEL_CALL_FAILED)
    }
    return RunView(
        info=info,
        items=timeline(events),
        last_seq=events[-1]["seq"] if events else 0,
        events_error=events_error,
        parent=parent,
        workflow=workflow,
        tree=tree,
        errors=errors,
        timeline=build_timeline(info, events, _nested(tree), time.time()),
        storage_rows=sum(1 for e in events if e["type"] == AGENT_MESSAGES_COMMITTED),
        calls=calls,
        caller=caller,
        totals=tree_totals(info, tree),
    )
