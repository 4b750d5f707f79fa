"""A runtime's workflows that wait: the run record reads `waiting` and holds no lease, a
signal resumes it, a timed-out wait is resumed by `Runtime.resume_expired_waits`."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tether.errors import WorkflowError, WorkflowWaitingError, WorkflowWaitTimeoutError
from tether.lab import Runtime
from tether.workflows import WorkflowContext


async def test_a_runtime_records_the_wait_and_resumes_what_timed_out(tmp_path: Path) -> None:
    lab = Runtime(store=f"sqlite:///{tmp_path / 'lab.db'}", version=False)

    async def run(input: Any, ctx: WorkflowContext[Any]) -> Any:
        try:
            return await ctx.wait_for("reply", timeout=float(input))
        except WorkflowWaitTimeoutError:
            return "timed out"

    flow = lab.create_workflow("replies", run)
    quick, slow = flow.run(0.2), flow.run(60)
    for handle in (quick, slow):
        with pytest.raises(WorkflowWaitingError):
            await handle
    info = await lab.run_store.get_run(quick.workflow_run_id)
    assert info is not None and info.status == "waiting" and info.ended_at is None
    assert info.lease_expires_at is None  # no heartbeat renews a waiting run
    assert await lab.resume_expired_waits() == []
    await asyncio.sleep(0.3)
    [resumed] = await lab.resume_expired_waits()
    assert resumed.workflow_run_id == quick.workflow_run_id
    assert await resumed == "timed out"
    assert await (await lab.signal(slow.workflow_run_id, "reply", "hi")) == "hi"
    for handle in (quick, slow):
        done = await lab.run_store.get_run(handle.workflow_run_id)
        assert done is not None and done.status == "completed"
    with pytest.raises(WorkflowError, match="there is no workflow run"):
        await lab.signal("nope", "reply", 1)
    await lab.aclose()
