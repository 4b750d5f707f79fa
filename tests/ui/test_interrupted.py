"""A run whose process died reads "interrupted" on the runs page, its own page (with the command
that resumes a workflow run) and the JSON API, and filters by that status."""

from __future__ import annotations

import asyncio
from typing import Any

from tether.lab import Runtime
from tether.stores.run_store import RunInfo

from .conftest import assert_inert, client_for, registry_of


async def test_a_run_whose_lease_expired_shows_interrupted_everywhere() -> None:
    runtime = Runtime(store="memory", version=False)

    async def review(input: Any, ctx: Any) -> Any:
        return input

    runtime.create_workflow("review", review)
    store = runtime.run_store
    await store.start_run(RunInfo(run_id="dead", kind="workflow", name="review"), lease_ttl=0.2)
    await store.start_run(
        RunInfo(run_id="alive", kind="workflow", name="review", started_at=1.0), lease_ttl=30
    )
    await store.start_run(RunInfo(run_id="stopped", kind="workflow", name="review"))
    await store.finish_run("stopped", "cancelled")
    await asyncio.sleep(0.3)
    async with client_for(runtime, registry_of(runtime, [], ["review"])) as client:
        page = await client.get("/runs/dead")
        assert page.status_code == 200
        text = assert_inert(page.text)
        assert "This run was interrupted" in text and "Its process died" in text
        assert "tether workflow run review --run-id dead" in text
        assert "status-interrupted" in page.text
        other = await client.get("/runs/stopped")
        assert "This run was interrupted" not in other.text
        api = (await client.get("/api/runs/dead")).json()
        assert (
            api["run"]["status"] == "interrupted"
            if "run" in api
            else api["status"] == "interrupted"
        )
        listed = (await client.get("/api/runs?status=interrupted")).json()
        assert [r["run_id"] for r in listed["runs"]] == ["dead"]
        running = (await client.get("/api/runs?status=running")).json()
        assert [r["run_id"] for r in running["runs"]] == ["alive"]
        assert (await client.get("/api/runs?status=bogus")).status_code == 400
    await runtime.aclose()
