"""Serving the inspection UI with uvicorn."""

from __future__ import annotations

import uvicorn

from ..lab import Registry, Runtime
from ._app import create_app

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "aserve", "serve"]

DEFAULT_HOST = "127.0.0.1"
"""Loopback only: the UI shows every stored conversation and has no login."""
DEFAULT_PORT = 8321


def _server(
    runtime: Runtime, host: str, port: int, registry: Registry | None, log_level: str
) -> uvicorn.Server:
    app = create_app(runtime, registry)
    config = uvicorn.Config(app, host=host, port=port, log_level=log_level, lifespan="on")
    return uvicorn.Server(config)


def serve(
    runtime: Runtime,
    *,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    registry: Registry | None = None,
    log_level: str = "info",
) -> None:
    """Serve the UI over `runtime` until interrupted (Ctrl-C). Blocks; starts its own event
    loop, so call it outside one (from async code, `await aserve(...)`).

    The runtime stays the caller's: close it after `serve` returns.
    """
    _server(runtime, host, port, registry, log_level).run()


async def aserve(
    runtime: Runtime,
    *,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    registry: Registry | None = None,
    log_level: str = "info",
) -> None:
    """Like `serve`, inside the running event loop."""
    await _server(runtime, host, port, registry, log_level).serve()
