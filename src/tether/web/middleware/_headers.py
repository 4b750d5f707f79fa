"""Security headers on every response, as a plain ASGI middleware.

The pages already escape everything they embed; the Content-Security-Policy is the second
wall: only this app's own script, stylesheet and fetches are allowed, so even markup that got
through could neither run inline script nor load anything from elsewhere.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["CONTENT_SECURITY_POLICY", "SecurityHeaders"]

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)

_HEADERS: list[tuple[bytes, bytes]] = [
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode("ascii")),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cache-control", b"no-store"),
]


_CSP = b"content-security-policy"


class SecurityHeaders:
    """Adds `_HEADERS` to every HTTP response the wrapped app sends (replacing any of the
    same name, except a Content-Security-Policy the response sets itself: a stricter one, such
    as the sandbox of a stored file served as a download)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                names = {name for name, _ in _HEADERS}
                headers = [(k, v) for k, v in message.get("headers", []) if k.lower() not in names]
                own = [(k, v) for k, v in message.get("headers", []) if k.lower() == _CSP]
                added = [(k, v) for k, v in _HEADERS if not (own and k == _CSP)]
                message = {**message, "headers": headers + own + added}
            await send(message)

        await self.app(scope, receive, send_with_headers)
