"""Abort signals, and `AbortScope`: one way to turn an abort into cancellation and back.

An `AbortController` cancels whatever was started with its `signal`. Code that waits on
something an abort must interrupt (a provider stream, a tool, a store write) does so inside an
`AbortScope`: while the scope is *armed*, an abort cancels the waiting task; afterwards the scope
takes that cancellation back (`Task.uncancel()`), so the task is left exactly as it was and the
abort surfaces as `AbortedError`. A cancellation from outside that arrived as well still
propagates. The tool loop, the lab's episodes and the command line's Ctrl-C all use this one
helper (`AbortScope.wait()` for an await, `AbortScope.iterate()` for each wait of a stream,
`take_back_cancel()` where a task must survive its own cancellation request).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from .errors import AbortedError

__all__ = ["AbortController", "AbortScope", "AbortSignal", "take_back_cancel"]

T = TypeVar("T")


class AbortSignal:
    """Read side of an AbortController. Cheap to check (`aborted`), and callbacks fire on abort."""

    __slots__ = ("_callbacks", "aborted", "reason")

    def __init__(self) -> None:
        self.aborted = False
        self.reason: object = None
        self._callbacks: list[Callable[[], None]] = []

    def add_callback(self, fn: Callable[[], None]) -> Callable[[], None]:
        """Call `fn` on abort (now if already aborted); returns a function that unregisters it."""
        if self.aborted:
            fn()
            return lambda: None
        self._callbacks.append(fn)

        def remove() -> None:
            try:
                self._callbacks.remove(fn)
            except ValueError:
                pass

        return remove

    def _fire(self, reason: object) -> None:
        if self.aborted:
            return
        self.aborted = True
        self.reason = reason
        callbacks, self._callbacks = self._callbacks, []
        for fn in callbacks:
            fn()


class AbortController:
    """`controller.abort()` cancels whatever was started with `signal=controller.signal`."""

    __slots__ = ("signal",)

    def __init__(self) -> None:
        self.signal = AbortSignal()

    def abort(self, reason: object = None) -> None:
        self.signal._fire(reason)


def _nothing() -> None:
    """What a closed scope's `remove` is: there is nothing left to unregister."""


def take_back_cancel(task: asyncio.Task[Any] | None = None) -> bool:
    """Take back one cancellation requested of `task` (default: the current task). True when no
    other cancellation request is left, i.e. the task may go on as if it had not been asked."""
    task = task if task is not None else _running_task()
    return task is not None and task.uncancel() == 0


def _running_task() -> asyncio.Task[Any] | None:
    try:
        return asyncio.current_task()
    except RuntimeError:  # no event loop running here
        return None


class AbortScope:
    """Turns an abort signal into cancellation of the task that waits, but only while armed
    (never while the task does other work, such as a consumer handling an event).

    Every armed await has one shape: `arm()`, the await, `absorb()` on CancelledError, and
    `disarm()` in a `finally`; `wait()` is that shape for one awaitable. The cancellation the
    scope asked for is always taken back, whether what was awaited let it through (`absorb`) or
    swallowed it and returned (`disarm`, which then raises AbortedError all the same). Call
    `close()` (or use the scope as a context manager) to unregister from the signal.
    """

    __slots__ = ("armed", "cancelled", "fired", "remove", "signal", "task")

    def __init__(self, signal: AbortSignal) -> None:
        self.signal = signal
        self.task = _running_task()
        self.armed = False
        self.fired = False
        self.cancelled = False
        self.remove = signal.add_callback(self._on_abort)

    def _on_abort(self) -> None:
        self.fired = True
        # From inside the waiting task itself (a tool wired to the controller) there is
        # nothing to interrupt: the call finishes, and the next arm() raises.
        if self.armed and self.task is not None and self.task is not _running_task():
            self.cancelled = True
            self.task.cancel()

    def error(self) -> AbortedError:
        """The AbortedError carrying the signal's reason."""
        return AbortedError(self.signal.reason)

    def arm(self) -> None:
        """About to wait: an abort now cancels this task. Raises AbortedError if it fired."""
        if self.fired:
            raise self.error()
        self.task = asyncio.current_task()
        self.armed = True

    def absorb(self) -> bool:
        """After a CancelledError: True when it was ours alone (and is swallowed); a
        cancellation from outside that arrived as well still propagates."""
        self.armed = False
        if self.cancelled and self.task is not None:
            self.cancelled = False
            return self.task.uncancel() == 0
        return False

    def disarm(self) -> None:
        """After the await, however it ended; raises AbortedError when what was awaited
        swallowed the cancellation the scope asked for."""
        self.armed = False
        if self.cancelled and self.task is not None:
            self.cancelled = False
            self.task.uncancel()
            raise self.error()

    async def wait(self, step: Awaitable[T]) -> T:
        """Await `step` so that an abort interrupts it (AbortedError)."""
        try:
            self.arm()
        except AbortedError:
            if isinstance(step, Coroutine):
                step.close()  # never started: close it rather than leave it unawaited
            raise
        try:
            return await step
        except asyncio.CancelledError:
            if self.absorb():
                raise self.error() from None
            raise
        finally:
            self.disarm()

    async def iterate(self, items: AsyncIterator[T]) -> AsyncGenerator[T, None]:
        """`items`, each wait for the next one made with `wait()`: an abort interrupts the wait
        (AbortedError), never the consumer's handling of an item between two waits."""
        next_item = items.__anext__
        while True:
            try:
                item = await self.wait(next_item())
            except StopAsyncIteration:
                return
            yield item

    def close(self) -> None:
        """Stop listening to the signal."""
        self.remove()
        # `remove` holds this scope's callback, which holds the scope: dropped, a closed scope
        # is freed by reference counting (no cycle left for the collector).
        self.remove = _nothing

    def __enter__(self) -> AbortScope:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
