"""The public surface of `tether` and of every subpackage: each `__all__` is sorted, complete and
importable, so drift fails here first. A new subpackage is covered without editing this file."""

from __future__ import annotations
import __future__

import importlib
import pkgutil
import types

import pytest

import tether


def _isort_key(name: str) -> tuple[int, str]:
    # constants, then classes, then functions: the order ruff's RUF022 keeps
    kind = 0 if name.isupper() else 1 if name[:1].isupper() else 2
    return kind, name


SUBPACKAGES = sorted(
    info.name
    for info in pkgutil.walk_packages(tether.__path__, prefix="tether.")
    if info.ispkg and not any(part.startswith("_") for part in info.name.split("."))
)
PACKAGES = ["tether", *SUBPACKAGES]


def test_the_subpackages_users_import_from_are_all_covered() -> None:
    for name in ("cli", "lab", "llm", "mcp", "stores", "testing", "ui", "workflows"):
        assert f"tether.{name}" in PACKAGES


@pytest.fixture(params=PACKAGES)
def package(request: pytest.FixtureRequest) -> types.ModuleType:
    return importlib.import_module(request.param)


def test_all_is_sorted_without_repeats(package: types.ModuleType) -> None:
    names = list(package.__all__)
    assert names == sorted(names, key=_isort_key)
    assert len(set(names)) == len(names)


def test_every_exported_name_imports(package: types.ModuleType) -> None:
    for name in package.__all__:
        namespace: dict[str, object] = {}
        exec(f"from {package.__name__} import {name}", namespace)
        assert namespace[name] is getattr(package, name)


def test_every_public_name_is_exported(package: types.ModuleType) -> None:
    for name in package.__all__:
        getattr(package, name)  # a package that imports its names on first use has them now
    public = {
        name
        for name, value in vars(package).items()
        if not name.startswith("_")
        and not isinstance(value, types.ModuleType | __future__._Feature)
    }
    assert public == set(package.__all__)
