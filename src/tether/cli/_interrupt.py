"""Ctrl-C during a run: cancel the run through its own handle and let it wind down.

Killing the process mid-write is what a durable store is built to survive, but a cancelled
episode can do better: it records itself as cancelled, keeps every completed step and leaves
the transcript a provider accepts. So the first Ctrl-C only asks the run to stop; a second one
ends the process at once (exit 130), whatever the run is still doing: a tool that ignores
cancellation, a thread asyncio would wait for. Its record may then still say "running".
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType, TracebackType

from ._errors import EXIT_INTERRUPTED

__all__ = ["AGAIN_MESSAGE", "CtrlC"]

AGAIN_MESSAGE = (
    "Error: interrupted again: stopped at once, without waiting for the run to wind down"
)


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
        _exit_on_the_next_one()
        self._on_interrupt()

    def cancelled(self) -> None:
        """The command's task was cancelled by Ctrl-C (the fallback path): stop the run, and
        take the cancellation back so the command can still wait for the run to end."""
        from ..signals import take_back_cancel

        take_back_cancel()
        if not self.fired:
            self.fired = True
            _exit_on_the_next_one()
            self._on_interrupt()


def _exit_on_the_next_one() -> None:
    """Make the next Ctrl-C end the process. A Python-level handler, not the loop's: it runs
    even while asyncio, after the command, waits for tasks and threads that will not stop.
    `run_async` puts the previous handler back once the command is over."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, _exit_now)


def _exit_now(signum: int, frame: FrameType | None) -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # a stream caught mid-write cannot be flushed
            stream.flush()
    os.write(2, f"{AGAIN_MESSAGE}\n".encode())
    os._exit(EXIT_INTERRUPTED)
