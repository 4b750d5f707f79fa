"""The public surface of tether.workflows and tether.stores: `__all__` is sorted, complete and
importable, so drift fails here first."""

from __future__ import annotations

import types

import pytest

import tether.stores
import tether.workflows


@pytest.mark.parametrize("module", [tether.workflows, tether.stores])
def test_all_is_sorted_and_importable(module: types.ModuleType) -> None:
    names = list(module.__all__)
    assert names == sorted(names, key=lambda n: (not n.isupper(), n))
    for name in names:
        assert getattr(module, name) is not None, name


@pytest.mark.parametrize("module", [tether.workflows, tether.stores])
def test_every_public_name_is_exported(module: types.ModuleType) -> None:
    public = {
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and not isinstance(value, types.ModuleType)
        and name not in ("annotations",)
    }
    assert public == set(module.__all__)


def test_the_issue_names_are_exported() -> None:
    for name in (
        "create_workflow",
        "define_workflow",
        "run_ladder",
        "LadderWorkflow",
        "LadderOutcome",
        "current_step",
    ):
        assert name in tether.workflows.__all__
    for name in ("WorkflowStore", "InMemoryWorkflowStore", "SqliteWorkflowStore", "Migrations"):
        assert name in tether.stores.__all__
