"""1,000 durable workflow runs waiting for a signal at once: what they cost while they wait, and
what a signal's resume adds.

    .venv/bin/python bench/workflow_waits.py [--runs N] [--store sqlite|postgres|both]

Each run is a lab workflow (`Runtime.create_workflow`, its runs recorded in the run store): one
step, then `ctx.wait_for("go")`, then one more step. All N are started and awaited until each
raised `WorkflowWaitingError`. Then, with every run waiting, measured in this process:

- asyncio tasks alive (a waiting run must hold none: its task ended);
- open file descriptors and resident memory, against before the runs started;
- the PostgreSQL connections the store's pool holds busy (none is held for a waiting run).

Last, each run is signalled in turn and awaited to its end: the wall time of
`runtime.signal(...)` + the resumed run to its output, against the same two-step run started
fresh and run to its end in the same store (the difference is what a signal and a resume add:
the journal read, the replayed step, the takeover write). Target: ≤ 5 ms added on SQLite.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import resource
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

from tether.errors import WorkflowWaitingError
from tether.lab import Runtime
from tether.workflows import WorkflowContext


def _fds() -> int:
    return len(os.listdir("/proc/self/fd")) if Path("/proc/self/fd").exists() else -1


def _rss_mib() -> float:
    statm = Path("/proc/self/statm")
    if statm.exists():
        return int(statm.read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def waiting(input: Any, ctx: WorkflowContext[Any]) -> Any:
    first = await ctx.step("first", lambda: input)
    value = await ctx.wait_for("go")
    return await ctx.step("last", lambda: [first, value])


async def straight(input: Any, ctx: WorkflowContext[Any]) -> Any:
    first = await ctx.step("first", lambda: input)
    return await ctx.step("last", lambda: [first, input])


async def bench(store: str, runs: int) -> None:
    lab = Runtime(store=store, version=False)
    wait_flow = lab.create_workflow("waiting", waiting)
    plain_flow = lab.create_workflow("straight", straight)
    _ = lab.run_store, lab.workflow_store
    await (plain_flow.run(0)).result  # warm up: stores migrated, connections opened
    tasks0, fds0, rss0 = len(asyncio.all_tasks()), _fds(), _rss_mib()
    tracemalloc.start()
    live0 = tracemalloc.get_traced_memory()[0]

    started = time.perf_counter()
    handles = [wait_flow.run(i) for i in range(runs)]
    outcomes = await asyncio.gather(*(h.result for h in handles), return_exceptions=True)
    assert all(isinstance(o, WorkflowWaitingError) for o in outcomes), outcomes[:3]
    park = time.perf_counter() - started
    # What a caller keeps of a waiting run is its id; the handles (and the exceptions their
    # tasks hold, with their frames) go.
    run_ids = [h.workflow_run_id for h in handles]
    del handles, outcomes
    await asyncio.sleep(0.2)
    gc.collect()  # an ended run's task, frames and exception form cycles: the collector frees them
    tasks1, fds1, rss1 = len(asyncio.all_tasks()), _fds(), _rss_mib()
    live1 = tracemalloc.get_traced_memory()[0]
    if os.environ.get("BENCH_TOP"):
        for stat in tracemalloc.take_snapshot().statistics("lineno")[:8]:
            print("   ", stat)
    tracemalloc.stop()
    busy = "-"
    pool = getattr(lab.workflow_store, "_pool", None)
    if pool is not None and hasattr(pool, "get_stats"):
        stats = pool.get_stats()
        busy = str(stats.get("pool_size", 0) - stats.get("pool_available", 0))

    resumes: list[float] = []
    for run_id in run_ids:
        t = time.perf_counter()
        resumed = await lab.signal(run_id, "go", "x")
        await resumed.result
        resumes.append(time.perf_counter() - t)
    fresh: list[float] = []
    for i in range(min(runs, 300)):
        t = time.perf_counter()
        await plain_flow.run(i).result
        fresh.append(time.perf_counter() - t)
    await lab.aclose()

    med_resume, med_fresh = statistics.median(resumes) * 1e3, statistics.median(fresh) * 1e3
    print(f"store {store.split(':', 1)[0]}: {runs} runs waiting (parked in {park:.2f} s)")
    print(f"  tasks alive while waiting: {tasks1 - tasks0:+d} (before {tasks0}, after {tasks1})")
    print(
        f"  open fds: {fds1 - fds0:+d}   live Python memory: {(live1 - live0) / 2**20:+.2f} MiB"
        f" (resident: {rss1 - rss0:+.1f} MiB, the allocator's high-water mark while parking)"
    )
    print(f"  pool connections busy while waiting: {busy}")
    print(
        f"  signal + resume to the end: median {med_resume:.2f} ms; a fresh two-step run "
        f"{med_fresh:.2f} ms; added {med_resume - med_fresh:.2f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--store", choices=["sqlite", "postgres", "both"], default="both")
    args = parser.parse_args()
    if args.store in ("sqlite", "both"):
        with tempfile.TemporaryDirectory() as tmp:
            asyncio.run(bench(f"sqlite:///{tmp}/waits.db", args.runs))
    if args.store in ("postgres", "both"):
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        from tests.postgres_server import postgres_url

        asyncio.run(bench(postgres_url(), args.runs))


if __name__ == "__main__":
    main()
