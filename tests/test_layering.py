"""DESIGN.md's import direction, checked on the source: imports point down only."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "tether"

UPPER = (
    "tether.lab",
    "tether.evals",
    "tether.stores",
    "tether.cli",
    "tether.ui",
    "tether.serve",
    "tether.web",
)


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(path: Path) -> list[tuple[str, list[str]]]:
    """Each import in `path`, at any depth (type-checking imports included), as the module
    named and the names taken from it (none for ``import m``), relative imports resolved."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found: list[tuple[str, list[str]]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.extend((a.name, []) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            found.append((target, [a.name for a in node.names]))
    return found


def tether_imports(path: Path) -> set[str]:
    """Every tether module `path` imports, at any depth (type-checking imports included)."""
    return {target for target, _ in imported(path) if target.startswith("tether")}


def modules(prefix: str) -> list[Path]:
    root = SRC / prefix if prefix else SRC
    return sorted(root.rglob("*.py")) if root.is_dir() else [root.with_suffix(".py")]


def under(name: str, packages: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in packages)


def test_events_imports_nothing_of_tether() -> None:
    assert tether_imports(SRC / "events.py") == set()


@pytest.mark.parametrize(
    "path",
    [
        p
        for p in modules("")
        # tether.__main__ is the command's entry point: it hands over to tether.cli once it
        # knows the lab extra is installed.
        if not under(module_name(p), (*UPPER, "tether.otel"))
        and module_name(p) not in ("tether", "tether.__main__")
    ],
    ids=lambda p: module_name(p),
)
def test_the_harness_never_imports_lab_stores_cli_or_ui(path: Path) -> None:
    assert not [m for m in tether_imports(path) if under(m, UPPER)]


@pytest.mark.parametrize("path", modules("llm"), ids=lambda p: module_name(p))
def test_llm_knows_nothing_of_agents(path: Path) -> None:
    allowed = (
        "tether.llm",
        "tether.errors",
        "tether.events",
        "tether.session",
        "tether.blobs",  # the media references of messages, and what reads them (data)
        "tether.signals",
        "tether._json",
        "tether._sse",
    )
    assert [m for m in tether_imports(path) if not under(m, allowed)] == []


@pytest.mark.parametrize("path", modules("mcp"), ids=lambda p: module_name(p))
def test_mcp_yields_tools_and_resources_and_nothing_else(path: Path) -> None:
    forbidden = ("tether.agent", "tether.loop", "tether.workflows", *UPPER)
    assert [m for m in tether_imports(path) if under(m, forbidden)] == []


@pytest.mark.parametrize("path", modules("stores"), ids=lambda p: module_name(p))
def test_stores_never_import_lab_cli_or_ui(path: Path) -> None:
    assert [
        m
        for m in tether_imports(path)
        if under(m, ("tether.lab", "tether.evals", "tether.cli", "tether.ui", "tether.serve"))
    ] == []


@pytest.mark.parametrize("path", modules("lab"), ids=lambda p: module_name(p))
def test_the_lab_never_imports_cli_or_ui(path: Path) -> None:
    assert [
        m for m in tether_imports(path) if under(m, ("tether.cli", "tether.ui", "tether.serve"))
    ] == []


@pytest.mark.parametrize("path", modules("lab"), ids=lambda p: module_name(p))
def test_the_lab_never_imports_the_experiments_that_run_on_it(path: Path) -> None:
    # tether.evals runs on a Runtime; `evaluate(lab, ...)` is the one entry point (no cycle).
    assert [m for m in tether_imports(path) if under(m, ("tether.evals",))] == []


@pytest.mark.parametrize("path", modules("ui"), ids=lambda p: module_name(p))
def test_the_ui_never_imports_the_server_or_the_cli(path: Path) -> None:
    # serve mounts the UI's pages; the pages know nothing of the endpoints that start runs.
    assert [m for m in tether_imports(path) if under(m, ("tether.serve", "tether.cli"))] == []


@pytest.mark.parametrize("path", modules("evals"), ids=lambda p: module_name(p))
def test_experiments_never_import_cli_or_ui(path: Path) -> None:
    assert [m for m in tether_imports(path) if under(m, ("tether.cli", "tether.ui"))] == []


@pytest.mark.parametrize("path", modules("web"), ids=lambda p: module_name(p))
def test_the_web_toolkit_knows_no_app(path: Path) -> None:
    # ui and serve are built on it; it knows nothing of runs, stores, pages or the CLI.
    allowed = ("tether.web", "tether.errors")
    assert [m for m in tether_imports(path) if not under(m, allowed)] == []


def _imports_of(path: Path, known: set[str]) -> set[str]:
    """The modules of `known` that `path` imports; ``from pkg import name`` imports the module
    ``pkg.name`` when there is one, else ``pkg``."""
    found: set[str] = set()
    for target, names in imported(path):
        subs = [f"{target}.{n}" for n in names]
        found.update(sub if sub in known else target for sub in subs or [target])
    return (found & known) - {module_name(path)}


def test_no_import_circles() -> None:
    # A circle, even through a function-level or a type-checking import, means modules that
    # cannot be read (or loaded) one without the other; the lower one names what it needs of
    # the upper as a Protocol instead (`handoffs.HandoffAgent`, `history.SummaryAgent`).
    paths = {module_name(p): p for p in modules("")}
    known = set(paths)
    graph = {m: _imports_of(p, known) for m, p in paths.items()}
    circles = []
    for start in graph:
        seen: set[str] = set()
        todo = list(graph[start])
        while todo:
            m = todo.pop()
            if m == start:
                circles.append(start)
                break
            if m not in seen:
                seen.add(m)
                todo.extend(graph[m])
    assert circles == []
