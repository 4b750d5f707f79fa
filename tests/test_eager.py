"""`tether._eager`: a write that never waits runs to its end in the caller's frame; one that does
goes on in a task from where it stopped, and a cancel of the caller never cuts it short."""

from __future__ import annotations

import asyncio

import pytest

from tether._eager import advance, shielded, step


async def test_a_coroutine_that_never_waits_is_done_when_step_returns_and_needs_no_task() -> None:
    done: list[str] = []

    async def write() -> int:
        done.append("written")
        return 7

    before = len(asyncio.all_tasks())
    future = step(write())
    assert done == ["written"] and future.done() and future.result() == 7
    assert len(asyncio.all_tasks()) == before
    assert await shielded(write()) == 7


async def test_its_error_is_the_future_s() -> None:
    async def write() -> None:
        raise ValueError("disk full")

    future = step(write())
    assert future.done()
    with pytest.raises(ValueError, match="disk full"):
        future.result()
    with pytest.raises(ValueError, match="disk full"):
        await shielded(write())


async def test_a_coroutine_that_waits_goes_on_from_its_wait_in_a_task() -> None:
    gate = asyncio.Event()
    steps: list[str] = []

    async def write() -> str:
        steps.append("before")
        await gate.wait()
        steps.append("after")
        await asyncio.sleep(0)
        try:
            await asyncio.wait_for(asyncio.Event().wait(), 0.01)  # a wait that times out
        except TimeoutError:
            steps.append("timed out")
        return "stored"

    future = step(write())
    assert steps == ["before"] and not future.done()
    gate.set()
    assert await future == "stored"
    assert steps == ["before", "after", "timed out"]


async def test_a_cancel_of_the_caller_lets_a_waiting_write_finish_first() -> None:
    gate = asyncio.Event()
    finished: list[str] = []

    async def write() -> None:
        await gate.wait()
        finished.append("written")

    caller = asyncio.ensure_future(shielded(write()))
    await asyncio.sleep(0)
    caller.cancel()
    await asyncio.sleep(0)
    assert not caller.done()  # still waiting for the write
    gate.set()
    with pytest.raises(asyncio.CancelledError):
        await caller
    assert finished == ["written"]


async def test_a_cancel_of_the_task_itself_reaches_the_coroutine() -> None:
    seen: list[str] = []

    async def write() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise

    future = step(write())
    await asyncio.sleep(0)
    future.cancel()
    with pytest.raises(asyncio.CancelledError):
        await future
    assert seen == ["cancelled"]


async def test_advance_ends_a_coroutine_that_never_waits_or_hands_on_the_rest() -> None:
    async def at_once() -> int:
        return 7

    assert advance(at_once()) == (True, 7)
    here = asyncio.current_task()
    ran_in: list[asyncio.Task[object] | None] = []
    gate = asyncio.Event()

    async def waits() -> str:
        await gate.wait()
        ran_in.append(asyncio.current_task())
        return "after"

    done, rest = advance(waits())
    assert done is False
    asyncio.get_running_loop().call_soon(gate.set)
    before = len(asyncio.all_tasks())
    assert await rest == "after"
    assert ran_in == [here] and len(asyncio.all_tasks()) == before  # no task of its own


async def test_advance_raises_what_the_first_step_raised() -> None:
    async def broken() -> None:
        raise ValueError("disk full")

    with pytest.raises(ValueError, match="disk full"):
        advance(broken())
