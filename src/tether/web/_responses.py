"""The responses both apps send: JSON that no mis-sniffing client reads as markup, the one
error body, and the plain answers a middleware sends before any app runs."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from starlette.responses import JSONResponse as _StarletteJSON
from starlette.types import Send

__all__ = ["JSONResponse", "api_error", "error_body", "send_error", "send_plain"]


class JSONResponse(_StarletteJSON):
    """Compact JSON with `<`, `>` and `&` written as `\\u003c`-style escapes: the same JSON
    value, and no markup a mis-sniffing client could act on."""

    def render(self, content: Any) -> bytes:
        text = json.dumps(content, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        return (
            text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
        ).encode("utf-8")


def api_error(status: int, kind: str, message: str) -> JSONResponse:
    """The API's error answer: `{"error": {"type": kind, "message": message}}`."""
    return JSONResponse({"error": {"type": kind, "message": message}}, status_code=status)


def error_body(kind: str, message: str) -> bytes:
    """The bytes of `api_error`'s body."""
    return JSONResponse(None).render({"error": {"type": kind, "message": message}})


async def send_plain(
    send: Send, status: int, text: str, headers: Sequence[tuple[bytes, bytes]] = ()
) -> None:
    """A short text/plain answer sent straight to the client (from a middleware)."""
    await _send(send, status, b"text/plain; charset=utf-8", text.encode("utf-8"), headers)


async def send_error(
    send: Send,
    status: int,
    kind: str,
    message: str,
    headers: Sequence[tuple[bytes, bytes]] = (),
) -> None:
    """`api_error`'s answer sent straight to the client (from a middleware)."""
    await _send(send, status, b"application/json", error_body(kind, message), headers)


async def _send(
    send: Send, status: int, kind: bytes, body: bytes, headers: Sequence[tuple[bytes, bytes]]
) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", kind),
                (b"content-length", str(len(body)).encode("ascii")),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
