"""The lab's modules import downwards only, and the lab, the CLI and the UI reach nothing private
of one another: no import cycle (type-only imports included), no `tether.lab._module` imported
from outside the lab, no `other._name` read."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "tether"

# Private by name, public by contract: namedtuple's `_replace`, `os._exit`.
PUBLIC_UNDERSCORE = {"_replace", "_exit", "_asdict", "_fields"}


def lab_imports(path: Path) -> set[str]:
    """The lab modules (`_agent`, `_episode`, ...) `path` imports, at any depth."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            found.add(node.module.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.level == 1:
            found.update(a.name for a in node.names)
    return {m for m in found if (SRC / "lab" / f"{m}.py").exists()}


def test_the_lab_modules_form_no_import_cycle() -> None:
    graph = {p.stem: lab_imports(p) for p in (SRC / "lab").glob("_*.py")}
    done: set[str] = set()

    def visit(name: str, path: list[str]) -> None:
        if name in path:
            cycle = " -> ".join([*path[path.index(name) :], name])
            pytest.fail(f"the lab modules import in a circle: {cycle}")
        if name in done:
            return
        for target in sorted(graph.get(name, ())):
            visit(target, [*path, name])
        done.add(name)

    for name in sorted(graph):
        visit(name, [])


@pytest.mark.parametrize(
    "path",
    sorted([*(SRC / "cli").glob("*.py"), *(SRC / "ui").glob("*.py")]),
    ids=lambda p: f"{p.parent.name}/{p.name}",
)
def test_the_cli_and_the_ui_import_only_the_public_lab(path: Path) -> None:
    private = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 2:
            parts = node.module.split(".")
            if parts[0] == "lab" and len(parts) > 1:
                private.append(node.module)
    assert private == []


@pytest.mark.parametrize(
    "path",
    sorted([*(SRC / "lab").glob("*.py"), *(SRC / "cli").glob("*.py"), *(SRC / "ui").glob("*.py")]),
    ids=lambda p: f"{p.parent.name}/{p.name}",
)
def test_no_module_reads_another_modules_private_names(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    # The module's own private names: what its classes set on `self` and define.
    own = {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id in ("self", "cls")
    } | {
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    }
    reads = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
            and node.attr not in PUBLIC_UNDERSCORE
            and node.attr not in own
        ):
            reads.append(f"line {node.lineno}: .{node.attr}")
    assert reads == []
