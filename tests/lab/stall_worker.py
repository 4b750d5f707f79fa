"""A writer that stalls, or the writer that takes over from it, for test_fenced_leases.py.

    python stall_worker.py STORE_URL KIND ROLE [RUN_ID]

KIND "episode": one episode on memory scope "s"; KIND "workflow": a two-step workflow run (with
RUN_ID, that stored run resumed). ROLE "first" prints `IN-MODEL` (or `IN-STEP`) once it is in
the model call (the second step) and waits there for the file named by $RELEASE before it
answers — the test stops the process (SIGSTOP) meanwhile; ROLE "second" runs through. Every
record written says which role wrote it. Prints `RUN <run id>`, then `DONE <output>`, or
`LOST <message>` when the run stopped with LeaseLostError. $LEASE_TTL sets the runtime's leases.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from tether.errors import LeaseLostError
from tether.lab import Runtime
from tether.llm.base import ChatRequest, StreamChunk
from tether.testing import ScriptClient
from tether.workflows import WorkflowContext


async def _released(role: str, mark: str) -> None:
    if role != "first":
        return
    print(mark, flush=True)
    release = Path(os.environ["RELEASE"])
    while not release.exists():  # noqa: ASYNC110, ASYNC240 - a file from another process
        await asyncio.sleep(0.01)


class Stalling(ScriptClient):
    def __init__(self, role: str) -> None:
        super().__init__([{"text": f"{role}'s answer"}])
        self.role = role

    async def chat(self, request: ChatRequest) -> AsyncIterator[StreamChunk]:
        await _released(self.role, "IN-MODEL")
        async for chunk in super().chat(request):
            yield chunk


async def main(url: str, kind: str, role: str, run_id: str | None) -> None:
    lab = Runtime(store=url, version=False, lease_ttl=float(os.environ["LEASE_TTL"]))

    async def body(input: Any, ctx: WorkflowContext[Any]) -> str:
        await ctx.step("one", lambda: f"{role}'s one")

        async def two() -> str:
            await _released(role, "IN-STEP")
            return f"{role}'s two"

        return str(await ctx.step("two", two)) + " then done"

    try:
        await lab.message_store.length("warm-up")  # open and migrate first
        if kind == "episode":
            agent = lab.create_agent(id="a", system_prompt="You answer.", model=Stalling(role))
            handle = agent.run(memory_scope="s", user=f"{role}'s question")
            print("RUN", handle.run_id, flush=True)
            result: Any = (await handle.result).text
        else:
            workflow = lab.create_workflow("two-steps", run=body)
            started = workflow.run(None) if run_id is None else workflow.run(workflow_run_id=run_id)
            print("RUN", started.workflow_run_id, flush=True)
            result = await started
        print("DONE", result, flush=True)
    except LeaseLostError as exc:
        print("LOST", exc, flush=True)
    finally:
        await lab.aclose()


if __name__ == "__main__":
    run_id = sys.argv[4] if len(sys.argv) > 4 else None
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], run_id))
