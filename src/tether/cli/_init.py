"""`tether init [DIR] [--model M]`: a small project the other commands accept at once."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from ._errors import CommandLineError, ProjectError, reports_errors
from ._models import check_model_option
from ._options import model_option
from ._render import emit, emit_err

__all__ = ["SCAFFOLD", "init"]

_TOML = """\
# What the `tether` command runs in this directory (each entry is "module:attribute").
runtime = "app:lab"
agents = ["app:assistant"]
store = "sqlite:///.tether/tether.db"
"""

_APP = '''\
"""The project's agents. `tether agent list` shows them; try:

    tether agent run assistant "How many words are in this sentence?"
    tether chat assistant
    tether eval run assistant --dataset datasets/smoke.jsonl
    tether ui
"""

from tether import tool
from tether.lab import Runtime

# The model every agent uses unless it names its own. "test" answers without a key
# (it repeats your message; "test:tools" calls each tool once). For a real model, set its
# key (`tether keys set anthropic`) and write e.g. "anthropic:claude-sonnet-4-5".
MODEL = {model}

lab = Runtime(defaults={{"model": MODEL}})


@tool
def count_words(text: str) -> int:
    """Count the words in a text."""
    return len(text.split())


assistant = lab.create_agent(
    id="assistant",
    system_prompt="You are a concise assistant. Use count_words to count words.",
    tools=[count_words],
    description="A concise assistant with a word counter",
)
'''

_CASES = [
    {
        "id": "hello",
        "input": "Hello",
        "evaluators": [{"type": "contains", "value": "hello", "case_sensitive": False}],
    },
    {
        "id": "echo",
        "input": "one two three",
        "expected": "one two three",
        "evaluators": [{"type": "equals"}],
    },
]
_SMOKE = "".join(json.dumps(case) + "\n" for case in _CASES)

_GITIGNORE = """\
# tether's store (runs, conversations, experiments) and Python's caches
.tether/
__pycache__/
"""

SCAFFOLD = {
    "tether.toml": _TOML,
    "app.py": _APP,
    "datasets/smoke.jsonl": _SMOKE,
    ".gitignore": _GITIGNORE,
}
"""The files `tether init` writes (app.py has its model filled in)."""


@reports_errors
def init(
    directory: Annotated[
        Path,
        typer.Argument(
            metavar="DIR", help="Where to write the project (created if needed).", file_okay=False
        ),
    ] = Path("."),
    model: Annotated[
        str,
        model_option(
            "The model app.py uses (see `tether models`). The default, test, needs no key."
        ),
    ] = "test",
) -> None:
    """Write a small project: tether.toml, app.py (one agent, one tool), datasets/smoke.jsonl
    and a .gitignore for .tether/.

    Refuses to overwrite a file that is already there. The project works at once with
    `tether agent run`, `tether chat`, `tether eval run` and `tether ui`.
    """
    check_model_option(model)
    there = [name for name in SCAFFOLD if (directory / name).exists()]
    if there:
        raise CommandLineError(
            f"{directory / there[0]} already exists; tether init writes "
            + ", ".join(SCAFFOLD)
            + " and overwrites nothing",
            hint="Give an empty or new directory: `tether init DIR`.",
        )
    try:
        for name, text in SCAFFOLD.items():
            path = directory / name
            path.parent.mkdir(parents=True, exist_ok=True)
            content = text.format(model=json.dumps(model)) if name == "app.py" else text
            with path.open("x", encoding="utf-8") as f:  # "x": never replace a file
                f.write(content)
    except FileExistsError as exc:  # created between the check and the write
        raise CommandLineError(f"{exc.filename} already exists; nothing overwritten") from None
    except OSError as exc:
        raise ProjectError(f"cannot write the project in {directory}: {exc}") from None
    for name in SCAFFOLD:
        emit_err(f"wrote {directory / name}")
    go = "" if directory == Path(".") else f"cd {directory}\n  "
    emit(
        f'Next:\n  {go}tether agent run assistant "Hello"\n  tether chat assistant\n'
        "  tether eval run assistant --dataset datasets/smoke.jsonl\n  tether ui"
    )
