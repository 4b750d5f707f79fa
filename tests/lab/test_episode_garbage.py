"""An ended episode is freed by reference counting: it leaves no reference cycle for the
cycle collector (whose passes a busy process would otherwise pay for every few episodes)."""

from __future__ import annotations

import asyncio
import gc
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from tether import define_tool
from tether.lab import LabAgent, Runtime
from tether.lab._recorder import pricing_loaded
from tether.testing import script_client


@pytest.fixture
def no_collector() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _left_for_the_collector() -> Counter[str]:
    """The types of what only the cycle collector would free now."""
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        found = Counter(type(o).__name__ for o in gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.collect()  # what was kept for the count, freed now
    return found


def _agent(lab: Runtime) -> LabAgent[Any]:
    look = define_tool(
        name="look",
        description="Look a word up",
        input_schema={"type": "object", "properties": {"word": {"type": "string"}}},
        execute=lambda args: str(args["word"]).upper(),
    )

    def reply(request: Any) -> dict[str, Any]:
        if request["messages"][-1]["role"] == "user":
            return {"tool_use": [{"name": "look", "input": {"word": "hi"}}]}
        return {"text": "done"}

    client = script_client([reply] * 20)
    return lab.create_agent(id="a", system_prompt="Be brief.", model=client, tools=[look])


async def _episodes(agent: LabAgent[Any], scopes: list[str]) -> None:
    for scope in scopes:
        result = await agent.run(memory_scope=scope, user="look hi up").result
        assert result.text == "done"
    await asyncio.sleep(0)  # the episodes' tasks' done callbacks


async def test_an_ended_episode_leaves_nothing_for_the_cycle_collector(
    lab: Runtime, no_collector: None
) -> None:
    agent = _agent(lab)
    # What the first episodes set up once (clients, caches), and the price data (its thread
    # builds classes as it imports).
    await _episodes(agent, ["a", "b"])
    await asyncio.wrap_future(pricing_loaded())
    _left_for_the_collector()
    await _episodes(agent, ["a", "c", "d"])
    assert _left_for_the_collector() == Counter()
