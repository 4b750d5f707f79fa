"""`Episode._interruptible`: a store operation (or a ToolProvider's) that waits is stopped by
`handle.cancel()`; one that never waits runs to its end without an abort scope."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tether.errors import AbortedError
from tether.lab import Runtime
from tether.lab._episode import Episode

from .conftest import scripted


async def _episode() -> tuple[Runtime, Episode]:
    lab = Runtime(store="memory", version=False)
    agent = lab.create_agent(id="a", model=scripted({"text": "x"}))
    return lab, agent.prepare_episode({"user": "q"}, buffer=None)


async def test_an_operation_that_waits_is_stopped_by_an_abort() -> None:
    lab, episode = await _episode()
    entered, stopped = asyncio.Event(), asyncio.Event()

    async def op() -> int:
        entered.set()
        try:
            await asyncio.Event().wait()
        finally:
            stopped.set()
        return 1

    waiting = asyncio.ensure_future(episode._interruptible(op))
    await entered.wait()
    episode.controller.abort("stop")
    with pytest.raises(AbortedError):
        await waiting
    assert stopped.is_set()
    await lab.aclose()


async def test_an_awaitable_that_is_no_coroutine_is_awaited_and_stopped_as_well() -> None:
    lab, episode = await _episode()
    done: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    asyncio.get_running_loop().call_soon(done.set_result, 7)
    assert await episode._interruptible(lambda: done) == 7
    never: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    waiting = asyncio.ensure_future(episode._interruptible(lambda: never))
    await asyncio.sleep(0)
    episode.controller.abort("stop")
    with pytest.raises(AbortedError):
        await waiting
    assert never.cancelled()
    await lab.aclose()


async def test_an_operation_done_at_once_keeps_its_result_whatever_it_set_off() -> None:
    lab, episode = await _episode()

    async def op() -> Any:
        episode.controller.abort("from inside")  # nothing waits: nothing to interrupt
        return "kept"

    assert await episode._interruptible(op) == "kept"
    # Aborted before: an operation that waits still runs (the loop stops at its next wait).
    assert await episode._interruptible(op) == "kept"
    await lab.aclose()
