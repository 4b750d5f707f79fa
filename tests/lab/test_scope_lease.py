"""Turns on one memory scope are serialized; turns on different scopes are not.

In one process here, on every backend (memory, SQLite, PostgreSQL); with several processes in
test_scope_processes.py.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from tests.helpers import texts
from tests.postgres_server import postgres_url

from tether.errors import ScopeBusyError, StoreError
from tether.lab import Runtime
from tether.llm.base import ChatRequest, StreamChunk
from tether.stores.memory import InMemoryMessageStore
from tether.testing import ScriptClient, script_client


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def lab(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Runtime]:
    store = {
        "memory": lambda: "memory",
        "sqlite": lambda: f"sqlite:///{tmp_path / 'lab.db'}",
        "postgres": postgres_url,
    }[request.param]()
    runtime = Runtime(store=store, version=False)
    yield runtime
    await runtime.aclose()


class GatedClient(ScriptClient):
    """A scripted model that answers a request only once `gate(request)` lets it through."""

    def __init__(self, turns: list[Any], gate: Callable[[ChatRequest], Any]) -> None:
        super().__init__(turns)
        self.gate = gate

    async def chat(self, request: ChatRequest) -> AsyncIterator[StreamChunk]:
        await self.gate(request)
        async for chunk in super().chat(request):
            yield chunk


def answer(request: ChatRequest) -> dict[str, Any]:
    """Says how many messages the request held (the transcript the turn was generated from)."""
    return {"text": f"saw {len(request['messages'])}"}


async def test_ten_episodes_at_once_on_a_new_scope_run_one_after_another(lab: Runtime) -> None:
    client = script_client([answer] * 10)
    agent = lab.create_agent(id="a", system_prompt="You count.", model=client)
    handles = [agent.run(memory_scope="s", user=f"turn {i}") for i in range(10)]
    results = await asyncio.gather(*(h.result for h in handles))
    # Each turn was generated from a transcript holding every turn before it.
    assert sorted(len(call["messages"]) for call in client.calls) == list(range(1, 20, 2))
    assert sorted(int(r.text.split()[1]) for r in results) == list(range(1, 20, 2))
    stored = await lab.message_store.load("s")
    # One pinned system prompt, first; then user/assistant pairs, never interleaved.
    assert [r["role"] for r in stored] == ["system"] + ["user", "assistant"] * 10
    assert [r["role"] for r in stored].count("system") == 1
    pairs = texts(stored[1:])
    for i in range(0, 20, 2):
        assert pairs[i][0] == "user" and pairs[i + 1] == ("assistant", f"saw {i + 1}")


async def test_the_second_episode_waits_for_the_first_to_commit(lab: Runtime) -> None:
    release, calling = asyncio.Event(), asyncio.Event()
    started: list[int] = []

    async def gate(request: ChatRequest) -> None:
        started.append(len(request["messages"]))
        if len(started) == 1:
            calling.set()
            await release.wait()

    agent = lab.create_agent(
        id="a", model=GatedClient([{"text": "first"}, {"text": "second"}], gate)
    )
    first = agent.run(memory_scope="s", user="one")
    await calling.wait()  # the first holds the scope, waiting for its model
    second = agent.run(memory_scope="s", user="two")
    await asyncio.sleep(0.3)
    assert started == [1] and not second.result.done()  # the second has not even loaded
    release.set()
    await asyncio.gather(first.result, second.result)
    # The second's request holds the first turn.
    assert started == [1, 3]
    assert texts(await lab.message_store.load("s")) == [
        ("user", "one"),
        ("assistant", "first"),
        ("user", "two"),
        ("assistant", "second"),
    ]


async def test_episodes_on_different_scopes_run_at_the_same_time(lab: Runtime) -> None:
    arrived = 0
    everyone = asyncio.Event()

    async def gate(request: ChatRequest) -> None:
        # Every model call waits until all five are in flight: possible only if the five
        # episodes run concurrently.
        nonlocal arrived
        arrived += 1
        if arrived == 5:
            everyone.set()
        await asyncio.wait_for(everyone.wait(), 10)

    agent = lab.create_agent(id="a", model=GatedClient([{"text": "ok"}] * 5, gate))
    results = await asyncio.gather(
        *(agent.run(memory_scope=f"s{i}", user="hi").result for i in range(5))
    )
    assert [r.text for r in results] == ["ok"] * 5


async def test_an_episode_that_waits_too_long_fails_naming_the_scope_and_the_holder(
    tmp_path: Path,
) -> None:
    lab = Runtime(store=f"sqlite:///{tmp_path / 'lab.db'}", version=False, scope_lock_timeout=0.3)
    release, calling = asyncio.Event(), asyncio.Event()

    async def gate(request: ChatRequest) -> None:
        if len(request["messages"]) == 1:
            calling.set()
            await release.wait()

    agent = lab.create_agent(id="a", model=GatedClient([{"text": "slow"}, {"text": "x"}], gate))
    first = agent.run(memory_scope="busy", user="one")
    await calling.wait()
    started = time.monotonic()
    second = agent.run(memory_scope="busy", user="two")
    with pytest.raises(ScopeBusyError) as busy:
        await second.result
    assert 0.25 < time.monotonic() - started < 5
    assert busy.value.scope == "busy"
    assert busy.value.holder is not None and first.run_id in busy.value.holder
    assert "'busy'" in str(busy.value) and "scope_lock_timeout" in str(busy.value)
    release.set()
    assert (await first.result).text == "slow"
    # The refused episode stored nothing; its run says why it failed.
    assert texts(await lab.message_store.load("busy")) == [("user", "one"), ("assistant", "slow")]
    info = await lab.run_store.get_run(second.run_id)
    assert info is not None and info.status == "failed" and "ScopeBusyError" in (info.error or "")
    await lab.aclose()


async def test_an_episode_started_from_inside_a_run_holding_its_scope_fails_at_once(
    lab: Runtime,
) -> None:
    inner = lab.create_agent(id="inner", model=script_client([{"text": "never"}]))
    tool = lab.tool_from_agent(
        inner,
        input_schema={"type": "object", "properties": {}},
        map_run=lambda args, info: {"memory_scope": "shared", "user": "again"},
    )
    outer = lab.create_agent(
        id="outer",
        tools=[tool],
        model=script_client([{"tool_use": [{"name": "inner", "input": {}}]}, {"text": "done"}]),
    )
    started = time.monotonic()
    result = await outer.run(memory_scope="shared", user="go").result
    assert time.monotonic() - started < 10  # no deadlock, no wait for scope_lock_timeout
    assert result.text == "done"
    (call, tool_result) = (result.new_messages[1], result.new_messages[2])
    assert call["content"][0]["type"] == "tool_call"
    part = tool_result["content"][0]
    assert part["type"] == "tool_result" and part["is_error"] is True
    assert "held by the run this episode was started from" in str(part["output"])


async def test_a_scope_is_free_again_after_a_failed_or_cancelled_episode(lab: Runtime) -> None:
    async def gate(request: ChatRequest) -> None:
        if texts(request["messages"])[-1] == ("user", "one"):
            await asyncio.Event().wait()  # the first episode is cancelled in its model call

    agent = lab.create_agent(id="a", model=GatedClient([{"text": "after"}], gate))
    first = agent.run(memory_scope="s", user="one")
    await asyncio.sleep(0.1)
    first.cancel()
    with pytest.raises((asyncio.CancelledError, Exception)):
        await first.result
    second = await asyncio.wait_for(agent.run(memory_scope="s", user="two").result, 10)
    assert second.text == "after"


class FailingLeases(InMemoryMessageStore):
    """A message store whose first `acquire_scope` fails (its lease table out of reach)."""

    def __init__(self) -> None:
        super().__init__()
        self.fail = True

    async def acquire_scope(
        self, scope: str, owner: str, *, ttl: float, replace: str | None = None
    ) -> str | None:
        if self.fail:
            self.fail = False
            raise StoreError("the lease table is out of reach")
        return await super().acquire_scope(scope, owner, ttl=ttl, replace=replace)


async def test_a_scope_whose_lease_could_not_be_taken_is_free_for_the_next_episode() -> None:
    lab = Runtime(store="memory", message_store=FailingLeases(), version=False)
    agent = lab.create_agent(id="a", model=script_client([{"text": "after"}]))
    with pytest.raises(StoreError, match="out of reach"):
        await agent.run(memory_scope="s", user="one").result
    assert lab.scopes._locks == {}  # nobody holds or waits for it in this process
    second = await asyncio.wait_for(agent.run(memory_scope="s", user="two").result, 10)
    assert second.text == "after"
    await lab.aclose()
