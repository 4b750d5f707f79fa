"""A five-step durable workflow run as a separate process by test_crash.py.

    python crash_workflow.py DB SIDE_EFFECTS MODE [RUN_ID]

MODE "crash" stops inside step 3 (after its side effect) and waits to be killed; "run" runs to
the end. With RUN_ID the stored run is resumed. Each step appends its name to SIDE_EFFECTS when it
executes, so the test can count executions. Prints `RUN-ID <id>`, then `IN-STEP-3` (crash mode)
or `OUTPUT <json>`.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from tether.stores import SqliteWorkflowStore
from tether.workflows import WorkflowContext, create_workflow


def _note(path: str, line: str) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write(line + "\n")


def main(db: str, side_effects: str, mode: str, run_id: str | None) -> None:
    async def run(input: dict[str, Any], ctx: WorkflowContext[dict[str, Any]]) -> dict[str, Any]:
        done: list[dict[str, Any]] = []
        for n in range(1, 6):

            async def step(n: int = n) -> dict[str, Any]:
                _note(side_effects, f"step{n}")
                if mode == "crash" and n == 3:
                    print("IN-STEP-3", flush=True)
                    await asyncio.Event().wait()
                previous = done[-1]["acc"] if done else input["seed"]
                return {"n": n, "acc": previous * 3 + n, "topic": input["topic"]}

            done.append(await ctx.step(f"step-{n}", step))
        return {"topic": input["topic"], "steps": done, "final": done[-1]["acc"]}

    async def go() -> None:
        store = SqliteWorkflowStore.open(db)
        workflow = create_workflow("five-steps", run)
        if run_id is None:
            handle = workflow.run({"topic": "crash-test", "seed": 7}, store=store)
        else:
            handle = workflow.run(store=store, workflow_run_id=run_id)
        print("RUN-ID", handle.workflow_run_id, flush=True)
        output = await handle
        print("OUTPUT", json.dumps(output), flush=True)
        await store.aclose()

    asyncio.run(go())


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else None)
