"""One order of access checks around an app, outside its own error middleware.

Outermost first: security headers (on every answer, an unexpected failure's too), the Host
allow-list, NUL refused in paths and queries, CORS for the configured origins only, the
cross-site request check (a state-changing request from another origin, or with a body that is
not JSON, is refused), the request body limit, and the token gate. CORS sits outside the gate
so that a browser's preflight, which never carries credentials, gets its answer; all of it sits
outside Starlette's error middleware, so nothing reaches a handler before the checks.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from starlette.applications import Starlette
from starlette.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp

from ._hostnames import LOOPBACK_NAMES
from .middleware import (
    BODY_TIMEOUT,
    DEFAULT_MAX_BODY,
    BodyLimit,
    HostAllowList,
    NulRefusal,
    OriginCheck,
    SecurityHeaders,
    TokenGate,
)

__all__ = ["Access", "GuardedApp", "guard"]


@dataclass(frozen=True, slots=True)
class Access:
    """Who may talk to an app, and how much they may send."""

    hosts: frozenset[str] = LOOPBACK_NAMES
    """The `Host` names answered (`*`: any)."""
    token: str | None = None
    """When set, every request proves it holds this token (bearer header or login cookie)."""
    cors_origins: tuple[str, ...] = ()
    """Origins whose pages may call the API from a browser (and send it state-changing
    requests: the cross-site check lets them through)."""
    max_body: int = DEFAULT_MAX_BODY
    """The largest request body accepted, in bytes."""
    body_timeout: float = BODY_TIMEOUT
    """Seconds a client has to send a request body."""

    @classmethod
    def of(
        cls,
        hosts: Iterable[str] | None = None,
        token: str | None = None,
        cors_origins: Iterable[str] = (),
        max_body: int = DEFAULT_MAX_BODY,
        body_timeout: float = BODY_TIMEOUT,
    ) -> Access:
        """From a factory's keyword arguments (None hosts: the loopback names)."""
        return cls(
            frozenset(hosts) if hosts is not None else LOOPBACK_NAMES,
            token or None,
            tuple(cors_origins),
            max_body,
            body_timeout,
        )


def guard(app: ASGIApp, access: Access) -> ASGIApp:
    """`app` behind the checks `access` asks for, in the module docstring's order."""
    if access.token:
        app = TokenGate(app, access.token)
    app = BodyLimit(app, access.max_body, timeout=access.body_timeout)
    # A run's start takes files as a multipart upload (`tether serve`'s agent runs).
    app = OriginCheck(
        app, access.cors_origins, form_paths=["/login"], upload_paths=[r"/api/agents/.+/runs"]
    )
    if access.cors_origins:
        app = CORSMiddleware(
            app,
            allow_origins=list(access.cors_origins),
            allow_methods=["GET", "POST"],
            allow_headers=["authorization", "content-type", "last-event-id"],
            allow_credentials=False,
            max_age=600,
        )
    return SecurityHeaders(HostAllowList(NulRefusal(app), access.hosts))


class GuardedApp(Starlette):
    """Starlette with `guard(access)` outside its own middleware (see the module docstring)."""

    def __init__(self, access: Access, **kwargs: Any) -> None:
        self.access = access
        super().__init__(**kwargs)

    def build_middleware_stack(self) -> ASGIApp:
        return guard(super().build_middleware_stack(), self.access)
