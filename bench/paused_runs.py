"""1,000 lab agent runs paused at once on an approval: what they cost while they wait, and what
a resume adds.

    .venv/bin/python bench/paused_runs.py [--runs N] [--store sqlite|postgres|both]

Each run is one episode of a lab agent on a scripted model (no network) whose first round asks
for a tool declared `approval=True`: the turn pauses, the run is stored as "paused" with its
pending call and its turn, and the episode ends. All N are started at once and awaited until
each returned paused. Then, with every run paused, measured in this process:

- asyncio tasks alive (a paused run must hold none: its episode ended);
- open file descriptors and memory, against before the runs started;
- the PostgreSQL connections the stores' pools hold busy (none is held for a paused run).

Last, each run is resumed in turn (`runtime.resume_stream(run_id, {call: approve()})`, the
tool runs, a final text round) and timed to its result, against a fresh episode doing the same
work (the tool not asking: its call and the final round), in the same store: the difference
is what a resume adds (the run's read, the conditional take with its decision event, the
paused round carried into the scope). The take alone (until `resume_stream` returns) is
printed too. Target (issue 27): <= 5 ms added on SQLite.
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

from tether import approve, define_tool
from tether.lab import Runtime
from tether.testing import script_client


def _fds() -> int:
    return len(os.listdir("/proc/self/fd")) if Path("/proc/self/fd").exists() else -1


def _rss_mib() -> float:
    statm = Path("/proc/self/statm")
    if statm.exists():
        return int(statm.read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def reply(request: Any) -> dict[str, Any]:
    """Calls `send` once, then answers."""
    done = any(p["type"] == "tool_result" for m in request["messages"] for p in m["content"])
    if done:
        return {"text": "sent"}
    return {"tool_use": [{"id": "c1", "name": "send", "input": {"to": "ana"}}]}


def agent(lab: Runtime, id: str, approval: bool, turns: int) -> Any:
    send = define_tool(
        name="send", input_schema={"type": "object"}, execute=lambda v: "ok", approval=approval
    )
    return lab.create_agent(id=id, model=script_client([reply] * turns), tools=[send])


def _busy(lab: Runtime) -> str:
    counts = []
    for store in (lab.run_store, lab.message_store):
        pool = getattr(store, "_pool", None)
        if pool is not None and hasattr(pool, "get_stats"):
            stats = pool.get_stats()
            counts.append(stats.get("pool_size", 0) - stats.get("pool_available", 0))
    return str(sum(counts)) if counts else "- (one SQLite connection per store, shared)"


async def bench(store: str, runs: int) -> None:
    lab = Runtime(store=store, version=False)
    asking = agent(lab, "asking", True, 2 * runs + min(runs, 300) + 4)
    plain = agent(lab, "plain", False, 2 * min(runs, 300) + 2)
    warm = await asking.run(user="warm up").result  # stores migrated, connections opened
    await lab.resume(warm.run_id, {"c1": approve()})
    await lab.wait_idle()
    gc.collect()
    tasks0, fds0, rss0 = len(asyncio.all_tasks()), _fds(), _rss_mib()
    tracemalloc.start()
    live0 = tracemalloc.get_traced_memory()[0]

    started = time.perf_counter()
    handles = [asking.run(user=f"mail {i}") for i in range(runs)]
    results = await asyncio.gather(*(h.result for h in handles))
    assert all(r.paused for r in results)
    park = time.perf_counter() - started
    run_ids = [r.run_id for r in results]  # what a caller keeps of a paused run: its id
    del handles, results
    await lab.wait_idle()
    gc.collect()
    tasks1, fds1, rss1 = len(asyncio.all_tasks()), _fds(), _rss_mib()
    live1 = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    busy = _busy(lab)
    info = await lab.run_store.get_run(run_ids[0])
    assert info is not None and info.status == "paused"

    resumes: list[float] = []
    takes: list[float] = []
    for run_id in run_ids:
        t = time.perf_counter()
        handle = await lab.resume_stream(run_id, {"c1": approve()}, decided_by="bench")
        takes.append(time.perf_counter() - t)  # the run read, checked and taken back
        done = await handle.result
        resumes.append(time.perf_counter() - t)
        assert done.text == "sent"
    fresh: list[float] = []
    for i in range(min(runs, 300)):
        t = time.perf_counter()
        done = await plain.run(user=f"mail {i}").result
        fresh.append(time.perf_counter() - t)
        assert done.text == "sent"
    pause_run: list[float] = []
    for i in range(min(runs, 300)):  # the paused half alone, for the split
        t = time.perf_counter()
        await asking.run(user=f"again {i}").result
        pause_run.append(time.perf_counter() - t)
    await lab.aclose()

    med = {k: statistics.median(v) * 1e3 for k, v in (("resume", resumes), ("fresh", fresh))}
    med_pause = statistics.median(pause_run) * 1e3
    added = med["resume"] - med["fresh"]
    print(f"store {store.split(':', 1)[0]}: {runs} runs paused (parked in {park:.2f} s)")
    print(f"  tasks alive while paused: {tasks1 - tasks0:+d} (before {tasks0}, after {tasks1})")
    print(
        f"  open fds: {fds1 - fds0:+d}   live Python memory: {(live1 - live0) / 2**20:+.2f} MiB"
        f" (resident: {rss1 - rss0:+.1f} MiB, the allocator's high-water mark while parking)"
    )
    print(f"  pool connections busy while paused: {busy}")
    print(
        f"  resume to the end {med['resume']:.2f} ms, against a fresh episode doing the same "
        f"(the call, the final round) {med['fresh']:.2f} ms: a resume adds {added:.2f} ms"
    )
    print(
        f"  of which the run's read and conditional take (with its decision event): "
        f"{statistics.median(takes) * 1e3:.2f} ms; the episode that paused took "
        f"{med_pause:.2f} ms (medians)"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--store", choices=["sqlite", "postgres", "both"], default="both")
    args = parser.parse_args()
    if args.store in ("sqlite", "both"):
        with tempfile.TemporaryDirectory() as tmp:
            asyncio.run(bench(f"sqlite:///{tmp}/paused.db", args.runs))
    if args.store in ("postgres", "both"):
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        from tests.postgres_server import postgres_url

        asyncio.run(bench(postgres_url(), args.runs))


if __name__ == "__main__":
    main()
