"""Guardrails: deterministic code between the model and the world.

A `tool_call` guardrail sees a call before it executes and may allow (return None), rewrite
(``{"action": "rewrite", "input": ...}``) or deny (``{"action": "deny", "reason": ...}``). An `output`
guardrail sees the text of the round that ends the turn and may rewrite (``{"text": ...}``) or
deny it. They run in declaration order; a rewrite feeds the next, the first deny stops the chain.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .errors import ToolDefinitionError

__all__ = ["Guardrail", "define_guardrail"]

GuardrailFn = Callable[..., Any]


@dataclass(slots=True, frozen=True)
class Guardrail:
    name: str
    tool_call: GuardrailFn | None = None
    output: GuardrailFn | None = None


def define_guardrail(
    *, name: str, tool_call: GuardrailFn | None = None, output: GuardrailFn | None = None
) -> Guardrail:
    """`tool_call(call, ctx)` and `output(text, ctx)` may be sync or async."""
    if tool_call is None and output is None:
        raise ToolDefinitionError(f"guardrail {name!r} needs tool_call=, output= or both")
    return Guardrail(name, tool_call, output)


async def decide(fn: GuardrailFn, subject: Any, ctx: Any) -> dict[str, Any] | None:
    """Run one guardrail function; None or ``{"action": "allow"}`` means allow."""
    n = len(inspect.signature(fn).parameters)
    result = fn(subject, ctx) if n >= 2 else fn(subject)
    if inspect.isawaitable(result):
        result = await result
    if result is None or (isinstance(result, dict) and result.get("action") == "allow"):
        return None
    if not isinstance(result, dict) or result.get("action") not in ("rewrite", "deny"):
        raise ToolDefinitionError(
            f"a guardrail returned {result!r}; return None, or a dict with action "
            "'allow', 'rewrite' or 'deny'"
        )
    return result
