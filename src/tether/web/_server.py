"""uvicorn, hardened for clients that are slow on purpose: the HTTP/1.1 protocol both servers
run, and the config that carries its limits.

- **Header timeout**: a connection must send a request's whole header block within
  `header_timeout` seconds of opening (or of its last answer); else it gets 408 and is closed.
  Without it, a client that trickles header bytes (slowloris) holds a connection forever, and a
  thousand of them make the server unreachable before any token check.
- **Connections per client**: at most `max_client_connections` open at once from one address;
  the next gets 503 and is closed at once.
- **Readers that do not read**: a response whose writes stay blocked for `send_timeout` seconds
  (the client's socket and the server's buffer are full: it stopped reading) is cut and its
  buffer freed at once (the connection aborted). The buffer is bounded meanwhile: a write waits
  while it is full, so a stream reads nothing more from the store for that client.

The body timeout is the request body middleware's (`BodyLimit`): the whole body within
`body_timeout` seconds of the first read, else 408.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from .middleware import BODY_TIMEOUT

__all__ = [
    "HEADER_TIMEOUT",
    "MAX_CLIENT_CONNECTIONS",
    "SEND_TIMEOUT",
    "STOPPING",
    "GuardedConfig",
    "GuardedH11Protocol",
    "ServerLimits",
]

logger = logging.getLogger("tether.web")

HEADER_TIMEOUT = 10.0
"""Seconds a client has to send a request's headers."""
SEND_TIMEOUT = 30.0
"""Seconds an answer waits for a client that stopped reading."""
MAX_CLIENT_CONNECTIONS = 64
"""Connections open at once from one client address."""
STOPPING = "tether.stopping"
"""The lifespan state key of an `asyncio.Event` the protocol sets when the server begins to
stop: a long response (an event stream) that waits on it ends at once, with a last message,
instead of holding the shutdown until its client leaves."""


@dataclass(frozen=True, slots=True)
class ServerLimits:
    """What a client may take of a server before it is cut off."""

    header_timeout: float = HEADER_TIMEOUT
    """Seconds to send a request's headers (408 after)."""
    body_timeout: float = BODY_TIMEOUT
    """Seconds to send a request's body (408 after)."""
    send_timeout: float = SEND_TIMEOUT
    """Seconds a response may wait for a client that does not read (cut after)."""
    max_client_connections: int = MAX_CLIENT_CONNECTIONS
    """Connections open at once from one client address (503 above)."""

    def __post_init__(self) -> None:
        for name in ("header_timeout", "body_timeout", "send_timeout"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive")
        if self.max_client_connections < 1:
            raise ValueError("max_client_connections must be at least 1")


class GuardedConfig(uvicorn.Config):
    """A uvicorn config that runs `GuardedH11Protocol` with `limits` (picklable, so worker
    processes get both)."""

    def __init__(self, app: Any, *, limits: ServerLimits | None = None, **kwargs: Any) -> None:
        self.limits = limits or ServerLimits()
        super().__init__(app, http=GuardedH11Protocol, **kwargs)


def _raw(status: str, text: str) -> bytes:
    body = text.encode("utf-8")
    return (
        f"HTTP/1.1 {status}\r\ncontent-type: text/plain; charset=utf-8\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    ).encode("ascii") + body


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with the limits of the module docstring."""

    def __init__(self, config: uvicorn.Config, *args: Any, **kwargs: Any) -> None:
        super().__init__(config, *args, **kwargs)
        self.limits = getattr(config, "limits", None) or ServerLimits()
        # One count per server (its state is shared by all its connections).
        state: Any = self.server_state
        if not hasattr(state, "tether_clients"):
            state.tether_clients = {}
        self.clients: dict[str, int] = state.tether_clients
        self.address: str | None = None
        self.header_timer: asyncio.TimerHandle | None = None
        self.stall_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        address = self.client[0] if self.client else ""
        if self.clients.get(address, 0) >= self.limits.max_client_connections:
            transport.write(_raw("503 Service Unavailable", "Too many connections from you.\n"))
            transport.close()
            return
        self.clients[address] = self.clients.get(address, 0) + 1
        self.address = address
        self._arm_header_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.address is not None:
            left = self.clients.get(self.address, 1) - 1
            if left > 0:
                self.clients[self.address] = left
            else:
                self.clients.pop(self.address, None)
            self.address = None
        for timer in (self.header_timer, self.stall_timer):
            if timer is not None:
                timer.cancel()
        super().connection_lost(exc)

    # -- headers -----------------------------------------------------------------------------

    def _arm_header_timer(self) -> None:
        if self.header_timer is not None:
            self.header_timer.cancel()
        self.header_timer = self.loop.call_later(self.limits.header_timeout, self._headers_late)

    def _headers_late(self) -> None:
        self.header_timer = None
        if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
            return
        self.transport.write(
            _raw("408 Request Timeout", "The request's headers came too slowly.\n")
        )
        self.transport.close()

    def handle_events(self) -> None:
        super().handle_events()
        if self.header_timer is not None and self.conn.their_state is not h11.IDLE:
            # The headers are in: the body has its own timeout.
            self.header_timer.cancel()
            self.header_timer = None

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
            self._arm_header_timer()

    def shutdown(self) -> None:
        stopping = self.app_state.get(STOPPING)
        if isinstance(stopping, asyncio.Event):
            stopping.set()
        super().shutdown()

    # -- clients that do not read ------------------------------------------------------------

    def pause_writing(self) -> None:
        super().pause_writing()
        if self.stall_timer is None:
            self.stall_timer = self.loop.call_later(self.limits.send_timeout, self._stalled)

    def resume_writing(self) -> None:
        super().resume_writing()
        if self.stall_timer is not None:
            self.stall_timer.cancel()
            self.stall_timer = None

    def _stalled(self) -> None:
        self.stall_timer = None
        if self.transport.is_closing():
            return
        logger.warning(
            "cut %s: it read nothing for %s s", self.address, f"{self.limits.send_timeout:g}"
        )
        # abort, not close: close would keep the unsent buffer until the client reads it.
        self.transport.abort()
