"""AbortScope: the one way tether turns an abort into cancellation of a wait, and back."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest

from tether import AbortController, AbortedError
from tether.signals import AbortScope, take_back_cancel


async def test_an_abort_interrupts_the_wait_and_leaves_the_task_as_it_was() -> None:
    controller = AbortController()
    scope = AbortScope(controller.signal)
    asyncio.get_running_loop().call_later(0.01, controller.abort, "enough")
    with pytest.raises(AbortedError, match="enough"):
        await scope.wait(asyncio.sleep(10))
    task = asyncio.current_task()
    assert task is not None and task.cancelling() == 0  # our cancellation was taken back
    await asyncio.sleep(0)  # and the task goes on
    scope.close()


async def test_an_abort_before_the_wait_never_starts_it() -> None:
    controller = AbortController()
    controller.abort()
    started: list[bool] = []

    async def step() -> None:
        started.append(True)

    with AbortScope(controller.signal) as scope, pytest.raises(AbortedError):
        await scope.wait(step())
    assert started == []


async def test_a_wait_that_swallows_the_cancellation_still_ends_in_aborted() -> None:
    controller = AbortController()
    scope = AbortScope(controller.signal)

    async def stubborn() -> str:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            return "swallowed"
        return "slept"

    asyncio.get_running_loop().call_later(0.01, controller.abort)
    with pytest.raises(AbortedError):
        await scope.wait(stubborn())
    task = asyncio.current_task()
    assert task is not None and task.cancelling() == 0


async def test_a_cancellation_from_outside_still_propagates() -> None:
    controller = AbortController()
    scope = AbortScope(controller.signal)

    async def waiter() -> None:
        await scope.wait(asyncio.sleep(10))

    task = asyncio.ensure_future(waiter())
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    scope.close()


async def test_iterate_interrupts_the_wait_for_an_item_never_the_handling_of_one() -> None:
    controller = AbortController()
    seen: list[int] = []

    async def items() -> AsyncIterator[int]:
        yield 1
        yield 2
        await asyncio.sleep(10)  # the next item never comes: only an abort ends the wait
        yield 3

    with AbortScope(controller.signal) as scope, pytest.raises(AbortedError, match="stop"):
        async for item in scope.iterate(items()):
            seen.append(item)
            if item == 2:  # the consumer's own await between two items is not interrupted
                asyncio.get_running_loop().call_soon(controller.abort, "stop")
                await asyncio.sleep(0.01)
    assert seen == [1, 2]
    task = asyncio.current_task()
    assert task is not None and task.cancelling() == 0


async def test_take_back_cancel_says_whether_another_request_is_left() -> None:
    task = asyncio.ensure_future(asyncio.sleep(10))
    task.cancel()
    task.cancel()
    assert take_back_cancel(task) is False  # one request is still there
    assert take_back_cancel(task) is True
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
