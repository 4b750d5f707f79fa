"""Writes that finish even when their caller is cancelled, without a task when they need none.

`asyncio.shield(asyncio.ensure_future(write))` is how a store write that must not be cut short
(a run's start, its end, a lease given back) is awaited: a cancel of the caller lets the write
go on. That costs a task and two turns of the event loop per write, while a SQLite write (or
the memory store's) never suspends at all: it is done before a task would even have started.

`step(coro)` runs the coroutine up to its first real wait, in the caller's frame: when it ends
there, its outcome is all there is (nothing could have cancelled it). Only a coroutine that
does wait (PostgreSQL, another process's lock) goes on in a task, from where it stopped.
Its first steps run in the caller's context and task, not a copy of them: for store writes,
which set no context variables and arm nothing on the running task (an `asyncio.timeout()`
entered before the first wait would be armed on the caller's task, not the one going on).
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Generator
from typing import Any, TypeVar

__all__ = ["advance", "shielded", "step"]

T = TypeVar("T")


class _Rest:
    """Awaitable going on with a coroutine that stopped at `yielded` (what its first wait
    handed up): each wait is handed on to the task that awaits this, and its wake-up (or the
    exception thrown in) handed back down."""

    __slots__ = ("coro", "yielded")

    def __init__(self, coro: Coroutine[Any, Any, Any], yielded: Any) -> None:
        self.coro = coro
        self.yielded = yielded

    def __await__(self) -> Generator[Any, None, Any]:
        coro, yielded = self.coro, self.yielded
        self.yielded = None
        while True:
            try:
                yield yielded
            except BaseException as exc:  # a cancel or a throw into the task: the coroutine's
                try:
                    yielded = coro.throw(exc)
                except StopIteration as done:
                    return done.value
                continue
            try:
                yielded = coro.send(None)
            except StopIteration as done:
                return done.value


async def _go_on(rest: _Rest) -> Any:
    return await rest


def advance(coro: Coroutine[Any, Any, T]) -> tuple[bool, Any]:
    """Run `coro` up to its first wait, in the caller's frame: `(True, its result)` when it
    ended there (what it raised is raised), else `(False, awaitable)`, which goes on with it
    in the task that awaits it, in that task's context (no task of its own)."""
    try:
        yielded = coro.send(None)
    except StopIteration as done:
        return True, done.value
    return False, _Rest(coro, yielded)


def step(coro: Coroutine[Any, Any, T]) -> asyncio.Future[T]:
    """`coro` as a future: already done when it ran to its end without waiting, else a task
    going on from its first wait. Like `asyncio.ensure_future(coro)`, but a coroutine that
    never waits costs no task, and its work is done by the time this returns."""
    loop = asyncio.get_running_loop()
    try:
        yielded = coro.send(None)
    except StopIteration as done:
        future: asyncio.Future[T] = loop.create_future()
        future.set_result(done.value)
        return future
    except BaseException as exc:
        future = loop.create_future()
        if isinstance(exc, asyncio.CancelledError):
            future.cancel()
        else:
            future.set_exception(exc)
        return future
    return loop.create_task(_go_on(_Rest(coro, yielded)))


async def shielded(coro: Coroutine[Any, Any, T]) -> T:
    """Await `coro` to its end even when the caller is cancelled meanwhile: the write is
    finished before the cancellation goes on (its own error, if any, is raised)."""
    future = step(coro)
    if future.done():
        return future.result()
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        await asyncio.wait([future])
        raise
