"""`tether serve [--host H] [--port P] [--workers N] [--token T] [--allowed-host NAME]
[--allowed-origin ORIGIN] [--max-body BYTES] [--header-timeout S] [--body-timeout S]
[--send-timeout S] [--max-client-connections N]`: the HTTP API and the UI over the project."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer

from ._errors import reports_errors
from ._options import allowed_host_option, host_option, port_option, token_option
from ._project import (
    absolute_store_url,
    load_project,
    locate_config,
    options_of,
)
from ._ui import ServerCommand, announce_login, check_port, serve_until_stopped

__all__ = ["serve"]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8700
TOKEN_ENV = "TETHER_SERVE_TOKEN"
SERVE_COMMAND = ServerCommand(
    what="the server",
    exposure="anyone on the network could start runs and read every stored conversation",
    token_env=TOKEN_ENV,
    module="tether.serve",
)


@reports_errors
def serve(
    ctx: typer.Context,
    host: Annotated[
        str, host_option("The interface to listen on. Anything but loopback needs --token.")
    ] = DEFAULT_HOST,
    port: Annotated[int, port_option("The port to listen on.")] = DEFAULT_PORT,
    workers: Annotated[
        int,
        typer.Option(
            "--workers",
            metavar="N",
            min=1,
            help="Worker processes sharing the port. More than one needs a store several "
            "processes can share (PostgreSQL, or a SQLite file on this machine).",
        ),
    ] = 1,
    token: Annotated[str | None, token_option(TOKEN_ENV)] = None,
    allowed_host: Annotated[list[str] | None, allowed_host_option()] = None,
    cors_origin: Annotated[
        list[str] | None,
        typer.Option(
            "--allowed-origin",
            "--cors-origin",
            metavar="ORIGIN",
            help="Let pages of this origin (https://app.example.com) call the API from a "
            "browser, state-changing requests included (repeatable). None by default: a "
            "POST from any other page's origin gets 403.",
        ),
    ] = None,
    max_body: Annotated[
        int,
        typer.Option(
            "--max-body",
            metavar="BYTES",
            min=1,
            help="The largest request body accepted (413 above).",
        ),
    ] = 1_048_576,
    header_timeout: Annotated[
        float,
        typer.Option(
            "--header-timeout",
            metavar="SECONDS",
            min=0.1,
            help="Seconds a client has to send a request's headers (408 after: slowloris).",
        ),
    ] = 10.0,
    body_timeout: Annotated[
        float,
        typer.Option(
            "--body-timeout",
            metavar="SECONDS",
            min=0.1,
            help="Seconds a client has to send a request's body (408 after).",
        ),
    ] = 30.0,
    send_timeout: Annotated[
        float,
        typer.Option(
            "--send-timeout",
            metavar="SECONDS",
            min=0.1,
            help="Seconds an answer waits for a client that stopped reading before the "
            "connection is cut.",
        ),
    ] = 30.0,
    max_client_connections: Annotated[
        int,
        typer.Option(
            "--max-client-connections",
            metavar="N",
            min=1,
            help="Connections one client address may hold open at once (503 above).",
        ),
    ] = 64,
    takeover_every: Annotated[
        float,
        typer.Option(
            "--takeover-every",
            metavar="SECONDS",
            min=0.1,
            help="How often this server looks for durable workflow runs whose worker died "
            "(interrupted), or whose wait for a signal timed out, and resumes them.",
        ),
    ] = 5.0,
) -> None:
    """Serve the project's agents and workflows over HTTP until Ctrl-C.

    Start runs (POST /api/agents/ID/runs, /api/workflows/ID/runs), follow them as
    server-sent events that resume with Last-Event-ID (GET /api/runs/RUN/stream), cancel
    them, send client messages, speak AG-UI (POST /api/agents/ID/ag-ui), and chat in the
    browser: the inspection UI is served beside the API. Several workers (--workers, or
    several machines) on one PostgreSQL store serve one set of conversations.
    """
    serve_options = replace(
        SERVE_COMMAND.options(host, port, token, allowed_host),
        cors_origins=list(cors_origin or ()),
        max_body=max_body,
        takeover_every=takeover_every,
        header_timeout=header_timeout,
        body_timeout=body_timeout,
        send_timeout=send_timeout,
        max_client_connections=max_client_connections,
    )
    options = options_of(ctx)
    registry = load_project(options)
    if workers > 1:
        from ..serve._server import serve_workers

        check_port(host, port)
        announce_login(host, port, token)
        # Each worker loads the project itself; here it was loaded to report errors first.
        config = locate_config(options.config)
        # A relative SQLite path means the current directory, as for every command.
        store = absolute_store_url(options.store, Path.cwd()) if options.store else None
        try:
            serve_workers(config, store, serve_options, workers)
        except KeyboardInterrupt:
            pass
        return
    serve_until_stopped(registry, options, serve_options)
