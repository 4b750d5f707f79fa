"""The project registry: which runtime, agents and workflows a project has, and where it stores.

Declared in `tether.toml`:

```toml
runtime = "app.lab:lab"
agents = ["app.agents:researcher", "app.agents:editor"]
workflows = ["app.workflows:literature_review"]
store = "sqlite:///.tether/tether.db"

[prices."openai:my-private-model"]     # models genai-prices does not know (USD per 1M tokens)
input_mtok = 0.5
output_mtok = 1.5
```

or the same keys under `[tool.tether]` in `pyproject.toml`. Each entry is `module:attribute`
(the attribute may be dotted); modules are imported with the project directory on `sys.path`.
"""

from __future__ import annotations

import importlib
import sys
import sysconfig
import tomllib
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Any, Protocol, TypeVar

from ..errors import ConfigError, ConfigNotFoundError, RegistryError
from ..workflows import Workflow
from ._agent import LabAgent
from ._runtime import Runtime

__all__ = ["Registry", "find_config", "load_registry"]

_KEYS = ("runtime", "agents", "workflows", "store", "prices")


@dataclass(slots=True)
class Registry:
    """What a project declares, loaded."""

    runtime: Runtime
    agents: dict[str, LabAgent[Any]] = field(default_factory=dict)
    workflows: dict[str, Workflow[Any, Any]] = field(default_factory=dict)
    root: Path = field(default_factory=Path.cwd)
    """The directory of the config file (modules import relative to it)."""
    config_path: Path | None = None
    """The tether.toml or pyproject.toml the registry came from."""

    def agent(self, id: str) -> LabAgent[Any]:
        try:
            return self.agents[id]
        except KeyError:
            known = ", ".join(sorted(self.agents)) or "none"
            raise RegistryError(f"no agent {id!r} in the registry (known: {known})") from None

    def workflow(self, id: str) -> Workflow[Any, Any]:
        try:
            return self.workflows[id]
        except KeyError:
            known = ", ".join(sorted(self.workflows)) or "none"
            raise RegistryError(f"no workflow {id!r} in the registry (known: {known})") from None


def find_config(start: str | PathLike[str] | None = None) -> tuple[Path, dict[str, Any]]:
    """The nearest `tether.toml`, or `pyproject.toml` with a `[tool.tether]` table, at or above
    `start` (default: the current directory), and its registry table.

    Raises:
        ConfigNotFoundError: none found (a RegistryError).
        RegistryError: the file does not parse.
    """
    here = Path(start) if start is not None else Path.cwd()
    if here.is_file():
        return here, _read(here)
    here = here.resolve()
    for directory in (here, *here.parents):
        candidate = directory / "tether.toml"
        if candidate.is_file():
            return candidate, _read(candidate)
        pyproject = directory / "pyproject.toml"
        if pyproject.is_file():
            data = _parse(pyproject)
            table = data.get("tool", {}).get("tether")
            if isinstance(table, dict):
                return pyproject, _check_keys(pyproject, table)
    raise ConfigNotFoundError(
        f"no tether.toml (or [tool.tether] in pyproject.toml) at or above {here}; "
        "create one listing runtime, agents and workflows"
    )


def _parse(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise RegistryError(f"cannot read {path}: {exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise RegistryError(f"{path} is not valid TOML: {exc}") from exc


def _read(path: Path) -> dict[str, Any]:
    data = _parse(path)
    if path.name == "pyproject.toml":
        table = data.get("tool", {}).get("tether")
        if not isinstance(table, dict):
            raise RegistryError(f"{path} has no [tool.tether] table")
        data = table
    return _check_keys(path, data)


def _check_keys(path: Path, table: dict[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(table) - set(_KEYS))
    if unknown:
        raise RegistryError(f"{path}: unknown registry key(s) {unknown}; known: {list(_KEYS)}")
    for key in ("runtime", "store"):
        if key in table and not isinstance(table[key], str):
            raise RegistryError(f"{path}: {key} must be a string")
    for key in ("agents", "workflows"):
        value = table.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise RegistryError(f"{path}: {key} must be a list of 'module:attribute' strings")
    return table


_TETHER = str(Path(__file__).resolve().parents[1])
"""The tether package's directory: its frames are not the user's."""


def user_line(exc: BaseException) -> str:
    """ " at FILE, line N" for the line of the user's code `exc` came from: a SyntaxError's own
    place, else the innermost frame that is neither tether's nor the import machinery's nor an
    installed package's (empty when there is none)."""
    if isinstance(exc, SyntaxError) and exc.filename and exc.lineno:
        return f" at {_shown(exc.filename)}, line {exc.lineno}"
    found = ""
    for frame, lineno in traceback.walk_tb(exc.__traceback__):
        name = frame.f_code.co_filename
        if (
            name.startswith("<")
            or name.startswith(_TETHER)
            or "site-packages" in name
            or name.startswith(sysconfig.get_paths()["stdlib"])
        ):
            continue
        found = f" at {_shown(name)}, line {lineno}"
    return found


def _shown(filename: str) -> str:
    """`filename` relative to the current directory when it is under it."""
    try:
        return str(Path(filename).resolve().relative_to(Path.cwd()))
    except ValueError:
        return filename


class _Identified(Protocol):
    @property
    def id(self) -> str: ...


_T = TypeVar("_T", bound=_Identified)


def _imported(
    table: dict[str, Any], key: str, kind: type[_T], noun: str
) -> Iterator[tuple[str, str, _T]]:
    """(where, entry, object) for each entry of the registry's `key` list ("agents"): imported,
    checked to be a `kind` (`noun`, "an agent", is what the error calls one), its id not seen
    before in the list."""
    seen: dict[str, str] = {}
    for i, entry in enumerate(table.get(key, [])):
        where = f"{key}[{i}]"
        value = _import(entry, where)
        if not isinstance(value, kind):
            raise RegistryError(
                f"{where} = {entry!r} is a {type(value).__name__}, not {noun} "
                f"(made with runtime.create_{key[:-1]})"
            )
        if value.id in seen:
            raise RegistryError(
                f"duplicate {key[:-1]} id {value.id!r}: {seen[value.id]} and {where} = {entry!r}"
            )
        seen[value.id] = f"{where} = {entry!r}"
        yield where, entry, value


def _import(entry: str, where: str) -> Any:
    module_name, sep, attr_path = entry.partition(":")
    if not sep or not module_name or not attr_path:
        raise RegistryError(
            f"{where} = {entry!r}: write 'module:attribute', e.g. 'app.agents:researcher'"
        )
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if missing == module_name or module_name.startswith(missing + "."):
            raise RegistryError(
                f"{where} = {entry!r}: module {module_name!r} not found "
                f"(is it under the project directory or installed?)"
            ) from exc
        raise RegistryError(
            f"{where} = {entry!r}: importing {module_name!r} failed{user_line(exc)}: {exc}"
        ) from exc
    except Exception as exc:
        raise RegistryError(
            f"{where} = {entry!r}: importing {module_name!r} raised {type(exc).__name__}"
            f"{user_line(exc)}: {exc}"
        ) from exc
    value: Any = module
    for part in attr_path.split("."):
        try:
            value = getattr(value, part)
        except AttributeError:
            raise RegistryError(
                f"{where} = {entry!r}: module {module_name!r} has no attribute {attr_path!r}"
            ) from None
    return value


def load_registry(start: str | PathLike[str] | None = None) -> Registry:
    """Find the project's registry (see `find_config`), import what it lists and check it.

    Raises:
        RegistryError: a missing file, module or attribute, an entry of the wrong kind, a
            duplicate id, or agents that belong to different runtimes.
    """
    path, table = find_config(start)
    root = path.parent.resolve()
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    runtime: Runtime | None = None
    if "runtime" in table:
        runtime = _import(table["runtime"], "runtime")
        if not isinstance(runtime, Runtime):
            raise RegistryError(
                f"runtime = {table['runtime']!r} is a {type(runtime).__name__}, "
                "not a tether.lab.Runtime"
            )
    agents: dict[str, LabAgent[Any]] = {}
    for where, entry, agent in _imported(table, "agents", LabAgent, "an agent"):
        agents[agent.id] = agent
        owner = agent.runtime
        if runtime is None and isinstance(owner, Runtime):
            runtime = owner
        elif owner is not runtime:
            raise RegistryError(
                f"{where} = {entry!r} belongs to a different runtime than "
                + ("the registry's runtime" if "runtime" in table else "the agents before it")
            )
    workflows: dict[str, Workflow[Any, Any]] = {
        workflow.id: workflow
        for _, _, workflow in _imported(table, "workflows", Workflow, "a workflow")
    }
    if runtime is None:
        runtime = Runtime(root=root)
    runtime.adopt_project(root, table.get("store"))
    if "prices" in table:
        # The project's prices, under any the runtime was given in code.
        from ..pricing import check_overrides  # the lab extra's genai-prices

        try:
            project_prices = check_overrides(table["prices"], f"{path}: prices")
        except ConfigError as exc:
            raise RegistryError(str(exc)) from exc
        runtime.prices = {**project_prices, **runtime.prices}
    return Registry(runtime, agents, workflows, root, path)
