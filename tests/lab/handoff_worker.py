"""One turn on a memory scope from a process of its own, for test_handoff_processes.py.

    python handoff_worker.py STORE_URL SCOPE MESSAGE

`triage` hands over to `billing` when asked about an invoice (a message with "invoice"),
else answers itself; `billing` answers ``billing saw N``, N being how many messages its
request held. Prints ``RUN <agent of the run> <answer>``.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from tether.lab import Runtime
from tether.llm.base import ChatRequest
from tether.testing import ScriptClient


def triage_turn(request: ChatRequest) -> dict[str, Any]:
    last = request["messages"][-1]
    asks = last["role"] == "user" and "invoice" in str(last["content"])
    if asks:
        return {"tool_use": [{"name": "transfer_to_billing", "input": {"reason": "invoice"}}]}
    return {"text": "triage answers"}


def billing_turn(request: ChatRequest) -> dict[str, Any]:
    return {"text": f"billing saw {len(request['messages'])}"}


async def main(url: str, scope: str, message: str) -> None:
    lab = Runtime(store=url, version=False)
    billing = lab.create_agent(
        id="billing", system_prompt="You are billing.", model=ScriptClient([billing_turn] * 4)
    )
    triage = lab.create_agent(
        id="triage",
        system_prompt="You are triage.",
        model=ScriptClient([triage_turn] * 4),
        handoffs=[billing],
    )
    try:
        handle = triage.run(memory_scope=scope, user=message)
        result = await handle.result
        run = await lab.run_store.get_run(handle.run_id)
        assert run is not None
        print("RUN", run.name, result.text, flush=True)
    finally:
        await lab.aclose()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3]))
