"""A filtered page of the run list over 100,000 runs, in SQLite and PostgreSQL.

    .venv/bin/python bench/run_filters.py [--runs 100000] [--no-postgres]

Fills a run store with `--runs` runs through `start_run`/`finish_run` (a mix of agents and
workflows, statuses, tags, runs nested in workflow runs and runs started by an episode's tool
calls, input and output text, spread over 30 days), then times
`query_runs` the way the UI's run list and `/api/runs` ask: the registry-listed root runs, each
filter alone, several together, free text, and a deep page reached by cursor. Prints the median
and the worst of 20 reads of one page (50 runs) per query. PostgreSQL runs on a throwaway
cluster (tests/postgres_server.py) unless `TETHER_TEST_POSTGRES_URL` names one.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tether.stores.run_store import RunInfo, RunQuery, RunStore
from tether.stores.sqlite import SqliteRunStore

AGENTS = ["researcher", "writer", "editor", "helper", "namer"]
WORKFLOWS = ["review", "polish", "conversation-title"]
WORDS = [
    "crispr",
    "delivery",
    "lipid",
    "nanoparticle",
    "report",
    "quarterly",
    "summary",
    "outline",
    "gene",
    "editing",
    "weather",
    "paris",
    "oslo",
    "invoice",
    "refund",
    "customer",
    "ticket",
    "bug",
    "crash",
    "latency",
    "cost",
    "model",
    "prompt",
    "agent",
]
DAY = 86_400.0


def make_runs(n: int, now: float) -> list[tuple[RunInfo, dict[str, Any]]]:
    rng = random.Random(7)
    out: list[tuple[RunInfo, dict[str, Any]]] = []
    roots: list[str] = []
    episodes: list[str] = []
    for i in range(n):
        started = now - 30 * DAY + 30 * DAY * i / n
        workflow = rng.random() < 0.2
        nested = roots and not workflow and rng.random() < 0.3
        # An episode an episode's tool started (an agent used as a tool).
        called = episodes and not workflow and not nested and rng.random() < 0.1
        info = RunInfo(
            run_id=f"run-{i:07d}",
            kind="workflow" if workflow else "agent",
            name=rng.choice(WORKFLOWS if workflow else AGENTS),
            started_at=started,
            tags=rng.sample(["nightly", "demo", "prod", "eval", "v:1", "v:2"], 2),
            memory_scope=None if workflow else f"scope-{rng.randrange(n // 4 + 1)}",
            workflow_run_id=rng.choice(roots[-50:]) if nested else None,
            parent_run_id=rng.choice(episodes[-50:]) if called else None,
            parent_tool_call_id=f"call_{i}" if called else None,
            input_text=" ".join(rng.choices(WORDS, k=12)) + f" case {i}",
        )
        if workflow:
            roots.append(info.run_id)
        elif not nested and not called:
            episodes.append(info.run_id)
        status = rng.choices(["completed", "failed", "cancelled"], [90, 8, 2])[0]
        finish = {
            "status": status,
            "ended_at": started + rng.uniform(0.2, 30.0),
            "output_text": " ".join(rng.choices(WORDS, k=20)),
            "usage": {"input_tokens": rng.randrange(100, 5000), "output_tokens": 200},
            "cost_usd": rng.uniform(0.0001, 0.05),
        }
        out.append((info, finish))
    return out


async def fill(store: RunStore, runs: list[tuple[RunInfo, dict[str, Any]]]) -> float:
    started = time.perf_counter()
    for info, finish in runs:
        await store.start_run(info)
        await store.finish_run(info.run_id, **finish)
    return time.perf_counter() - started


def queries(now: float) -> dict[str, RunQuery]:
    listed = {"agents": tuple(AGENTS[:4]), "workflows": tuple(WORKFLOWS[:2]), "roots_only": True}
    return {
        "listed root runs (the default page)": RunQuery(**listed),  # type: ignore[arg-type]
        "status=failed": RunQuery(status="failed", **listed),  # type: ignore[arg-type]
        "status=cancelled (rare)": RunQuery(status="cancelled", **listed),  # type: ignore[arg-type]
        "agent=writer": RunQuery(name="writer", **listed),  # type: ignore[arg-type]
        "tag=eval": RunQuery(tag="eval", **listed),  # type: ignore[arg-type]
        "since/until (one day)": RunQuery(
            since=now - 10 * DAY,
            until=now - 9 * DAY,
            **listed,  # type: ignore[arg-type]
        ),
        "q=lipid nanoparticle": RunQuery(q="lipid nanoparticle", **listed),  # type: ignore[arg-type]
        "q='case 4242' (one run)": RunQuery(q="case 4242", **listed),  # type: ignore[arg-type]
        "status+agent+tag+q+range": RunQuery(
            status="completed",
            name="researcher",
            tag="prod",
            q="report",
            since=now - 20 * DAY,
            until=now,
            **listed,  # type: ignore[arg-type]
        ),
    }


async def time_query(store: RunStore, query: RunQuery, cursor: str | None = None) -> list[float]:
    times = []
    for _ in range(20):
        t = time.perf_counter()
        await store.query_runs(query, limit=50, cursor=cursor)
        times.append((time.perf_counter() - t) * 1000)
    return times


async def bench(name: str, store: RunStore, n: int) -> None:
    now = time.time()
    runs = make_runs(n, now)
    took = await fill(store, runs)
    print(f"\n{name}: {n:,} runs written in {took:.1f} s ({n / took:,.0f} runs/s)")
    analyze = getattr(store, "_session", None)
    if analyze is not None:
        # What autovacuum does after a bulk load: the planner needs the table's statistics to
        # choose between the time index and the text index.
        async with store._session() as conn:  # type: ignore[attr-defined]
            await conn.execute("ANALYZE tether_runs")
            await conn.execute("ANALYZE tether_run_tags")
    print(f"  {'query (one page of 50)':42} {'median':>9} {'worst':>9}")
    for label, query in queries(now).items():
        times = await time_query(store, query)
        print(f"  {label:42} {statistics.median(times):7.2f} ms {max(times):7.2f} ms")
    # What an episode's page reads for its timeline: the runs its tools started.
    parent = next(info.parent_run_id for info, _ in reversed(runs) if info.parent_run_id)
    times = await time_query(store, RunQuery(parent_run_id=parent))
    label = "runs one episode's tools started"
    print(f"  {label:42} {statistics.median(times):7.2f} ms {max(times):7.2f} ms")
    # A deep page: follow the cursor 40 pages down the default list.
    query = queries(now)["listed root runs (the default page)"]
    cursor = None
    for _ in range(40):
        cursor = (await store.query_runs(query, limit=50, cursor=cursor)).next_cursor
    times = await time_query(store, query, cursor)
    label = "page 41 of the default list, by cursor"
    print(f"  {label:42} {statistics.median(times):7.2f} ms {max(times):7.2f} ms")


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--no-sqlite", action="store_true")
    args = parser.parse_args()
    if not args.no_sqlite:
        with tempfile.TemporaryDirectory() as tmp:
            store = SqliteRunStore.open(Path(tmp) / "runs.db")
            try:
                await bench("SQLite", store, args.runs)
            finally:
                await store.aclose()
    if args.no_postgres:
        return
    from tests.postgres_server import postgres_url

    from tether.stores.postgres import PostgresRunStore

    pg = PostgresRunStore(postgres_url())
    try:
        await bench("PostgreSQL", pg, args.runs)
    finally:
        await pg.aclose()


if __name__ == "__main__":
    asyncio.run(main())
