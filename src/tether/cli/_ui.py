"""`tether ui [--host H] [--port P] [--allowed-host NAME] [--token T]`: the inspection UI over
the project's runtime."""

from __future__ import annotations

import socket
from typing import Annotated, Any
from urllib.parse import quote

import typer

from ._errors import CommandLineError, ProjectError, reports_errors
from ._project import load_project, open_stores, options_of, run_async

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "ui"]

DEFAULT_HOST = "127.0.0.1"
"""Loopback: the UI shows every stored conversation, so elsewhere it needs a token."""
DEFAULT_PORT = 8321
TOKEN_ENV = "TETHER_UI_TOKEN"


def token_option(envvar: str) -> Any:
    """`--token`, read from `envvar` when not given (`tether ui` and `tether serve`)."""
    return typer.Option(
        "--token",
        metavar="TOKEN",
        envvar=envvar,
        show_envvar=True,
        help="Require this token: 'Authorization: Bearer TOKEN', or a browser logs in "
        "once at /login. Needed when --host is not loopback.",
    )


def allowed_host_option() -> Any:
    """`--allowed-host` (`tether ui` and `tether serve`)."""
    return typer.Option(
        "--allowed-host",
        metavar="NAME",
        help="Also answer requests for this host name (repeatable). By default only the "
        "names the server was started for are answered: the loopback names on loopback, "
        "the --host name otherwise; others get 400 (DNS rebinding).",
    )


@reports_errors
def ui(
    ctx: typer.Context,
    host: Annotated[
        str,
        typer.Option(
            "--host",
            metavar="HOST",
            help="The interface to listen on. Anything but loopback exposes every "
            "stored conversation to the network.",
        ),
    ] = DEFAULT_HOST,
    port: Annotated[
        int,
        typer.Option(
            "--port",
            metavar="PORT",
            min=0,
            max=65535,
            help="The port to listen on (0: any free port).",
        ),
    ] = DEFAULT_PORT,
    allowed_host: Annotated[list[str] | None, allowed_host_option()] = None,
    token: Annotated[str | None, token_option(TOKEN_ENV)] = None,
) -> None:
    """Serve the inspection UI until Ctrl-C.

    The browser shows the project's runs, conversations, agents and workflows. Ctrl-C
    is the way to stop the server: it exits 0. The project's registry is reloaded when its
    files change.
    """
    refuse_open_host(
        host,
        token,
        exposure="the UI would show every stored conversation to the network without a login",
        token_env=TOKEN_ENV,
    )
    options = options_of(ctx)
    registry = load_project(options)
    # Imported here, not at the top: the rest of the CLI works without the UI's dependencies.
    try:
        from ..ui import serve
    except ImportError as exc:
        raise ProjectError(
            f"the inspection UI cannot be loaded: {exc}",
            kind=type(exc).__name__,
            hint="Install the lab extra: pip install 'tether[lab]'.",
        ) from exc
    runtime = registry.runtime
    try:
        open_stores(runtime, options)
        announce_login(host, port, token)
        serve(
            runtime,
            host=host,
            port=port,
            registry=registry,
            allowed_host=tuple(allowed_host or ()),
            token=token,
        )
    except KeyboardInterrupt:
        # The server has shut down; uvicorn hands the Ctrl-C that stopped it back to us.
        pass
    finally:
        # serve() leaves the runtime to its caller.
        run_async(runtime.aclose())


def login_link(host: str, port: int, token: str) -> str:
    """The link that logs a browser in to a server bound to `host`:`port` (`/login?token=`):
    a wildcard address is reached by this machine's name, which the server answers."""
    name = host.strip("[]")
    if name in ("", "0.0.0.0", "::"):
        name = socket.gethostname()
    if ":" in name:
        name = f"[{name}]"
    where = f"http://{name}:{port}" if port else f"http://{name}:PORT"
    return f"{where}/login?token={quote(token, safe='')}"


def announce_login(host: str, port: int, token: str | None) -> None:
    """Print the login link when the server needs a token, as a notebook server does."""
    if not token:
        return
    link = login_link(host, port, token)
    note = " (PORT: the one the server reports below)" if not port else ""
    typer.echo(f"Log in once from a browser: {link}{note}", err=True)


def refuse_open_host(host: str, token: str | None, *, exposure: str, token_env: str) -> None:
    """`tether ui` and `tether serve` bind a non-loopback address only with a token."""
    # Imported here: the rest of the CLI works without the web extra's modules loaded.
    from ..web import is_loopback

    if not is_loopback(host) and not token:
        raise CommandLineError(
            f"--host {host} is not loopback: {exposure}",
            hint=f"Pass --token TOKEN (or set {token_env}); browsers log in once at /login.",
        )
