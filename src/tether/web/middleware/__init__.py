"""The access checks of `tether ui` and `tether serve`, one plain ASGI middleware per module
(as Starlette's `starlette/middleware/`): each wraps any ASGI app."""

from ._body import DEFAULT_MAX_BODY, BodyLimit
from ._headers import CONTENT_SECURITY_POLICY, SecurityHeaders
from ._hosts import HostAllowList
from ._token import SESSION_COOKIE, TokenGate

__all__ = [
    "CONTENT_SECURITY_POLICY",
    "DEFAULT_MAX_BODY",
    "SESSION_COOKIE",
    "BodyLimit",
    "HostAllowList",
    "SecurityHeaders",
    "TokenGate",
]
