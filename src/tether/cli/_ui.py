"""`tether ui [--host H] [--port P]`: the inspection UI over the project's runtime."""

from __future__ import annotations

from typing import Annotated

import typer

from ._errors import ProjectError, reports_errors
from ._project import load_project, open_stores, options_of, run_async

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "ui"]

DEFAULT_HOST = "127.0.0.1"
"""Loopback: the UI shows every stored conversation and has no login."""
DEFAULT_PORT = 8321


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
) -> None:
    """Serve the inspection UI until Ctrl-C.

    The browser shows the project's runs, conversations, agents and workflows. Ctrl-C
    is the way to stop the server: it exits 0.
    """
    options = options_of(ctx)
    registry = load_project(options)
    # Imported here, not at the top: the rest of the CLI works without the UI's dependencies.
    try:
        from ..ui import serve
    except ImportError as exc:
        raise ProjectError(
            f"the inspection UI cannot be loaded: {exc}",
            kind=type(exc).__name__,
            hint="Reinstall tether with its dependencies (pip install tether).",
        ) from exc
    runtime = registry.runtime
    try:
        open_stores(runtime, options)
        serve(runtime, host=host, port=port, registry=registry)
    except KeyboardInterrupt:
        # The server has shut down; uvicorn hands the Ctrl-C that stopped it back to us.
        pass
    finally:
        # serve() leaves the runtime to its caller.
        run_async(runtime.aclose())
