"""The agents and workflows pages."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...errors import StoreCorruptError, StoreError
from ...lab import IntegrationInspection, LabAgent, Runtime, Template
from ...stores.run_store import RunInfo, RunQuery
from ...workflows import Workflow
from ._catalog import Catalog
from ._common import Unreadable
from ._runs import run_json

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
