"""Serving the inspection UI with uvicorn."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TypedDict, Unpack

import uvicorn

from ..errors import ConfigError
from ..lab import Registry, Runtime
from ..web import GuardedConfig, allowed_hosts, is_loopback, scrub_access_log
from ._app import create_app

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "TOKEN_ENV", "aserve", "serve"]

DEFAULT_HOST = "127.0.0.1"
"""Loopback: the UI shows every stored conversation, so elsewhere it needs a token."""
DEFAULT_PORT = 8321
TOKEN_ENV = "TETHER_UI_TOKEN"
"""The environment variable a token is read from when none is passed."""


class UiServeArgs(TypedDict, total=False):
    """What `serve` and `aserve` take besides the runtime (every key optional)."""

    host: str
    """The interface to listen on (default loopback, `DEFAULT_HOST`)."""
    port: int
    """Default `DEFAULT_PORT`."""
    registry: Registry | None
    """The project's agents and workflows the pages list (default: none)."""
    log_level: str
    """uvicorn's log level (default "info")."""
    allowed_host: Iterable[str]
    """Host names answered besides the ones the server was started for."""
    token: str | None
    """The login token (default: `TETHER_UI_TOKEN`); required off loopback."""


def _server(
    runtime: Runtime,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    registry: Registry | None = None,
    log_level: str = "info",
    allowed_host: Iterable[str] = (),
    token: str | None = None,
) -> uvicorn.Server:
    token = token or os.environ.get(TOKEN_ENV) or None
    if not is_loopback(host) and not token:
        raise ConfigError(
            f"serving the UI on {host!r} (not loopback) exposes every stored conversation to "
            f"the network, so it needs a token: pass --token TOKEN or set {TOKEN_ENV}"
        )
    app = create_app(
        runtime, registry, allowed_hosts=allowed_hosts(host, allowed_host), token=token
    )
    config = GuardedConfig(app, host=host, port=port, log_level=log_level, lifespan="on")
    scrub_access_log()
    return uvicorn.Server(config)


def serve(runtime: Runtime, **args: Unpack[UiServeArgs]) -> None:
    """Serve the UI over `runtime` until interrupted (Ctrl-C). Blocks; starts its own event
    loop, so call it outside one (from async code, `await aserve(...)`). `UiServeArgs` lists
    the keyword arguments.

    Requests are answered only for the host names the server was started for (the loopback
    names on loopback, `host` otherwise, plus `allowed_host`); on an address that is not
    loopback a `token` (or `TETHER_UI_TOKEN`) is required.

    Raises:
        ConfigError: a non-loopback `host` without a token.

    The runtime stays the caller's: close it after `serve` returns.
    """
    _server(runtime, **args).run()


async def aserve(runtime: Runtime, **args: Unpack[UiServeArgs]) -> None:
    """Like `serve`, inside the running event loop."""
    await _server(runtime, **args).serve()
