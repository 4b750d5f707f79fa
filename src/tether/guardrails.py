"""Guardrails: deterministic code between the model and the world.

A `tool_call` guardrail sees a call before it executes and may allow (return None or
``{"action": "allow"}``), rewrite (``{"action": "rewrite", "input": {...}}``), deny
(``{"action": "deny", "reason": "..."}``) or ask a human (``{"action": "ask", "reason":
"..."}``: the turn pauses on the call, see `tether.approvals`). An `output` guardrail sees the
text of the round that ends the turn and may rewrite it (``{"action": "rewrite", "text":
"..."}``) or deny it.

Guardrails run in declaration order and chain: a rewrite feeds the next one, the first deny (or
ask) stops the chain. A guardrail decides from the call (or the final text) and the harness's
own context; the text of a tool result, a resource or a model turn is data and never reaches it
as anything else.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, NotRequired, TypeAlias, TypedDict, cast

from .errors import AbortedError, ToolDefinitionError
from .events import AgentEvent, GuardrailEvent

if TYPE_CHECKING:
    from .context import RunContext

__all__ = [
    "Ask",
    "Guardrail",
    "GuardrailDecision",
    "OutputGuardrail",
    "OutputOutcome",
    "ToolCallGuardrail",
    "ToolCallSubject",
    "decide",
    "define_guardrail",
    "run_output_guards",
    "run_tool_call_guards",
]


class ToolCallSubject(TypedDict):
    """What a `tool_call` guardrail is shown: the call, and nothing the call did not carry."""

    id: str
    name: str
    input: Any


class GuardrailDecision(TypedDict):
    """A non-allow decision. `input` goes with a tool-call rewrite, `text` with an output one;
    `ask` is for tool calls only."""

    action: Literal["rewrite", "deny", "ask"]
    reason: NotRequired[str]
    input: NotRequired[Any]
    text: NotRequired[str]


_Result: TypeAlias = GuardrailDecision | dict[str, Any] | None
ToolCallGuardrail: TypeAlias = Callable[..., _Result | Awaitable[_Result]]
"""``(call: ToolCallSubject, ctx: RunContext) -> decision | None``, sync or async; ctx optional."""
OutputGuardrail: TypeAlias = Callable[..., _Result | Awaitable[_Result]]
"""``(text: str, ctx: RunContext) -> decision | None``, sync or async; ctx optional."""

Target: TypeAlias = Literal["tool_call", "output"]


@dataclass(slots=True, frozen=True)
class Guardrail:
    """A named guardrail with one or both attach points. Build one with `define_guardrail`."""

    name: str
    """Names the guardrail in `guardrail` events, trace records and denial messages."""
    tool_call: ToolCallGuardrail | None = None
    """Runs before a tool call executes."""
    output: OutputGuardrail | None = None
    """Runs on the text of the round that ends the turn."""


def define_guardrail(
    *,
    name: str,
    tool_call: ToolCallGuardrail | None = None,
    output: OutputGuardrail | None = None,
) -> Guardrail:
    """Declare a guardrail. `tool_call(call, ctx)` and `output(text, ctx)` may be sync or async,
    and may take only their first argument. `ctx` is the same context a tool receives
    (`services`, `memory`, `remember()`, `trace()`, `signal`)."""
    if not isinstance(name, str) or not name:
        raise ToolDefinitionError(f"a guardrail needs a non-empty name, got {name!r}")
    if tool_call is None and output is None:
        raise ToolDefinitionError(f"guardrail {name!r} needs tool_call=, output= or both")
    for label, fn in (("tool_call", tool_call), ("output", output)):
        if fn is not None and not callable(fn):
            raise ToolDefinitionError(f"guardrail {name!r}: {label}= must be callable")
    return Guardrail(name, tool_call, output)


def _takes_ctx(fn: Callable[..., Any]) -> bool:
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):  # some builtins and C callables have no signature
        return True
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2 or any(p.kind is p.VAR_POSITIONAL for p in params)


async def decide(
    fn: Callable[..., Any], subject: Any, ctx: Any, *, target: Target | None = None
) -> GuardrailDecision | None:
    """Run one guardrail function and return its decision; None means allow.

    A result that is not None or a dict with action 'allow', 'rewrite', 'deny' (or, for a tool
    call, 'ask') raises ToolDefinitionError (the loop turns that into a denial: a guardrail
    that cannot be read fails closed). With `target`, a rewrite must also carry what it
    rewrites: ``input`` for a tool call, a string ``text`` for output.
    """
    result = fn(subject, ctx) if _takes_ctx(fn) else fn(subject)
    if inspect.isawaitable(result):
        result = await result
    if result is None:
        return None
    action = result.get("action") if isinstance(result, dict) else None
    if action == "allow":
        return None
    if action not in ("rewrite", "deny") and not (action == "ask" and target != "output"):
        asks = "" if target == "output" else " (or 'ask', for a tool call)"
        raise ToolDefinitionError(
            f"a guardrail returned {result!r:.200}; return None, or a dict with action "
            f"'allow', 'rewrite' or 'deny'{asks}"
        )
    if action == "rewrite":
        if target == "tool_call" and "input" not in result:
            raise ToolDefinitionError("a tool_call guardrail's rewrite needs an 'input'")
        if target == "output" and not isinstance(result.get("text"), str):
            raise ToolDefinitionError("an output guardrail's rewrite needs a string 'text'")
    return cast(GuardrailDecision, result)


# -- running the chains (the tool loop's side) ---------------------------------------------


def _raised(exc: Exception) -> GuardrailDecision:
    # A guardrail that cannot decide fails closed.
    return {"action": "deny", "reason": f"guardrail raised {type(exc).__name__}: {exc}"}


async def _decision(
    fn: Callable[..., Any],
    subject: Any,
    ctx: RunContext,
    target: Target,
    events: list[AgentEvent],
) -> GuardrailDecision | None:
    """One guardrail's decision (a deny when it raised); what it traced itself goes to `events`
    first, before its own record."""
    try:
        decision = await decide(fn, subject, ctx, target=target)
    except AbortedError:
        raise
    except Exception as exc:
        decision = _raised(exc)
    if ctx.tracer is not None:
        events.extend(ctx.tracer.drain())
    return decision


def _record(
    events: list[AgentEvent],
    ctx: RunContext,
    name: str,
    target: Target,
    decision: GuardrailDecision,
    call: tuple[str, str] | None = None,
) -> None:
    """Append the `guardrail` event of a decision that was not allow (and its trace record);
    `call` is the (tool name, tool call id) of a tool-call decision."""
    action, reason = decision["action"], decision.get("reason")
    gev: GuardrailEvent = {"type": "guardrail", "name": name, "target": target, "action": action}
    if call is not None:
        gev["tool_name"], gev["tool_use_id"] = call
    if reason is not None:
        gev["reason"] = str(reason)
    events.append(gev)
    if ctx.tracer is not None:
        data = {"target": target, "action": action, "reason": reason}
        if call is not None:
            data.update(tool=call[0], tool_use_id=call[1])
        events.append(ctx.tracer.record("guardrail", name, data))


async def run_tool_call_guards(
    guards: Sequence[tuple[str, Callable[..., Any]]],
    call_id: str,
    tool_name: str,
    value: Any,
    ctx: RunContext,
) -> tuple[list[AgentEvent], Any, str | Ask | None]:
    """Run the tool-call chain on one call: in order, a rewrite feeding the next guardrail, the
    first deny (or ask) stopping it. Returns the `guardrail` events (and trace records, what a
    guardrail traced itself first), the input to call the tool with, and the denial the model
    reads, or an `Ask` (None when the call may run)."""
    events: list[AgentEvent] = []
    for gname, fn in guards:
        subject: ToolCallSubject = {"id": call_id, "name": tool_name, "input": value}
        decision = await _decision(fn, subject, ctx, "tool_call", events)
        if decision is None:
            continue
        _record(events, ctx, gname, "tool_call", decision, (tool_name, call_id))
        action, reason = decision["action"], decision.get("reason")
        if action == "deny":
            why = f": {reason}" if reason else ""
            if gname == "on_tool_call":
                return events, value, f"Tool call {tool_name} was denied{why}"
            return events, value, f"Guardrail {gname} denied the call to {tool_name}{why}"
        if action == "ask":
            return events, value, Ask(None if reason is None else str(reason))
        value = decision.get("input", value)
    return events, value, None


@dataclass(slots=True, frozen=True)
class Ask:
    """A tool-call chain's `ask`: the call waits for a human's decision."""

    reason: str | None = None


@dataclass(slots=True)
class OutputOutcome:
    """What the output chain decided on the final text."""

    text: str
    """The text after every rewrite ("" when denied)."""
    events: list[AgentEvent] = field(default_factory=list)
    """The `guardrail` events and trace records, in order."""
    decided: bool = False
    """True when any guardrail rewrote or denied."""
    denied: bool = False


async def run_output_guards(
    guards: Sequence[tuple[str, Callable[..., Any]]], text: str, ctx: RunContext
) -> OutputOutcome:
    """Run the output chain on the final round's text (rewrites chain, the first deny stops)."""
    out = OutputOutcome(text)
    for gname, fn in guards:
        decision = await _decision(fn, out.text, ctx, "output", out.events)
        if decision is None:
            continue
        out.decided = True
        _record(out.events, ctx, gname, "output", decision)
        if decision["action"] == "deny":
            out.text, out.denied = "", True
            break
        out.text = str(decision.get("text", out.text))
    return out
