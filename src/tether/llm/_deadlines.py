"""Every wait of a model call is bounded and named (the model config's deadlines, in seconds):

| deadline             | default | measured                                                      |
|----------------------|---------|---------------------------------------------------------------|
| `connect_timeout`    | 10      | opening one connection                                        |
| `first_byte_timeout` | 300     | from sending the request to the response's first byte         |
| `idle_timeout`       | 300     | the longest gap between two events that are not keep-alives   |
| `total_timeout`      | 1800    | the whole call, request retries and their waits included      |

Keep-alives are ``event: ping`` events, SSE comments and empty ``data:`` lines. A deadline that
fires raises `DeadlineError` naming it and its value. The connect deadline is httpx's own (the
pool's connect timeout, mapped in `_transport`); the first-byte clock is started by the request's
trace hook (`_adapter`); the idle and total deadlines of a streamed body are `StreamWatch`.
"""

from __future__ import annotations

import asyncio
import math
from typing import Any

from ..errors import ConfigError, ConnectDeadlineError, DeadlineError

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_FIRST_BYTE_TIMEOUT",
    "DEFAULT_IDLE_TIMEOUT",
    "DEFAULT_TOTAL_TIMEOUT",
    "StreamWatch",
    "check_deadlines",
    "connect_error",
    "first_byte_error",
    "stream_deadline_error",
    "total_error",
]

DEFAULT_CONNECT_TIMEOUT = 10.0
DEFAULT_FIRST_BYTE_TIMEOUT = 300.0
"""Reasoning models can think for minutes before the first byte; a dead server is found in 5."""
DEFAULT_IDLE_TIMEOUT = 300.0
DEFAULT_TOTAL_TIMEOUT = 1800.0


def check_deadlines(provider: str, deadlines: dict[str, float | None]) -> None:
    """Each deadline is a number of seconds > 0, or None for no limit; else a `ConfigError`."""
    for name, seconds in deadlines.items():
        if seconds is not None and (
            not isinstance(seconds, int | float) or isinstance(seconds, bool) or not seconds > 0
        ):
            raise ConfigError(
                f"{provider}: {name} must be a number of seconds > 0 (or None for no "
                f"limit), got {seconds!r}"
            )


def connect_error(provider: str, url: str, seconds: float, attempts: int) -> ConnectDeadlineError:
    return ConnectDeadlineError(
        f"could not connect to {provider} at {url} within connect_timeout="
        f"{seconds:g} s ({attempts} attempts)",
        deadline="connect",
        seconds=seconds,
        provider=provider,
    )


def first_byte_error(provider: str, url: str, seconds: float) -> DeadlineError:
    return DeadlineError(
        f"{provider} sent no answer within first_byte_timeout={seconds:g} s "
        f"of the request to {url} (the model config's first_byte_timeout raises it; "
        "stream_retries reruns the step)",
        deadline="first_byte",
        seconds=seconds,
        provider=provider,
        retryable=True,
    )


def total_error(provider: str, seconds: float | None, what: str) -> DeadlineError:
    seconds = seconds or 0.0
    return DeadlineError(
        f"{provider}: the model call passed total_timeout={seconds:g} s{what} (the "
        "model config's total_timeout raises it)",
        deadline="total",
        seconds=seconds,
        provider=provider,
    )


def stream_deadline_error(provider: str, watch: StreamWatch, total: float | None) -> DeadlineError:
    """The deadline `watch` found passed: idle when it came before the total one."""
    idle = watch.idle
    if idle is not None and watch.deadline < watch.total_at:
        return DeadlineError(
            f"{provider} sent no content for idle_timeout={idle:g} s (the stream stayed "
            "open; keep-alives do not count; the model config's idle_timeout raises it, "
            "stream_retries reruns the step)",
            deadline="idle",
            seconds=idle,
            provider=provider,
            retryable=True,
        )
    return total_error(provider, total, " while the answer streamed")


class StreamWatch:
    """The idle and total deadlines of one streamed body, for the price of a float per content
    batch: one timer per idle period checks them and cancels the reading task only while it
    waits for the body (never while the consumer holds the stream between chunks)."""

    __slots__ = (
        "_handle",
        "_loop",
        "cancelling",
        "deadline",
        "fired",
        "idle",
        "lapsed",
        "reading",
        "task",
        "total_at",
    )

    def __init__(self, loop: asyncio.AbstractEventLoop, idle: float | None, total_at: float):
        self._loop = loop
        self.idle = idle
        self.total_at = total_at
        self.deadline = min(loop.time() + idle, total_at) if idle is not None else total_at
        self.reading = False
        self.fired = False
        self.lapsed = False
        self.task: asyncio.Task[Any] | None = None
        task = asyncio.current_task()
        self.cancelling = task.cancelling() if task is not None else 0
        self._handle: asyncio.TimerHandle | None = (
            loop.call_at(self.deadline, self._check) if self.deadline != math.inf else None
        )

    def reset(self) -> None:
        """Content arrived (and the consumer has taken it): the idle clock starts again."""
        if self.idle is not None:
            self.deadline = min(self._loop.time() + self.idle, self.total_at)

    def _check(self) -> None:
        self._handle = None
        if self._loop.time() < self.deadline:  # content moved it on since this was set
            self._handle = self._loop.call_at(self.deadline, self._check)
        elif self.reading and self.task is not None:
            self.fired = True
            self.task.cancel()
        else:
            # The consumer holds the stream: the next read looks again (content it is taking
            # resets the clock first).
            self.lapsed = True

    def resume(self) -> bool:
        """Before a read, after the timer lapsed outside one: True when the deadline has passed,
        else the timer is set again."""
        self.lapsed = False
        if self._loop.time() >= self.deadline:
            return True
        self._handle = self._loop.call_at(self.deadline, self._check)
        return False

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
