"""`tether ui [--host H] [--port P] [--allowed-host NAME] [--token T]`: the inspection UI over
the project's runtime."""

from __future__ import annotations

import errno
import importlib
import socket
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Annotated
from urllib.parse import quote

import typer

from ._errors import CommandLineError, ProjectError, missing_lab, reports_errors
from ._options import allowed_host_option, host_option, port_option, token_option
from ._project import has_project, load_project, open_stores, options_of, run_async
from ._prompt import prompt_registry

if TYPE_CHECKING:
    from ..lab import Registry
    from ..serve import ServeOptions
    from ._project import GlobalOptions

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "ServerCommand", "check_port", "ui"]

DEFAULT_HOST = "127.0.0.1"
"""Loopback: the UI shows every stored conversation, so elsewhere it needs a token."""
DEFAULT_PORT = 8321
TOKEN_ENV = "TETHER_UI_TOKEN"


@reports_errors
def ui(
    ctx: typer.Context,
    host: Annotated[
        str,
        host_option(
            "The interface to listen on. Anything but loopback exposes every stored "
            "conversation to the network."
        ),
    ] = DEFAULT_HOST,
    port: Annotated[int, port_option("The port to listen on (0: any free port).")] = DEFAULT_PORT,
    allowed_host: Annotated[list[str] | None, allowed_host_option()] = None,
    token: Annotated[str | None, token_option(TOKEN_ENV)] = None,
) -> None:
    """Serve the inspection UI until Ctrl-C.

    The browser shows the project's runs, conversations, agents and workflows (outside
    any project: the prompts `tether prompt` recorded), and a chat page per agent with the
    answer's timeline beside it (/chat). Ctrl-C
    is the way to stop the server: it exits 0. The project's registry is reloaded when its
    files change.
    """
    # The pages with the chat page beside them (tether serve's app): the UI's own reload of the
    # project's files, and no takeover of other workers' workflow runs (it inspects, it is not
    # a worker).
    serve_options = replace(
        UI_COMMAND.options(host, port, token, allowed_host),
        takeover_every=None,
        watch_registry=True,
    )
    options = options_of(ctx)
    if options.config is None and not has_project():
        registry = prompt_registry(options.store)  # outside a project: `tether prompt`'s runs
    else:
        registry = load_project(options)
    serve_until_stopped(registry, options, serve_options)


def serve_until_stopped(
    registry: Registry, options: GlobalOptions, serve_options: ServeOptions
) -> None:
    """Serve `registry` in this process until Ctrl-C (`tether ui`, and `tether serve` with one
    worker): the port checked, the stores opened, the login link printed; the runtime is closed
    after, whatever happened."""
    from ..serve._server import serve_with

    host, port, token = serve_options.host, serve_options.port, serve_options.token
    runtime = registry.runtime
    try:
        check_port(host, port)
        open_stores(runtime, options)
        announce_login(host, port, token)
        # Closed by the server, in its own event loop (PostgreSQL's pool needs that loop).
        serve_with(runtime, serve_options, registry=registry, close_runtime=True)
    except KeyboardInterrupt:
        # The server has shut down; uvicorn hands the Ctrl-C that stopped it back to us.
        pass
    finally:
        run_async(runtime.aclose())


def check_port(host: str, port: int) -> None:
    """Refuse a port another process listens on, before the server starts (which would log a
    bind error around a traceback-like shutdown). Bound as the server binds (SO_REUSEADDR), so
    a port left in TIME_WAIT still counts as free.

    Raises:
        ProjectError: the port is taken (exit 3), naming it and `--port`.
    """
    if port == 0:
        return
    try:
        infos = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM)
    except socket.gaierror:
        return  # a name that does not resolve: the server says so itself
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                return  # not this machine's address, no permission: the server says so itself
            raise ProjectError(
                f"port {port} on {host} is in use ({exc.strerror or exc})",
                hint=f"Stop what listens there, or pass --port N (e.g. --port {port + 1}; "
                "--port 0 picks a free one).",
            ) from None


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


@dataclass(frozen=True, slots=True)
class ServerCommand:
    """`tether ui` or `tether serve`, as its checks and errors name it."""

    what: str
    """The server, as the error for a missing lab extra names it."""
    exposure: str
    """What a host that is not loopback would expose without a token."""
    token_env: str
    """The environment variable the token is read from."""
    module: str
    """The package of its pages, imported first so that a missing one is named."""

    def options(
        self, host: str, port: int, token: str | None, allowed_host: list[str] | None
    ) -> ServeOptions:
        """The server options both commands share (`dataclasses.replace` adds each one's own):
        a host that is not loopback refused without a token, the server's modules imported.

        Raises:
            CommandLineError: a host that is not loopback, and no token.
            ProjectError: the lab extra is not installed.
        """
        refuse_open_host(host, token, exposure=self.exposure, token_env=self.token_env)
        # Imported here, not at the top: the rest of the CLI works without the server's
        # dependencies.
        try:
            importlib.import_module(self.module)
            from ..serve import ServeOptions
        except ImportError as exc:
            raise missing_lab(self.what, exc) from exc
        return ServeOptions(
            host=host, port=port, token=token, allowed_hosts=list(allowed_host or ())
        )


UI_COMMAND = ServerCommand(
    what="the inspection UI",
    exposure="the UI would show every stored conversation to the network without a login",
    token_env=TOKEN_ENV,
    module="tether.ui",
)


def refuse_open_host(host: str, token: str | None, *, exposure: str, token_env: str) -> None:
    """`tether ui` and `tether serve` bind a non-loopback address only with a token."""
    # Imported here: the rest of the CLI works without the web extra's modules loaded.
    from ..web import is_loopback

    if not is_loopback(host) and not token:
        raise CommandLineError(
            f"--host {host} is not loopback: {exposure}",
            hint=f"Pass --token TOKEN (or set {token_env}); browsers log in once at /login.",
        )
