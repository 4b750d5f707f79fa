"""The options several commands take, declared once: each command gives its own help text, the
flags and metavars are the same everywhere (``--model/-m PROVIDER:MODEL``, ``--scope``,
``--host``, ``--port``, ``--token``, ``--allowed-host``)."""

from __future__ import annotations

from typing import Any

import typer

__all__ = [
    "allowed_host_option",
    "host_option",
    "model_option",
    "port_option",
    "scope_option",
    "token_option",
]


def model_option(help: str) -> Any:
    """`--model` / `-m PROVIDER:MODEL` (`agent run`, `chat`, `prompt`, `init`)."""
    return typer.Option("--model", "-m", metavar="PROVIDER:MODEL", help=help)


def scope_option(help: str, *, short: bool = True) -> Any:
    """`--scope SCOPE`, the conversation (memory scope); `-s` too unless the command gives
    that letter to another option (`prompt`'s `--system`)."""
    flags = ("--scope", "-s") if short else ("--scope",)
    return typer.Option(*flags, metavar="SCOPE", help=help)


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


def host_option(help: str) -> Any:
    """`--host HOST`, the interface a server listens on (`tether ui` and `tether serve`)."""
    return typer.Option("--host", metavar="HOST", help=help)


def port_option(help: str) -> Any:
    """`--port PORT`, 0 to 65535 (`tether ui` and `tether serve`)."""
    return typer.Option("--port", metavar="PORT", min=0, max=65535, help=help)
