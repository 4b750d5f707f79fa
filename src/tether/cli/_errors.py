"""What a command reports when it cannot do what it was asked, and the exit status it ends with.

```
CliError                  printed as "Error: ..." (plus a hint) on stderr
├── CommandLineError  2   an argument names something that is not there or is malformed
├── ProjectError      3   the project's tether.toml, registry, store or provider keys
├── RunFailedError    1   the agent episode or workflow run itself failed
└── Interrupted     130   Ctrl-C: the run was cancelled, what it completed stays stored
```

Commands raise these; the root command group prints them and exits with their status, so no
command prints an error or calls `sys.exit` itself. A command given `--json` also prints the
failure as one JSON object on stdout: `{"error": {"type", "message", "exit_code"}}`.
"""

from __future__ import annotations

import functools
import os
import sys
import traceback
from collections.abc import Callable
from typing import Any, ClassVar, ParamSpec

import typer

from ..errors import ConfigError, MissingKeyError, TetherError
from ._render import emit_err, emit_json

__all__ = [
    "DEBUG_ENV",
    "EXIT_INTERRUPTED",
    "EXIT_PROJECT",
    "EXIT_RUN_FAILED",
    "EXIT_USAGE",
    "CliError",
    "CommandLineError",
    "Interrupted",
    "ProjectError",
    "RunFailedError",
    "check_utf8",
    "debugging",
    "error_json",
    "missing_lab",
    "read_stdin",
    "report_error",
    "reports_errors",
    "stdin_if_dash",
]

P = ParamSpec("P")

EXIT_RUN_FAILED = 1
EXIT_USAGE = 2
"""Also what typer uses for a missing or malformed option."""
EXIT_PROJECT = 3
EXIT_INTERRUPTED = 130
"""128 + SIGINT, what shells report for a command stopped with Ctrl-C."""


class CliError(Exception):
    """A failure the CLI reports as a message, not a traceback."""

    exit_code: ClassVar[int] = EXIT_RUN_FAILED

    def __init__(self, message: str, *, hint: str | None = None, kind: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        """What went wrong."""
        self.hint = hint
        """What to do about it: the command to run, the file to write, the variable to set."""
        self.kind = kind
        """The tether exception type behind it (e.g. ``RegistryError``), shown before the
        message; None for errors the CLI found itself."""


class CommandLineError(CliError):
    """An argument names something that is not there, or does not parse."""

    exit_code = EXIT_USAGE


class ProjectError(CliError):
    """The project cannot be loaded or used as configured (config file, registry, store,
    provider keys)."""

    exit_code = EXIT_PROJECT


class RunFailedError(CliError):
    """The episode or workflow run started and failed."""

    exit_code = EXIT_RUN_FAILED


class Interrupted(CliError):
    """Ctrl-C stopped the command."""

    exit_code = EXIT_INTERRUPTED


def start_error(exc: ConfigError, again: str) -> ProjectError:
    """A run that could not start (a missing key, an unknown provider, a bad model) as the
    project error the CLI reports; `again` ends the hint ("run it again")."""
    if isinstance(exc, MissingKeyError):
        variable = exc.env_var.split(" or ")[0]
        hint: str | None = f"e.g. `export {variable}=...`, then {again}."
    else:
        hint = None
    return ProjectError(str(exc), kind=type(exc).__name__, hint=hint)


def missing_lab(what: str, exc: ImportError) -> ProjectError:
    """The error for a command whose `what` ("the server") cannot be imported: the lab extra
    is missing."""
    return ProjectError(
        f"{what} cannot be loaded: {exc}",
        kind=type(exc).__name__,
        hint="Install the lab extra: pip install 'tether[lab]'.",
    )


DEBUG_ENV = "TETHER_DEBUG"
"""Set to 1 (or pass `tether --debug`): an error also prints the traceback behind it."""


def debugging() -> bool:
    """Whether errors print their tracebacks (`--debug`, or TETHER_DEBUG=1)."""
    return os.environ.get(DEBUG_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def error_json(kind: str, message: str, exit_code: int, hint: str | None = None) -> None:
    """Print a failure as `--json` shows it: one object on stdout."""
    error: dict[str, object] = {"type": kind, "message": message, "exit_code": exit_code}
    if hint:
        error["hint"] = hint
    emit_json({"error": error})


def report_error(exc: CliError, *, as_json: bool = False) -> None:
    """Print a CliError on stderr: ``Error: [Kind: ]message``, then its hint (control
    characters escaped: a message can quote a server, a tool or a stored id). With
    `as_json`, also as `{"error": {"type", "message", "exit_code"}}` on stdout."""
    if as_json:
        error_json(exc.kind or type(exc).__name__, exc.message, exc.exit_code, exc.hint)
    if debugging() and exc.__cause__ is not None:
        emit_err("".join(traceback.format_exception(exc.__cause__)).rstrip())
    kind = f"{exc.kind}: " if exc.kind else ""
    emit_err(f"Error: {kind}{exc.message}")
    if exc.hint:
        emit_err(exc.hint)


_UTF8_HINT = "Pass UTF-8 text (check the file's or the terminal's encoding)."


def check_utf8(text: str, what: str) -> None:
    """Refuse `text` when it holds bytes that are not UTF-8. Python hands such bytes from the
    command line (and from stdin in the C locale) over as lone surrogates, which no store,
    provider or wire accepts.

    Raises:
        CommandLineError: naming `what` (an option, an argument, "stdin") and the first byte.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        code = ord(text[exc.start])
        bad = f"byte 0x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"U+{code:04X}"
        raise CommandLineError(
            f"{what} is not valid UTF-8: {bad} at position {exc.start}", hint=_UTF8_HINT
        ) from None


def stdin_if_dash(text: str, what: str, hint: str) -> str:
    """`text`, or all of stdin when it is ``-`` (see `read_stdin`).

    Raises:
        CommandLineError: stdin is empty (there is no `what`, `hint` says how to give it).
    """
    if text != "-":
        return text
    read = read_stdin()
    if not read.strip():
        raise CommandLineError(f"stdin is empty: there is no {what}", hint=hint)
    return read


def read_stdin() -> str:
    """All of stdin as text, without its final line break (what `--input -` means).

    Raises:
        CommandLineError: stdin is not UTF-8.
    """
    try:
        text = sys.stdin.read().rstrip("\r\n")
    except UnicodeDecodeError as exc:
        raise CommandLineError(
            f"stdin is not valid UTF-8: byte 0x{exc.object[exc.start]:02x} at position {exc.start}",
            hint=_UTF8_HINT,
        ) from None
    check_utf8(text, "stdin")
    return text


def _check_arguments(ctx: Any) -> None:
    """`check_utf8` on every text option and argument of the command whose context (its `ctx`
    parameter, a `typer.Context`) is `ctx`, and of the groups above it."""
    while ctx is not None:
        for param in ctx.command.params:
            value = ctx.params.get(param.name)
            if isinstance(value, str):
                if param.param_type_name == "option":
                    what = max(param.opts, key=len)
                else:
                    what = param.metavar or str(param.name).upper()
                check_utf8(value, what)
        ctx = ctx.parent


def reports_errors(command: Callable[P, None]) -> Callable[P, None]:
    """Wrap a command: its text arguments are checked to be UTF-8, a CliError is printed and
    becomes its exit status, Ctrl-C outside a run's own handling exits 130, and any other
    tether error is printed with its type (a ConfigError as a project error, the rest as a
    failure). Anything else is a bug and keeps its traceback."""

    @functools.wraps(command)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> None:
        try:
            try:
                _check_arguments(kwargs.get("ctx"))
                command(*args, **kwargs)
            except KeyboardInterrupt:
                raise Interrupted("interrupted") from None
            except ConfigError as exc:
                raise ProjectError(str(exc), kind=type(exc).__name__) from exc
            except TetherError as exc:
                raise RunFailedError(str(exc), kind=type(exc).__name__) from exc
        except CliError as exc:
            report_error(exc, as_json=kwargs.get("as_json") is True)
            raise typer.Exit(exc.exit_code) from None

    return wrapper
