"""An experiment's version includes the project's uncommitted changes: a rerun after an edit is
a new version, not a resume of the old results."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tether.errors import ExperimentMismatchError
from tether.evals import evaluate
from tether.evals._changes import changes_tag
from tether.lab import Runtime


def test_without_git_every_file_counts_but_stores_and_caches_do_not(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text("x = 1\n")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "cases.jsonl").write_text("{}\n")
    first = changes_tag(tmp_path)
    assert first is not None and first.startswith("changes:") and len(first) == 20
    (tmp_path / ".tether").mkdir()
    (tmp_path / ".tether" / "tether.db").write_bytes(b"runs")
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "app.cpython-311.pyc").write_bytes(b"\0")
    (tmp_path / "steps.log").write_text("a tool's log\n")
    assert changes_tag(tmp_path) == first  # running the project changes nothing
    (tmp_path / "app.py").write_text("x = 2\n")
    assert changes_tag(tmp_path) not in (None, first)


def _git(root: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=root,
        check=True,
        capture_output=True,
    )


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_in_a_git_checkout_only_what_git_status_lists_counts(tmp_path: Path) -> None:
    _git(tmp_path, "init", "-q")
    (tmp_path / "app.py").write_text("x = 1\n")
    (tmp_path / ".gitignore").write_text(".tether/\n")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-qm", "first")
    assert changes_tag(tmp_path) is None  # clean: the commit tag says it all
    (tmp_path / ".tether").mkdir()
    (tmp_path / ".tether" / "tether.db").write_bytes(b"runs")
    assert changes_tag(tmp_path) is None  # ignored files are no change
    (tmp_path / "app.py").write_text("x = 2\n")
    edited = changes_tag(tmp_path)
    assert edited is not None
    (tmp_path / "new.py").write_text("y = 1\n")
    assert changes_tag(tmp_path) not in (None, edited)  # an untracked file too
    (tmp_path / "new.py").unlink()
    assert changes_tag(tmp_path) == edited


async def test_a_rerun_after_an_edit_is_another_version(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text("x = 1\n")
    cases = [{"id": "a", "input": "hello", "evaluators": [{"type": "contains", "value": "hello"}]}]
    lab = Runtime(store="memory", root=tmp_path)
    lab.create_agent(id="echo", model="test")
    first = await evaluate(lab, "echo", cases)
    again = await evaluate(lab, "echo", cases)
    assert again["experiment"] == first["experiment"]  # nothing changed: the same one resumed
    assert any(v.startswith("changes:") for v in first["versions"])
    (tmp_path / "app.py").write_text("x = 2\n")
    edited = await evaluate(lab, "echo", cases)
    assert edited["experiment"] != first["experiment"]  # a new default name
    with pytest.raises(ExperimentMismatchError, match="another target version"):
        await evaluate(lab, "echo", cases, experiment=first["experiment"])
    await lab.aclose()


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_an_untracked_symlink_out_of_the_project_is_a_change_of_the_project(
    tmp_path: Path,
) -> None:
    root, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    root.mkdir()
    elsewhere.mkdir()
    _git(root, "init", "-q")
    (root / "app.py").write_text("x = 1\n")
    _git(root, "add", ".")
    _git(root, "commit", "-qm", "first")
    (root / "venv.py").symlink_to(elsewhere / "target.py")
    (elsewhere / "target.py").write_text("z = 1\n")
    linked = changes_tag(root)
    assert linked is not None  # listed by git status; read through the link
    (elsewhere / "target.py").write_text("z = 2\n")
    assert changes_tag(root) not in (None, linked)
