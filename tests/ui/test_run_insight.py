"""The run page as a debugging tool: the timeline waterfall, per-event times, the request view,
tokens and cost, storage rows behind a toggle, one error panel per failure; and the run list's
filters on the page and in `/api/runs`."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tether import define_tool
from tether.errors import LLMError
from tether.lab import Runtime
from tether.stores.run_store import RunInfo
from tether.testing import script_client
from tether.workflows import WorkflowContext

from .conftest import HOSTILE, assert_inert, client_for


@pytest.fixture
async def lab() -> AsyncIterator[Runtime]:
    runtime = Runtime(
        store="memory",
        version=False,
        prices={"script": {"input_mtok": 1.0, "output_mtok": 2.0}},
    )
    yield runtime
    await runtime.aclose()


async def tool_run(lab: Runtime, recording: str = "full") -> str:
    lookup = define_tool(
        name="lookup",
        description="Look it up",
        input_schema={"type": "object", "properties": {"q": {"type": "string"}}},
        execute=lambda v: f"found {HOSTILE}",
    )
    agent = lab.create_agent(  # type: ignore[call-overload]
        id=f"agent-{recording}",
        system_prompt=f"You look things up. {HOSTILE}",
        tools=[lookup],
        recording=recording,
        model=script_client(
            [
                {
                    "tool_use": [{"name": "lookup", "input": {"q": "x"}}],
                    "usage": {"input_tokens": 1000, "output_tokens": 100},
                },
                {
                    "text": ["**Done**: ", HOSTILE],
                    "usage": {"input_tokens": 1200, "output_tokens": 50},
                },
            ]
        ),
    )
    run_id: str = (await agent.run(user=f"Find *it* {HOSTILE}", tags=["t1"]).result).run_id
    return run_id


async def test_the_timeline_draws_model_calls_tools_with_times(lab: Runtime) -> None:
    run_id = await tool_run(lab)
    async with client_for(lab) as client:
        html = (await client.get(f"/runs/{run_id}")).text
        api = (await client.get(f"/api/runs/{run_id}")).json()
    assert_inert(html)
    bars = re.findall(r'<li class="bar bar-(\w+) bar-(\w+)', html)
    assert bars == [("model", "ok"), ("tool", "ok"), ("model", "ok")]
    # Each bar links to the event it began with, and that event is on the page.
    anchors = re.findall(r'<a href="#ev-(\d+)">', html)
    assert len(anchors) == 3 and all(f'id="ev-{a}"' in html for a in anchors)
    # An SVG rect per bar and one more per model call (the wait for the first token).
    assert html.count('<rect class="span"') == 3 and html.count('<rect class="ttft"') == 2
    timeline = api["timeline"]
    kinds = [b["kind"] for b in timeline["bars"]]
    assert kinds == ["model", "tool", "model"]
    starts = [b["start"] for b in timeline["bars"]]
    assert starts == sorted(starts)
    ends = [b["end"] for b in timeline["bars"]]
    # The total is the span from the first start to the last end, not a sum of the bars.
    assert timeline["total_s"] == pytest.approx(max([*ends, timeline["end"]]) - timeline["start"])
    for bar in timeline["bars"]:
        if bar["kind"] == "model":
            assert 0 <= bar["first_token_s"] <= bar["duration_s"]
    # Every event shows its time from the run's start.
    assert re.search(r'class="rel muted" title="[^"]+">\+0\.\d{3} s', html)


def test_the_total_is_not_the_sum_of_parallel_bars() -> None:
    from tether.stores.run_store import RunEvent
    from tether.ui._timeline import build_timeline

    info = RunInfo("w", "workflow", "wf", "completed", 100.0, ended_at=103.0)
    events: list[RunEvent] = []
    nested = [
        (RunInfo("a", "agent", "x", "completed", 100.5, ended_at=102.5), 1),
        (RunInfo("b", "agent", "y", "completed", 101.0, ended_at=102.8), 1),
        (RunInfo("c", "agent", "z", "running", 102.0), 2),
    ]
    tl = build_timeline(info, events, nested, now=104.0)
    assert tl.total == 4.0  # 100.0 .. 104.0 (the running child ends now), not 2 + 1.8 + 2
    assert [b.status for b in tl.bars] == ["ok", "ok", "running"]
    assert tl.x(100.0) == 0 and tl.x(104.0) == 1000 and tl.x(102.0) == 500


async def test_the_request_view_shows_what_the_model_received(lab: Runtime) -> None:
    run_id = await tool_run(lab, "full")
    async with client_for(lab) as client:
        html = (await client.get(f"/runs/{run_id}?call=2")).text
    text = assert_inert(html)
    # The second call's request is open: system, tool definitions, the transcript so far.
    assert re.search(r'<details class="request" open><summary>request as sent', html)
    assert f"You look things up. {HOSTILE}" in text
    assert "lookup" in text and '"q"' in text
    assert f"found {HOSTILE}" in text  # the tool result, sent back to the model
    assert "Messages (3)" in text
    # Tokens and cost per call and per run (the price comes from the runtime's override).
    assert "1000 → 100" in text and "1200 → 50" in text
    assert "$0.0012" in text and "$0.0013" in text  # 1000*1 + 100*2, 1200*1 + 50*2 per 1M
    assert "2200 → 150" in text and "$0.0025" in text


async def test_the_metadata_level_shows_sizes_not_content(lab: Runtime) -> None:
    run_id = await tool_run(lab, "metadata")
    async with client_for(lab) as client:
        html = (await client.get(f"/runs/{run_id}?call=1")).text
    text = assert_inert(html)
    assert "Recorded at the metadata level" in text
    assert f"{len('You look things up. ' + HOSTILE)} chars" in text
    request = html[
        html.index('class="request-view"') : html.index(
            "</details>", html.index('class="request-view"')
        )
    ]
    assert "You look things up" not in request and "Find" not in request


async def test_storage_rows_are_behind_a_toggle(lab: Runtime) -> None:
    run_id = await tool_run(lab)
    async with client_for(lab) as client:
        hidden = (await client.get(f"/runs/{run_id}")).text
        shown = (await client.get(f"/runs/{run_id}?storage=1")).text
    assert "ev-agent-messages-committed" not in hidden
    assert "2 internal storage rows hidden" in assert_inert(hidden)
    assert '<a href="?storage=1">Show them</a>' in hidden
    assert shown.count('class="ev ev-agent-messages-committed"') == 2


async def test_text_is_markdown_and_hostile_text_stays_text(lab: Runtime) -> None:
    run_id = await tool_run(lab)
    async with client_for(lab) as client:
        html = (await client.get(f"/runs/{run_id}")).text
    assert_inert(html)
    assert "<strong>Done</strong>: &lt;script&gt;" in html


async def failing_workflow(lab: Runtime) -> str:
    async def boom(value: Any) -> str:
        raise RuntimeError("the step broke\n" + "\n".join(f"detail {i}" for i in range(10)))

    async def run(input: Any, ctx: WorkflowContext[Any]) -> Any:
        return await ctx.step("explode", lambda: boom(input))

    wf = lab.create_workflow("fragile", run)
    handle = wf.run({"x": 1})
    with pytest.raises(RuntimeError):
        await handle.result
    return handle.workflow_run_id


async def test_a_failed_workflow_shows_one_error_panel_with_the_rest_folded(lab: Runtime) -> None:
    run_id = await failing_workflow(lab)
    async with client_for(lab) as client:
        html = (await client.get(f"/runs/{run_id}")).text
    text = assert_inert(html)
    assert html.count('class="panel panel-error error-panel"') == 1
    # Once, besides the folded traceback (whose source line and last line quote it).
    shown = re.sub(r'<details class="traceback">.*?</details>', "", html, flags=re.S)
    assert shown != html and shown.count("the step broke") == 1
    assert '<code class="error-type">RuntimeError</code>' in html
    assert "the rest of the message (5 lines)" in text  # folded, not dropped
    assert text.count("(the error is shown above)") == 2  # step failed, workflow failed


async def test_a_failed_episode_shows_one_error_panel(lab: Runtime) -> None:
    agent = lab.create_agent(
        id="flaky",
        model=script_client([{"text": "partial", "error": LLMError("quota", provider="x")}]),
    )
    handle = agent.run(user="hi")
    with pytest.raises(LLMError):
        await handle.result
    async with client_for(lab) as client:
        html = (await client.get(f"/runs/{handle.run_id}")).text
    assert html.count('class="panel panel-error error-panel"') == 1
    assert "(the error is shown above)" in assert_inert(html)


# -- filters -------------------------------------------------------------------------------------


@pytest.fixture
async def many(lab: Runtime) -> AsyncIterator[Runtime]:
    lab.create_agent(id="researcher", model=script_client([]))
    lab.create_agent(id="writer", model=script_client([]))
    rows = [
        (
            "r1",
            "researcher",
            "completed",
            1_767_225_600.0,
            ["nightly"],
            "find CRISPR papers",
        ),  # 2026-01-01
        ("r2", "researcher", "failed", 1_767_312_000.0, ["adhoc"], "summarise the report"),  # 01-02
        (
            "r3",
            "writer",
            "completed",
            1_767_398_400.0,
            ["nightly"],
            "outline gene editing",
        ),  # 01-03
        (
            "r4",
            "writer",
            "failed",
            1_767_484_800.0,
            ["nightly", HOSTILE],
            "draft <b>gene</b> essay",
        ),  # 01-04
    ]
    for run_id, name, status, at, tags, text in rows:
        await lab.run_store.start_run(
            RunInfo(run_id, "agent", name, "running", at, tags=tags, input_text=text)
        )
        await lab.run_store.finish_run(run_id, status, output_text=f"output of {run_id}")  # type: ignore[arg-type]
    yield lab


async def api_ids(client: httpx.AsyncClient, query: str) -> list[str]:
    response = await client.get(f"/api/runs?{query}")
    assert response.status_code == 200, response.text
    return [r["run_id"] for r in response.json()["runs"]]


async def test_api_runs_filters(many: Runtime) -> None:
    async with client_for(many) as client:
        assert await api_ids(client, "") == ["r4", "r3", "r2", "r1"]
        assert await api_ids(client, "status=failed") == ["r4", "r2"]
        assert await api_ids(client, "agent=writer") == ["r4", "r3"]
        assert await api_ids(client, "tag=nightly") == ["r4", "r3", "r1"]
        assert await api_ids(client, "q=gene") == ["r4", "r3"]
        assert await api_ids(client, "q=output+r2") == ["r2"]  # outputs are searched too
        assert await api_ids(client, "since=2026-01-02&until=2026-01-03") == ["r3", "r2"]
        assert await api_ids(client, "since=2026-01-02T12:00:00Z") == ["r4", "r3"]
        assert await api_ids(client, f"since={1_767_398_400}") == ["r4", "r3"]
        assert await api_ids(client, "status=failed&agent=writer&tag=nightly&q=draft") == ["r4"]
        # Cursor pages, the way the page follows them.
        first = (await client.get("/api/runs?limit=3")).json()
        assert [r["run_id"] for r in first["runs"]] == ["r4", "r3", "r2"]
        rest = (await client.get(f"/api/runs?limit=3&cursor={first['next_cursor']}")).json()
        assert [r["run_id"] for r in rest["runs"]] == ["r1"] and rest["next_cursor"] is None


async def test_the_runs_page_filters_and_keeps_the_form(many: Runtime) -> None:
    async with client_for(many) as client:
        html = (await client.get("/runs?status=failed&tag=nightly&q=draft")).text
    text = assert_inert(html)
    assert re.findall(r'data-run-id="([^"]+)"', html) == ["r4"]
    assert '<option value="failed" selected>' in html
    assert 'name="q" value="draft"' in html and 'name="tag" value="nightly"' in html
    assert "clear" in text
    async with client_for(many) as client:
        none = (await client.get("/runs?q=nothing+matches+this")).text
    assert "No runs match these filters." in assert_inert(none)


# -- the workflow page ---------------------------------------------------------------------------


async def test_the_workflow_page_has_recent_runs_success_rate_and_median_duration(
    lab: Runtime,
) -> None:
    async def run(input: Any, ctx: WorkflowContext[Any]) -> Any:
        if input == "bad":
            raise ValueError("no")
        return await ctx.step("s", lambda: _echo(input))

    wf = lab.create_workflow("steady", run)
    for value in ("a", "b", "bad"):
        handle = wf.run(value)
        try:
            await handle.result
        except ValueError:
            pass
    infos = (
        await lab.run_store.query_runs(__import__("tether").stores.RunQuery(name="steady"))
    ).runs
    durations = sorted(i.ended_at - i.started_at for i in infos if i.status == "completed")  # type: ignore[operator]
    async with client_for(lab) as client:
        listing = (await client.get("/workflows")).text
        assert '<a href="/workflows/steady"><code>steady</code></a>' in listing
        html = (await client.get("/workflows/steady")).text
        api = (await client.get("/api/workflows/steady")).json()
        missing = await client.get("/workflows/nope")
    text = assert_inert(html)
    assert "67%" in text and "(2 completed of 3 finished)" in text
    assert len(re.findall(r'data-run-id="', html)) == 3
    assert api["success_rate"] == pytest.approx(2 / 3)
    assert api["median_duration_s"] == pytest.approx(sum(durations) / 2)
    assert [r["status"] for r in api["recent"]] == ["failed", "completed", "completed"]
    assert missing.status_code == 404


async def _echo(value: Any) -> Any:
    return value


# -- conversation search -------------------------------------------------------------------------


async def test_conversations_by_title_and_by_text(
    world_client: tuple[Any, httpx.AsyncClient],
) -> None:
    world, client = world_client

    async def scopes(query: str) -> list[str]:
        response = await client.get(f"/api/scopes?{query}")
        assert response.status_code == 200, response.text
        return [s["scope"] for s in response.json()["scopes"]]

    assert await scopes("q=second+answer") == ["notes"]
    assert await scopes("q=outline") == [world.writer_scope]
    assert await scopes("q=found") == ["notes"]  # two matching episodes, one row
    assert await scopes("q=nothing+like+this") == []
    assert await scopes("title=TITLE") == ["notes"]
    assert await scopes("title=title&q=outline") == []
    html = (await client.get("/conversations?q=second")).text
    text = assert_inert(html)
    assert 'name="q" value="second"' in html and "notes" in text
    none = (await client.get("/conversations?title=zzz")).text
    assert "No conversations match." in assert_inert(none)


@pytest.fixture
async def world_client(world: Any) -> AsyncIterator[tuple[Any, httpx.AsyncClient]]:
    async with client_for(world.runtime, world.registry) as client:
        yield world, client


async def test_tokens_and_cost_per_conversation_and_agent(lab: Runtime) -> None:
    agent = lab.create_agent(
        id="chat",
        model=script_client(
            [
                {"text": "one", "usage": {"input_tokens": 1000, "output_tokens": 10}},
                {"text": "two", "usage": {"input_tokens": 3000, "output_tokens": 30}},
            ]
        ),
    )
    await agent.run(memory_scope="talk", user="a").result
    await agent.run(memory_scope="talk", user="b").result
    unpriced = lab.create_agent(
        id="unpriced",
        model=script_client(
            [{"text": "x", "usage": {"input_tokens": 7, "output_tokens": 3}}], model="no-price"
        ),
    )
    await unpriced.run(user="c").result
    lab.create_agent(id="idle", model=script_client([]))
    async with client_for(lab) as client:
        conversation = assert_inert((await client.get("/conversations/talk")).text)
        agent_page = assert_inert((await client.get("/agents/chat")).text)
        api = (await client.get("/api/scopes/talk")).json()
        listing = (await client.get("/agents")).text
    assert_inert(listing)
    rows = {
        m.group(1): re.sub(r"<[^>]+>|\s+", " ", m.group(2)).split()
        for m in re.finditer(r'<tr class="agent-row">\s*<td><a href="/agents/([^"]+)">(.*?)</tr>', listing, re.S)
    }  # fmt: skip
    # The last three cells: runs, tokens, cost; no cost where a model has no known price.
    assert rows["chat"][-5:] == ["2", "4000", "→", "40", "$0.004080"]
    assert rows["unpriced"][-5:] == ["1", "7", "→", "3", "—"]
    assert rows["idle"][-3:] == ["0", "—", "—"]
    # 4000 input at $1/M + 40 output at $2/M = $0.00408
    for text in (conversation, agent_page):
        assert "4000 → 40" in text and "$0.004080" in text
    assert api["totals"] == {
        "runs": 2, "input_tokens": 4000, "output_tokens": 40,
        "cost_usd": pytest.approx(0.00408), "unpriced_runs": 0,
    }  # fmt: skip
