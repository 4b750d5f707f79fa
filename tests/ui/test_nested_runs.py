"""Runs an episode's tools started (agents and workflows used as tools): the parent's timeline
draws each as a nested bar under the tool call that started it, linking to the child's page,
which links back; the JSON API shows the link; the run list keeps them out of its roots."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tether.lab import Runtime
from tether.testing import script_client
from tether.workflows import WorkflowContext

from .conftest import HOSTILE, assert_inert, client_for


@dataclass
class Nested:
    runtime: Runtime
    outer: str
    """The orchestrator's run: one tool call of the researcher agent, one of the workflow."""
    child: str
    """The researcher's episode its first tool call started."""
    flow: str
    """The workflow run its second tool call started."""
    calls: list[str]
    """The orchestrator's tool call ids, in order."""


async def build(runtime: Runtime) -> Nested:
    researcher = runtime.create_agent(
        id="researcher", model=script_client([{"text": f"Found {HOSTILE}"}])
    )

    async def outline(input: Any, ctx: WorkflowContext[Any]) -> str:
        return await ctx.step("draft", lambda: _echo(f"outline of {input}"))

    flow = runtime.create_workflow("outline", outline)
    orchestrator = runtime.create_agent(
        id="orchestrator",
        tools=[runtime.tool_from_agent(researcher), runtime.tool_from_workflow(flow)],
        model=script_client(
            [
                {"tool_use": [{"name": "researcher", "input": {"user": f"Look {HOSTILE}"}}]},
                {"tool_use": [{"name": "outline", "input": {"topic": "x"}}]},
                {"text": "Done."},
            ]
        ),
    )
    outer = await orchestrator.run(user="Research, then outline").result
    await runtime.wait_idle()
    events = await runtime.run_store.events(outer.run_id)
    calls = [e["data"]["id"] for e in events if e["type"] == "agent_tool_call"]
    runs = await runtime.run_store.list_runs(limit=100)
    [child] = [r.run_id for r in runs if r.name == "researcher"]
    [flow_run] = [r.run_id for r in runs if r.name == "outline"]
    return Nested(runtime, outer.run_id, child, flow_run, calls)


async def _echo(value: Any) -> Any:
    return value


@pytest.fixture(params=["memory", "sqlite"])
async def nested(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Nested]:
    store = "memory" if request.param == "memory" else f"sqlite:///{tmp_path / 'ui.db'}"
    runtime = Runtime(store=store, version=False)
    yield await build(runtime)
    await runtime.aclose()


def bar_rows(html: str) -> list[tuple[str, str]]:
    """(kind, link) of each waterfall bar, in page order."""
    section = html[
        html.index('<ol class="waterfall"') : html.index("</ol>", html.index("waterfall"))
    ]
    return re.findall(
        r'<li class="bar bar-(\w+)[^"]*">\s*<span class="bar-label"><a href="([^"]+)"', section
    )


async def test_the_parent_timeline_draws_each_tool_started_run_under_its_tool_call(
    nested: Nested,
) -> None:
    async with client_for(nested.runtime) as client:
        html = (await client.get(f"/runs/{nested.outer}")).text
        api = (await client.get(f"/api/runs/{nested.outer}")).json()
    assert_inert(html)
    rows = bar_rows(html)
    kinds = [kind for kind, _ in rows]
    # model, tool, the agent it started, model, tool, the workflow run it started, model.
    assert kinds == ["model", "tool", "run", "model", "tool", "run", "model"], rows
    assert rows[2][1] == f"/runs/{nested.child}"
    assert rows[5][1] == f"/runs/{nested.flow}"
    # Nested bars are indented one level under the tool bar.
    assert re.search(r'<li class="bar bar-run bar-ok depth-1">\s*<span class="bar-label">'
                     rf'<a href="/runs/{nested.child}">agent researcher</a>', html)  # fmt: skip
    bars = api["timeline"]["bars"]
    runs = [b for b in bars if b["kind"] == "run"]
    assert [(b["run_id"], b["tool_call_id"]) for b in runs] == [
        (nested.child, nested.calls[0]),
        (nested.flow, nested.calls[1]),
    ]
    tools = [b for b in bars if b["kind"] == "tool"]
    for tool, run in zip(tools, runs, strict=True):
        # Drawn within its tool call: it started after the call began and ended before its result.
        assert tool["start"] <= run["start"] <= run["end"] <= tool["end"]
    # The tree lists them too, each a link.
    tree = api["tree"]
    assert [c["run_id"] for c in tree["children"]] == [nested.child, nested.flow]
    assert "Runs its tools started" in html


async def test_the_child_page_links_back_to_the_parent(nested: Nested) -> None:
    async with client_for(nested.runtime) as client:
        child = (await client.get(f"/runs/{nested.child}")).text
        flow = (await client.get(f"/runs/{nested.flow}")).text
        api = (await client.get(f"/api/runs/{nested.child}")).json()
        flow_api = (await client.get(f"/api/runs/{nested.flow}")).json()
    for html, call in ((child, nested.calls[0]), (flow, nested.calls[1])):
        assert_inert(html)
        started_by = re.search(r'<dd class="parent-run">(.*?)</dd>', html, re.S)
        assert started_by is not None, html
        assert f'<a href="/runs/{nested.outer}">orchestrator</a>' in started_by.group(1)
        assert f"tool call <code>{call}</code>" in started_by.group(1)
    assert api["run"]["parent_run_id"] == nested.outer
    assert api["run"]["parent_tool_call_id"] == nested.calls[0]
    assert flow_api["run"]["parent_run_id"] == nested.outer
    outer_api = (await client_for(nested.runtime).get(f"/api/runs/{nested.outer}")).json()
    assert outer_api["run"]["parent_run_id"] is None


async def test_the_run_list_shows_the_parent_and_not_its_children(nested: Nested) -> None:
    async with client_for(nested.runtime) as client:
        listed = (await client.get("/api/runs")).json()["runs"]
        every = (await client.get("/api/runs?all=1")).json()["runs"]
    assert [r["run_id"] for r in listed] == [nested.outer]
    assert {nested.child, nested.flow} <= {r["run_id"] for r in every}
    by_id = {r["run_id"]: r for r in every}
    assert by_id[nested.child]["parent_run_id"] == nested.outer


async def test_a_parent_that_is_gone_still_leaves_a_link(tmp_path: Path) -> None:
    """A child whose parent's summary cannot be found links to the id it recorded."""
    from tether.stores.run_store import RunInfo

    runtime = Runtime(store="memory", version=False)
    await runtime.run_store.start_run(
        RunInfo("kid", "agent", "researcher", "completed", 10.0, parent_run_id="lost",
                parent_tool_call_id="call_9")
    )  # fmt: skip
    async with client_for(runtime) as client:
        html = (await client.get("/runs/kid")).text
    assert_inert(html)
    assert '<a href="/runs/lost">lost</a>, tool call <code>call_9</code>' in html
    await runtime.aclose()


async def test_a_run_page_totals_the_tokens_and_cost_of_the_runs_nested_in_it() -> None:
    runtime = Runtime(
        store="memory", version=False, prices={"script": {"input_mtok": 1.0, "output_mtok": 2.0}}
    )
    used = {"input_tokens": 1000, "output_tokens": 500}
    inner = runtime.create_agent(
        id="inner", model=script_client([{"text": "found", "usage": used}])
    )
    outer = runtime.create_agent(
        id="outer",
        tools=[runtime.tool_from_agent(inner)],
        model=script_client(
            [
                {"tool_use": [{"name": "inner", "input": {"user": "look"}}], "usage": used},
                {"text": "Done.", "usage": used},
            ]
        ),
    )
    result = await outer.run(user="go").result
    async with client_for(runtime) as client:
        html = (await client.get(f"/runs/{result.run_id}")).text
        [child] = [r for r in await runtime.run_store.list_runs(limit=10) if r.name == "inner"]
        lone = (await client.get(f"/runs/{child.run_id}")).text
    await runtime.aclose()
    (totals,) = re.findall(r'<dd class="tree-totals">(.*?)</dd>', html, re.S)
    # Own: 2 calls of 1000 -> 500 tokens ($0.002 each); nested: 1 more call.
    assert "3000 → 1500" in totals and "$0.0060" in totals and "1 nested run" in totals
    assert "tree-totals" not in lone


async def test_nested_totals_show_no_cost_when_a_nested_run_has_no_price() -> None:
    runtime = Runtime(
        store="memory", version=False, prices={"priced": {"input_mtok": 1.0, "output_mtok": 1.0}}
    )
    used = {"input_tokens": 1000, "output_tokens": 0}
    inner = runtime.create_agent(
        id="inner", model=script_client([{"text": "x", "usage": used}], model="unpriced")
    )
    outer = runtime.create_agent(
        id="outer",
        tools=[runtime.tool_from_agent(inner)],
        model=script_client(
            [
                {"tool_use": [{"name": "inner", "input": {"user": "look"}}], "usage": used},
                {"text": "Done.", "usage": used},
            ],
            model="priced",
        ),
    )
    result = await outer.run(user="go").result
    async with client_for(runtime) as client:
        html = (await client.get(f"/runs/{result.run_id}")).text
    await runtime.aclose()
    (totals,) = re.findall(r'<dd class="tree-totals">(.*?)</dd>', html, re.S)
    assert "3000 → 0" in totals and "—" in totals and "$" not in totals
