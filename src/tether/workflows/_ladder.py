"""The cascade ladder: `define_workflow(name, steps, exit_gate=…)` and `run_ladder`.

A ladder tries its steps in order until one is accepted:

- `until(result, ctx)` accepts a step's result; a step without `until` is **terminal**: always
  accepted and never exit-gated (the answer of last resort).
- `when(result, ctx)` (result: the previous round's, None before any) decides whether a step runs
  at all; a skipped step leaves no attempt.
- `retry={"max_rounds": n}` lets a step run up to n times in all (2 = one retry) before the
  ladder falls through; `ctx.round` is 1-based and `ctx.feedback` is the previous round's verdict.
- `exit_gate(result, ctx)` runs after a step's own `until` accepted; a rejection consumes the
  round like an `until` rejection and reaches the next round as feedback with
  `gate_rejected=True` (the attempt says `reason="gate-rejected"`).

`until`, `when` and `exit_gate` may be sync or async, and may take fewer arguments than
`(result, ctx)` — `lambda r: r["ok"]` and `lambda: True` work as they read. A verdict is a
`Verdict`, a dict, or any object whose `accepted` is a real bool, optionally with `reason`,
`detail` and `data`; any other value is read for its truthiness.

The ladder runs on the durable engine: called inside a durable workflow run, each round is one
journaled `ctx.step`, so a resumed run replays finished rounds instead of running them again.
Without an enclosing run, rounds simply run.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NotRequired, TypeAlias, TypedDict, cast
from urllib.parse import quote

from .._json import check_json_safe
from ..context import RunContext
from ..errors import AbortedError, NotJSONSafeError, StepOutputError, WorkflowError
from ..events import AgentEvent, MemoryEvent, StepEvent
from ..turn import TurnOptions, TurnPlanner
from ._engine import Workflow, WorkflowContext, create_workflow, current_run

if TYPE_CHECKING:
    from ..session import Session
    from ..signals import AbortSignal

__all__ = [
    "Attempt",
    "LadderContext",
    "LadderEventHandler",
    "LadderOutcome",
    "LadderStep",
    "LadderWorkflow",
    "Retry",
    "Verdict",
    "define_workflow",
    "read_verdict",
    "run_ladder",
]

Check: TypeAlias = Callable[..., Any]
"""`until` / `when` / `exit_gate`: `(result, ctx)` (or fewer arguments), sync or async."""

LadderEventHandler: TypeAlias = Callable[[AgentEvent], Awaitable[None] | None]
"""Receives each `step`, `trace` and `memory` event of a ladder run as it happens."""

_STEP_KEYS = frozenset({"name", "run", "until", "when", "retry"})


@dataclass(frozen=True, slots=True)
class Verdict:
    """An acceptance decision with its reason, as `until` or `exit_gate` may return it."""

    accepted: bool
    reason: str | None = None
    """Why: lands on the attempt so a UI can show why the ladder climbed."""
    detail: Any = None
    """Human-readable detail."""
    data: Any = None
    """Machine-readable detail (for example the validation errors a repair round should fix)."""
    gate_rejected: bool = False
    """Set on feedback and attempts when the workflow's exit gate rejected a result `until`
    had accepted."""


@dataclass(frozen=True, slots=True)
class Retry:
    """Same-step retry: `max_rounds` counts total runs of the step (2 = one retry)."""

    max_rounds: int = 1


@dataclass(frozen=True, slots=True)
class LadderStep:
    """One rung of a ladder. Dicts with the same keys are accepted by `define_workflow`."""

    name: str
    run: Callable[[LadderContext], Any]
    """`run(ctx)`, sync or async; its return value is the step's result."""
    until: Check | None = None
    """Accepts the result; None makes the step terminal (always accepted, never gated)."""
    when: Check | None = None
    """Runs the step only when truthy (or an accepting verdict)."""
    retry: Retry = field(default_factory=Retry)


class Attempt(TypedDict):
    """One round that ran, with its verdict."""

    step: str
    accepted: bool
    round: int
    result: Any
    reason: NotRequired[str]
    detail: NotRequired[Any]
    data: NotRequired[Any]
    gate_rejected: NotRequired[bool]


@dataclass(slots=True)
class LadderOutcome:
    """What a ladder run ended with."""

    result: Any
    """The accepted result, or the last round's when none was accepted (None if none ran)."""
    step: str | None
    """The step that produced `result`."""
    accepted: bool
    """False only when the last step that ran also rejected (or nothing ran)."""
    attempts: list[Attempt]
    """Every round that ran, in order: the escalation trace a UI renders."""
    events: list[AgentEvent] = field(default_factory=list)
    """The `step`, `trace` and `memory` events the run produced, in order. Fold them into the
    session with `reduce()` like a turn's (only `memory` changes it)."""

    def to_dict(self) -> dict[str, Any]:
        """`{"result", "step", "accepted", "attempts"}` (JSON-safe when the results are)."""
        return {
            "result": self.result,
            "step": self.step,
            "accepted": self.accepted,
            "attempts": list(self.attempts),
        }


@dataclass(slots=True, eq=False)
class LadderContext(RunContext):
    """What a ladder step's `run`, `until` and `when` and the exit gate receive as `ctx`."""

    input: Any = None
    """What the run is about."""
    workflow_name: str = ""
    step_name: str = ""
    """The step being decided on or run."""
    round: int = 1
    """1-based round of the current step."""
    feedback: Verdict | None = None
    """The previous round's verdict of this step (None on round 1)."""
    attempts: list[Attempt] = field(default_factory=list)
    """The rounds that ran so far."""
    agent: Any = None
    """The agent running the ladder (an `Agent`): a step may run turns with `ctx.agent.send()`."""
    session: Session | None = None
    """The session the ladder runs on."""
    run: WorkflowContext[Any] | None = None
    """The enclosing durable run, when the ladder runs inside one."""


def _positional_arity(fn: Callable[..., Any], most: int) -> int:
    """How many of `most` leading positional arguments `fn` takes."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return most
    count = 0
    for p in params:
        if p.kind is p.VAR_POSITIONAL:
            return most
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            count += 1
    return min(count, most)


class _Call:
    """A user callable invoked with as many of its leading arguments as it takes."""

    __slots__ = ("arity", "fn")

    def __init__(self, fn: Callable[..., Any], most: int) -> None:
        self.fn = fn
        self.arity = _positional_arity(fn, most)

    async def __call__(self, *args: Any) -> Any:
        value = self.fn(*args[: self.arity])
        if inspect.isawaitable(value):
            value = await value
        return value


def read_verdict(value: Any) -> Verdict:
    """A Verdict from what a check returned: a verdict-shaped value, or its truthiness."""
    if isinstance(value, Verdict):
        return value
    if isinstance(value, Mapping):
        if isinstance(value.get("accepted"), bool):
            return Verdict(
                accepted=value["accepted"],
                reason=value.get("reason"),
                detail=value.get("detail"),
                data=value.get("data"),
            )
        return Verdict(bool(value))
    accepted = getattr(value, "accepted", None)
    if isinstance(accepted, bool):
        return Verdict(
            accepted=accepted,
            reason=getattr(value, "reason", None),
            detail=getattr(value, "detail", None),
            data=getattr(value, "data", None),
        )
    return Verdict(bool(value))


def _verdict_dict(v: Verdict) -> dict[str, Any]:
    out: dict[str, Any] = {"accepted": v.accepted}
    if v.reason is not None:
        out["reason"] = v.reason
    if v.detail is not None:
        out["detail"] = v.detail
    if v.data is not None:
        out["data"] = v.data
    if v.gate_rejected:
        out["gate_rejected"] = True
    return out


def _verdict_from_dict(d: dict[str, Any]) -> Verdict:
    return Verdict(
        accepted=bool(d["accepted"]),
        reason=d.get("reason"),
        detail=d.get("detail"),
        data=d.get("data"),
        gate_rejected=bool(d.get("gate_rejected", False)),
    )


@dataclass(frozen=True, slots=True)
class _Rung:
    name: str
    run: _Call
    until: _Call | None
    when: _Call | None
    max_rounds: int


class LadderWorkflow:
    """A declared cascade ladder; run it with `agent.run_workflow(session, name, input)`."""

    def __init__(
        self, name: str, steps: Sequence[LadderStep], exit_gate: Check | None = None
    ) -> None:
        self.name = name
        self.steps = tuple(steps)
        self.exit_gate = exit_gate
        self._rungs = tuple(
            _Rung(
                s.name,
                _Call(s.run, 1),
                None if s.until is None else _Call(s.until, 2),
                None if s.when is None else _Call(s.when, 2),
                s.retry.max_rounds,
            )
            for s in self.steps
        )
        self._gate = None if exit_gate is None else _Call(exit_gate, 2)

    def __repr__(self) -> str:
        return f"LadderWorkflow({self.name!r}, steps={[s.name for s in self.steps]})"

    def as_workflow(
        self,
        agent: TurnPlanner,
        *,
        id: str | None = None,
        services: dict[str, Any] | None = None,
    ) -> Workflow[Any, dict[str, Any]]:
        """This ladder as a durable workflow whose output is `LadderOutcome.to_dict()`.

        Each round is a journaled step, so a resumed run does not repeat finished rounds.
        Every run uses a fresh session of `agent`.
        """

        async def run(input: Any, ctx: WorkflowContext[Any]) -> dict[str, Any]:
            outcome = await run_ladder(
                agent, agent.create_session(), self, input, services=services
            )
            return outcome.to_dict()

        return create_workflow(id or self.name, run)


def _step_from(item: LadderStep | Mapping[str, Any], workflow: str, i: int) -> LadderStep:
    if isinstance(item, LadderStep):
        step = item
    elif isinstance(item, Mapping):
        unknown = set(item) - _STEP_KEYS
        if unknown:
            raise WorkflowError(
                f"workflow {workflow!r} step {i}: unknown keys {sorted(unknown)}; "
                f"a step takes {sorted(_STEP_KEYS)}"
            )
        retry = item.get("retry")
        if retry is None:
            retry = Retry()
        elif isinstance(retry, Mapping):
            extra = set(retry) - {"max_rounds"}
            if extra:
                raise WorkflowError(
                    f"workflow {workflow!r} step {i}: retry takes only max_rounds, "
                    f"got {sorted(extra)}"
                )
            retry = Retry(**retry)
        step = LadderStep(
            # checked below, with a message naming the step
            name=cast(str, item.get("name")),
            run=cast(Callable[[LadderContext], Any], item.get("run")),
            until=item.get("until"),
            when=item.get("when"),
            retry=retry,
        )
    else:
        raise WorkflowError(
            f"workflow {workflow!r} step {i}: expected a dict or LadderStep, "
            f"got {type(item).__name__}"
        )
    where = f"workflow {workflow!r} step {step.name!r}"
    if not isinstance(step.name, str) or not step.name:
        raise WorkflowError(f"workflow {workflow!r} step {i}: name must be a non-empty string")
    if not callable(step.run):
        raise WorkflowError(f"{where}: run must be callable")
    for key in ("until", "when"):
        fn = getattr(step, key)
        if fn is not None and not callable(fn):
            raise WorkflowError(f"{where}: {key} must be callable")
    if not isinstance(step.retry, Retry):
        raise WorkflowError(f"{where}: retry must be {{'max_rounds': n}} or a Retry")
    rounds = step.retry.max_rounds
    if type(rounds) is not int or rounds < 1:
        raise WorkflowError(f"{where}: retry max_rounds must be an int >= 1, got {rounds!r}")
    return step


def define_workflow(
    name: str,
    steps: Sequence[LadderStep | Mapping[str, Any]],
    exit_gate: Check | None = None,
) -> LadderWorkflow:
    """Declare a cascade ladder.

    ```python
    define_workflow("generate", [
        {"name": "zettel", "run": zettel, "until": lambda r: r["strategy"] == "composition-match"},
        {"name": "repair", "run": repair, "until": is_valid, "retry": {"max_rounds": 3}},
        {"name": "monolithic", "run": monolithic},   # terminal: always accepted
    ], exit_gate=validates_against_catalog)
    ```

    Raises:
        WorkflowError: a step is malformed (unknown key, missing run, bad max_rounds, a
            duplicate name) — found here, before anything runs.
    """
    if not isinstance(name, str) or not name:
        raise WorkflowError(f"a workflow name must be a non-empty string, got {name!r}")
    if isinstance(steps, (str, bytes, Mapping)) or not isinstance(steps, Sequence):
        raise WorkflowError(f"workflow {name!r}: steps must be a list")
    if not steps:
        raise WorkflowError(f"workflow {name!r} has no steps")
    if exit_gate is not None and not callable(exit_gate):
        raise WorkflowError(f"workflow {name!r}: exit_gate must be callable")
    parsed = [_step_from(item, name, i) for i, item in enumerate(steps)]
    seen: set[str] = set()
    for step in parsed:
        if step.name in seen:
            raise WorkflowError(f"workflow {name!r} has two steps named {step.name!r}")
        seen.add(step.name)
    return LadderWorkflow(name, parsed, exit_gate)


# -- running ---------------------------------------------------------------------------------


class _Emitter:
    __slots__ = ("events", "on_event")

    def __init__(self, on_event: LadderEventHandler | None) -> None:
        self.events: list[AgentEvent] = []
        self.on_event = on_event

    async def emit(self, event: AgentEvent) -> None:
        self.events.append(event)
        if self.on_event is not None:
            result = self.on_event(event)
            if inspect.isawaitable(result):
                await result


async def run_ladder(
    agent: TurnPlanner,
    session: Session,
    name: str | LadderWorkflow,
    input: Any = None,
    *,
    services: Mapping[str, Any] | None = None,
    signal: AbortSignal | None = None,
    on_event: LadderEventHandler | None = None,
) -> LadderOutcome:
    """Run the agent's ladder `name` (or the given ladder) on `input`.

    `ctx.services` is the agent's services overlaid key by key with `services`. Step events,
    `workflow` trace records (`step:start`, `step:verdict`; only when the agent traces) and
    memory patches asked for with `ctx.remember()` are collected on `outcome.events` and, as they
    happen, passed to `on_event`.

    Raises:
        WorkflowError: the agent declares no workflow named `name`.
        AbortedError: `signal` was aborted (checked before each round).
        StepOutputError: inside a durable run, a round's result is not JSON-safe.
        Exception: whatever a step's `run`, `until`, `when` or the exit gate raised.
    """
    if isinstance(name, LadderWorkflow):
        ladder = name
    else:
        found = agent.workflows.get(name)
        if not isinstance(found, LadderWorkflow):
            known = ", ".join(
                repr(n) for n, w in agent.workflows.items() if isinstance(w, LadderWorkflow)
            )
            raise WorkflowError(
                f"no workflow named {name!r} is a ladder; the agent declares: {known or 'none'}"
                + (" (a durable workflow runs with agent.run_workflow())" if found else "")
            )
        ladder = found
    durable = current_run()
    plan = agent.plan_turn(session, TurnOptions(signal=signal, services=services))
    ctx = plan.ctx.derive(
        LadderContext,
        input=input,
        workflow_name=ladder.name,
        agent=agent,
        session=session,
        run=durable,
    )
    out = _Emitter(on_event)
    last: Attempt | None = None
    for rung in ladder._rungs:
        ctx.step_name = rung.name
        ctx.round = 1
        ctx.feedback = None
        if rung.when is not None:
            go = read_verdict(await rung.when(None if last is None else last["result"], ctx))
            if not go.accepted:
                await out.emit(_step_event(ladder.name, rung.name, {"status": "skipped"}))
                continue
        for round_ in range(1, rung.max_rounds + 1):
            if signal is not None and signal.aborted:
                raise AbortedError(signal.reason)
            ctx.round = round_
            await out.emit(
                _step_event(ladder.name, rung.name, {"round": round_, "status": "running"})
            )
            await _trace(ctx, out, "step:start", {"step": rung.name, "round": round_})
            result, verdict, patches = await _round(ladder, rung, ctx, durable)
            if ctx.tracer is not None:
                # What the round recorded through ctx.trace() happened before its verdict.
                for buffered in ctx.tracer.drain():
                    await out.emit(buffered)
            for patch in patches:
                await out.emit(cast(MemoryEvent, {"type": "memory", "patch": patch}))
            attempt = cast(Attempt, {"step": rung.name, **_verdict_dict(verdict), "round": round_})
            attempt["result"] = result
            ctx.attempts.append(attempt)
            last = attempt
            status = "accepted" if verdict.accepted else "rejected"
            summary = {k: v for k, v in attempt.items() if k in ("reason", "gate_rejected")}
            await out.emit(
                _step_event(ladder.name, rung.name, {"round": round_, "status": status, **summary})
            )
            await _trace(
                ctx,
                out,
                "step:verdict",
                {"step": rung.name, "round": round_, "accepted": verdict.accepted, **summary},
            )
            if verdict.accepted:
                return LadderOutcome(result, rung.name, True, ctx.attempts, out.events)
            ctx.feedback = verdict
    if last is None:
        return LadderOutcome(None, None, False, ctx.attempts, out.events)
    return LadderOutcome(last["result"], last["step"], False, ctx.attempts, out.events)


def _step_event(workflow: str, step: str, data: dict[str, Any]) -> StepEvent:
    return {"type": "step", "workflow": workflow, "step": step, "data": data}


async def _trace(ctx: LadderContext, out: _Emitter, name: str, data: dict[str, Any]) -> None:
    tracer = ctx.tracer
    if tracer is None:
        return
    await out.emit(tracer.record("workflow", name, {"workflow": ctx.workflow_name, **data}))


async def _decide(ladder: LadderWorkflow, rung: _Rung, result: Any, ctx: LadderContext) -> Verdict:
    if rung.until is None:
        return Verdict(True)  # terminal: the floor of the ladder, never gated
    verdict = read_verdict(await rung.until(result, ctx))
    if verdict.accepted and ladder._gate is not None:
        gate = read_verdict(await ladder._gate(result, ctx))
        if not gate.accepted:
            return Verdict(
                accepted=False,
                reason="gate-rejected",
                detail=gate.detail if gate.detail is not None else gate.reason,
                data=gate.data,
                gate_rejected=True,
            )
    return verdict


async def _round(
    ladder: LadderWorkflow,
    rung: _Rung,
    ctx: LadderContext,
    durable: WorkflowContext[Any] | None,
) -> tuple[Any, Verdict, list[dict[str, Any]]]:
    """Run one round and decide on it; inside a durable run, as one journaled step."""

    async def once() -> tuple[Any, Verdict, list[dict[str, Any]]]:
        result = await rung.run(ctx)
        verdict = await _decide(ladder, rung, result, ctx)
        patches = ctx.take_memory_writes()
        return result, verdict, patches

    if durable is None:
        return await once()
    step = f"ladder:{_quote(ladder.name)}:{_quote(rung.name)}:{ctx.round}"

    async def journaled() -> dict[str, Any]:
        result, verdict, patches = await once()
        entry = {"result": result, "verdict": _verdict_dict(verdict), "memory": patches}
        try:
            check_json_safe(entry["result"], "result")
            check_json_safe(entry["verdict"], "verdict")
        except NotJSONSafeError as exc:
            raise StepOutputError(step, exc.path, exc.what) from exc
        return entry

    entry = await durable.step(step, journaled)
    return entry["result"], _verdict_from_dict(entry["verdict"]), list(entry["memory"])


def _quote(name: str) -> str:
    # Journal step names may not contain '#' or '/'; ladder and step names may.
    return quote(name, safe="")
