"""The token gate, as a plain ASGI middleware.

`TokenGate` lets a request through when it carries `Authorization: Bearer <token>`, or the
session cookie a browser got by trading the token once at `/login` (a form, or
`/login?token=...` from the link the server prints). Tokens are compared in constant time; the
cookie holds an HMAC of the token, never the token, and is `HttpOnly` and `SameSite=Strict`.

A request the cookie lets in that may change something (a POST ...) must also carry the
session's CSRF token in `X-Tether-CSRF`: `SameSite=Strict` does not stop a page on another port
of the same host, whose requests carry the cookie too. The token is another HMAC of the server
token, handed to a page only in its body (`csrf_token(scope)`; `data-csrf` on the chat page),
which no other origin can read. A bearer request needs none: no browser adds that header by
itself.

Wrong guesses are limited per client (`GUESSES` in `GUESS_WINDOW` seconds): past them, every
request of that client that offers a token gets 429 until the window has passed.
"""

from __future__ import annotations

import hashlib
import hmac
import html
import time
from http.cookies import SimpleCookie
from urllib.parse import parse_qs, quote

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .._responses import send_error, send_plain
from ._scope import header

__all__ = ["CSRF_HEADER", "GUESSES", "GUESS_WINDOW", "SESSION_COOKIE", "TokenGate", "csrf_token"]

SESSION_COOKIE = "tether_session"
CSRF_HEADER = "x-tether-csrf"
"""The header a cookie-authenticated state-changing request carries the CSRF token in."""
GUESSES = 10
"""Wrong tokens a client may offer within `GUESS_WINDOW` seconds before it gets 429."""
GUESS_WINDOW = 60.0
_MAX_FORM = 4096
_SAFE = frozenset({"GET", "HEAD", "OPTIONS"})
_CSRF_SCOPE_KEY = "tether.csrf"
_MAX_CLIENTS = 10_000
"""Clients whose wrong guesses are remembered at once (the oldest are forgotten first)."""


def csrf_token(scope: Scope) -> str:
    """The CSRF token a page of this request embeds for its own POSTs ("" without a token
    gate: then there is no cookie to forge with)."""
    value = scope.get(_CSRF_SCOPE_KEY, "")
    return value if isinstance(value, str) else ""


class _Guesses:
    """Wrong guesses per client address within a window, in bounded memory."""

    def __init__(self, limit: int, window: float) -> None:
        self.limit = limit
        self.window = window
        self._seen: dict[str, tuple[float, int]] = {}

    def blocked(self, client: str) -> float:
        """Seconds until `client` may guess again (0: it may now)."""
        entry = self._seen.get(client)
        if entry is None:
            return 0.0
        start, count = entry
        left = start + self.window - time.monotonic()
        if left <= 0:
            del self._seen[client]
            return 0.0
        return left if count >= self.limit else 0.0

    def wrong(self, client: str) -> None:
        now = time.monotonic()
        start, count = self._seen.get(client, (now, 0))
        if now - start > self.window:
            start, count = now, 0
        self._seen.pop(client, None)
        self._seen[client] = (start, count + 1)
        while len(self._seen) > _MAX_CLIENTS:
            del self._seen[next(iter(self._seen))]


class TokenGate:
    """Lets through requests that prove they hold `token`; `/login` trades it for a cookie.

    A request without proof gets 401 (with `WWW-Authenticate: Bearer`) when it asks for JSON
    or is not a GET, and a redirect to the login form otherwise; see the module docstring for
    the CSRF token and the limit on guesses.
    """

    def __init__(
        self,
        app: ASGIApp,
        token: str,
        *,
        login_path: str = "/login",
        guesses: int = GUESSES,
        guess_window: float = GUESS_WINDOW,
    ) -> None:
        if not token:
            raise ValueError("TokenGate needs a non-empty token")
        self.app = app
        self._token = token.encode("utf-8")
        self._session = hmac.new(self._token, b"tether-ui-session", hashlib.sha256).hexdigest()
        self._csrf = hmac.new(self._token, b"tether-csrf", hashlib.sha256).hexdigest()
        self._guesses = _Guesses(guesses, guess_window)
        self.login_path = login_path

    def _token_ok(self, value: str) -> bool:
        return hmac.compare_digest(value.encode("utf-8"), self._token)

    def _credentials(self, scope: Scope) -> tuple[str | None, str | None]:
        """The bearer token and the session cookie the request offers."""
        bearer: str | None = None
        auth = header(scope, b"authorization")
        if auth is not None:
            kind, _, value = auth.partition(" ")
            bearer = value.strip() if kind.lower() == "bearer" else auth
        session: str | None = None
        raw = header(scope, b"cookie")
        if raw:
            cookie: SimpleCookie = SimpleCookie()
            try:
                cookie.load(raw)
            except Exception:
                return bearer, None
            morsel = cookie.get(SESSION_COOKIE)
            session = morsel.value if morsel is not None else None
        return bearer, session

    def _authorized(self, bearer: str | None, session: str | None) -> str | None:
        """How the request proved it holds the token: "bearer", "cookie", or None."""
        if bearer is not None and self._token_ok(bearer):
            return "bearer"
        if session is not None and hmac.compare_digest(
            session.encode("ascii", "replace"), self._session.encode("ascii")
        ):
            return "cookie"
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        root = scope.get("root_path", "").rstrip("/")
        path = scope.get("path", "")
        client = _client(scope)
        bearer, session = self._credentials(scope)
        is_login = scope["type"] == "http" and path in (root + self.login_path, self.login_path)
        offers = bearer is not None or session is not None or is_login
        wait = self._guesses.blocked(client) if offers else 0.0
        if wait:
            await send_plain(
                send,
                429,
                "Too many wrong tokens from this address; wait and try again.\n",
                [(b"retry-after", str(int(wait) + 1).encode("ascii"))],
            )
            return
        if is_login:
            await self._login(scope, receive, send, root, client)
            return
        how = self._authorized(bearer, session)
        if how is not None:
            if how == "cookie" and scope.get("method", "GET") not in _SAFE:
                given = header(scope, CSRF_HEADER.encode("ascii")) or ""
                if not hmac.compare_digest(given.encode("ascii", "replace"), self._csrf.encode()):
                    await send_error(
                        send,
                        403,
                        "csrf_token_missing",
                        f"a request logged in by cookie that changes something needs the "
                        f"page's CSRF token in {CSRF_HEADER} (or send 'Authorization: Bearer "
                        "TOKEN' instead of the cookie)",
                    )
                    return
            scope[_CSRF_SCOPE_KEY] = self._csrf
            await self.app(scope, receive, send)
            return
        if bearer is not None or session is not None:
            self._guesses.wrong(client)
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

    async def _login(
        self, scope: Scope, receive: Receive, send: Send, root: str, client: str
    ) -> None:
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
        if failed:
            self._guesses.wrong(client)
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


def _client(scope: Scope) -> str:
    client = scope.get("client")
    return str(client[0]) if client else ""


def _local(target: str, root: str) -> str:
    """`target` when it is a path on this server, else the root: never an open redirect.

    A browser drops tabs and line breaks from a URL before it reads it (slash, tab, slash,
    `evil.example` is `//evil.example`, another site) and reads a backslash as a slash, so a
    target holding any control character, space or backslash is refused, not cleaned; what is
    left is percent-encoded where it is not plain ASCII (a `Location` header is ASCII).
    """
    if (
        target.startswith("/")
        and not target.startswith("//")
        and not any(c <= " " or c == "\x7f" or c == "\\" or 0x80 <= ord(c) <= 0x9F for c in target)
    ):
        return quote(target, safe="/?&=%#:;@!$'()*+,~-._")
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
