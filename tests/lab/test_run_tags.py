"""`run_tags(...)`: every run started inside the block records its tags, nested runs too."""

from __future__ import annotations

from typing import Any

import pytest

from tether.errors import ConfigError
from tether.lab import Runtime, run_tags
from tether.workflows import WorkflowContext

from .conftest import scripted


async def test_episodes_and_workflow_runs_inside_the_block_are_tagged(lab: Runtime) -> None:
    agent = lab.create_agent(id="a", model=scripted(*[{"text": "ok"}] * 3))

    async def body(input: str, ctx: WorkflowContext[str]) -> str:
        async def episode() -> str:
            result = await agent.run(user=input, tags=["own"]).result
            return result.text

        return await ctx.step("ask", episode)

    flow = lab.create_workflow("flow", body)
    with run_tags(["experiment:x", "case:c1"]):
        with run_tags(["case:c1", "inner"]):
            handle = flow.run("hi")
            await handle.result
        direct = agent.run(user="direct")
        await direct.result
    outside = agent.run(user="outside")
    await outside.result
    store = lab.run_store
    wf = await store.get_run(handle.workflow_run_id)
    assert wf is not None and wf.tags == ["experiment:x", "case:c1", "inner"]
    [child] = await store.list_runs(workflow_run_id=handle.workflow_run_id)
    assert child.tags == ["own", "experiment:x", "case:c1", "inner"]
    info = await store.get_run(direct.run_id)
    assert info is not None and info.tags == ["experiment:x", "case:c1"]
    info = await store.get_run(outside.run_id)
    assert info is not None and info.tags == []


async def test_a_version_tag_given_to_the_block_replaces_the_automatic_one() -> None:
    lab = Runtime(store="memory", version="1.0", defaults={"model": scripted({"text": "ok"})})
    agent = lab.create_agent(id="a")
    with run_tags(["version:2.0"]):
        handle = agent.run(user="hi")
        await handle.result
    info = await lab.run_store.get_run(handle.run_id)
    assert info is not None
    assert [t for t in info.tags if t.startswith("version:")] == ["version:2.0"]
    await lab.aclose()


@pytest.mark.parametrize("bad", ["one-string", [1]])
def test_tags_must_be_a_list_of_strings(bad: Any) -> None:
    with pytest.raises(ConfigError), run_tags(bad):
        pass
