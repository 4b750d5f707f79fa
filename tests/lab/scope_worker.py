"""Episodes on one memory scope from a separate process, for test_scope_processes.py.

    python scope_worker.py STORE_URL EPISODES MODE

MODE "turns": print `READY`, wait for the file named by $GO, then run EPISODES episodes one
after another on scope "s"; the scripted model answers `saw N`, N being how many messages its
request held. "hang": one episode whose model never answers (print `IN-MODEL` and wait to be
killed). Prints `RUN <run id>` for each episode and `DONE` at the end. $LEASE_TTL sets the
runtime's leases.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from tether.lab import Runtime
from tether.llm.base import ChatRequest, StreamChunk
from tether.testing import ScriptClient


def answer(request: ChatRequest) -> dict[str, Any]:
    return {"text": f"saw {len(request['messages'])}"}


class Hanging(ScriptClient):
    async def chat(self, request: ChatRequest) -> AsyncIterator[StreamChunk]:
        print("IN-MODEL", flush=True)
        await asyncio.Event().wait()
        yield {"type": "text", "text": "never"}


async def main(url: str, episodes: int, mode: str) -> None:
    lab = Runtime(store=url, version=False, lease_ttl=float(os.environ.get("LEASE_TTL", "30")))
    model = Hanging([]) if mode == "hang" else ScriptClient([answer] * episodes)
    agent = lab.create_agent(id="counter", system_prompt="You count.", model=model)
    try:
        await lab.message_store.length("warm-up")  # open and migrate before the start line
        if mode == "turns":
            print("READY", flush=True)
            go = Path(os.environ["GO"])
            # A tight start line, on purpose blocking: nothing else runs in this process yet.
            while not go.exists():  # noqa: ASYNC240
                time.sleep(0.005)  # noqa: ASYNC251
        for i in range(episodes):
            handle = agent.run(memory_scope="s", user=f"{os.getpid()} turn {i}")
            print("RUN", handle.run_id, flush=True)
            await handle.result
        print("DONE", flush=True)
    finally:
        await lab.aclose()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), sys.argv[3]))
