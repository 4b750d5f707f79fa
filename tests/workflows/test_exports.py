"""The names the workflow issue asked for are exported (tests/test_exported_members.py checks
that every `__all__` is sorted, complete and importable)."""

from __future__ import annotations

import tether.stores
import tether.workflows


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
    for name in ("WorkflowStore", "InMemoryWorkflowStore", "SqliteWorkflowStore"):
        assert name in tether.stores.__all__


def test_sqlite_plumbing_is_named_for_sqlite() -> None:
    # SQLite's connection helper, transactions and migrations are not backend-neutral: they are
    # reached through the module that says so, not the package's top level.
    import tether.stores.sqlite

    for name in ("connect", "transaction", "SqliteMigrations"):
        assert name not in tether.stores.__all__
        assert name in tether.stores.sqlite.__all__
