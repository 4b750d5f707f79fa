"""Paused turns (approvals), harness part, with the scripted client (no network).

    .venv/bin/python bench/hitl_pause.py

Prints:
- 1,000 turns paused at once: the asyncio tasks and open file descriptors while they wait
  (a paused turn's generator has ended: what waits is the session's JSON), and the memory the
  1,000 paused sessions hold, live and as stored JSON;
- a resume's added latency: (a turn that pauses on an approval + its resume, the session
  stored as JSON and loaded again between them) minus (the same turn with the tool not asking),
  median over many runs. Goal (issue 27): <= 5 ms.

Lab runs cannot pause yet, so the run-store half of issue 27's bench (paused runs on SQLite
and PostgreSQL) is not measured here.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import statistics
import time
import tracemalloc
from typing import Any

from tether import Session, approve, create_agent, define_tool, reduce
from tether.testing import script_client

SCHEMA = {
    "type": "object",
    "properties": {"to": {"type": "string"}},
    "required": ["to"],
}


def mailer(approval: bool, turns: int, answers: bool = True) -> Any:
    send = define_tool(
        name="send_email", input_schema=SCHEMA, execute=lambda v: "sent", approval=approval
    )
    script: list[dict[str, Any]] = []
    for i in range(turns):
        script.append({"tool_use": [{"id": f"c{i}", "name": "send_email", "input": {"to": "a"}}]})
        if answers:
            script.append({"text": "done"})
    return create_agent(model=script_client(script), tools=[send])


async def fold(stream: Any, session: Any) -> None:
    async for event in stream:
        reduce(session, event)


def fds() -> int:
    return len(os.listdir("/proc/self/fd"))


async def paused_at_once(n: int) -> None:
    agent = mailer(True, n, answers=False)
    gc.collect()
    tasks_before, fds_before = len(asyncio.all_tasks()), fds()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    sessions = []
    for i in range(n):
        session = Session(id=f"s{i}")
        await fold(agent.send(session, "mail a"), session)
        assert session.pending
        sessions.append(session)
    agent.client.calls.clear()  # the scripted client's record of requests is not the sessions'
    gc.collect()
    live = tracemalloc.get_traced_memory()[0] - base
    stored = [json.dumps(s) for s in sessions]
    del sessions
    gc.collect()
    as_json = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    print(
        f"{n:,} paused turns: tasks {len(asyncio.all_tasks()) - tasks_before:+d}, "
        f"fds {fds() - fds_before:+d}; held live {live / 2**20:.2f} MiB, "
        f"as stored JSON {as_json / 2**20:.2f} MiB ({sum(map(len, stored)) / n:.0f} B each)"
    )


async def added_latency(runs: int) -> None:
    plain = mailer(False, runs)
    asking = mailer(True, runs)
    base: list[float] = []
    paused: list[float] = []
    for _ in range(runs):
        session = Session()
        start = time.perf_counter()
        await fold(plain.send(session, "mail a"), session)
        base.append(time.perf_counter() - start)

        session = Session()
        start = time.perf_counter()
        await fold(asking.send(session, "mail a"), session)
        stored = json.dumps(session)  # where a real caller keeps it
        loaded = json.loads(stored)
        pending = loaded["pending"]
        await fold(asking.resume(loaded, {p["id"]: approve() for p in pending}), loaded)
        paused.append(time.perf_counter() - start)
    b, p = statistics.median(base) * 1000, statistics.median(paused) * 1000
    print(
        f"turn with one tool call: {b:.3f} ms; paused + stored + resumed: {p:.3f} ms; "
        f"a resume adds {p - b:.3f} ms (goal <= 5 ms)"
    )


async def main() -> None:
    await added_latency(300)
    await paused_at_once(1000)


if __name__ == "__main__":
    asyncio.run(main())
