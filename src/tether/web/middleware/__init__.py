"""The access checks of `tether ui` and `tether serve`, one plain ASGI middleware per module
(as Starlette's `starlette/middleware/`): each wraps any ASGI app."""

from ._body import BODY_TIMEOUT, DEFAULT_MAX_BODY, BodyLimit
from ._headers import CONTENT_SECURITY_POLICY, SecurityHeaders
from ._hosts import HostAllowList
from ._nul import NulRefusal
from ._origin import SAFE_METHODS, OriginCheck
from ._token import CSRF_HEADER, GUESS_WINDOW, GUESSES, SESSION_COOKIE, TokenGate, csrf_token

__all__ = [
    "BODY_TIMEOUT",
    "CONTENT_SECURITY_POLICY",
    "CSRF_HEADER",
    "DEFAULT_MAX_BODY",
    "GUESSES",
    "GUESS_WINDOW",
    "SAFE_METHODS",
    "SESSION_COOKIE",
    "BodyLimit",
    "HostAllowList",
    "NulRefusal",
    "OriginCheck",
    "SecurityHeaders",
    "TokenGate",
    "csrf_token",
]
