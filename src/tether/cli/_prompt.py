"""`tether prompt TEXT [-m MODEL] [-s SYSTEM] [--attach FILE]` (also `tether TEXT`): one
answer from a model, no project needed, logged to the user's own store."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ._agents import _episode
from ._errors import CommandLineError, ProjectError, check_utf8, read_stdin, reports_errors
from ._models import MODEL_ENV, check_model_option, default_model
from ._options import model_option, scope_option
from ._project import options_of, run_async, user_runtime

if TYPE_CHECKING:
    from ..lab import Registry

__all__ = ["PROMPT_AGENT", "prompt", "prompt_registry"]

PROMPT_AGENT = "prompt"
"""The agent id the runs of `tether prompt` are recorded under."""


def _attachment(path: Path) -> str:
    """The text of an attached file, as it goes into the message."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise CommandLineError(f"--attach {path}: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise CommandLineError(
            f"--attach {path}: not a UTF-8 text file",
            hint="Attach text files (source, Markdown, CSV, JSON, logs).",
        ) from None
    check_utf8(text, f"--attach {path}")
    return f'<file name="{path.name}">\n{text.rstrip()}\n</file>'


def prompt_registry(store: str | None) -> Registry:
    """What `tether ui` shows outside any project: the runs `tether prompt` recorded, under
    one `prompt` agent on the default model (the test model when no key is set)."""
    from ..lab import Registry

    runtime = user_runtime(store)
    agent = runtime.create_agent(id=PROMPT_AGENT, model=default_model() or "test")
    return Registry(runtime=runtime, agents={PROMPT_AGENT: agent})


@reports_errors
def prompt(
    ctx: typer.Context,
    text: Annotated[
        str,
        typer.Argument(
            metavar="TEXT", help="What to ask. '-' reads it from stdin.", show_default=False
        ),
    ],
    model: Annotated[
        str | None,
        model_option(
            f"The model (see `tether models`). Default: ${MODEL_ENV}, else a model of the "
            "first provider that has a key. `test` answers without a key."
        ),
    ] = None,
    system: Annotated[
        str | None,
        typer.Option("--system", "-s", metavar="TEXT", help="A system prompt."),
    ] = None,
    attach: Annotated[
        list[Path] | None,
        typer.Option(
            "--attach",
            "-a",
            metavar="FILE",
            help="Add a text file to the message (repeatable).",
            dir_okay=False,
        ),
    ] = None,
    scope: Annotated[
        str | None,
        scope_option(
            "Continue this conversation (the scope a previous prompt printed).", short=False
        ),
    ] = None,
) -> None:
    """Ask a model one question, no project needed: the answer streams to stdout.

    Each prompt is recorded in your own store (runs.db in tether's config directory):
    `tether runs list` and `tether ui` show them when run outside a project.
    """
    check_model_option(model)
    chosen = model or default_model()
    if chosen is None:
        raise ProjectError(
            "no model: no provider key is set",
            hint="Pass -m test (keyless), set a provider's key (e.g. `export "
            "ANTHROPIC_API_KEY=...` or `tether keys set anthropic`), or set "
            f"{MODEL_ENV}=provider:model.",
        )
    check_model_option(chosen, f"${MODEL_ENV}" if model is None else "--model")
    if scope is not None and not scope.strip():
        raise CommandLineError("--scope is empty", hint="Give a scope, or omit --scope.")
    message = read_stdin() if text == "-" else text
    if not message.strip() and not attach:
        raise CommandLineError("the prompt is empty", hint='e.g. `tether prompt "Hello"`.')
    parts = [message, *(_attachment(p) for p in attach or ())]
    options = options_of(ctx)
    runtime = user_runtime(options.store)
    agent = runtime.create_agent(id=PROMPT_AGENT, model=chosen, system_prompt=system)
    run_async(
        _episode(
            runtime,
            agent,
            options,
            user="\n\n".join(p for p in parts if p),
            scope=scope,
            model=None,
            tool_context=None,
            title_wait=0,
            as_json=False,
            go_on='tether prompt --scope {scope} "..."',
        )
    )
