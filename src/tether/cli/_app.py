"""The `tether` command: global options, and the command groups wired together."""

from __future__ import annotations

import difflib
import importlib
import os
import sys
from collections.abc import Iterator, MutableMapping
from pathlib import Path
from typing import Annotated, Any

import typer
import typer.core
import typer.main
import typer.models

from .._startup import resume_collection
from .._version import __version__
from ._errors import DEBUG_ENV, EXIT_INTERRUPTED, EXIT_USAGE, error_json
from ._project import GlobalOptions
from ._render import emit_err

__all__ = ["COMMANDS", "app", "main"]

_EPILOG = """\b
Exit status:
  0    done
  1    the run failed
  2    a wrong argument: an unknown id, malformed JSON, an option the agent
       does not take
  3    the project is not usable as configured: no tether.toml, a registry
       entry that does not import, a missing provider key, a bad store
  130  interrupted with Ctrl-C"""

COMMANDS: dict[str, tuple[str, str]] = {
    # `tether --help` lists them in this order: the commands, then the groups, each in the
    # order a beginner meets them.
    "init": ("._init", "init"),
    "prompt": ("._prompt", "prompt"),
    "chat": ("._chat", "chat"),
    "models": ("._models", "models"),
    "ui": ("._ui", "ui"),
    "serve": ("._serve", "serve"),
    "keys": ("._models", "keys_app"),
    "agent": ("._agents", "agent_app"),
    "workflow": ("._workflows", "workflow_app"),
    "runs": ("._runs", "runs_app"),
    "eval": ("._eval", "eval_app"),
}
"""Each command (a function) or command group (a Typer) and the module and name it is in.

A command's module is imported, and typer builds its click command, only when the command line
names it (`tether --help` and a mistyped name need them all): `tether agent list` pays for
the `agent` group alone, not for the UI, the server, chat and eval."""


class _Commands(MutableMapping[str, Any]):
    """The root group's commands, each built on first access (see `COMMANDS`)."""

    def __init__(self) -> None:
        self._built: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        built = self._built.get(name)
        if built is None:
            module, attr = COMMANDS[name]  # KeyError: no such command
            target = getattr(importlib.import_module(module, __package__), attr)
            # Built with the root's settings, as typer builds what add_typer / command add.
            if isinstance(target, typer.Typer):
                built = typer.main.get_group_from_info(
                    typer.models.TyperInfo(target, name=name),
                    pretty_exceptions_short=app.pretty_exceptions_short,
                    rich_markup_mode=app.rich_markup_mode,
                    suggest_commands=app.suggest_commands,
                )
            else:
                built = typer.main.get_command_from_info(
                    typer.models.CommandInfo(name=name, callback=target),
                    pretty_exceptions_short=app.pretty_exceptions_short,
                    rich_markup_mode=app.rich_markup_mode,
                )
            self._built[name] = built
        return built

    def __setitem__(self, name: str, command: Any) -> None:
        self._built[name] = command

    def __delitem__(self, name: str) -> None:
        raise TypeError("the tether command's commands are fixed")

    def __iter__(self) -> Iterator[str]:
        return iter(COMMANDS)

    def __len__(self) -> int:
        return len(COMMANDS)

    def __contains__(self, name: object) -> bool:
        return name in COMMANDS


class _Root(typer.core.TyperGroup):
    """The `tether` group, its commands loaded as they are named."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self.commands = _Commands()


app = typer.Typer(
    name="tether",
    cls=_Root,
    help="Start a project (tether init), ask a model with no project at all (tether "
    '"question", tether prompt), chat with an agent, and run and inspect the agents and '
    "workflows a project declares in tether.toml (or [tool.tether] in pyproject.toml).",
    epilog=_EPILOG,
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"tether {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            metavar="PATH",
            exists=True,
            help="The tether.toml or pyproject.toml to use, or a directory to search from. "
            "Default: the nearest one at or above the current directory.",
        ),
    ] = None,
    store: Annotated[
        str | None,
        typer.Option(
            "--store",
            metavar="URL",
            help="Use this store instead of the project's: memory, sqlite:///relative.db "
            "(relative to the current directory), sqlite:////absolute.db or "
            "postgresql://user:password@host/db. The runs commands then need no config at all.",
        ),
    ] = None,
    debug: Annotated[
        bool,
        typer.Option(
            "--debug",
            help=f"On an error, also print the traceback behind it (as {DEBUG_ENV}=1 does).",
        ),
    ] = False,
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            "-V",
            is_eager=True,
            callback=_print_version,
            help="Print tether's version and exit.",
        ),
    ] = False,
) -> None:
    resume_collection()  # held off by `python -m tether` while the command line loaded
    if debug:
        os.environ[DEBUG_ENV] = "1"  # read where errors are reported, and by worker processes
    ctx.obj = GlobalOptions(config=config, store=store)


_VALUED = ("--config", "--store")
"""The global options that take a value (the word after them is not a command)."""


def _with_prompt(args: list[str]) -> list[str]:
    """`tether "text"` as `tether prompt "text"`: the first word that is not a global option
    (or its value) and names no command is a prompt, unless it is one word close to a
    command's name (a typo is reported as one)."""
    i = 0
    while i < len(args):
        word = args[i]
        if word == "--":
            return args
        if word in _VALUED:
            i += 2
            continue
        if word.startswith("-"):
            i += 1
            continue
        if word in COMMANDS:
            return args
        if " " not in word and difflib.get_close_matches(word, list(COMMANDS), cutoff=0.75):
            return args  # a mistyped command (`tether agnet list`): typer says so
        return [*args[:i], "prompt", *args[i:]]
    return args


def main() -> None:
    """The `tether` console script. With `--json`, a failure found while parsing the command
    line (a missing argument, an option it does not take) is also one JSON object on stdout,
    like every other failure."""
    args = _with_prompt(sys.argv[1:])
    sys.argv[1:] = args
    options = args[: args.index("--")] if "--" in args else args
    if "--json" not in options:
        app(prog_name="tether")
        return
    try:
        code = app(prog_name="tether", standalone_mode=False)
    except typer.Abort:
        code = EXIT_INTERRUPTED
        error_json("Interrupted", "interrupted", code)
        emit_err("Error: interrupted")
    except typer.TyperException as exc:  # typer's click: a usage error and the like
        code = int(getattr(exc, "exit_code", EXIT_USAGE))
        format_message = getattr(exc, "format_message", None)
        message = format_message() if callable(format_message) else str(exc)
        error_json(type(exc).__name__, message, code)
        show = getattr(exc, "show", None)
        if callable(show):
            show()
        else:
            emit_err(f"Error: {message}")
    sys.exit(code if isinstance(code, int) else 0)
