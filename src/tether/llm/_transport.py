"""The httpx side of a model call: the pooled client an adapter opens, the body's bytes as they
arrive, and — in one place — what each transport failure becomes in our error tree.

The mapping follows when the failure happened (httpx's own transport maps httpcore's errors the
same way, in one context manager):

| phase | httpx exception                      | our error                                  |
|-------|--------------------------------------|--------------------------------------------|
| send  | `UnsupportedProtocol`                | `LLMConnectionError`: a wrong base_url     |
| send  | `ConnectTimeout`, a connect_timeout set | `ConnectDeadlineError`                  |
| send  | `ConnectError`, `ConnectTimeout`, `WriteError` | `LLMConnectionError`, retryable: unsent |
| send  | any other `TransportError`           | `LLMStreamError`, retryable: sent, no answer |
| read  | any `TransportError`                 | `LLMStreamError`, retryable: the stream broke |

Only an unsent request is sent again by request retries (`is_unsent`); one that went out may have
been acted on, so the loop's `stream_retries` decide whether to rerun the model step.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Literal

import httpx

from ..errors import LLMConnectionError, LLMError, LLMStreamError
from ._deadlines import connect_error

__all__ = [
    "DEFAULT_MAX_CONNECTIONS",
    "KEEPALIVE_EXPIRY",
    "Phase",
    "body_bytes",
    "is_unsent",
    "new_client",
    "transport_error",
]

DEFAULT_MAX_CONNECTIONS = 100
KEEPALIVE_EXPIRY = 30.0
"""Seconds an idle pooled connection stays open (providers keep theirs for about a minute)."""

Phase = Literal["send", "read"]
"""``send``: from opening the connection to the status line; ``read``: the body."""

_UNSENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.WriteError)


def new_client(connect_timeout: float | None, max_connections: int) -> httpx.AsyncClient:
    """The client an adapter opens for itself. Reads have no httpx timeout: the first-byte, idle
    and total deadlines are ours, measured per event rather than per socket read. Every
    connection is kept alive, so concurrent runs reuse the pool instead of reconnecting (httpx
    keeps only 20 by default)."""
    return httpx.AsyncClient(
        timeout=httpx.Timeout(None, connect=connect_timeout),
        limits=httpx.Limits(
            max_connections=max_connections,
            max_keepalive_connections=max_connections,
            keepalive_expiry=KEEPALIVE_EXPIRY,
        ),
    )


def body_bytes(response: httpx.Response) -> AsyncIterator[bytes]:
    """The body's bytes as they arrive. Event streams are rarely compressed; when this one is
    not, read the response's byte stream itself and skip two generator layers per read (the
    caller closes the response either way)."""
    if response.headers.get("content-encoding", "identity") != "identity":
        return response.aiter_bytes()
    stream = response.stream
    if isinstance(stream, httpx.AsyncByteStream):
        return stream.__aiter__()
    return response.aiter_raw()


def is_unsent(exc: httpx.TransportError) -> bool:
    """The request did not reach the server whole: it cannot have been processed."""
    return isinstance(exc, _UNSENT)


def transport_error(
    exc: httpx.TransportError,
    phase: Phase,
    *,
    provider: str,
    url: str,
    base_url: str = "",
    connect_timeout: float | None = None,
    attempts: int = 1,
) -> LLMError:
    """The error `exc` is in our tree (see the table above); raise it ``from exc``. The one
    place an httpx failure becomes ours: the adapter's send and read both come here."""
    what = type(exc).__name__
    if phase == "read":
        return LLMStreamError(
            f"{provider} stream broke: {what}: {exc}", provider=provider, retryable=True
        )
    if isinstance(exc, httpx.UnsupportedProtocol):
        return LLMConnectionError(
            f"{provider}: bad base_url {base_url!r}: {exc}", provider=provider
        )
    if isinstance(exc, _UNSENT):
        if isinstance(exc, httpx.ConnectTimeout) and connect_timeout is not None:
            return connect_error(provider, url, connect_timeout, attempts)
        return LLMConnectionError(
            f"could not reach {provider} at {url}: {what}: {exc}", provider=provider, retryable=True
        )
    # The request went out and the answer never came (a read timeout of a caller's client, a
    # connection closed before the status line): the server may have acted on it.
    return LLMStreamError(
        f"{provider} at {url} did not answer the request: {what}: {exc}",
        provider=provider,
        retryable=True,
    )
