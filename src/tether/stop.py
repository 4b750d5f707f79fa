"""Stop conditions for the tool loop, evaluated after each round that called tools."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeAlias

from .events import FinishReason, TextPart, ThinkingPart, ToolCallPart, ToolResultPart, Usage

__all__ = [
    "RoundResult",
    "StopCondition",
    "has_tool_call",
    "should_stop",
    "step_count_is",
]


def _no_usage() -> Usage:
    return {}


@dataclass(slots=True)
class RoundResult:
    """One round of a turn: one model request and the tool calls that followed it."""

    text: str
    """The round's visible text."""
    tool_calls: list[ToolCallPart] = field(default_factory=list)
    """The calls the model made, in order (empty on the round that answered)."""
    tool_results: list[ToolResultPart] = field(default_factory=list)
    """The results of the calls that ran, in order (filled as they complete)."""
    stop_reason: str | None = None
    """The provider's raw stop reason for this request."""
    usage: Usage = field(default_factory=_no_usage)
    """This request's token usage."""
    content: list[TextPart | ThinkingPart | ToolCallPart] = field(default_factory=list)
    """The assistant message of this request as the provider sent it."""
    finish_reason: FinishReason | None = None
    """The normalized reading of `stop_reason` (see `FinishReason`)."""


StopCondition: TypeAlias = Callable[[Sequence[RoundResult]], bool]
"""Decides after a tool round whether the loop stops; it sees every round of the turn so far."""


def step_count_is(n: int) -> StopCondition:
    """Stop once `n` rounds (model requests) have run."""
    if n < 1:
        raise ValueError("step_count_is(n) needs n >= 1")

    def condition(rounds: Sequence[RoundResult]) -> bool:
        return len(rounds) >= n

    condition.__name__ = f"step_count_is({n})"
    return condition


def has_tool_call(name: str) -> StopCondition:
    """Stop after a round in which the model called `name`."""

    def condition(rounds: Sequence[RoundResult]) -> bool:
        return bool(rounds) and any(c["name"] == name for c in rounds[-1].tool_calls)

    condition.__name__ = f"has_tool_call({name!r})"
    return condition


def should_stop(conditions: Sequence[StopCondition], rounds: Sequence[RoundResult]) -> bool:
    """True when any of `conditions` says stop."""
    return any(cond(rounds) for cond in conditions)
