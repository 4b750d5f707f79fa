"""Decisions on paused tool calls: `approve()`, `deny()`, `result()`, and how they are checked.

A turn pauses on the calls of its round that need a decision (a tool declared with
``approval=``, an ``external=True`` tool, a guardrail that answered ``ask``, a tool that asked
a person for input mid-call: an MCP elicitation with ``elicitation="pause"``); the session keeps
them as `pending`. `Agent.resume(session, decisions)` continues the turn with one decision per
pending call, keyed by the call's id. Decisions are plain JSON dicts, so a paused lab run stores
them as they are.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, NotRequired, TypeAlias, TypedDict, cast

from .errors import DecisionError, NotPausedError
from .events import PendingCall

if TYPE_CHECKING:
    from .tools import Tool

__all__ = [
    "ApproveDecision",
    "Decision",
    "DenyDecision",
    "ResultDecision",
    "approve",
    "check_decisions",
    "check_edit",
    "denial_text",
    "deny",
    "input_answer",
    "result",
]


class ApproveDecision(TypedDict):
    """Run the call: with its own arguments, or with `input` (edited; checked against the
    tool's schema when the turn resumes)."""

    action: Literal["approve"]
    input: NotRequired[Any]


class DenyDecision(TypedDict):
    """Do not run the call: the model reads an error result with `reason`."""

    action: Literal["deny"]
    reason: str


class ResultDecision(TypedDict):
    """An external call's result, run by the caller (or the front end); for an input call,
    the value asked for, as JSON (the tool goes on with it)."""

    action: Literal["result"]
    output: str
    is_error: bool


Decision: TypeAlias = ApproveDecision | DenyDecision | ResultDecision

_KEEP: Any = object()


def approve(*, input: Any = _KEEP) -> ApproveDecision:
    """Approve a pending call; `input=` replaces its arguments (checked against the tool's
    schema when the turn resumes)."""
    decision: ApproveDecision = {"action": "approve"}
    if input is not _KEEP:
        from ._json import check_json_safe, copy_json

        check_json_safe(input, "approve(input=)")
        decision["input"] = copy_json(input)
    return decision


def deny(reason: str = "denied") -> DenyDecision:
    """Deny a pending call: the model sees an error result carrying `reason`."""
    if not isinstance(reason, str):
        raise TypeError(f"deny() takes a string reason, got {type(reason).__name__}")
    return {"action": "deny", "reason": reason}


def result(output: Any, is_error: bool = False) -> ResultDecision:
    """The result of an external call, as the model reads it: a string as it is, any other
    JSON value as compact JSON. For an input call (an MCP elicitation), the value asked for:
    an object its schema takes (checked on resume); the tool goes on with it."""
    if not isinstance(output, str):
        from .tools import output_text

        output = output_text(output)
    return {"action": "result", "output": output, "is_error": bool(is_error)}


_ALLOWED: dict[str, tuple[str, ...]] = {
    "approval": ("approve", "deny"),
    "external": ("result", "deny"),
    "input": ("result", "deny"),
}


def check_decisions(
    pending: Sequence[PendingCall],
    decisions: Mapping[str, Any],
    decided: Callable[[], Collection[str]] = frozenset,
) -> list[tuple[PendingCall, Decision]]:
    """Each pending call with its decision, in the pending order.

    `decided()` gives the ids of the calls that already have a result (asked only to tell an
    already decided id from an unknown one, in the error).

    Raises:
        NotPausedError: nothing is pending.
        DecisionError: a pending call without a decision, an id that is not pending, or a
            decision that is not one of `approve()` / `deny()` / `result()` or does not fit the
            call's kind. The error names the call.
    """
    if not pending:
        raise NotPausedError(
            "the session waits for no decision: only a session whose turn ended paused "
            "(done.finish_reason == 'paused') can be resumed"
        )
    if not isinstance(decisions, Mapping):
        raise TypeError(f"decisions must map call ids to decisions, got {type(decisions).__name__}")
    ids = {p["id"] for p in pending}
    for cid in decisions:
        if cid in ids:
            continue
        if cid in decided():
            raise DecisionError(
                f"call {cid!r} was already decided; pending: {', '.join(sorted(ids))}",
                call_id=cid,
            )
        raise DecisionError(
            f"call {cid!r} is not a pending call of this session; pending: "
            f"{', '.join(sorted(ids))}",
            call_id=str(cid),
        )
    out: list[tuple[PendingCall, Decision]] = []
    for p in pending:
        cid = p["id"]
        decision = decisions.get(cid)
        if decision is None:
            raise DecisionError(
                f"no decision for pending call {cid!r} ({p['name']}): give each pending call "
                "approve(), deny(reason) or, for an external or input call, result(output)",
                call_id=cid,
            )
        action = decision.get("action") if isinstance(decision, Mapping) else None
        allowed = _ALLOWED.get(p["kind"], ())
        if action not in allowed:
            what = " or ".join(f"{a}()" for a in allowed)
            raise DecisionError(
                f"the decision on call {cid!r} ({p['name']}, {p['kind']}) is {decision!r:.120}; "
                f"a {p['kind']} call takes {what}",
                call_id=cid,
            )
        if action == "deny" and not isinstance(decision.get("reason"), str):
            raise DecisionError(f"the denial of call {cid!r} needs a string reason", call_id=cid)
        if action == "result" and not isinstance(decision.get("output"), str):
            raise DecisionError(
                f"the result of call {cid!r} needs a string output (use result(output))",
                call_id=cid,
            )
        if action == "result" and p["kind"] == "input":
            problem = _answer_problem(p, decision)
            if problem is not None:
                raise DecisionError(
                    f"the answer to call {cid!r} ({p['name']} asks for input) {problem}",
                    call_id=cid,
                )
        # The checks above proved its shape: the action this call takes, with its fields.
        out.append((p, cast(Decision, dict(decision))))
    return out


def _answer_problem(call: PendingCall, decision: Mapping[str, Any]) -> str | None:
    """What is wrong with a result given to an input call, else None: it is the value asked
    for, a JSON object its schema takes (the schema's defaults count for what it leaves out)."""
    if decision.get("is_error"):
        return "cannot be an error: give result(value) with the value asked for, or deny(reason)"
    try:
        value = json.loads(decision["output"])
    except ValueError:
        value = None
    if not isinstance(value, dict):
        return f"must be the object asked for, as result({{...}}), got {decision['output']!r:.120}"
    schema = call.get("schema")
    if not isinstance(schema, dict):
        return None
    from .errors import ToolDefinitionError
    from .tools import _schema_checker

    try:
        check = _schema_checker(call["name"], schema)
    except ToolDefinitionError:
        return None  # a schema that does not compile: the tool is the one to judge the answer
    problem = check(_with_defaults(schema, value))
    return None if problem is None else f"does not match the schema asked for: {problem}"


def _with_defaults(schema: Mapping[str, Any], content: dict[str, Any]) -> dict[str, Any]:
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return content
    defaults = {
        k: spec["default"]
        for k, spec in properties.items()
        if k not in content and isinstance(spec, dict) and "default" in spec
    }
    return {**content, **defaults} if defaults else content


def check_edit(call: PendingCall, decision: Decision, tool: Tool) -> None:
    """An approval with edited input (`approve(input=...)`) that `tool`'s schema refuses:
    DecisionError naming the call. Anything else passes."""
    if decision["action"] != "approve" or "input" not in decision:
        return
    problem = tool.check_input(decision["input"])
    if problem is not None:
        raise DecisionError(
            f"the edited input of call {call['id']!r} ({call['name']}) does not match the "
            f"tool's schema: {problem}",
            call_id=call["id"],
        )


def input_answer(decision: Decision) -> dict[str, Any]:
    """The answer an input call's tool goes on with (`Tool.resume_input`): a result's value
    accepted, a denial declined (the tool's own answer then reaches the model)."""
    if decision["action"] == "result":
        return {"action": "accept", "content": json.loads(decision["output"])}
    return {"action": "decline"}


def denial_text(name: str, reason: str) -> str:
    """What the model reads for a denied call."""
    return (
        f"The call to {name} was denied: {reason}" if reason else f"The call to {name} was denied"
    )
