"""Stop conditions for the tool loop, evaluated after each step that called tools."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeAlias

from .events import TextPart, ThinkingPart, ToolCallPart, ToolResultPart, Usage

__all__ = ["StepResult", "StopCondition", "has_tool_call", "should_stop", "step_count_is"]


@dataclass(slots=True)
class StepResult:
    """One model request of a turn and what followed it."""

    text: str
    tool_calls: list[ToolCallPart] = field(default_factory=list)
    tool_results: list[ToolResultPart] = field(default_factory=list)
    stop_reason: str | None = None
    usage: Usage = field(default_factory=dict)  # type: ignore[assignment]
    content: list[TextPart | ThinkingPart | ToolCallPart] = field(default_factory=list)


StopCondition: TypeAlias = Callable[[Sequence[StepResult]], bool]


def step_count_is(n: int) -> StopCondition:
    """Stop once `n` steps (model requests) have run."""
    if n < 1:
        raise ValueError("step_count_is(n) needs n >= 1")

    def condition(steps: Sequence[StepResult]) -> bool:
        return len(steps) >= n

    condition.__name__ = f"step_count_is({n})"
    return condition


def has_tool_call(name: str) -> StopCondition:
    """Stop after a step in which the model called `name`."""

    def condition(steps: Sequence[StepResult]) -> bool:
        return bool(steps) and any(c["name"] == name for c in steps[-1].tool_calls)

    condition.__name__ = f"has_tool_call({name!r})"
    return condition


def should_stop(conditions: Sequence[StopCondition], steps: Sequence[StepResult]) -> bool:
    return any(cond(steps) for cond in conditions)
