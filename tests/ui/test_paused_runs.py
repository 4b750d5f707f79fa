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


async def test_a_run_paused_on_an_mcp_elicitation_shows_what_it_asks() -> None:
    from tether.mcp import mcp_server
    from tether.testing import create_test_mcp_server

    schema = {"type": "object", "properties": {"name": {"type": "string", "title": HOSTILE}}}

    async def whoami(arguments: dict[str, object], call: object) -> str:
        await call.elicit(HOSTILE + " Who are you?", schema)  # type: ignore[attr-defined]
        return "hello"

    server = create_test_mcp_server(tools=[{"name": "whoami", "run": whoami}], modern=True)
    source = mcp_server(server.url, transport=server, elicitation="pause")
    runtime = Runtime(store="memory", version=False)
    model = script_client([{"tool_use": [{"id": "c1", "name": "whoami", "input": {}}]}])
    agent = runtime.create_agent(id="asker", model=model, integrations=[source])
    paused = await agent.run(user="who?").result
    assert [p["kind"] for p in paused.pending] == ["input"]
    async with client_for(runtime) as client:
        page = (await client.get(f"/runs/{paused.run_id}")).text
        text = assert_inert(page)
        assert 'data-kind="input"' in page and "asks for input" in page
        assert HOSTILE + " Who are you?" in text  # the server's words, as text
        assert 'class="pending-schema"' in page and server.url in text
    await runtime.aclose()
    await server.aclose()
