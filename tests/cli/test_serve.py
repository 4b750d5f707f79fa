"""`tether serve` without the server's dependencies."""

from __future__ import annotations

import sys

import pytest

from tether.cli import EXIT_PROJECT

from .conftest import Project


def test_serve_that_cannot_be_imported_is_a_project_error(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "tether.serve", None)
    result = project.invoke("serve")
    assert result.exit_code == EXIT_PROJECT
    assert result.stderr.startswith(
        "Error: ModuleNotFoundError: the server cannot be loaded: import of tether.serve halted"
    )
    assert "pip install 'tether[lab]'" in result.stderr
