"""`tether models`: the model strings tether knows, and whether each has a key (and from where);
and the check of a `--model` option."""

from __future__ import annotations

from ..llm import model_problem
from ._errors import CommandLineError

__all__ = ["check_model_option"]


def check_model_option(model: str | None, option: str = "--model") -> None:
    """Refuse a `--model` value that is not a model string tether can build.

    Raises:
        CommandLineError: naming the option and what is wrong, with an example.
    """
    if model is None:
        return
    problem = model_problem(model)
    if problem is not None:
        if problem.startswith("must be"):
            problem = "is not 'provider:model'" + problem[len("must be 'provider:model'") :]
        raise CommandLineError(
            f"{option} {problem}",
            hint="e.g. --model openai:gpt-4o-mini, -m anthropic:claude-sonnet-4-5, or -m test "
            "(keyless); `tether models` lists them.",
        )
