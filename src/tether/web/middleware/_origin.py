"""Cross-site request forgery, refused before any handler: a plain ASGI middleware.

A page on any web site can make a browser send requests to a server on loopback — a form
POST, or `fetch(..., {mode: "no-cors"})` — and the browser adds the server's cookies even from
another port of the same host (cookies are not kept apart by port; `SameSite=Strict` only
stops other *sites*). Such a request cannot read the answer, but it can start a run. So every
request that may change something (any method but GET, HEAD and OPTIONS):

- carries a body only as `application/json` (a form or `text/plain` body, the two kinds a page
  may send cross-site without asking, gets 415); `form_paths` (`/login`) take a form as well,
  and `upload_paths` (a run's start, with files) a `multipart/form-data` upload — only from a
  request with an `Origin` that passed the check below (every browser sends one on such a
  POST; an old browser that sends none could be made to post a form cross-site) or with an
  `Authorization` header (which no cross-site form can add);
- comes from this server's own origin or a configured one: `Sec-Fetch-Site: same-origin`
  (or `none`, a user's own navigation), or an `Origin` whose host and port are the request's
  `Host`, or an `Origin` in `origins` (the `--cors-origin` list). Anything else gets 403.

A request with neither `Origin` nor `Sec-Fetch-Site` is not a browser's (every browser that
lets a page send cross-site sends one of them on a POST): curl and the SDKs pass as before,
with the token where one is set.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Receive, Scope, Send

from .._hostnames import host_name
from .._responses import send_error
from ._scope import header

__all__ = ["SAFE_METHODS", "OriginCheck"]

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
"""Methods that change nothing here: never checked."""
_FORM_TYPES = frozenset({"application/x-www-form-urlencoded", "multipart/form-data"})


class OriginCheck:
    """Answers 403 to a state-changing request from another origin, and 415 to one whose
    body is not JSON (see the module docstring).

    Args:
        app: The app behind the check.
        origins: Origins (`https://app.example.com`) whose pages may also send such requests.
        form_paths: Paths that take a form body (the login form) besides JSON.
        upload_paths: Patterns (regular expressions, matched whole) of paths that take a
            `multipart/form-data` upload besides JSON.
    """

    def __init__(
        self,
        app: ASGIApp,
        origins: Iterable[str] = (),
        *,
        form_paths: Iterable[str] = (),
        upload_paths: Iterable[str] = (),
    ) -> None:
        self.app = app
        self.origins = frozenset(o.rstrip("/").lower() for o in origins)
        self.form_paths = frozenset(form_paths)
        self.upload_paths = [re.compile(p) for p in upload_paths]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method", "GET") in SAFE_METHODS:
            await self.app(scope, receive, send)
            return
        refusal = self._refusal(scope)
        if refusal is not None:
            status, kind, message = refusal
            await send_error(send, status, kind, message, [(b"vary", b"origin")])
            return
        await self.app(scope, receive, send)

    def _refusal(self, scope: Scope) -> tuple[int, str, str] | None:
        origin = header(scope, b"origin")
        site = (header(scope, b"sec-fetch-site") or "").strip().lower()
        if not self._same_or_allowed(scope, origin, site):
            shown = (origin or f"a {site} page")[:200]
            return (
                403,
                "cross_origin",
                f"requests that change something are taken only from this server's own pages "
                f"(this one came from {shown}); to call the API from another origin's page, "
                "start the server with --cors-origin ORIGIN",
            )
        kind = (header(scope, b"content-type") or "").split(";", 1)[0].strip().lower()
        if kind == "application/json" or not _has_body(scope):
            return None
        if kind in _FORM_TYPES and _path(scope) in self.form_paths:
            return None
        if (
            kind == "multipart/form-data"
            and (origin is not None or header(scope, b"authorization") is not None)
            and any(p.fullmatch(_path(scope)) for p in self.upload_paths)
        ):
            return None
        return (
            415,
            "unsupported_media_type",
            f"send the body as JSON with 'Content-Type: application/json', not {kind or 'none'!r}",
        )

    def _same_or_allowed(self, scope: Scope, origin: str | None, site: str) -> bool:
        if origin is not None:
            value = origin.strip().lower().rstrip("/")
            if value in self.origins:
                return True
            return site in ("", "same-origin") and _same_host(value, header(scope, b"host"))
        # No Origin: not a browser's request, or a browser's own navigation.
        return site in ("", "same-origin", "none")


def _same_host(origin: str, host: str | None) -> bool:
    """Whether `origin` (`http://127.0.0.1:8700`) names the host and port of `Host`."""
    if host is None or origin == "null":
        return False
    parts = urlsplit(origin)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return False
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return False
    given = host.strip().lower()
    name = host_name(given)
    tail = given.rsplit("]", 1)[-1] if given.startswith("[") else given
    host_port = tail.rsplit(":", 1)[1] if ":" in tail else ""
    default = "443" if parts.scheme == "https" else "80"
    return parts.hostname == name and str(port) == (host_port or default)


def _has_body(scope: Scope) -> bool:
    length = header(scope, b"content-length")
    if length is not None:
        return length.strip() not in ("", "0")
    return header(scope, b"transfer-encoding") is not None


def _path(scope: Scope) -> str:
    root = scope.get("root_path", "").rstrip("/")
    path: str = scope.get("path", "")
    return path[len(root) :] if root and path.startswith(root) else path
