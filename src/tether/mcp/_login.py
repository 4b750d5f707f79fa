"""The default `OAuth(authorize=...)`: open the authorization URL in the browser and wait on the
loopback redirect URI for the browser to come back."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import webbrowser
from urllib.parse import urlsplit, urlunsplit

from ..errors import McpAuthError

__all__ = ["browser_login"]

LOGIN_TIMEOUT = 300.0
"""Seconds a person has to finish logging in."""
_LOOPBACK = ("127.0.0.1", "localhost", "::1")
_PAGE = (
    b"<!doctype html><meta charset=utf-8><title>tether</title>"
    b"<p>You are logged in. You can close this window and go back to tether.</p>"
)


async def browser_login(url: str, *, redirect_uri: str, wait: float = LOGIN_TIMEOUT) -> str:
    """Open `url` in the browser (and print it, for a terminal without one) and return the URL
    the browser is redirected to, read from a one-shot HTTP listener on `redirect_uri`."""
    parts = urlsplit(redirect_uri)
    host = parts.hostname or ""
    if parts.scheme != "http" or host not in _LOOPBACK or parts.port is None:
        raise McpAuthError(
            f"the default login listens on a loopback redirect URI with a port "
            f"(http://127.0.0.1:PORT/...), not {redirect_uri!r}; give OAuth(authorize=...) to "
            "receive the browser's return yourself"
        )
    path = parts.path or "/"
    arrived: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = await asyncio.wait_for(reader.readline(), 10)
            while (await asyncio.wait_for(reader.readline(), 10)) not in (b"\r\n", b"\n", b""):
                pass  # the headers: nothing in them matters
            method, target, *_ = line.decode("latin-1").split(" ")
            target_parts = urlsplit(target)
            if method != "GET" or target_parts.path != path:
                writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
                return
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\n"
                b"Content-Length: " + str(len(_PAGE)).encode() + b"\r\nConnection: close\r\n\r\n"
            )
            writer.write(_PAGE)
            if not arrived.done():
                arrived.set_result(
                    urlunsplit(
                        (parts.scheme, parts.netloc, target_parts.path, target_parts.query, "")
                    )
                )
        except (ValueError, OSError, TimeoutError):
            pass
        finally:
            with contextlib.suppress(OSError):
                await writer.drain()
                writer.close()

    try:
        server = await asyncio.start_server(handle, host, parts.port)
    except OSError as exc:
        raise McpAuthError(
            f"cannot listen on {redirect_uri} for the login ({exc}); free the port or give "
            "OAuth(redirect_uri=...) another one"
        ) from exc
    async with server:
        print(f"Log in to the MCP server in your browser: {url}", file=sys.stderr)
        await asyncio.to_thread(webbrowser.open, url)
        try:
            async with asyncio.timeout(wait):
                return await arrived
        except TimeoutError:
            raise McpAuthError(
                f"nobody finished the login within {wait:g} s (waiting on {redirect_uri})"
            ) from None
