"""How soon a resume waiting for a busy workflow run (an attach) returns after its holder
finished: PostgreSQL (woken by the holder's NOTIFY) against SQLite (polling with a backoff).

    PYTHONPATH=src:. .venv/bin/python bench/attach_wake.py [--runs 8]

Each run: a holder (a store of its own, as another process's would be) runs a one-step workflow
whose step ends after a random 0.2-1.5 s; an attach started meanwhile waits for it. Printed: the
median and worst ms from the holder's finish to the attach's return, per store. The PostgreSQL
server is the tests' (tests/postgres_server.py: a throwaway cluster, or TETHER_TEST_POSTGRES_URL).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from tether.stores.sqlite import SqliteWorkflowStore, connect
from tether.workflows import WorkflowContext, create_workflow


async def one(holder_store: Any, waiter_store: Any, pause: float) -> float:
    finished: list[float] = []

    async def body(input: int, ctx: WorkflowContext[int]) -> int:
        async def slow() -> int:
            await asyncio.sleep(pause)
            return input

        return await ctx.step("slow", slow)

    holder = create_workflow("wf", body, store=holder_store)
    waiter = create_workflow("wf", body, store=waiter_store)
    first = holder.run(1)
    await asyncio.sleep(0.1)
    attach = waiter.run(workflow_run_id=first.workflow_run_id)
    await first
    finished.append(time.perf_counter())
    await attach
    return (time.perf_counter() - finished[0]) * 1000


async def measure(name: str, make: Any, runs: int) -> None:
    holder_store, waiter_store = await make()
    rng = random.Random(7)
    latencies = []
    try:
        for _ in range(runs):
            latencies.append(await one(holder_store, waiter_store, rng.uniform(0.2, 1.5)))
    finally:
        await holder_store.aclose()
        await waiter_store.aclose()
    print(
        f"{name:<28} attach returns after the finish: median {statistics.median(latencies):7.1f}"
        f" ms, worst {max(latencies):7.1f} ms ({runs} runs)"
    )


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=8)
    runs = parser.parse_args().runs
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "wf.db"

        async def sqlite() -> tuple[Any, Any]:
            return (
                SqliteWorkflowStore(connect(path), owns=True),
                SqliteWorkflowStore(connect(path), owns=True),
            )

        await measure("SQLite (polling)", sqlite, runs)
    try:
        from tests.postgres_server import postgres_url

        from tether.stores.postgres import PostgresWorkflowStore

        url = postgres_url()
    except Exception as exc:  # no server: say so, the SQLite figure stands alone
        print(f"PostgreSQL: skipped ({exc})")
        return

    async def postgres() -> tuple[Any, Any]:
        return PostgresWorkflowStore(url), PostgresWorkflowStore(url)

    try:
        await measure("PostgreSQL (LISTEN/NOTIFY)", postgres, runs)
    finally:
        from tests.postgres_server import shutdown

        shutdown()


if __name__ == "__main__":
    asyncio.run(main())
