"""The repository's habits hold: the pre-commit hooks run the lint and format checks CI runs, and
the whole-suite run measures coverage against a floor."""

from __future__ import annotations

import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def test_the_pre_commit_hooks_are_the_checks_scripts_test_runs() -> None:
    config = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text(encoding="utf-8"))
    hooks = [hook for repo in config["repos"] for hook in repo["hooks"]]
    entries = {hook["entry"].replace(" --force-exclude", "") for hook in hooks}
    script = (ROOT / "scripts" / "test").read_text(encoding="utf-8")
    for entry in entries:
        assert f"{entry} src tests" in script, entry
    assert entries == {".venv/bin/ruff check", ".venv/bin/ruff format --check"}


def test_the_whole_suite_run_measures_coverage_against_a_floor() -> None:
    script = (ROOT / "scripts" / "test").read_text(encoding="utf-8")
    assert "--cov=tether" in script
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    floor = pyproject["tool"]["coverage"]["report"]["fail_under"]
    assert isinstance(floor, int | float) and 50 <= floor <= 100
    dev = pyproject["project"]["optional-dependencies"]["dev"]
    assert any(req.startswith("pytest-cov") for req in dev)
