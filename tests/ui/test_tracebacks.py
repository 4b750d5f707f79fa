"""A failed run keeps where it failed: the run page's one error panel shows the error's type and
message, and the traceback folded (closed until opened), escaped; the JSON API has it; runs
recorded before tracebacks were kept still render."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tether.errors import AbortedError, LLMError
from tether.lab import Runtime
from tether.llm.base import ChatRequest
from tether.stores.run_store import RunInfo
from tether.workflows import WorkflowContext

from .conftest import HOSTILE, assert_inert, client_for


def refuse_the_request() -> None:
    raise RuntimeError(f"the model broke {HOSTILE}")


class BrokenModel:
    """A model client whose every request raises from `refuse_the_request`."""

    model = "broken"

    async def chat(self, request: ChatRequest) -> Any:
        refuse_the_request()
        yield {"type": "text", "text": ""}  # pragma: no cover - makes this an async generator

    async def aclose(self) -> None:
        return None


@pytest.fixture(params=["memory", "sqlite"])
async def lab(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Runtime]:
    store = "memory" if request.param == "memory" else f"sqlite:///{tmp_path / 'ui.db'}"
    runtime = Runtime(store=store, version=False)
    yield runtime
    await runtime.aclose()


def folded(html: str) -> str:
    """The traceback block of the page's one error panel (it must be closed)."""
    panels = re.findall(r'<section class="panel panel-error error-panel".*?</section>', html, re.S)
    assert len(panels) == 1, panels
    match = re.search(r'<details class="traceback"><summary>traceback</summary><pre>(.*?)</pre>', panels[0], re.S)  # fmt: skip
    assert match is not None, panels[0]
    return match.group(1)


async def test_a_failed_episode_shows_its_traceback_folded_and_escaped(lab: Runtime) -> None:
    agent = lab.create_agent(id="fragile", model=BrokenModel(), max_retries=0)
    handle = agent.run(user="hi")
    with pytest.raises(LLMError):  # the harness's wrapping of what the client raised
        await handle.result
    info = await lab.run_store.get_run(handle.run_id)
    assert info is not None and info.traceback is not None
    assert "refuse_the_request" in info.traceback and info.error is not None
    async with client_for(lab) as client:
        html = (await client.get(f"/runs/{handle.run_id}")).text
        api = (await client.get(f"/api/runs/{handle.run_id}")).json()
        listed = (await client.get("/api/runs?all=1")).json()["runs"]
    assert_inert(html)
    block = folded(html)
    assert "refuse_the_request" in block and "Traceback (most recent call last)" in block
    # The message (in the panel and the traceback's last line) is text, never markup.
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in block
    assert "<script>window" not in block
    assert '<code class="error-type">LLMError</code>' in html
    assert '<details class="traceback" open' not in html
    assert "refuse_the_request" in api["run"]["traceback"]
    # Lists leave the traceback out (a run's own record has it).
    assert [r for r in listed if r["run_id"] == handle.run_id] and all(
        "traceback" not in r for r in listed
    )


async def test_a_failed_workflow_shows_where_its_step_raised(lab: Runtime) -> None:
    def explode_the_step(value: Any) -> str:
        raise ValueError(f"no <b>{value}</b>")

    async def run(input: Any, ctx: WorkflowContext[Any]) -> Any:
        return await ctx.step("explode", lambda: _call(explode_the_step, input))

    handle = lab.create_workflow("fragile-flow", run).run("x")
    with pytest.raises(ValueError):
        await handle.result
    async with client_for(lab) as client:
        html = (await client.get(f"/runs/{handle.workflow_run_id}")).text
        api = (await client.get(f"/api/runs/{handle.workflow_run_id}")).json()
    assert_inert(html)
    block = folded(html)
    assert "explode_the_step" in block and "ValueError: no &lt;b&gt;x&lt;/b&gt;" in block
    assert "explode_the_step" in api["run"]["traceback"]
    # Kept with the run's error, not copied into its events.
    events = await lab.run_store.events(handle.workflow_run_id)
    assert not any("traceback" in e["data"] for e in events)


async def _call(fn: Any, value: Any) -> Any:
    return fn(value)


async def test_a_cancelled_episode_records_no_traceback(lab: Runtime) -> None:
    import asyncio

    started = asyncio.Event()

    class SlowModel:
        model = "slow"

        async def chat(self, request: ChatRequest) -> Any:
            started.set()
            await asyncio.sleep(30)
            yield {"type": "text", "text": ""}  # pragma: no cover

        async def aclose(self) -> None:
            return None

    handle = lab.create_agent(id="slow", model=SlowModel()).run(user="hi")
    await started.wait()
    handle.cancel()
    with pytest.raises(AbortedError):
        await handle.result
    info = await lab.run_store.get_run(handle.run_id)
    assert info is not None and info.status == "cancelled" and info.traceback is None


async def test_a_run_recorded_before_tracebacks_still_renders_one_panel(lab: Runtime) -> None:
    await lab.run_store.start_run(RunInfo("old", "agent", "researcher", "running", 10.0))
    await lab.run_store.finish_run("old", "failed", error=f"LLMError: quota {HOSTILE}")
    async with client_for(lab) as client:
        html = (await client.get("/runs/old")).text
        api = (await client.get("/api/runs/old")).json()
    text = assert_inert(html)
    assert html.count('class="panel panel-error error-panel"') == 1
    assert '<code class="error-type">LLMError</code>' in html
    assert f"quota {HOSTILE}" in text
    assert 'class="traceback"' not in html
    assert api["run"]["traceback"] is None
