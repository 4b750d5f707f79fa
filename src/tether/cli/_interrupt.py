"""Ctrl-C during a run: cancel the run through its own handle and let it wind down.

Killing the process mid-write is what a durable store is built to survive, but a cancelled
episode can do better: it records itself as cancelled, keeps every completed step and leaves
the transcript a provider accepts. So the first Ctrl-C only asks the run to stop; a second one
interrupts at once.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable
from types import TracebackType

__all__ = ["CtrlC"]


class CtrlC:
    """While entered (inside the running loop), the first Ctrl-C calls `on_interrupt` instead
    of raising KeyboardInterrupt. Where the loop cannot take signal handlers (Windows, a
    thread other than the main one), `asyncio.run` cancels the command's task instead: the
    command then calls `cancelled()` from its `except asyncio.CancelledError`.
    """

    def __init__(self, on_interrupt: Callable[[], None]) -> None:
        self._on_interrupt = on_interrupt
        self._loop: asyncio.AbstractEventLoop | None = None
        self.fired = False
        """True once Ctrl-C was pressed."""

    def __enter__(self) -> CtrlC:
        loop = asyncio.get_running_loop()
        try:
            loop.add_signal_handler(signal.SIGINT, self._fire)
        except (NotImplementedError, RuntimeError, ValueError):
            return self
        self._loop = loop
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._remove()

    def _remove(self) -> None:
        loop, self._loop = self._loop, None
        if loop is not None:
            # Puts back the default handler: the next Ctrl-C raises KeyboardInterrupt.
            loop.remove_signal_handler(signal.SIGINT)

    def _fire(self) -> None:
        self.fired = True
        self._remove()
        self._on_interrupt()

    def cancelled(self) -> None:
        """The command's task was cancelled by Ctrl-C (the fallback path): stop the run, and
        take the cancellation back so the command can still wait for the run to end."""
        task = asyncio.current_task()
        if task is not None:
            task.uncancel()
        if not self.fired:
            self.fired = True
            self._on_interrupt()
