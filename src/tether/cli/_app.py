"""The `tether` command: global options, and the command groups wired together."""

from __future__ import annotations

import difflib
import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from .._version import __version__
from ._agents import agent_app
from ._chat import chat
from ._errors import DEBUG_ENV, EXIT_INTERRUPTED, EXIT_USAGE, error_json
from ._eval import eval_app
from ._init import init
from ._models import keys_app, models
from ._project import GlobalOptions
from ._prompt import prompt
from ._render import emit_err
from ._runs import runs_app
from ._serve import serve
from ._ui import ui
from ._workflows import workflow_app

__all__ = ["app", "main"]

_EPILOG = """\b
Exit status:
  0    done
  1    the run failed
  2    a wrong argument: an unknown id, malformed JSON, an option the agent
       does not take
  3    the project is not usable as configured: no tether.toml, a registry
       entry that does not import, a missing provider key, a bad store
  130  interrupted with Ctrl-C"""

app = typer.Typer(
    name="tether",
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
    if debug:
        os.environ[DEBUG_ENV] = "1"  # read where errors are reported, and by worker processes
    ctx.obj = GlobalOptions(config=config, store=store)


# In the order a beginner meets them: `tether --help` lists them so.
app.command("init")(init)
app.command("prompt")(prompt)
app.command("chat")(chat)
app.command("models")(models)
app.add_typer(keys_app, name="keys")
app.add_typer(agent_app, name="agent")
app.add_typer(workflow_app, name="workflow")
app.add_typer(runs_app, name="runs")
app.add_typer(eval_app, name="eval")
app.command("ui")(ui)
app.command("serve")(serve)

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
        names = {c.name for c in app.registered_commands} | {g.name for g in app.registered_groups}
        if word in names:
            return args
        known = [n for n in names if n]
        if " " not in word and difflib.get_close_matches(word, known, cutoff=0.75):
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
