"""What a handoff adds to a plain turn, with the scripted client (no network).

    .venv/bin/python bench/handoff.py

Prints medians, in ms, of one turn answered by one agent ("plain") and of one turn that agent
hands to another, which answers ("handoff": the transfer call's round, the tool, the target's
round), each on a fresh session; the difference is what the handoff adds (goal, issue 31: at
most 1 ms). Harness (`create_agent`, in memory) and lab (`Runtime`, in-memory stores: the
nested run is recorded too).
"""

from __future__ import annotations

import asyncio
import statistics
import time
from typing import Any

from tether import Session, create_agent
from tether.lab import Runtime
from tether.testing import script_client

N = 300
TRANSFER = {"tool_use": [{"name": "transfer_to_billing", "input": {"reason": "invoice"}}]}


def answer(_: Any) -> dict[str, Any]:
    return {"text": "Your invoice is 42 EUR."}


def transfer(_: Any) -> dict[str, Any]:
    return TRANSFER


async def harness() -> tuple[float, float]:
    billing = create_agent(name="billing", model=script_client([answer] * (2 * N + 20)))
    triage = create_agent(
        name="triage", model=script_client([transfer] * (N + 10)), handoffs=[billing]
    )
    plain_times, handoff_times = [], []
    for _ in range(N):
        start = time.perf_counter()
        await billing.run_turn(Session(), "Invoice?")
        plain_times.append(time.perf_counter() - start)
        start = time.perf_counter()
        await triage.run_turn(Session(), "Invoice?")
        handoff_times.append(time.perf_counter() - start)
    return statistics.median(plain_times) * 1e3, statistics.median(handoff_times) * 1e3


async def lab() -> tuple[float, float]:
    runtime = Runtime(store="memory", version=False)
    billing = runtime.create_agent(id="billing", model=script_client([answer] * (2 * N + 20)))
    triage = runtime.create_agent(
        id="triage", model=script_client([transfer] * (N + 10)), handoffs=[billing]
    )
    plain_times, handoff_times = [], []
    for _ in range(N):
        start = time.perf_counter()
        await billing.run(user="Invoice?").result
        plain_times.append(time.perf_counter() - start)
        start = time.perf_counter()
        await triage.run(user="Invoice?").result
        handoff_times.append(time.perf_counter() - start)
    await runtime.aclose()
    return statistics.median(plain_times) * 1e3, statistics.median(handoff_times) * 1e3


def main() -> None:
    for name, bench in (("harness", harness), ("lab", lab)):
        plain, handed = asyncio.run(bench())
        print(
            f"{name:8} plain turn {plain:.3f} ms   handed-over turn {handed:.3f} ms   "
            f"added {handed - plain:.3f} ms (goal <= 1 ms)"
        )


if __name__ == "__main__":
    main()
