"""A turn's cost at message 100, 1,000, 10,000 and 20,000 of one memory scope, with the history
policy `keep_last(turns=20)` and without a policy. Scripted model (no network, no latency), so
what is timed is the lab's own work: load, check, send, commit.

    .venv/bin/python bench/long_conversation.py [--turns 5] [--pg URL] [--no-pg]

For each store (SQLite on a temporary file; PostgreSQL at --pg URL, or a throwaway server
started by tests/postgres_server.py when initdb is installed) the scope is filled with
user/assistant records of ~200 characters up to each mark, then TURNS turns are run there with
each agent; the median wall and CPU (process) time per turn are printed, with the records and
bytes the turn read from the store. The goal: with the policy, turn 20,000 costs at most 1.2x
turn 100.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from tether import keep_last
from tether.lab import Runtime
from tether.stores import StoredRecord
from tether.testing import script_client

MARKS = (100, 1_000, 10_000, 20_000)
FILLER = "lorem ipsum dolor sit amet " * 7  # ~190 characters


class Counting:
    """A message store that counts the records and bytes each read returns."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.rows = 0
        self.bytes = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def _count(self, records: list[StoredRecord]) -> None:
        self.rows += len(records)
        self.bytes += sum(len(json.dumps(r)) for r in records)

    async def load(self, scope: str, **kw: Any) -> list[StoredRecord]:
        records: list[StoredRecord] = await self._inner.load(scope, **kw)
        self._count(records)
        return records

    async def tail(self, scope: str, n: int) -> tuple[int, list[StoredRecord]]:
        start, records = await self._inner.tail(scope, n)
        self._count(records)
        return start, records


def _pair(i: int) -> list[StoredRecord]:
    return [
        {"role": "user", "content": [{"type": "text", "text": f"question {i} {FILLER}"}]},
        {"role": "assistant", "content": [{"type": "text", "text": f"answer {i} {FILLER}"}]},
    ]


async def _fill(store: Any, scope: str, upto: int) -> None:
    length = await store.length(scope)
    if length == 0:
        await store.append(
            scope, [{"role": "system", "content": [{"type": "text", "text": "Be brief."}]}]
        )
        length = 1
    batch: list[StoredRecord] = []
    while length + len(batch) < upto:
        batch += _pair(length + len(batch))
        if len(batch) >= 1000:
            await store.append(scope, batch)
            length += len(batch)
            batch = []
    if batch:
        await store.append(scope, batch)


async def _bench(label: str, url: str, turns: int) -> None:
    runtime = Runtime(store=url, version=False)
    counting = Counting(runtime.message_store)
    model = script_client([lambda request: {"text": "ok"}] * (2 * turns * len(MARKS) + 8))
    agents = {
        "keep_last(turns=20)": runtime.create_agent(
            id="kept",
            system_prompt="Be brief.",
            model=model,
            history=[keep_last(turns=20)],
            memory_store=counting,
        ),
        "no policy": runtime.create_agent(
            id="whole",
            system_prompt="Be brief.",
            model=model,
            memory_store=counting,
        ),
    }
    scope = "long"
    print(f"\n{label}")
    print(f"{'policy':<22}{'messages':>9}{'wall ms':>10}{'cpu ms':>9}{'rows':>8}{'KiB read':>10}")
    base: dict[str, float] = {}
    for mark in MARKS:
        await _fill(runtime.message_store, scope, mark)
        for name, agent in agents.items():
            walls, cpus, rows, sizes = [], [], [], []
            for t in range(turns):
                counting.rows = counting.bytes = 0
                w0, c0 = time.perf_counter(), time.process_time()
                await agent.run(memory_scope=scope, user=f"turn {t}").result
                walls.append(time.perf_counter() - w0)
                cpus.append(time.process_time() - c0)
                rows.append(counting.rows)
                sizes.append(counting.bytes)
            wall = statistics.median(walls) * 1000
            base.setdefault(name, wall)
            print(
                f"{name:<22}{mark:>9,}{wall:>10.2f}{statistics.median(cpus) * 1000:>9.2f}"
                f"{statistics.median(rows):>8.0f}{statistics.median(sizes) / 1024:>10.1f}"
                f"   ({wall / base[name]:.2f}x turn {MARKS[0]})"
            )
    await runtime.aclose()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--pg", default=None, help="a PostgreSQL URL (default: start one)")
    parser.add_argument("--no-pg", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        await _bench("SQLite", f"sqlite:///{Path(tmp) / 'long.db'}", args.turns)
    if args.no_pg:
        return
    url = args.pg
    if url is None:
        try:
            from tests.postgres_server import postgres_url, shutdown
        except ImportError:
            print("\nPostgreSQL: skipped (no --pg URL and tests/postgres_server.py not found)")
            return
        try:
            url = postgres_url()
        except Exception as exc:  # no initdb on this machine
            print(f"\nPostgreSQL: skipped ({exc})")
            return
        try:
            await _bench("PostgreSQL", url, args.turns)
        finally:
            shutdown()
        return
    await _bench("PostgreSQL", url, args.turns)


if __name__ == "__main__":
    asyncio.run(main())
