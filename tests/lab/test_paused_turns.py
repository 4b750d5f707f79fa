"""A lab episode whose turn pauses on a call that waits for a decision: lab runs cannot pause
yet, so the run fails saying so, and the scope keeps no call without its result."""

from __future__ import annotations

from typing import Any

import pytest
from tests.helpers import texts

from tether import define_tool
from tether.errors import AgentRunError
from tether.lab import Runtime

from .conftest import scripted


async def test_a_paused_turn_fails_the_run_and_stores_no_call_without_a_result(
    lab: Runtime,
) -> None:
    ran: list[Any] = []
    wipe = define_tool(
        name="wipe",
        input_schema={"type": "object"},
        execute=lambda value: ran.append(value) or "wiped",
        approval=True,
    )
    look = define_tool(name="look", input_schema={"type": "object"}, execute=lambda v: "seen")
    client = scripted(
        {"tool_use": [{"id": "a", "name": "look", "input": {}}]},
        {
            "tool_use": [
                {"id": "b", "name": "wipe", "input": {}},
                {"id": "c", "name": "look", "input": {}},
            ]
        },
        {"text": "fine"},
    )
    agent = lab.create_agent(id="janitor", system_prompt="Tidy.", model=client, tools=[wipe, look])
    handle = agent.run(memory_scope="room", user="clean up")
    with pytest.raises(AgentRunError, match=r"wipe \(approval, b\).*cannot pause") as info:
        await handle.result
    assert "approval=False" in str(info.value)
    assert ran == []
    run = await lab.run_store.get_run(handle.run_id)
    assert run is not None and run.status == "failed"
    stored = await lab.message_store.load("room")
    calls = [p["id"] for m in stored for p in m["content"] if p["type"] == "tool_call"]
    results = [p["id"] for m in stored for p in m["content"] if p["type"] == "tool_result"]
    assert calls == results == ["a"]  # the first round, whole; the paused round not at all
    # The scope stays one the provider takes: the next episode runs on it.
    result = await agent.run(memory_scope="room", user="just answer").result
    assert result.text == "fine"
    assert texts(client.calls[2]["messages"])[-1] == ("user", "just answer")
