"""A long reply in small chunks costs linear time: 1 MB of text in 10-byte chunks.

    .venv/bin/python bench/long_reply.py

Three timings, medians of several runs, each on the same 100,000 chunks from the scripted
client (no network):

- the floor: iterating the client's stream directly and joining the text (what any consumer of
  the chunks pays);
- a turn folded with `reduce()` (the events dropped as they come);
- a turn whose caller keeps every event (a `text` event's snapshot is built only when read, so
  keeping them costs no copies).

Target (issue 11): each turn within 3x of the floor. Before the lazy snapshot a turn of this size
took seconds: every event carried a fresh copy of the text so far. Both CPU time (this process
alone: the fair measure on a shared machine) and wall time are shown; the ratios are of CPU time.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from typing import Any

from tether import Session, create_agent, reduce
from tether.testing import script_client

CHUNK = "0123456789"
COUNT = 100_000  # 1 MB


def client() -> Any:
    return script_client([{"text": [CHUNK] * COUNT}])


async def floor() -> tuple[float, float]:
    c = client()
    request: Any = {"model": "script", "system": [], "messages": []}
    start, cpu = time.perf_counter(), time.process_time()
    parts = [chunk["text"] async for chunk in c.chat(request) if chunk["type"] == "text"]
    text = "".join(parts)
    elapsed = time.process_time() - cpu, time.perf_counter() - start
    assert len(text) == len(CHUNK) * COUNT
    return elapsed


async def turn(keep: bool) -> tuple[float, float]:
    agent = create_agent(model=client())
    session = Session()
    kept: list[Any] = []
    start, cpu = time.perf_counter(), time.process_time()
    async for event in agent.send(session, "write a megabyte"):
        reduce(session, event)
        if keep:
            kept.append(event)
    elapsed = time.process_time() - cpu, time.perf_counter() - start
    assert len(session.messages[-1]["content"][0]["text"]) == len(CHUNK) * COUNT
    if keep:  # every snapshot is still there to read
        last = [e for e in kept if e["type"] == "text"][-1]
        assert len(last["snapshot"]) == len(CHUNK) * COUNT
    return elapsed


def median(samples: list[tuple[float, float]]) -> tuple[float, float]:
    return statistics.median(s[0] for s in samples), statistics.median(s[1] for s in samples)


async def main() -> None:
    runs = 5
    base = median([await floor() for _ in range(runs)])
    folded = median([await turn(False) for _ in range(runs)])
    kept = median([await turn(True) for _ in range(runs)])
    print(f"1 MB in {COUNT:,} chunks of {len(CHUNK)} bytes (median of {runs}; CPU / wall)")
    for label, (cpu, wall) in (
        ("floor (iterate the stream, join):", base),
        ("turn, events folded and dropped:", folded),
        ("turn, every event kept:", kept),
    ):
        ratio = "" if label.startswith("floor") else f"  ({cpu / base[0]:.2f}x)"
        print(f"{label:36s}{cpu * 1000:8.1f} ms / {wall * 1000:8.1f} ms{ratio}")


if __name__ == "__main__":
    asyncio.run(main())
