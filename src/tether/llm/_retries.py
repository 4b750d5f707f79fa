"""Request retries: how long to wait before the next attempt, and whether a refusal is retried.

These are *request* retries (the model config's `max_retries`): a request that did not reach the
server whole (no connection, a write that failed), or a 408 / 409 / 429 / 5xx status (Anthropic's
529 included) before any of the body was read. The server's own wait wins (``retry-after-ms``,
``retry-after`` in seconds or as an HTTP date, or the ``google.rpc.RetryInfo`` of a Gemini error
body), capped at `MAX_RETRY_AFTER`; a server asking for longer fails the call at once, saying how
long it asked for. Otherwise the wait is exponential backoff with jitter. Once a request went out,
nothing is sent twice here: the loop's `stream_retries` decide whether to rerun a model step.
"""

from __future__ import annotations

import asyncio
import datetime
import email.utils
import math
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from ..errors import LLMHTTPError
from ._errors import error_object

__all__ = [
    "INITIAL_BACKOFF",
    "JITTER",
    "MAX_BACKOFF",
    "MAX_RETRY_AFTER",
    "Sleep",
    "backoff_delay",
    "refusal_wait",
    "retry_after",
    "retry_info",
]

Sleep = Callable[[float], Awaitable[None]]
"""How a retry waits; tests pass a recorder instead of `asyncio.sleep`."""

_sleep: Sleep = asyncio.sleep
"""The wait of adapters given no `sleep` (read at each wait, so a test can replace it)."""

INITIAL_BACKOFF = 0.5
MAX_BACKOFF = 8.0
MAX_RETRY_AFTER = 60.0
"""The longest retry-after tether waits; a server asking for longer fails the call at once."""
JITTER = 0.25
"""Each computed backoff is shortened by up to this fraction, so clients do not retry in step."""


def retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds the server asked us to wait: ``retry-after-ms``, or ``retry-after`` as seconds or
    an HTTP date. None when absent or unreadable."""
    ms = _seconds(headers.get("retry-after-ms"))
    if ms is not None:
        return ms / 1000.0
    value = headers.get("retry-after")
    if value is None:
        return None
    seconds = _seconds(value)
    if seconds is not None:
        return seconds
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # "-0000" or no zone at all: HTTP dates are GMT, not local time
        when = when.replace(tzinfo=datetime.UTC)
    return max(0.0, when.timestamp() - time.time())


def _seconds(value: str | None) -> float | None:
    """A header's number, at least 0; None when absent or not a finite number ("nan")."""
    if value is None:
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return max(0.0, number) if math.isfinite(number) else None


def retry_info(body: Any) -> float | None:
    """Seconds a Google error body asks us to wait (``google.rpc.RetryInfo``'s ``retryDelay``,
    a duration like ``"3.5s"``): Gemini says it there rather than in a retry-after header."""
    err = error_object(body)
    for detail in (err or {}).get("details") or ():
        if isinstance(detail, dict) and str(detail.get("@type", "")).endswith("rpc.RetryInfo"):
            delay = detail.get("retryDelay")
            if isinstance(delay, str) and delay.endswith("s"):
                return _seconds(delay[:-1])
    return None


def backoff_delay(
    attempt: int, headers: Mapping[str, str] | None, rng: random.Random, body: Any = None
) -> float:
    """The wait before retry number `attempt` (0-based): the server's retry-after (or the
    RetryInfo of its error body) when it gave one, capped at MAX_RETRY_AFTER, else exponential
    backoff with jitter."""
    asked = retry_after(headers) if headers is not None else None
    if asked is None and body is not None:
        asked = retry_info(body)
    if asked is not None:
        return min(asked, MAX_RETRY_AFTER)
    delay = min(INITIAL_BACKOFF * (2.0 ** min(attempt, 16)), MAX_BACKOFF)
    return delay * (1.0 - JITTER * rng.random())


def refusal_wait(
    error: LLMHTTPError,
    headers: Mapping[str, str],
    attempt: int,
    retries_left: bool,
    rng: random.Random,
) -> float | None:
    """The wait before retrying a non-2xx answer (`error`, mapped from it), or None when it is
    not retried. The server's ``x-should-retry`` overrides the status's reading; the wait it asked
    for is kept on `error.retry_after`. Raises `error` itself, made non-retryable, when the server
    asked for a longer wait than `MAX_RETRY_AFTER` (sleeping the cap would only fail later
    without saying why)."""
    should = headers.get("x-should-retry")
    retry = error.retryable if should is None else should.lower() == "true"
    asked = retry_after(headers)
    if asked is None:
        asked = retry_info(error.body)
    error.retry_after = asked
    if retry and asked is not None and asked > MAX_RETRY_AFTER:
        error.args = (
            f"{error} (the server asked to wait {asked:.0f} s before retrying, longer than "
            f"the {MAX_RETRY_AFTER:.0f} s tether waits; not retried)",
        )
        error.retryable = False
        raise error
    if retry and retries_left:
        return asked if asked is not None else backoff_delay(attempt - 1, None, rng)
    return None
