"""What the pages and the JSON API show, read from the runtime's stores.

Everything here returns plain data (dataclasses, JSON-safe dicts); the templates and the API
only format it. Nothing here escapes anything: values stay exactly what the stores hold, and
the Jinja environment (autoescape on) or the JSON encoder encodes them where they are embedded.

A stored record that does not parse never takes a page down: the part it belongs to carries
the error (`StoreCorruptError`'s message) and the rest of the page renders.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..errors import StoreCorruptError, StoreError
from ..evals import CASE_SCOPE_PREFIX
from ..lab import IntegrationInspection, LabAgent, Registry, Runtime, Template
from ..stores.message_store import ScopeInfo, StoredRecord
from ..stores.run_store import RunEvent, RunInfo, RunQuery, RunTotals
from ..workflows import Workflow
from ._timeline import Timeline, build_timeline

__all__ = [
    "Catalog",
    "ConversationView",
    "PromptView",
    "RunRow",
    "RunView",
    "StepView",
    "TreeNode",
    "Turn",
    "agent_detail_json",
    "build_conversation",
    "build_run",
    "list_runs",
    "list_scopes",
    "run_json",
    "timeline",
]

T = TypeVar("T")

PAGE_SIZE = 50
"""Rows per page of the runs and conversations lists."""
_BATCH = 200
"""Rows read from a store per query when a list is filtered after reading."""
_TREE_DEPTH = 16
"""How deep a workflow tree is followed (a cycle in corrupt links stops here too)."""
_TREE_NODES = 500
"""How many runs one tree shows at most."""
EVENTS_PER_POLL = 1000
"""How many events one `/api/events/{id}` answer carries at most."""


class Unreadable(Exception):
    """A part of a page could not be read; carries the store's message."""


async def _read(read: Awaitable[T]) -> T:
    """Await a store read, turning a corrupt record or a failing store into `Unreadable`."""
    try:
        return await read
    except (StoreCorruptError, StoreError) as exc:
        raise Unreadable(f"{type(exc).__name__}: {exc}") from exc


# -- what is registered ----------------------------------------------------------------------


@dataclass(slots=True)
class Catalog:
    """The agents and workflows the UI lists, and so which runs and conversations it lists.

    From a project registry, exactly what it declares. Without one, every agent and workflow
    the runtime created, except workflows that serve as some agent's `title_workflow`: title
    runs stay out of the lists unless a registry names their workflow (seed 002).
    """

    runtime: Runtime
    agents: dict[str, LabAgent[Any]]
    workflows: dict[str, Workflow[Any, Any]]
    title_workflows: dict[str, list[str]]
    """Workflow id -> the ids of the agents it names conversations for."""

    @classmethod
    def of(cls, runtime: Runtime, registry: Registry | None) -> Catalog:
        known_agents = dict(runtime.agents)
        if registry is not None:
            known_agents.update(registry.agents)
        titles: dict[str, list[str]] = {}
        for agent in known_agents.values():
            if agent.title_workflow is not None:
                titles.setdefault(agent.title_workflow.id, []).append(agent.id)
        if registry is not None:
            return cls(runtime, dict(registry.agents), dict(registry.workflows), titles)
        workflows = {k: v for k, v in runtime.workflows.items() if k not in titles}
        return cls(runtime, known_agents, workflows, titles)

    def agent(self, agent_id: str | None) -> LabAgent[Any] | None:
        """A live agent definition by id: the listed ones first, then any the runtime knows."""
        if agent_id is None:
            return None
        return self.agents.get(agent_id) or self.runtime.agents.get(agent_id)

    def lists_run(self, info: RunInfo) -> bool:
        """A root run of a registered agent or workflow; nested runs show in their tree."""
        if info.workflow_run_id is not None or info.parent_run_id is not None:
            return False
        if info.kind == "workflow":
            return info.name in self.workflows
        if info.kind == "agent":
            return info.name in self.agents
        return True


# -- runs ------------------------------------------------------------------------------------


def duration(info: RunInfo, now: float) -> float | None:
    if info.started_at <= 0:
        return None
    end = info.ended_at if info.ended_at is not None else now
    return max(end - info.started_at, 0.0)


def run_json(info: RunInfo, now: float, *, traceback: bool = True) -> dict[str, Any]:
    """A run summary as the JSON API shows it; a list leaves out the tracebacks
    (`traceback=False`: up to 20,000 characters each), a run's own record has it."""
    out = {
        "usage": dict(info.usage),
        "cost_usd": info.cost_usd,
        "input_text": info.input_text,
        "output_text": info.output_text,
        "run_id": info.run_id,
        "kind": info.kind,
        "name": info.name,
        "status": info.status,
        "started_at": info.started_at,
        "ended_at": info.ended_at,
        "duration": duration(info, now),
        "tags": list(info.tags),
        "memory_scope": info.memory_scope,
        "workflow_run_id": info.workflow_run_id,
        "step_id": info.step_id,
        "parent_run_id": info.parent_run_id,
        "parent_tool_call_id": info.parent_tool_call_id,
        "error": info.error,
        "meta": info.meta,
        "lease_expires_at": info.lease_expires_at,
    }
    if traceback:
        out["traceback"] = info.traceback
    return out


@dataclass(slots=True)
class RunRow:
    """One row of the runs list: a run, or why the row could not be read."""

    info: RunInfo | None
    error: str | None = None


async def _run_batch(runtime: Runtime, offset: int, filters: dict[str, Any]) -> list[RunRow]:
    """Up to `_BATCH` runs matching `filters` from `offset`, newest first. A batch with a
    corrupt row is read again one run at a time, so only the bad rows become error rows."""
    store = runtime.run_store
    try:
        return [RunRow(i) for i in await store.list_runs(limit=_BATCH, offset=offset, **filters)]
    except StoreCorruptError:
        pass
    rows: list[RunRow] = []
    for i in range(offset, offset + _BATCH):
        try:
            one = await store.list_runs(limit=1, offset=i, **filters)
        except StoreCorruptError as exc:
            rows.append(RunRow(None, f"StoreCorruptError: {exc}"))
            continue
        if not one:
            break
        rows.append(RunRow(one[0]))
    return rows


async def list_runs(
    catalog: Catalog, *, page: int = 1, show_all: bool = False
) -> tuple[list[RunRow], bool]:
    """One page of listed runs (newest first), and whether there is a next page.

    Raises:
        Unreadable: the run store failed.
    """
    skip = (page - 1) * PAGE_SIZE
    rows: list[RunRow] = []
    offset = 0
    while len(rows) <= PAGE_SIZE:
        batch = await _read(_run_batch(catalog.runtime, offset, {}))
        for row in batch:
            if row.info is not None and not show_all and not catalog.lists_run(row.info):
                continue
            if skip:
                skip -= 1
                continue
            rows.append(row)
        if len(batch) < _BATCH:
            break
        offset += len(batch)
    return rows[:PAGE_SIZE], len(rows) > PAGE_SIZE


@dataclass(slots=True, frozen=True)
class RunFilters:
    """What the run list is filtered by (`/runs?...` and `/api/runs?...`)."""

    status: str | None = None
    agent: str | None = None
    """An agent id or a workflow id."""
    tag: str | None = None
    q: str | None = None
    since: float | None = None
    until: float | None = None
    show_all: bool = False
    """Nested runs and runs of unregistered agents and workflows too."""

    @property
    def active(self) -> bool:
        return any(
            v is not None
            for v in (self.status, self.agent, self.tag, self.q, self.since, self.until)
        )

    def query(self, catalog: Catalog) -> RunQuery:
        listed: dict[str, Any] = {}
        if not self.show_all:
            listed = {
                "roots_only": True,
                "agents": tuple(sorted(catalog.agents)),
                "workflows": tuple(sorted(catalog.workflows)),
            }
        return RunQuery(
            status=self.status,
            name=self.agent,
            tag=self.tag,
            q=self.q,
            since=self.since,
            until=self.until,
            **listed,
        )


async def page_runs(
    catalog: Catalog, filters: RunFilters, *, cursor: str | None = None, limit: int = PAGE_SIZE
) -> tuple[list[RunRow], str | None]:
    """One page of the run list, newest first, and the cursor of the next page.

    A store with an unreadable row cannot serve a filtered page: the rows are then read one
    at a time (unfiltered pages only), so that the bad row becomes an error row of its own.

    Raises:
        Unreadable: the run store failed.
        ConfigError: a cursor no page returned.
    """
    query = filters.query(catalog)
    try:
        page = await catalog.runtime.run_store.query_runs(query, limit=limit, cursor=cursor)
    except StoreCorruptError as exc:
        if filters.active:
            raise Unreadable(
                f"StoreCorruptError: {exc} (filters need every row of the page to read)"
            ) from exc
        return await _rows_one_by_one(catalog, filters, cursor, limit)
    except StoreError as exc:
        raise Unreadable(f"{type(exc).__name__}: {exc}") from exc
    return [RunRow(i) for i in page.runs], page.next_cursor


async def _rows_one_by_one(
    catalog: Catalog, filters: RunFilters, cursor: str | None, limit: int
) -> tuple[list[RunRow], str | None]:
    offset = 0
    if cursor is not None and cursor.startswith("offset:"):
        try:
            offset = max(int(cursor[len("offset:") :]), 0)
        except ValueError:
            offset = 0
    rows: list[RunRow] = []
    position = offset
    while len(rows) <= limit:
        batch = await _read(_run_batch(catalog.runtime, position, {}))
        for row in batch:
            position += 1
            if row.info is not None and not filters.show_all and not catalog.lists_run(row.info):
                continue
            rows.append(row)
            if len(rows) > limit:
                break
        if len(batch) < _BATCH:
            break
    more = len(rows) > limit
    return rows[:limit], (f"offset:{position - 1}" if more else None)


async def runs_where(runtime: Runtime, **filters: Any) -> tuple[list[RunInfo], list[str]]:
    """All runs matching `filters`, oldest first, and the errors of unreadable rows."""
    infos: list[RunInfo] = []
    errors: list[str] = []
    offset = 0
    while True:
        try:
            batch = await _read(_run_batch(runtime, offset, filters))
        except Unreadable as exc:
            errors.append(str(exc))
            break
        for row in batch:
            if row.info is not None:
                infos.append(row.info)
            elif row.error is not None:
                errors.append(row.error)
        if len(batch) < _BATCH:
            break
        offset += len(batch)
    infos.reverse()
    return infos, errors


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
        if kind == "agent_text_delta":
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
        if kind == "workflow_step_started":
            steps.setdefault(step_id, StepView(step_id, name, "running"))
        elif kind == "workflow_step_finished":
            step = steps.setdefault(step_id, StepView(step_id, name, "running"))
            step.status = "replayed" if data.get("replayed") else "completed"
            step.output = data.get("output")
            step.has_output = True
        elif kind == "workflow_step_failed":
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
    budget = [_TREE_NODES]
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
        events = await _read(runtime.run_store.events(info.run_id))
    except Unreadable as exc:
        node.errors.append(str(exc))
        events = []
    try:
        node.steps = await _read(_workflow_steps(runtime, info.run_id, events))
    except Unreadable as exc:
        node.errors.append(str(exc))
        node.steps = steps_from_events(events)
    children, errors = await runs_where(runtime, workflow_run_id=info.run_id)
    node.errors.extend(errors)
    if depth >= _TREE_DEPTH:
        node.truncated = bool(children)
        return node
    by_step = {s.step_id: s for s in node.steps}
    for child in children:
        if child.run_id in seen:
            continue
        if budget[0] <= 0:
            node.truncated = True
            break
        step_id = child.step_id
        if child.kind == "workflow":
            try:
                record = await _read(runtime.workflow_store.get_run(child.run_id))
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


async def _called(
    runtime: Runtime, node: TreeNode, depth: int, budget: list[int], seen: set[str]
) -> None:
    """The runs an episode's tools started (agents and workflows used as tools), oldest
    first, as the node's nested runs."""
    query = RunQuery(parent_run_id=node.info.run_id)
    children: list[RunInfo] = []
    cursor: str | None = None
    while len(children) < _TREE_NODES:
        try:
            page = await _read(runtime.run_store.query_runs(query, limit=200, cursor=cursor))
        except Unreadable as exc:
            node.errors.append(str(exc))
            break
        children.extend(page.runs)
        cursor = page.next_cursor
        if cursor is None:
            break
    if not children:
        return
    if depth >= _TREE_DEPTH:
        node.truncated = True
        return
    children.reverse()
    for child in children:
        if child.run_id in seen:
            continue
        if budget[0] <= 0:
            node.truncated = True
            break
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
    info = await _read(runtime.run_store.get_run(run_id))
    if info is None:
        return None
    errors: list[str] = []
    events_error = None
    try:
        events = await _read(runtime.run_store.events(run_id))
    except Unreadable as exc:
        events, events_error = [], str(exc)
    parent = None
    if info.workflow_run_id is not None:
        try:
            parent = await _read(runtime.run_store.get_run(info.workflow_run_id or ""))
        except Unreadable as exc:
            errors.append(str(exc))
    caller = None
    if info.parent_run_id is not None:
        try:
            caller = await _read(runtime.run_store.get_run(info.parent_run_id))
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
            record = await _read(runtime.workflow_store.get_run(run_id))
        except Unreadable as exc:
            errors.append(str(exc))
            record = None
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
            }
        tree = await build_tree(catalog, info)
    calls = {
        e["data"].get("call"): {**e["data"], "failed": e["type"] == "model_call_failed"}
        for e in events
        if e["type"] in ("model_call_finished", "model_call_failed")
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
        storage_rows=sum(1 for e in events if e["type"] == "agent_messages_committed"),
        calls=calls,
        caller=caller,
        totals=tree_totals(info, tree),
    )


# -- conversations ---------------------------------------------------------------------------


@dataclass(slots=True)
class ScopeRow:
    info: ScopeInfo
    agent_id: str | None
    error: str | None = None


async def _scope_agent(runtime: Runtime, scope: str) -> tuple[str | None, str | None]:
    """The agent of the latest episode on `scope` (None when no episode was recorded)."""
    try:
        latest = await _read(runtime.run_store.list_runs(memory_scope=scope, kind="agent", limit=1))
    except Unreadable as exc:
        return None, str(exc)
    return (latest[0].name if latest else None), None


async def list_scopes(
    catalog: Catalog, *, page: int = 1, title: str | None = None
) -> tuple[list[ScopeRow], bool]:
    """One page of listed conversations (most recently written first) and whether there is
    a next page. A conversation is listed when its latest episode's agent is registered, or
    when no episode of it was recorded (a store written by other means), unless it is an
    experiment case's (`tether.evals.CASE_SCOPE_PREFIX`). With `title`, only
    conversations whose title contains it.

    Raises:
        Unreadable: the message store failed.
    """
    runtime = catalog.runtime
    skip = (page - 1) * PAGE_SIZE
    rows: list[ScopeRow] = []
    offset = 0
    while len(rows) <= PAGE_SIZE:
        batch = await _read(runtime.message_store.scopes(limit=_BATCH, offset=offset, title=title))
        for info in batch:
            if info.scope.startswith(CASE_SCOPE_PREFIX):
                continue  # an experiment case's: the experiment's page shows it
            agent_id, error = await _scope_agent(runtime, info.scope)
            if agent_id is not None and agent_id not in catalog.agents:
                continue
            if skip:
                skip -= 1
                continue
            rows.append(ScopeRow(info, agent_id, error))
            if len(rows) > PAGE_SIZE:
                break
        if len(batch) < _BATCH:
            break
        offset += len(batch)
    return rows[:PAGE_SIZE], len(rows) > PAGE_SIZE


async def search_scopes(
    catalog: Catalog, q: str, *, title: str | None = None, cursor: str | None = None
) -> tuple[list[ScopeRow], str | None]:
    """Conversations of registered agents with an episode whose input or output has every
    word of `q` (the run store's text search), by their newest such episode, newest first;
    with `title`, only those whose title contains it. Returns a page (about `PAGE_SIZE`
    rows) and the cursor of the next one.

    A conversation shows on the page of its newest matching episode only: an older match met
    on a later page is passed over.

    Raises:
        Unreadable: a store failed.
        ConfigError: a cursor no page returned.
    """
    runtime = catalog.runtime
    agents = tuple(sorted(catalog.agents))
    query = RunQuery(kind="agent", q=q, agents=agents, workflows=())
    rows: list[ScopeRow] = []
    wanted = title.lower() if title else None
    while len(rows) < PAGE_SIZE:
        try:
            page = await runtime.run_store.query_runs(query, limit=PAGE_SIZE, cursor=cursor)
        except (StoreCorruptError, StoreError) as exc:
            raise Unreadable(f"{type(exc).__name__}: {exc}") from exc
        for run in page.runs:
            scope = run.memory_scope
            if scope is None or scope.startswith(CASE_SCOPE_PREFIX):
                continue
            if any(r.info.scope == scope for r in rows):
                continue
            newest = await runtime.run_store.query_runs(
                RunQuery(kind="agent", q=q, memory_scope=scope), limit=1
            )
            if not newest.runs or newest.runs[0].run_id != run.run_id:
                continue  # an older match: the conversation is on an earlier page
            info = await _read(runtime.message_store.info(scope))
            if info is None:
                continue
            if wanted is not None and (info.title is None or wanted not in info.title.lower()):
                continue
            rows.append(ScopeRow(info, run.name))
        cursor = page.next_cursor
        if cursor is None:
            break
    return rows, cursor


def totals_json(totals: RunTotals | None) -> dict[str, Any] | None:
    if totals is None:
        return None
    return {
        "runs": totals.runs,
        "input_tokens": totals.input_tokens,
        "output_tokens": totals.output_tokens,
        "cost_usd": totals.known_cost,
        "unpriced_runs": totals.unpriced,
    }


def scope_json(info: ScopeInfo) -> dict[str, Any]:
    return {
        "scope": info.scope,
        "title": info.title,
        "length": info.length,
        "created_at": info.created_at,
        "updated_at": info.updated_at,
    }


@dataclass(slots=True)
class PromptView:
    """The system prompt a conversation page shows.

    `source` is "pinned" (the scope's stored first record), "live" (the agent's current
    definition rendered now, for a scope that has not pinned one), "error" (the live template
    cannot render), "none" (the agent has no system prompt) or "unknown" (no agent to ask).
    """

    source: str
    text: str | None = None
    error: str | None = None
    agent_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "text": self.text,
            "error": self.error,
            "agent_id": self.agent_id,
        }


@dataclass(slots=True)
class Turn:
    """A contiguous stretch of the stored list written by one episode (or by none we know)."""

    start: int
    end: int
    """Record indexes [start, end) of the stored list."""
    records: list[tuple[int, StoredRecord]]
    run: RunInfo | None
    continued: bool = False
    """This episode also wrote an earlier stretch (episodes on one scope interleaved)."""

    def to_json(self, now: float) -> dict[str, Any]:
        return {
            "start": self.start,
            "end": self.end,
            "run": run_json(self.run, now, traceback=False) if self.run is not None else None,
            "continued": self.continued,
            "records": [{"index": i, "record": r} for i, r in self.records],
        }


@dataclass(slots=True)
class ConversationView:
    """Everything the conversation page shows."""

    scope: str
    info: ScopeInfo | None
    prompt: PromptView
    turns: list[Turn]
    records_error: str | None
    errors: list[str]
    older: int | None = None
    """The `before` of the page of older episodes, or None when this page reaches the start."""
    totals: RunTotals | None = None
    """Tokens and cost of every episode of the conversation (not only this page's)."""
    end: int = 0
    """The record index this page ends before."""
    skip: int = 0
    """How many of the scope's runs (newest first) the older page need not read again."""


def _pin_text(record: Mapping[str, Any]) -> str:
    content = record.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(p.get("text", "")) for p in content if isinstance(p, dict) and "text" in p
        )
    return json.dumps(content)


def prompt_for(
    catalog: Catalog, records: Sequence[StoredRecord] | None, agent_id: str | None
) -> PromptView:
    """The pinned prompt when the scope has one; otherwise the live agent's, rendered now."""
    if records:
        first = records[0]
        if first.get("role") == "system":
            pinned_by = first.get("agent_id")
            return PromptView(
                "pinned",
                text=_pin_text(first),
                agent_id=pinned_by if isinstance(pinned_by, str) else None,
            )
    agent = catalog.agent(agent_id)
    if agent is None:
        return PromptView("unknown", agent_id=agent_id)
    inspection = agent.inspect_system_prompt()
    if inspection.is_err:
        return PromptView("error", error=inspection.error, agent_id=agent.id)
    if not inspection.text:
        return PromptView("none", agent_id=agent.id)
    return PromptView("live", text=inspection.text, agent_id=agent.id)


async def _commits(runtime: Runtime, run_id: str) -> list[tuple[int, int]]:
    """The (start, count) of every `agent_messages_committed` event of a run."""
    events = await runtime.run_store.events(run_id)
    out: list[tuple[int, int]] = []
    for event in events:
        if event["type"] != "agent_messages_committed":
            continue
        start, count = event["data"].get("start"), event["data"].get("count")
        if isinstance(start, int) and isinstance(count, int) and start >= 0 and count >= 0:
            out.append((start, count))
    return out


def split_turns(
    records: Sequence[StoredRecord],
    episodes: Sequence[tuple[RunInfo, Sequence[tuple[int, int]]]],
    *,
    base: int = 0,
) -> list[Turn]:
    """Split a stretch of the stored list into turns by the list lengths each episode recorded.

    `records` are the stored records from index `base` on. Every episode records where its
    writes landed (`agent_messages_committed`: `start` is the list length before the write).
    Each record index belongs to the episode that wrote it; a turn is a maximal stretch of
    indexes with one owner. Records no given episode wrote form turns of their own; episodes
    that stored nothing (they failed before their first step) are placed by start time. A
    leading pinned system prompt (index 0) is not part of any turn.
    """
    n = len(records)
    owner: list[int | None] = [None] * n
    for k, (_, commits) in enumerate(episodes):
        for start, count in commits:
            for index in range(max(start - base, 0), min(start + count - base, n)):
                owner[index] = k
    first = 1 if base == 0 and n and records[0].get("role") == "system" else 0
    turns: list[Turn] = []
    wrote: set[int] = set()
    i = first
    while i < n:
        who = owner[i]
        j = i
        while j < n and owner[j] == who:
            j += 1
        run = episodes[who][0] if who is not None else None
        continued = who is not None and who in wrote
        turns.append(
            Turn(base + i, base + j, [(base + x, records[x]) for x in range(i, j)], run, continued)
        )
        if who is not None:
            wrote.add(who)
        i = j
    for k, (run, _) in enumerate(episodes):
        if k in wrote:
            continue
        empty = Turn(base + n, base + n, [], run)
        at = len(turns)
        for pos, turn in enumerate(turns):
            if turn.run is not None and turn.run.started_at > run.started_at:
                at = pos
                break
        turns.insert(at, empty)
    return turns


EPISODES_PER_PAGE = 20
"""How many episodes one page of a conversation shows."""
RECORDS_PER_PAGE = 200
"""How many records one page shows of a stretch no recorded episode wrote."""


async def _page_episodes(
    runtime: Runtime, scope: str, before: int, newest_page: bool, skip: int
) -> tuple[list[tuple[RunInfo, list[tuple[int, int]]]], list[str], int]:
    """The episodes of the conversation page that ends at record `before`, newest first: up
    to `EPISODES_PER_PAGE` that wrote records below `before`, and the episodes that stored
    nothing among them (on the newest page, also those newer than all of them). Also the
    number of the scope's runs (newest first) read up to the last one picked.

    `skip` is where the newer page stopped reading: a hint, not a promise. Episodes started
    since push the older ones further down, so reading from `skip` may meet runs of newer
    pages again; those wrote only at or above `before` and are passed over."""
    picked: list[tuple[RunInfo, list[tuple[int, int]]]] = []
    errors: list[str] = []
    writers = 0
    offset = skip
    read_to = skip
    while writers < EPISODES_PER_PAGE:
        batch = await _read(_run_batch(runtime, offset, {"memory_scope": scope, "kind": "agent"}))
        for position, row in enumerate(batch, start=offset + 1):
            read_to = position
            if row.info is None:
                if row.error is not None:
                    errors.append(row.error)
                continue
            try:
                commits = await _read(_commits(runtime, row.info.run_id))
            except Unreadable as exc:
                errors.append(str(exc))
                commits = []
            if commits:
                if min(start for start, _ in commits) >= before:
                    continue  # it belongs to a newer page
                writers += 1
                picked.append((row.info, commits))
                if writers >= EPISODES_PER_PAGE:
                    break
            elif writers or newest_page:
                picked.append((row.info, commits))
        if len(batch) < _BATCH:
            break
        offset += len(batch)
    return picked, errors, read_to


async def build_conversation(
    catalog: Catalog,
    scope: str,
    agent_id: str | None = None,
    *,
    before: int | None = None,
    skip: int = 0,
) -> ConversationView | None:
    """The conversation page's data, or None when neither the message store nor the run store
    knows `scope` and no agent was named to preview a new conversation with.

    A page shows the newest `EPISODES_PER_PAGE` episodes that wrote records below `before`
    (default: the whole list), in the order they ran, and `older` is the `before` of the page
    of the episodes ahead of them (None on the first page). Only the page's records are read.

    Raises:
        Unreadable: the message store failed.
    """
    runtime = catalog.runtime
    store = runtime.message_store
    info = await _read(store.info(scope))
    length = info.length if info is not None else 0
    end = length if before is None else max(0, min(before, length))
    errors: list[str] = []
    read_to = skip
    try:
        episodes, errors, read_to = await _page_episodes(
            runtime, scope, end, end == length, skip if end < length else 0
        )
    except Unreadable as exc:
        episodes, errors = [], [str(exc)]
    if info is None and not episodes and catalog.agent(agent_id) is None:
        return None
    if agent_id is None and episodes:
        agent_id = episodes[0][0].name
    records: list[StoredRecord] = []
    records_error = None
    head: list[StoredRecord] = []
    start = end
    if length:
        starts = [s for _, commits in episodes for s, _ in commits if s < end]
        start = min(starts) if starts else max(end - RECORDS_PER_PAGE, 0)
        if errors:
            # Where an unreadable episode wrote is unknown: show a stretch before the page's
            # known records too, as records without a recorded episode.
            start = min(start, max(end - RECORDS_PER_PAGE, 0))
        try:
            head = await _read(store.load(scope, end=1))
            if start <= 1 and head and head[0].get("role") == "system":
                start = 0  # the pin is shown above the transcript, not as the page's start
            records = await _read(store.load(scope, start=start, end=end))
        except Unreadable as exc:
            records_error = str(exc)
    if records_error is not None:
        prompt = PromptView("unknown", agent_id=agent_id)
    else:
        prompt = prompt_for(catalog, head, agent_id)
    episodes.reverse()
    turns = split_turns(records, episodes, base=start) if records_error is None else []
    first = 1 if head and head[0].get("role") == "system" else 0
    older = start if start > first else None
    try:
        totals = await _read(
            runtime.run_store.run_totals(RunQuery(kind="agent", memory_scope=scope))
        )
    except Unreadable as exc:
        errors.append(str(exc))
        totals = None
    return ConversationView(
        scope,
        info,
        prompt,
        turns,
        records_error,
        errors,
        older=older,
        end=end,
        skip=read_to,
        totals=totals,
    )


# -- agents and workflows --------------------------------------------------------------------


def agent_json(catalog: Catalog, agent: LabAgent[Any]) -> dict[str, Any]:
    tools: list[str] | None = None
    if isinstance(agent.tools, list):
        tools = [t.name for t in agent.tools]
    schema = agent.output_schema
    prompt = agent.prompt_layers
    return {
        "id": agent.id,
        "model": agent.model_label,
        "model_is_default": agent.model is None,
        "tools": tools,
        "tool_provider": agent.uses_tool_provider,
        "description": agent.description,
        "title_workflow": agent.title_workflow.id if agent.title_workflow else None,
        "output_schema": getattr(schema, "__name__", None) if schema is not None else None,
        "system_prompt": (
            "template"
            if prompt.templates
            else "none"
            if not prompt.static and not prompt.dynamic
            else "string"
        ),
    }


def agent_detail_json(
    catalog: Catalog, agent: LabAgent[Any], integrations: Sequence[IntegrationInspection]
) -> dict[str, Any]:
    """`agent_json` and every other part the agent runs with: prompt layers, resources, MCP
    sources with the tools each offers (`integrations`, asked just now), guardrails, limits."""
    d = agent.definition
    trace = d.trace
    return {
        **agent_json(catalog, agent),
        "layers": [
            {
                "name": layer.name,
                "kind": "template" if isinstance(layer.source, Template) else "static",
                "cache": layer.cache,
            }
            for layer in agent.prompt_layers.static
        ]
        + [
            {"name": layer.name, "kind": "dynamic", "cache": False}
            for layer in agent.prompt_layers.dynamic
        ],
        "resources": [
            {"name": r.name, "mode": r.mode, "description": r.description} for r in agent.resources
        ],
        "integrations": [
            {
                "label": i.label,
                "tools": list(i.report.get("tools") or ()) if i.report is not None else None,
                "resources": [
                    f"{r.get('name')} ({r.get('mode')})"
                    for r in (i.report.get("resources") or ())
                    if isinstance(r, Mapping)
                ]
                if i.report is not None
                else [],
                "error": i.error,
            }
            for i in integrations
        ],
        "guardrails": [
            {
                "name": g.name,
                "on": [w for w, fn in (("tool calls", g.tool_call), ("output", g.output)) if fn],
            }
            for g in agent.guardrails
        ],
        "settings": dict(d.settings or {}),
        "max_tool_rounds": d.max_tool_rounds,
        "stop_when": [getattr(c, "__name__", repr(c)) for c in agent.stop_when],
        "trace": "off" if not trace else "log" if trace is True else _callable_name(trace),
        "services": sorted(d.services or {}),
    }


def _callable_name(fn: Any) -> str:
    return str(getattr(fn, "__name__", None) or type(fn).__name__)


STATS_RUNS = 500
"""How many of a workflow's most recent runs its success rate and median duration cover."""


@dataclass(slots=True)
class WorkflowStats:
    """A workflow's recent runs and how they went."""

    recent: list[RunInfo]
    considered: int
    """How many runs the figures cover (the most recent, up to `STATS_RUNS`)."""
    finished: int
    completed: int
    failed: int
    cancelled: int
    running: int
    median_duration: float | None
    """Of the completed runs; None without one."""
    cost_usd: float | None
    """Of the covered runs that have a known cost (None when none has)."""

    @property
    def success_rate(self) -> float | None:
        return self.completed / self.finished if self.finished else None

    def to_json(self, now: float) -> dict[str, Any]:
        return {
            "recent": [run_json(r, now, traceback=False) for r in self.recent],
            "considered": self.considered,
            "completed": self.completed,
            "failed": self.failed,
            "cancelled": self.cancelled,
            "running": self.running,
            "success_rate": self.success_rate,
            "median_duration_s": self.median_duration,
            "cost_usd": self.cost_usd,
        }


async def workflow_stats(runtime: Runtime, workflow_id: str, *, recent: int = 20) -> WorkflowStats:
    """The workflow's `recent` latest runs, and figures over its last `STATS_RUNS` runs.

    Raises:
        Unreadable: the run store failed.
    """
    runs: list[RunInfo] = []
    cursor: str | None = None
    query = RunQuery(kind="workflow", name=workflow_id)
    while len(runs) < STATS_RUNS:
        try:
            page = await runtime.run_store.query_runs(
                query, limit=min(200, STATS_RUNS - len(runs)), cursor=cursor
            )
        except (StoreCorruptError, StoreError) as exc:
            raise Unreadable(f"{type(exc).__name__}: {exc}") from exc
        runs.extend(page.runs)
        cursor = page.next_cursor
        if cursor is None:
            break
    by = {s: [r for r in runs if r.status == s] for s in ("completed", "failed", "cancelled")}
    durations = sorted(r.ended_at - r.started_at for r in by["completed"] if r.ended_at is not None)
    costs = [r.cost_usd for r in runs if r.cost_usd is not None]
    return WorkflowStats(
        recent=runs[:recent],
        considered=len(runs),
        finished=sum(len(v) for v in by.values()),
        completed=len(by["completed"]),
        failed=len(by["failed"]),
        cancelled=len(by["cancelled"]),
        running=sum(1 for r in runs if r.status == "running"),
        median_duration=statistics.median(durations) if durations else None,
        cost_usd=sum(costs) if costs else None,
    )


def workflow_json(catalog: Catalog, workflow: Workflow[Any, Any]) -> dict[str, Any]:
    return {
        "id": workflow.id,
        "names_conversations_of": sorted(catalog.title_workflows.get(workflow.id, [])),
    }
