"""A paused run in the inspection UI: its page lists the calls it waits for (each call's input
escaped), with no buttons where the app cannot take decisions (tether.ui alone: the decisions
endpoint is tether serve's); the runs list has the "Waiting for you" filter."""

from __future__ import annotations

from tether import define_tool
from tether.lab import Runtime
from tether.testing import script_client

from .conftest import HOSTILE, assert_inert, client_for


async def test_a_paused_run_page_lists_its_calls_and_the_filter_finds_it() -> None:
    runtime = Runtime(store="memory", version=False)
    wipe = define_tool(
        name="wipe", input_schema={"type": "object"}, execute=lambda v: "wiped", approval=True
    )
    model = script_client(
        [{"tool_use": [{"id": "c1", "name": "wipe", "input": {"path": HOSTILE}}]}, {"text": "ok"}]
    )
    agent = runtime.create_agent(id="janitor", model=model, tools=[wipe])
    paused = await agent.run(user="clean up").result
    assert paused.paused
    done = await agent.run(user="again").result  # another run, not paused
    async with client_for(runtime) as client:
        page = (await client.get(f"/runs/{paused.run_id}")).text
        assert_inert(page)
        assert 'id="pending"' in page and "Waiting for you" in page
        assert "wipe" in page and "asks for approval" in page
        assert 'data-action="approve"' not in page  # no endpoint here to send a decision to
        assert "agent.resume(run_id, decisions)" in page
        listed = (await client.get("/runs?status=paused")).text
        assert paused.run_id in listed and done.run_id not in listed
        assert 'class="waiting-filter"' in (await client.get("/runs")).text
    await runtime.aclose()
