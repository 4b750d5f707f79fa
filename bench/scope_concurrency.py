"""Episodes on different memory scopes run concurrently; episodes on one scope run one after
another. Scripted model (no network) with a fixed latency per model call.

    .venv/bin/python bench/scope_concurrency.py [--episodes 100] [--latency 0.02] [--pg URL]

For each store (memory, SQLite, and PostgreSQL when --pg is given), starts EPISODES episodes at
once, first each on its own scope, then all on one scope, and prints the wall time of each
batch and per episode. On many scopes the batch takes about one model latency plus the
store's work; on one scope the episodes queue, so it takes EPISODES times one episode. The
scope lease costs two short writes per episode (take, give back).
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from tether.lab import Runtime
from tether.llm.base import ChatRequest, StreamChunk
from tether.testing import ScriptClient


class SlowModel(ScriptClient):
    """Answers every request after `latency` seconds (a model call's wait, without the CPU)."""

    def __init__(self, latency: float) -> None:
        super().__init__([])
        self.latency = latency

    async def chat(self, request: ChatRequest) -> AsyncIterator[StreamChunk]:
        await asyncio.sleep(self.latency)
        yield {"type": "text", "text": "ok"}
        yield {
            "type": "finish",
            "content": [{"type": "text", "text": "ok"}],
            "stop_reason": "end_turn",
            "finish_reason": "stop",
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }


async def batch(url: str, episodes: int, latency: float, *, one_scope: bool) -> float:
    lab = Runtime(store=url, version=False)
    agent = lab.create_agent(id="a", system_prompt="Answer.", model=SlowModel(latency))
    try:
        await lab.message_store.length("warm-up")
        start = time.perf_counter()
        handles = [
            agent.run(memory_scope="one" if one_scope else f"scope-{i}", user=f"q{i}")
            for i in range(episodes)
        ]
        await asyncio.gather(*(h.result for h in handles))
        return time.perf_counter() - start
    finally:
        await lab.aclose()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--latency", type=float, default=0.02)
    parser.add_argument("--pg", help="a PostgreSQL URL (an empty schema) to bench as well")
    args = parser.parse_args()
    stores: list[tuple[str, Any]] = [("memory", lambda _: "memory")]
    stores.append(("sqlite", lambda tmp: f"sqlite:///{tmp / 'bench.db'}"))
    if args.pg:
        stores.append(("postgres", lambda _: args.pg))
    n, latency = args.episodes, args.latency
    asyncio.run(batch("memory", 10, 0, one_scope=False))  # warm up (imports, first calls)
    print(f"{n} episodes, model latency {latency * 1e3:.0f} ms")
    for name, make in stores:
        for one_scope in (False, True):
            with tempfile.TemporaryDirectory() as tmp:
                url = make(Path(tmp) / ("one" if one_scope else "many"))
                if url.startswith("sqlite"):
                    (Path(tmp) / ("one" if one_scope else "many")).mkdir()
                took = asyncio.run(batch(url, n, latency, one_scope=one_scope))
            where = "1 scope   " if one_scope else f"{n} scopes"
            print(
                f"{name:8s} {where}: {took * 1e3:8.1f} ms in all, "
                f"{took / n * 1e3:6.2f} ms per episode"
            )


if __name__ == "__main__":
    main()
