"""Running one case: the target's run (an episode or a workflow run, tagged like any other),
what it produced read back into a `CaseResult`, and the evaluators' verdicts.

The same code runs a case on the local engine and inside a Ray worker. It is idempotent per
(experiment, generation, case, repeat), which is what lets a crashed experiment resume and Ray
retry a case without running a finished one again:

- a workflow case runs under a run id derived from those four, so running it again resumes it
  from its journal (and a completed run returns its stored output without running anything);
- an agent case runs on a memory scope derived from them; before running, the run records of
  that scope are read: a completed episode there is the case's result (read back, not run
  again), and a scope left dirty by an interrupted episode is skipped for the next one
  (`…~2`), so the new episode starts on an empty conversation.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from ..approvals import Decision
from ..errors import AgentRunError, ConfigError, DatasetError
from ..events import PendingCall
from ..lab import AgentRunResult, LabAgent, Runtime, run_tags
from ..run_events import AGENT_FINISHED, AGENT_TOOL_CALL
from ..stores.run_store import RunInfo, RunStore
from ..workflows import Workflow
from ._dataset import AGENT_INPUT_KEYS, Case
from ._evaluators import CaseResult, EvaluationResult, Evaluator, EvaluatorContext, run_evaluator

__all__ = [
    "CASE_SCOPE_PREFIX",
    "EXPERIMENT_TAG_PREFIX",
    "Plan",
    "Target",
    "check_inputs",
    "resolve_target",
    "run_case",
    "run_together",
]

CASE_SCOPE_PREFIX = "eval/"
"""Every experiment case's conversation (memory scope) starts with this: lists of
conversations leave them out."""
EXPERIMENT_TAG_PREFIX = "experiment:"
"""The tag of every run an experiment made (``experiment:NAME``): lists of runs leave the
cases out unless asked for all."""

_NAMESPACE = uuid.UUID("3b0d3f57-9a43-4b36-8d8e-6a3c1f0b7e21")
_SCOPE_PROBES = 100
"""How many interrupted attempts of one case are skipped before giving up."""
OUTPUT_LIMIT = 4000
"""How much of a case's output text its record keeps (the run records keep all of it)."""


@dataclass(slots=True, frozen=True)
class Target:
    """What an experiment runs: an agent or a workflow, by registry id."""

    kind: str
    """``"agent"`` or ``"workflow"``."""
    id: str

    def to_json(self) -> dict[str, str]:
        return {"kind": self.kind, "id": self.id}


@dataclass(slots=True, frozen=True)
class Plan:
    """What every case run of one experiment shares (plain data, shipped to Ray workers)."""

    experiment: str
    generation: int
    target: Target
    versions: tuple[str, ...]
    """The provenance tags (`version:`, `commit:`) recorded on every run."""
    fresh: bool = False
    """No case of this generation can have run before (a new pass, not a resume): the look-up
    of an earlier attempt's records is skipped. On Ray it holds only in an actor that was never
    restarted: Ray retries a batch on the same actor once restarted, so a case that may have
    run before only ever comes to a restarted one."""

    def tags(self, case_id: str) -> list[str]:
        return [f"{EXPERIMENT_TAG_PREFIX}{self.experiment}", f"case:{case_id}", *self.versions]

    def key(self, case_id: str, repeat: int) -> str:
        return f"{self.experiment}/{self.generation}/{case_id}/{repeat}"

    def scope(self, case_id: str, repeat: int) -> str:
        """The memory scope of an agent case's first attempt."""
        return f"{CASE_SCOPE_PREFIX}{self.key(case_id, repeat)}"

    def workflow_run_id(self, case_id: str, repeat: int) -> str:
        return str(uuid.uuid5(_NAMESPACE, self.key(case_id, repeat)))


def resolve_target(runtime: Runtime, target: Any) -> tuple[Target, Any]:
    """The target as (Target, the agent or workflow object).

    `target` is an agent or workflow of `runtime`, or an id: an agent id, a workflow id, or
    ``agent:ID`` / ``workflow:ID`` when the same id names both.

    Raises:
        ConfigError: nothing of that id, an ambiguous id, or an object of another runtime.
    """
    if isinstance(target, LabAgent):
        if target.runtime is not runtime:
            raise ConfigError(f"agent {target.id!r} belongs to another runtime")
        return Target("agent", target.id), target
    if isinstance(target, Workflow):
        if runtime.workflows.get(target.id) is not target:
            raise ConfigError(
                f"workflow {target.id!r} was not made by this runtime (runtime.create_workflow), "
                "so its runs would not be recorded where the experiment reads them"
            )
        return Target("workflow", target.id), target
    if not isinstance(target, str) or not target:
        raise ConfigError(f"a target is an agent, a workflow or an id, got {target!r:.80}")
    kind, sep, rest = target.partition(":")
    if sep and kind in ("agent", "workflow") and rest:
        table: Mapping[str, Any] = runtime.agents if kind == "agent" else runtime.workflows
        if rest in table:
            return Target(kind, rest), table[rest]
        raise ConfigError(f"no {kind} {rest!r} (known: {', '.join(sorted(table)) or 'none'})")
    agent = runtime.agents.get(target)
    workflow = runtime.workflows.get(target)
    if agent is not None and workflow is not None:
        raise ConfigError(
            f"{target!r} is both an agent and a workflow; say agent:{target} or workflow:{target}"
        )
    if agent is not None:
        return Target("agent", target), agent
    if workflow is not None:
        return Target("workflow", target), workflow
    known = sorted({*runtime.agents, *runtime.workflows})
    raise ConfigError(f"no agent or workflow {target!r} (known: {', '.join(known) or 'none'})")


def check_inputs(target: Target, cases: list[Case], path: str | None) -> None:
    """Refuse, before anything runs, a case whose input the target cannot take.

    Raises:
        DatasetError: naming the case's line and its `input`.
    """
    if target.kind != "agent":
        return
    for i, case in enumerate(cases):
        value = case.input
        field = "input" if path is not None else f"cases[{i}].input"
        if isinstance(value, Mapping):
            unknown = sorted(set(value) - set(AGENT_INPUT_KEYS))
            if unknown or not ({"user", "messages"} & set(value)):
                raise DatasetError(
                    f"an object input of agent {target.id!r} holds its run options "
                    f"({', '.join(AGENT_INPUT_KEYS)}) with user or messages"
                    + (f"; not {unknown[0]!r}" if unknown else ""),
                    path=path,
                    line=case.line,
                    field=field,
                )


# -- running ---------------------------------------------------------------------------------


async def run_case(
    runtime: Runtime,
    target: Any,
    plan: Plan,
    case: Case,
    repeat: int,
    evaluators: list[Evaluator],
) -> dict[str, Any]:
    """Run one repeat of one case and score it; returns its `case_finished` record."""
    tags = plan.tags(case.id)
    if plan.target.kind == "agent":
        result = await _run_agent(runtime, target, plan, case, repeat, tags)
    else:
        result = await _run_workflow(runtime, target, plan, case, repeat, tags)
    ctx = EvaluatorContext(runtime, tags, result.memory_scope or plan.scope(case.id, repeat))
    results: dict[str, EvaluationResult] = {}
    for evaluator in evaluators:
        if result.error is not None:
            results[evaluator.name] = EvaluationResult(
                False, None, f"not evaluated: the run failed ({result.error})"
            )
        else:
            results[evaluator.name] = await run_evaluator(evaluator, case, result, ctx)
    if result.error is not None or any(r.error for r in results.values()):
        status = "error"
    elif any(r.passed is False for r in results.values()):
        status = "failed"
    else:
        status = "passed"
    return {
        "case": case.id,
        "repeat": repeat,
        "run_id": result.run_id,
        "status": status,
        "results": {name: r.to_json() for name, r in results.items()},
        "latency_ms": round(result.latency_ms, 3),
        "usage": result.usage,
        "cost_usd": result.cost_usd,
        "cost_note": result.cost_note,
        "error": result.error,
        "recovered": result.recovered,
        "output": result.text[:OUTPUT_LIMIT],
    }


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


async def _run_agent(
    runtime: Runtime,
    agent: LabAgent[Any],
    plan: Plan,
    case: Case,
    repeat: int,
    tags: list[str],
) -> CaseResult:
    store = runtime.run_store
    scope = plan.scope(case.id, repeat)
    if not plan.fresh:
        scope, done = await _attempt_scope(store, agent.id, scope, case.id)
        if done is not None:
            return await _recover_agent(store, done)
    options: dict[str, Any] = (
        {"user": case.input} if isinstance(case.input, str) else dict(case.input)
    )
    start = time.perf_counter()
    with run_tags(tags):
        handle = agent.run(memory_scope=scope, **options)
    legs: list[AgentRunResult[Any]] = []
    try:
        episode = await handle.result
        legs.append(episode)
        while episode.paused:
            # Experiments never pause: the case's decisions answer, or the case is an error.
            if len(legs) > _MAX_PAUSES:
                raise ConfigError(f"the run paused {_MAX_PAUSES} times; giving up")
            decisions = case_decisions(case, episode.pending)
            episode = await agent.resume(handle.run_id, decisions, decided_by="experiment")
            legs.append(episode)
    except Exception as exc:
        return CaseResult(
            output=None,
            text="",
            run_id=handle.run_id,
            kind="agent",
            latency_ms=(time.perf_counter() - start) * 1000,
            error=f"{type(exc).__name__}: {exc}",
            memory_scope=scope,
        )
    latency = (time.perf_counter() - start) * 1000
    # The run's cost as its record stores it, carried by the result: no read back.
    cost = episode.cost_usd
    note = None if cost is not None else _no_cost(handle.run_id, episode.model)
    calls = [
        {"name": part["name"], "arguments": part["input"]}
        for leg in legs
        for message in leg.new_messages
        for part in message["content"]
        if part["type"] == "tool_call"
    ]
    usage: dict[str, int] = {}
    for leg in legs:
        for key, n in leg.usage.items():
            if isinstance(n, int):
                usage[key] = usage.get(key, 0) + n
    output = _plain(episode.output)
    return CaseResult(
        output=output,
        text=episode.text if isinstance(output, str) else _text(output),
        run_id=handle.run_id,
        kind="agent",
        latency_ms=latency,
        usage=usage,
        cost_usd=cost,
        cost_note=note,
        tool_calls=calls,
        memory_scope=scope,
    )


_MAX_PAUSES = 20
"""How many times one case's run may pause (each decided by the case) before it is an error."""


def case_decisions(case: Case, pending: list[PendingCall]) -> dict[str, Decision]:
    """The decision of each pending call from the case's `decisions` (by call id, else by
    tool name).

    Raises:
        AgentRunError: the case gives no decisions, or none for one of the calls.
    """
    calls = ", ".join(f"{p['name']} ({p['kind']}, {p['id']})" for p in pending)
    given = case.decisions
    if given is None:
        raise AgentRunError(
            f"the run paused on calls that wait for a decision: {calls}; an experiment never "
            "pauses: give the case 'decisions' (by tool name: approve, deny or a result)"
        )
    out: dict[str, Decision] = {}
    for call in pending:
        decision = given.get(call["id"], given.get(call["name"]))
        if decision is None:
            raise AgentRunError(
                f"the run paused on {call['name']} ({call['kind']}, {call['id']}) and the "
                f"case's decisions name no {call['name']!r} (they name "
                f"{', '.join(sorted(given)) or 'nothing'})"
            )
        if decision.get("action") == "deny" and "reason" not in decision:
            decision = {**decision, "reason": "denied"}
        elif decision.get("action") == "result":
            decision = {"is_error": False, **decision}
        out[call["id"]] = cast(Decision, decision)
    return out


async def _attempt_scope(
    store: RunStore, agent_id: str, base: str, case_id: str
) -> tuple[str, RunInfo | None]:
    """Where this attempt of a case runs: the scope of an earlier attempt's completed episode
    (returned with it, to be read back), else the first scope no attempt has touched."""
    for attempt in range(1, _SCOPE_PROBES + 1):
        scope = base if attempt == 1 else f"{base}~{attempt}"
        runs = await store.list_runs(memory_scope=scope, kind="agent", limit=50)
        done = next((r for r in runs if r.status == "completed" and r.name == agent_id), None)
        if done is not None or not runs:
            return scope, done
    raise ConfigError(f"case {case_id!r}: {_SCOPE_PROBES} interrupted attempts; giving up")


async def _recover_agent(store: RunStore, info: RunInfo) -> CaseResult:
    """A case's completed episode, read back from its run record."""
    finished: dict[str, Any] = {}
    calls: list[dict[str, Any]] = []
    for event in await store.events(info.run_id):
        if event["type"] == AGENT_FINISHED:
            finished = event["data"]
        elif event["type"] == AGENT_TOOL_CALL:
            data = event["data"]
            calls.append({"name": data.get("name"), "arguments": data.get("input")})
    output = finished.get("output", finished.get("text", ""))
    cost, note = _cost_of([info])
    return CaseResult(
        output=output,
        text=str(finished.get("text", "")) if isinstance(output, str) else _text(output),
        run_id=info.run_id,
        kind="agent",
        latency_ms=_elapsed_ms(info),
        usage=dict(finished.get("usage") or {}),
        cost_usd=cost,
        cost_note=note,
        tool_calls=calls,
        memory_scope=info.memory_scope,
        recovered=True,
    )


async def _run_workflow(
    runtime: Runtime,
    workflow: Workflow[Any, Any],
    plan: Plan,
    case: Case,
    repeat: int,
    tags: list[str],
) -> CaseResult:
    run_id = plan.workflow_run_id(case.id, repeat)
    stored = await runtime.workflow_store.get_run(run_id)
    recovered = stored is not None and stored.status == "completed"
    start = time.perf_counter()
    error: str | None = None
    output: Any = None
    with run_tags(tags):
        # A case cut off mid-run (its process killed) is resumed from its journal once the dead
        # process's lease on the run expired: wait for that rather than fail the case.
        handle = workflow.run(case.input, workflow_run_id=run_id, wait=workflow.lease_ttl + 1)
    try:
        output = await handle.result
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
    latency = (time.perf_counter() - start) * 1000
    store = runtime.run_store
    infos, usage, calls = await _tree(store, run_id)
    if recovered:
        info = await store.get_run(run_id)
        if info is not None:
            latency = _elapsed_ms(info)
    cost, note = _cost_of(infos) if infos else (0.0, None)
    return CaseResult(
        output=output,
        text=_text(output) if error is None else "",
        run_id=run_id,
        kind="workflow",
        latency_ms=latency,
        usage=usage,
        cost_usd=cost,
        cost_note=note,
        tool_calls=calls,
        error=error,
        recovered=recovered,
    )


async def _tree(
    store: RunStore, run_id: str
) -> tuple[list[RunInfo], dict[str, int], list[dict[str, Any]]]:
    """The episodes under a workflow run (nested workflows followed), their summed usage and
    their tool calls in order."""
    episodes: list[RunInfo] = []
    usage: dict[str, int] = {}
    calls: list[dict[str, Any]] = []
    pending = [run_id]
    seen = {run_id}
    while pending:
        parent = pending.pop(0)
        children = await store.list_runs(workflow_run_id=parent, limit=10_000)
        for child in sorted(children, key=lambda r: r.started_at):
            if child.run_id in seen:
                continue
            seen.add(child.run_id)
            if child.kind == "workflow":
                pending.append(child.run_id)
                continue
            episodes.append(child)
            for event in await store.events(child.run_id):
                data = event["data"]
                if event["type"] == AGENT_TOOL_CALL:
                    calls.append({"name": data.get("name"), "arguments": data.get("input")})
                elif event["type"] == AGENT_FINISHED:
                    for key, n in (data.get("usage") or {}).items():
                        if isinstance(n, int):
                            usage[key] = usage.get(key, 0) + n
    return episodes, usage, calls


def _cost_of(infos: list[RunInfo]) -> tuple[float | None, str | None]:
    """The summed `cost_usd` of run records, or (None, why) when one of them has none."""
    total = 0.0
    for info in infos:
        value = getattr(info, "cost_usd", None)
        if value is None:
            value = info.meta.get("cost_usd") if isinstance(info.meta, dict) else None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            model = info.meta.get("model") if isinstance(info.meta, dict) else None
            return None, _no_cost(info.run_id, model)
        total += float(value)
    return total, None


def _no_cost(run_id: str, model: Any) -> str:
    """Why a case's cost is unknown: run `run_id` (on `model`) records none."""
    return f"run {run_id} records no cost_usd" + (
        f" (no price known for model {model!r})" if model else ""
    )


def _elapsed_ms(info: RunInfo) -> float:
    if info.ended_at is None:
        return 0.0
    return max(0.0, (info.ended_at - info.started_at) * 1000)


def _plain(value: Any) -> Any:
    """A structured output as plain JSON data (a pydantic model dumped)."""
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    return value


async def run_together(runners: Sequence[Coroutine[Any, Any, None]]) -> None:
    """Run `runners` (an experiment's case workers, local or on Ray) at once until all end;
    the first to fail cancels the others, which are awaited, and its error is raised."""
    tasks = [asyncio.ensure_future(runner) for runner in runners]
    try:
        await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
