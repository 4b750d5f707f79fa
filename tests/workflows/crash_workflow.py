"""A five-step durable workflow run as a separate process by test_crash.py.

    python crash_workflow.py STORE SIDE_EFFECTS MODE [RUN_ID]

STORE is a SQLite file path or a PostgreSQL URL. MODE is one of

- "crash": stop inside step 3 (after its side effect) and wait to be killed;
- "fail": step 3 raises, so the run ends failed;
- "run": run to the end;
- "race": like "run", but first print `READY` and wait for the file SIDE_EFFECTS + ".go" (so
  two processes can resume one run at the same moment), and take 0.3 s per step.

With RUN_ID the stored run is resumed. The environment's LEASE_TTL sets the run's lease (seconds)
and LEASE_WAIT how long a resume waits for another holder. Each step appends its name and this
process's pid to SIDE_EFFECTS when it executes, so the test can count executions. Prints
`RUN-ID <id>`, then `IN-STEP-3` (crash mode), `OUTPUT <json>`, `FAILED <message>` or
`BUSY <message>` (exit status 3: another live process holds the run).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from tether.errors import WorkflowRunBusyError
from tether.stores import SqliteWorkflowStore, WorkflowStore
from tether.workflows import WorkflowContext, create_workflow


def _note(path: str, line: str) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write(f"{line} {os.getpid()}\n")


def _store(spec: str) -> WorkflowStore:
    if spec.startswith("postgresql://"):
        from tether.stores.postgres import PostgresWorkflowStore

        return PostgresWorkflowStore(spec)
    return SqliteWorkflowStore.open(spec)


def main(spec: str, side_effects: str, mode: str, run_id: str | None) -> int:
    pace = 0.3 if mode == "race" else 0.0

    async def run(input: dict[str, Any], ctx: WorkflowContext[dict[str, Any]]) -> dict[str, Any]:
        done: list[dict[str, Any]] = []
        for n in range(1, 6):

            async def step(n: int = n) -> dict[str, Any]:
                _note(side_effects, f"step{n}")
                if n == 3 and mode == "crash":
                    print("IN-STEP-3", flush=True)
                    await asyncio.Event().wait()
                if n == 3 and mode == "fail":
                    raise RuntimeError("step 3 failed")
                await asyncio.sleep(pace)
                previous = done[-1]["acc"] if done else input["seed"]
                return {"n": n, "acc": previous * 3 + n, "topic": input["topic"]}

            done.append(await ctx.step(f"step-{n}", step))
        return {"topic": input["topic"], "steps": done, "final": done[-1]["acc"]}

    async def go() -> int:
        store = _store(spec)
        workflow = create_workflow(
            "five-steps", run, lease_ttl=float(os.environ.get("LEASE_TTL", "30"))
        )
        wait = float(os.environ.get("LEASE_WAIT", "0"))
        try:
            if mode == "race":
                await store.get_run("warm-up")  # connect and migrate before the start line
                print("READY", flush=True)
                # A tight start line, on purpose blocking: nothing else runs in this process yet.
                while not Path(side_effects + ".go").exists():  # noqa: ASYNC240
                    time.sleep(0.005)  # noqa: ASYNC251
            if run_id is None:
                handle = workflow.run({"topic": "crash-test", "seed": 7}, store=store)
            else:
                handle = workflow.run(store=store, workflow_run_id=run_id, wait=wait)
            print("RUN-ID", handle.workflow_run_id, flush=True)
            try:
                output = await handle
            except WorkflowRunBusyError as exc:
                print("BUSY", exc, flush=True)
                return 3
            except RuntimeError as exc:
                print("FAILED", exc, flush=True)
                return 1
            print("OUTPUT", json.dumps(output), flush=True)
            return 0
        finally:
            await store.aclose()

    return asyncio.run(go())


if __name__ == "__main__":
    sys.exit(
        main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else None)
    )
