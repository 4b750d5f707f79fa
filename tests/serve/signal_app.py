"""Workflows that wait for signals, served by `tether serve` in test_signals.py (beside the
shared test project's runtime, whose module the tether.toml lists first)."""

from __future__ import annotations

from typing import Any

from project_app import runtime  # type: ignore[import-not-found]  # the served project's module

from tether.errors import WorkflowWaitTimeoutError
from tether.workflows import WorkflowContext


async def review_run(input: Any, ctx: WorkflowContext[Any]) -> dict[str, Any]:
    draft = await ctx.step("draft", lambda: f"draft of {input['doc']}")
    verdict = await ctx.wait_for(
        "verdict",
        schema={"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]},
    )
    return {"draft": draft, "ok": verdict["ok"]}


async def deadline_run(input: Any, ctx: WorkflowContext[Any]) -> str:
    try:
        return str(await ctx.wait_for("reply", timeout=float(input["timeout"])))
    except WorkflowWaitTimeoutError:
        return "timed out"


review = runtime.create_workflow("review", review_run)
deadline = runtime.create_workflow("deadline", deadline_run)
