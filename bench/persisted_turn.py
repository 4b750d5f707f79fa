"""A conversation persisted in SQLite, one tool round per turn, scripted model (no network).

    .venv/bin/python bench/persisted_turn.py [--turns 60] [--conversations 5]

Each turn is one lab episode on the same memory scope: load the transcript, one model request
that calls a trivial tool, one that answers, both rounds appended to the MessageStore, the run
and its events recorded in the RunStore. Prints, over several conversations on fresh files:

- the median ms of a persisted turn over turns 1-20 (the issue's 20-turn workload), in wall
  time and in this process's CPU time (on a loaded machine the wall time also counts the time
  other processes had the CPU; the CPU time does not);
- the median ms of turn 5 and of the last turn, and their ratio (appends cost the same at any
  length, so the ratio stays near 1; what grows is the transcript the episode loads and the
  request the scripted model is sent);
- the share of MessageStore appends that took over 1 ms: an append is ~0.1 ms of work, so a
  slow one is a wait (SQLite's busy handler sleeps 1 ms when another connection of this same
  process holds the write lock).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from tether import define_tool
from tether.lab import Runtime
from tether.testing import script_client

ADD = define_tool(
    name="add",
    description="Add two integers",
    input_schema={
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
    },
    execute=lambda i: i["a"] + i["b"],
)


def script(turns: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i in range(turns):
        out.append({"tool_use": [{"name": "add", "input": {"a": i, "b": 1}}]})
        out.append({"text": f"the sum is {i + 1}"})
    return out


APPENDS: list[float] = []


async def conversation(db: Path, turns: int, clock: Any = time.perf_counter) -> list[float]:
    lab = Runtime(store=f"sqlite:///{db}", version=False)
    store = lab.message_store
    append = store.append

    async def timed_append(*args: Any, **kwargs: Any) -> Any:
        start = clock()
        try:
            return await append(*args, **kwargs)
        finally:
            APPENDS.append(clock() - start)

    store.append = timed_append  # type: ignore[method-assign]
    agent = lab.create_agent(
        id="adder",
        system_prompt="You add numbers with the add tool.",
        model=script_client(script(turns)),
        tools=[ADD],
    )
    costs: list[float] = []
    try:
        # Open the stores (and migrate) before timing.
        await lab.message_store.length("warm-up")
        for i in range(turns):
            start = clock()
            await agent.run(memory_scope="chat", user=f"add {i} and 1").result
            costs.append(clock() - start)
    finally:
        await lab.aclose()
    return costs


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=60)
    parser.add_argument("--conversations", type=int, default=5)
    args = parser.parse_args()
    for label, clock in (("wall", time.perf_counter), ("cpu", time.process_time)):
        APPENDS.clear()
        runs: list[list[float]] = []
        with tempfile.TemporaryDirectory() as tmp:
            for n in range(args.conversations):
                db = Path(tmp) / f"c{n}.db"
                runs.append(asyncio.run(conversation(db, args.turns, clock)))
        first20 = [c for costs in runs for c in costs[:20]]
        turn5 = statistics.median(costs[4] for costs in runs)
        last = statistics.median(costs[-1] for costs in runs)
        print(
            f"[{label}] persisted turn, turns 1-20: "
            f"median {statistics.median(first20) * 1e3:.2f} ms;"
            f" turn 5: {turn5 * 1e3:.2f} ms, turn {args.turns}: {last * 1e3:.2f} ms"
            f" ({last / turn5:.2f}x)"
        )
    slow = sum(1 for a in APPENDS if a > 1e-3)
    print(
        f"appends (cpu clock): median {statistics.median(APPENDS) * 1e3:.3f} ms, "
        f"{slow / len(APPENDS):.0%} over 1 ms ({slow} of {len(APPENDS)})"
    )


if __name__ == "__main__":
    main()
