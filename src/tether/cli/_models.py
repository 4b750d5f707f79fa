"""`tether models` (the model strings tether knows, and where each provider's key comes from),
`tether keys set PROVIDER`, and the check of a `--model` option."""

from __future__ import annotations

import getpass
import importlib
import os
import sys
from typing import Annotated

import typer

# Light (no adapter, no httpx), and named in a command's help, which typer reads at startup.
from ..llm._keys import KEY_NAMES
from ._errors import CommandLineError, read_stdin, reports_errors
from ._render import emit, emit_err, emit_json, table

__all__ = [
    "DEFAULT_MODELS",
    "KNOWN_MODELS",
    "MODEL_ENV",
    "check_model_option",
    "default_model",
    "key_source",
    "keys_app",
    "models",
]

MODEL_ENV = "TETHER_MODEL"
"""The model `tether prompt` uses when not given -m."""

KNOWN_MODELS: dict[str, tuple[str, ...]] = {
    "anthropic": ("claude-opus-4-1", "claude-sonnet-4-5", "claude-haiku-4-5"),
    "openai": ("gpt-4.1", "gpt-4.1-mini", "gpt-4o", "gpt-4o-mini", "o4-mini"),
    "openai-responses": ("gpt-5", "gpt-5-mini", "o4-mini"),
    "gemini": ("gemini-2.5-pro", "gemini-2.5-flash"),
    "test": ("", "echo", "tools"),
}
"""Model ids worth listing per provider; any id the provider serves works the same way."""

DEFAULT_MODELS = {
    "anthropic": "anthropic:claude-sonnet-4-5",
    "openai": "openai:gpt-4o-mini",
    "gemini": "gemini:gemini-2.5-flash",
}
"""The model `tether prompt` picks for the first provider that has a key."""


def _env_vars(provider: str) -> tuple[str, ...]:
    """The environment variables `provider`'s adapter reads its key from."""
    from ..llm import PROVIDERS

    module, name = PROVIDERS[provider].split(":")
    env_vars = getattr(getattr(importlib.import_module(module), name), "env_vars", ())
    return tuple(env_vars)


def check_model_option(model: str | None, option: str = "--model") -> None:
    """Refuse a `--model` value that is not a model string tether can build.

    Raises:
        CommandLineError: naming the option and what is wrong, with an example.
    """
    from ..llm import model_problem

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


def key_source(provider: str) -> str | None:
    """Where `provider`'s key would come from: the environment variable set, the keys file,
    "not needed" (the test model), or None (no key)."""
    from ..llm._keys import keys_path, stored_key

    if provider == "test":
        return "not needed"
    for var in _env_vars(provider):
        if os.environ.get(var):
            return f"${var}"
    if stored_key(provider) is not None:
        return str(keys_path())
    return None


def default_model() -> str | None:
    """``$TETHER_MODEL``, else the default model of the first provider that has a key."""
    given = os.environ.get(MODEL_ENV)
    if given:
        return given
    for provider, model in DEFAULT_MODELS.items():
        if key_source(provider) is not None:
            return model
    return None


@reports_errors
def models(
    as_json: Annotated[bool, typer.Option("--json", help="Print the list as JSON.")] = False,
) -> None:
    """List the model strings tether knows, whether each has a key, and where it comes from.

    Keys are read from the provider's environment variable first, then from the keys
    `tether keys set PROVIDER` stored. Any model id a provider serves works as
    PROVIDER:MODEL; these are the ones worth knowing. `test` needs no key.
    """
    from ..llm import PROVIDERS

    rows = []
    for provider in PROVIDERS:
        source = key_source(provider)
        for name in KNOWN_MODELS.get(provider, ()):
            model = f"{provider}:{name}" if name else provider
            rows.append((model, "yes" if source else "no", source or "-"))
    if as_json:
        emit_json([{"model": m, "key": k == "yes", "key_from": s} for m, k, s in rows])
        return
    emit(table(("MODEL", "KEY", "FROM"), rows))
    chosen = default_model()
    if chosen:
        emit_err(f"`tether prompt` without -m uses {chosen}.")
    else:
        emit_err(
            "No provider key is set: `tether keys set PROVIDER` stores one; -m test needs none."
        )


keys_app = typer.Typer(
    name="keys",
    help="Store provider API keys in your config directory (used after the environment variables).",
    no_args_is_help=True,
)


@keys_app.command("set")
@reports_errors
def set_key(
    provider: Annotated[
        str,
        typer.Argument(
            metavar="PROVIDER", help=f"One of {', '.join(sorted(set(KEY_NAMES.values())))}."
        ),
    ],
) -> None:
    """Store PROVIDER's API key: typed at a hidden prompt, or read from stdin in a pipe.

    The key is kept in keys.json in tether's config directory (mode 0600; $TETHER_CONFIG_DIR
    moves it) and used whenever the provider's environment variable is not set.
    """
    from ..llm._keys import store_key

    if provider not in KEY_NAMES:
        raise CommandLineError(
            f"no provider {provider!r} takes a key",
            hint=f"Give one of {', '.join(sorted(set(KEY_NAMES.values())))}.",
        )
    if sys.stdin.isatty():
        key = getpass.getpass(f"{provider} API key: ").strip()
    else:
        key = read_stdin().strip()
    if not key:
        raise CommandLineError("no key given", hint="Type or pipe the key; it is not echoed.")
    path = store_key(provider, key)
    emit_err(f"Stored the {KEY_NAMES[provider]} key in {path}.")


@keys_app.command("path")
def keys_file() -> None:
    """Print the file the keys are stored in."""
    from ..llm._keys import keys_path

    emit(str(keys_path()))
