"""Serving the app with uvicorn: one process, or N worker processes sharing the port.

With `workers > 1` every worker is its own process with its own runtime, loaded from the
project's config (`worker_app` is the factory uvicorn calls in each): the workers share nothing
but the store, so they must share one that several processes can use (PostgreSQL; a SQLite
file works on one machine).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, TypedDict, Unpack

import uvicorn
from starlette.applications import Starlette
from uvicorn.supervisors import Multiprocess

from ..errors import ConfigError
from ..lab import Registry, Runtime, load_registry
from ..web import (
    GuardedConfig,
    ServerLimits,
    allowed_hosts,
    defer_access_log,
    is_loopback,
    scrub_access_log,
    settle_gc,
)
from ..web._server import HEADER_TIMEOUT, MAX_CLIENT_CONNECTIONS, SEND_TIMEOUT
from ..web.middleware import BODY_TIMEOUT, DEFAULT_MAX_BODY
from ._app import create_app
from ._sweeper import TAKEOVER_EVERY

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "TOKEN_ENV", "ServeOptions", "aserve", "serve"]

DEFAULT_HOST = "127.0.0.1"
"""Loopback: anywhere else the server needs a token."""
DEFAULT_PORT = 8700
TOKEN_ENV = "TETHER_SERVE_TOKEN"
"""The environment variable a token is read from when none is passed."""
_WORKER_ENV = "TETHER_SERVE_WORKER"
"""How the parent process hands a worker its options (JSON)."""


class ServeArgs(TypedDict, total=False):
    """What `serve` and `aserve` take besides the runtime and the registry (every key
    optional; `ServeOptions` says what each means and its default)."""

    host: str
    port: int
    token: str | None
    allowed_host: Iterable[str]
    """Host names answered besides the ones the server was started for."""
    cors_origins: Sequence[str]
    max_body: int
    log_level: str
    takeover_every: float


@dataclass(slots=True)
class ServeOptions:
    """How a server is reached and what it accepts (see `tether serve --help`)."""

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    token: str | None = None
    allowed_hosts: list[str] = field(default_factory=list)
    """Host names answered besides the ones the server was started for."""
    cors_origins: list[str] = field(default_factory=list)
    max_body: int = DEFAULT_MAX_BODY
    log_level: str = "info"
    takeover_every: float | None = TAKEOVER_EVERY
    """Seconds between two looks for interrupted workflow runs to resume; None: never (`tether
    ui`, which inspects and chats, does not take other workers' runs over)."""
    header_timeout: float = HEADER_TIMEOUT
    """Seconds a client has to send a request's headers (408 after: slowloris)."""
    body_timeout: float = BODY_TIMEOUT
    """Seconds a client has to send a request's body (408 after)."""
    send_timeout: float = SEND_TIMEOUT
    """Seconds an answer waits for a client that stopped reading before it is cut."""
    max_client_connections: int = MAX_CLIENT_CONNECTIONS
    """Connections one client address may hold open at once (503 above)."""
    watch_registry: bool = False
    """Reload a registry loaded from a config file when the project's files change (`tether
    ui`; a `tether serve` worker serves what it started with)."""

    @classmethod
    def of(cls, args: ServeArgs) -> ServeOptions:
        """The options `serve(**args)` stands for."""
        return cls(
            host=args.get("host", DEFAULT_HOST),
            port=args.get("port", DEFAULT_PORT),
            token=args.get("token"),
            allowed_hosts=list(args.get("allowed_host", ())),
            cors_origins=list(args.get("cors_origins", ())),
            max_body=args.get("max_body", DEFAULT_MAX_BODY),
            log_level=args.get("log_level", "info"),
            takeover_every=args.get("takeover_every", TAKEOVER_EVERY),
        )

    @property
    def limits(self) -> ServerLimits:
        return ServerLimits(
            self.header_timeout, self.body_timeout, self.send_timeout, self.max_client_connections
        )

    def checked(self) -> ServeOptions:
        """These options with the token from the environment when none was given.

        Raises:
            ConfigError: a non-loopback host without a token.
        """
        token = self.token or os.environ.get(TOKEN_ENV) or None
        if not is_loopback(self.host) and not token:
            raise ConfigError(
                f"serving on {self.host!r} (not loopback) lets the network start runs and read "
                f"every stored conversation, so it needs a token: pass --token TOKEN or set "
                f"{TOKEN_ENV}"
            )
        _ = self.limits  # each limit checked now, not in a worker
        return replace(self, token=token)


def _app(runtime: Runtime, registry: Registry | None, options: ServeOptions) -> Starlette:
    return create_app(
        runtime,
        registry,
        allowed_hosts=allowed_hosts(options.host, options.allowed_hosts),
        token=options.token,
        cors_origins=options.cors_origins,
        max_body=options.max_body,
        body_timeout=options.body_timeout,
        takeover_every=options.takeover_every,
        watch_registry=options.watch_registry,
    )


def _server(runtime: Runtime, registry: Registry | None, options: ServeOptions) -> uvicorn.Server:
    options = options.checked()
    config = GuardedConfig(
        _app(runtime, registry, options),
        limits=options.limits,
        host=options.host,
        port=options.port,
        log_level=options.log_level,
        lifespan="on",
        timeout_graceful_shutdown=2,
    )
    scrub_access_log()
    defer_access_log()
    return uvicorn.Server(config)


def serve(
    runtime: Runtime,
    *,
    registry: Registry | None = None,
    **options: Unpack[ServeArgs],
) -> None:
    """Serve the API and the UI over `runtime` in this process until interrupted. Blocks;
    call it outside an event loop (from async code, `await aserve(...)`).

    Raises:
        ConfigError: a non-loopback `host` without a token (or `TETHER_SERVE_TOKEN`).

    The runtime stays the caller's: close it after `serve` returns.
    """
    serve_with(runtime, ServeOptions.of(options), registry=registry)


def serve_with(
    runtime: Runtime,
    options: ServeOptions,
    *,
    registry: Registry | None = None,
    close_runtime: bool = False,
) -> None:
    """`serve` with its options already gathered (what `tether serve` builds).

    `close_runtime`: close the runtime when the server stops, in the server's own event loop
    (a PostgreSQL pool must be closed in the loop that opened it: closed from another after
    Ctrl-C, it failed with "Event loop is closed").
    """
    server = _server(runtime, registry, options)
    if close_runtime:
        app: Any = server.config.app
        app.state.owns_runtime = True
    settle_gc()
    server.run()


async def aserve(
    runtime: Runtime,
    *,
    registry: Registry | None = None,
    **options: Unpack[ServeArgs],
) -> None:
    """Like `serve`, inside the running event loop."""
    await _server(runtime, registry, ServeOptions.of(options)).serve()


def serve_workers(config: Path, store: str | None, options: ServeOptions, workers: int) -> None:
    """Run `workers` processes serving the project at `config` on one port (uvicorn's
    supervisor restarts a worker that dies). Blocks until interrupted."""
    options = options.checked()
    os.environ[_WORKER_ENV] = json.dumps(
        {"config": str(config), "store": store, "options": asdict(options)}
    )
    server = GuardedConfig(
        "tether.serve._server:worker_app",
        limits=options.limits,
        factory=True,
        host=options.host,
        port=options.port,
        workers=workers,
        log_level=options.log_level,
        lifespan="on",
        timeout_graceful_shutdown=2,
    )
    # What uvicorn.run does for workers, with this config (its limits reach every worker).
    Multiprocess(server, sockets=[server.bind_socket()]).run()


def worker_app() -> Starlette:
    """The app of one worker process: the project loaded from the parent's options, served
    by a runtime the worker owns (closed when the worker stops)."""
    raw = os.environ.get(_WORKER_ENV)
    if not raw:
        raise ConfigError(f"worker_app runs in a `tether serve --workers N` worker ({_WORKER_ENV})")
    spec = json.loads(raw)
    registry = load_registry(spec["config"])
    if spec.get("store"):
        registry.runtime.use_store(spec["store"])
    options = ServeOptions(**spec["options"])
    app = _app(registry.runtime, registry, options)
    app.state.owns_runtime = True
    scrub_access_log()
    defer_access_log()
    settle_gc()
    return app
