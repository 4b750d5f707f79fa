"""The project a command works on: its config file, its registry, its runtime and stores.

Every failure here is turned into a `ProjectError` (the project is misconfigured) or a
`CommandLineError` (a global option names something wrong), each saying what to change.
"""

from __future__ import annotations

import asyncio
import signal
import sqlite3
import threading
from collections.abc import Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import typer

from ..errors import ConfigError, ConfigNotFoundError, RegistryError, StoreError
from ._errors import CommandLineError, Interrupted, ProjectError

if TYPE_CHECKING:
    from ..lab import Registry, Runtime

__all__ = [
    "CONFIG_EXAMPLE",
    "GlobalOptions",
    "absolute_store_url",
    "has_project",
    "load_project",
    "locate_config",
    "open_stores",
    "options_of",
    "reach_stores",
    "run_async",
    "store_project",
    "store_runtime",
    "user_runtime",
    "user_store_url",
]

T = TypeVar("T")

CONFIG_EXAMPLE = """\
    runtime = "app.lab:lab"                  # a tether.lab.Runtime (optional)
    agents = ["app.agents:researcher"]       # made with runtime.create_agent(...)
    workflows = ["app.workflows:review"]     # made with runtime.create_workflow(...)
    store = "sqlite:///.tether/tether.db"    # optional; this is the default"""


@dataclass(slots=True, frozen=True)
class GlobalOptions:
    """The options given before the command (`tether --config ... --store ... agent ...`)."""

    config: Path | None = None
    """A tether.toml / pyproject.toml, or a directory to search upward from."""
    store: str | None = None
    """A store URL replacing the project's."""


def options_of(ctx: typer.Context) -> GlobalOptions:
    """The global options of this invocation (the root callback stores them)."""
    obj = ctx.find_root().obj
    return obj if isinstance(obj, GlobalOptions) else GlobalOptions()


def locate_config(start: Path | None) -> Path:
    """The config file the registry comes from (`tether.lab.find_config`'s search).

    Raises:
        ProjectError: there is none (with an example tether.toml), or it does not parse.
    """
    from ..lab import find_config

    try:
        path, _ = find_config(start)
    except ConfigNotFoundError as exc:
        raise ProjectError(
            str(exc).split(";")[0],
            hint=(
                "Create tether.toml in your project directory, listing what the CLI can run, "
                f"for example:\n\n{CONFIG_EXAMPLE}\n\n"
                "(each entry is 'module:attribute', imported from that directory), "
                "or point at a config file with --config PATH."
            ),
        ) from exc
    except RegistryError as exc:  # the file is there but does not parse, or has no table
        named = Path(start) if start is not None and Path(start).is_file() else None
        if named is not None and named.name == "pyproject.toml" and "[tool.tether]" in str(exc):
            hint = (
                "Add one (the keys of a tether.toml, under [tool.tether]), or point --config "
                "at a tether.toml."
            )
        else:
            hint = "Fix the TOML of the file named above."
        raise ProjectError(str(exc), kind="RegistryError", hint=hint) from exc
    return path


def absolute_store_url(url: str, cwd: Path) -> str:
    """`url`, with a relative SQLite path made absolute against `cwd`: on the command line a
    relative path means the current directory, not the project's."""
    prefix = "sqlite:///"
    if url.startswith(prefix) and not url.startswith(prefix + "/"):
        rest = url[len(prefix) :]
        if rest and rest != ":memory:" and not Path(rest).is_absolute():
            return prefix + str((cwd / rest).resolve())
    return url


def load_project(options: GlobalOptions) -> Registry:
    """Find the config, import the registry it lists, and apply `--store`.

    Raises:
        ProjectError: no config, or the registry cannot be loaded (the RegistryError text).
        CommandLineError: `--store` cannot be applied.
    """
    from .._startup import collection_paused

    path = locate_config(options.config)
    try:
        with collection_paused():  # the project's modules, the lab and pydantic under them
            from ..lab import load_registry

            registry = load_registry(path)
    except RegistryError as exc:
        if exc.__cause__ is not None and " not found " not in str(exc):
            hint = (
                "Fix the code at the line named above; `tether --debug ...` (or TETHER_DEBUG=1) "
                "prints the traceback."
            )
        else:
            hint = f"Fix the entry in {path} (each is 'module:attribute'), or the module it names."
        raise ProjectError(str(exc), kind="RegistryError", hint=hint) from exc
    except ConfigError as exc:
        raise ProjectError(str(exc), kind=type(exc).__name__) from exc
    if options.store is not None:
        url = absolute_store_url(options.store, Path.cwd())
        try:
            registry.runtime.use_store(url)
        except ConfigError as exc:
            raise CommandLineError(
                f"--store {options.store}: {exc}",
                kind=type(exc).__name__,
                hint="The project's runtime opened its stores while being imported; "
                "give the store in its Runtime(store=...) or in tether.toml instead.",
            ) from exc
    return registry


def user_store_url() -> str:
    """The store of runs made without a project (`tether prompt`): ``runs.db`` in tether's
    config directory. `tether runs` and `tether ui` read it outside any project."""
    from ..llm._keys import config_dir

    return f"sqlite:///{(config_dir() / 'runs.db').resolve()}"


def user_runtime(store: str | None = None) -> Runtime:
    """A runtime on `store` (a `--store` URL), else on `user_store_url()` (its directory
    created)."""
    from ..lab import Runtime
    from ..llm._keys import config_dir

    if store is not None:
        return Runtime(store=absolute_store_url(store, Path.cwd()), root=Path.cwd(), version=False)
    config_dir().mkdir(parents=True, exist_ok=True, mode=0o700)
    return Runtime(store=user_store_url(), root=Path.cwd(), version=False)


def store_runtime(options: GlobalOptions) -> Runtime:
    """A runtime for commands that only read the stores (`tether runs ...`): with `--store` a
    bare runtime on that URL (no config needed, no project module imported), else the
    project's.

    Raises:
        CommandLineError: `--store` names a SQLite file that does not exist.
    """
    return store_project(options)[0]


def has_project(start: Path | None = None) -> bool:
    """Whether a config file is found at or above `start` (a broken one counts)."""
    from ..lab import find_config

    try:
        find_config(start)
    except ConfigNotFoundError:
        return False
    except RegistryError:
        return True
    return True


def store_project(options: GlobalOptions) -> tuple[Runtime, Registry | None]:
    """`store_runtime`, and the project's registry (None with `--store`, or outside any
    project, where the runs `tether prompt` made are read: no project is imported then)."""
    from ..lab import Runtime, redact_url, sqlite_path

    if options.store is not None:
        cwd = Path.cwd()
        url = absolute_store_url(options.store, cwd)
        try:
            path = sqlite_path(url, cwd)
        except ConfigError:
            path = None  # a malformed URL: open_stores says what is wrong with it
        if path is not None and path != ":memory:" and not Path(path).exists():
            # Opening it would create an empty database, and report no runs instead of a typo.
            raise CommandLineError(
                f"--store {redact_url(options.store)}: there is no SQLite database at {path}",
                hint="A relative path is relative to the current directory.",
            )
        return Runtime(store=url, root=cwd, version=False), None
    if options.config is None and not has_project():
        return user_runtime(), None
    project = load_project(options)
    return project.runtime, project


def open_stores(runtime: Runtime, options: GlobalOptions) -> None:
    """Open the runtime's stores now, so a bad store URL is reported before anything runs.

    Raises:
        ProjectError: the `--store` URL or the project's is wrong (exit 3, as every bad
            store), or the database cannot be opened.
    """
    from ..lab import DEFAULT_STORE, redact_url

    url = runtime.store_url or DEFAULT_STORE
    try:
        _ = runtime.message_store, runtime.run_store, runtime.workflow_store
    except ConfigError as exc:
        if options.store is not None:
            raise ProjectError(
                f"--store {redact_url(options.store)}: {exc}", kind=type(exc).__name__
            ) from exc
        raise ProjectError(
            str(exc),
            kind=type(exc).__name__,
            hint="Fix the store URL in the project's Runtime(store=...) or tether.toml, "
            "or pass --store URL.",
        ) from exc
    except (StoreError, sqlite3.Error, OSError) as exc:
        raise ProjectError(
            f"cannot open the store {redact_url(url)}: {exc}",
            kind=type(exc).__name__,
        ) from exc


async def reach_stores(runtime: Runtime, options: GlobalOptions) -> None:
    """`open_stores`, then one read: a store server connects on first use (PostgreSQL), so
    this is where one that cannot be reached is reported, before anything runs.

    Raises:
        CommandLineError, ProjectError: as `open_stores`; ProjectError when the read fails.
    """
    from ..lab import DEFAULT_STORE, redact_url

    open_stores(runtime, options)
    try:
        await runtime.run_store.get_run("")
    except (StoreError, sqlite3.Error, OSError) as exc:
        url = runtime.store_url or DEFAULT_STORE
        raise ProjectError(
            f"cannot open the store {redact_url(url)}: {exc}", kind=type(exc).__name__
        ) from exc


def run_async(main: Coroutine[Any, Any, T]) -> T:
    """Run a command's coroutine to the end. A KeyboardInterrupt that gets through (Ctrl-C
    outside a run's own handling) ends the command as interrupted. The Ctrl-C handler is
    what it was before, after (a run's `CtrlC` replaces it once pressed)."""
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.getsignal(signal.SIGINT) if main_thread else None
    try:
        return asyncio.run(main)
    except KeyboardInterrupt:
        raise Interrupted("interrupted") from None
    finally:
        if main_thread and signal.getsignal(signal.SIGINT) is not previous:
            signal.signal(signal.SIGINT, previous)
