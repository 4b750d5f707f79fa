"""The token gate, as a plain ASGI middleware.

`TokenGate` lets a request through when it carries `Authorization: Bearer <token>`, or the
session cookie a browser got by trading the token once at `/login` (a form, or
`/login?token=...` from the link the server prints). Tokens are compared in constant time; the
cookie holds an HMAC of the token, never the token, and is `HttpOnly` and `SameSite=Strict`.
"""

from __future__ import annotations

import hashlib
import hmac
import html
from http.cookies import SimpleCookie
from urllib.parse import parse_qs, quote

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .._responses import send_plain
from ._scope import header

__all__ = ["SESSION_COOKIE", "TokenGate"]

SESSION_COOKIE = "tether_session"
_MAX_FORM = 4096


class TokenGate:
    """Lets through requests that prove they hold `token`; `/login` trades it for a cookie.

    A request without proof gets 401 (with `WWW-Authenticate: Bearer`) when it asks for JSON
    or is not a GET, and a redirect to the login form otherwise.
    """

    def __init__(self, app: ASGIApp, token: str, *, login_path: str = "/login") -> None:
        if not token:
            raise ValueError("TokenGate needs a non-empty token")
        self.app = app
        self._token = token.encode("utf-8")
        self._session = hmac.new(self._token, b"tether-ui-session", hashlib.sha256).hexdigest()
        self.login_path = login_path

    def _token_ok(self, value: str) -> bool:
        return hmac.compare_digest(value.encode("utf-8"), self._token)

    def _authorized(self, scope: Scope) -> bool:
        auth = header(scope, b"authorization")
        if auth is not None:
            kind, _, value = auth.partition(" ")
            if kind.lower() == "bearer" and self._token_ok(value.strip()):
                return True
        raw = header(scope, b"cookie")
        if raw:
            cookie: SimpleCookie = SimpleCookie()
            try:
                cookie.load(raw)
            except Exception:
                return False
            morsel = cookie.get(SESSION_COOKIE)
            if morsel is not None and hmac.compare_digest(
                morsel.value.encode("ascii", "replace"), self._session.encode("ascii")
            ):
                return True
        return False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        root = scope.get("root_path", "").rstrip("/")
        path = scope.get("path", "")
        if scope["type"] == "http" and path in (root + self.login_path, self.login_path):
            await self._login(scope, receive, send, root)
            return
        if self._authorized(scope):
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        accept = header(scope, b"accept") or ""
        wants_page = scope.get("method") == "GET" and "text/html" in accept
        if wants_page and not path.startswith(root + "/api/"):
            query = scope.get("query_string", b"").decode("latin-1")
            target = path + (f"?{query}" if query else "")
            location = f"{root}{self.login_path}?next={quote(target, safe='')}"
            await send(
                {
                    "type": "http.response.start",
                    "status": 303,
                    "headers": [
                        (b"location", location.encode("latin-1")),
                        (b"content-length", b"0"),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": b""})
            return
        await send_plain(
            send,
            401,
            "This server needs its token: send 'Authorization: Bearer TOKEN', or open "
            f"{root}{self.login_path} in a browser.\n",
            [(b"www-authenticate", b'Bearer realm="tether"')],
        )

    async def _login(self, scope: Scope, receive: Receive, send: Send, root: str) -> None:
        method = scope.get("method")
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        next_path = _local(query.get("next", [""])[0], root)
        token: str | None = None
        if method == "POST":
            body = await _read_body(receive)
            if body is None:
                await send_plain(send, 413, "The login form is too large.\n")
                return
            form = parse_qs(body.decode("utf-8", "replace"))
            token = form.get("token", [""])[0]
            next_path = _local(form.get("next", [next_path])[0], root)
        elif method in ("GET", "HEAD"):
            token = query.get("token", [None])[0]
        else:
            await send_plain(send, 405, "Use GET or POST.\n", [(b"allow", b"GET, POST")])
            return
        if token is not None and self._token_ok(token):
            secure = "; Secure" if scope.get("scheme") == "https" else ""
            cookie = (
                f"{SESSION_COOKIE}={self._session}; Path={root or '/'}; HttpOnly; "
                f"SameSite=Strict{secure}"
            )
            await send(
                {
                    "type": "http.response.start",
                    "status": 303,
                    "headers": [
                        (b"location", next_path.encode("latin-1")),
                        (b"set-cookie", cookie.encode("latin-1")),
                        (b"content-length", b"0"),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": b""})
            return
        failed = token is not None
        page = _LOGIN_PAGE.format(
            action=html.escape(f"{root}{self.login_path}"),
            next=html.escape(next_path),
            message="The token is wrong." if failed else "This server needs its token.",
        ).encode("utf-8")
        await send(
            {
                "type": "http.response.start",
                "status": 401 if failed else 200,
                "headers": [
                    (b"content-type", b"text/html; charset=utf-8"),
                    (b"content-length", str(len(page)).encode("ascii")),
                ],
            }
        )
        await send({"type": "http.response.body", "body": page})


def _local(target: str, root: str) -> str:
    """`target` when it is a path on this server, else the root: never an open redirect."""
    if target.startswith("/") and not target.startswith("//") and "\\" not in target:
        return target
    return root + "/"


async def _read_body(receive: Receive) -> bytes | None:
    chunks: list[bytes] = []
    size = 0
    while True:
        message: Message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks)
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > _MAX_FORM:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


_LOGIN_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>tether · log in</title></head>
<body><main><h1>tether</h1><p>{message}</p>
<form method="post" action="{action}">
<input type="hidden" name="next" value="{next}">
<label>Token <input type="password" name="token" autocomplete="current-password" autofocus></label>
<button type="submit">Log in</button>
</form></main></body></html>
"""
