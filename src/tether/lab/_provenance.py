"""Automatic `version:` and `commit:` run tags: which code produced a run.

Both are read from files, once per runtime: the version from the nearest `pyproject.toml`
(`[project].version`; where it is `dynamic`, the installed distribution's version), the commit
from the nearest git checkout (`HEAD`, a loose ref or `packed-refs`; worktrees and submodules
through their `.git` file). Nothing is executed.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable, Sequence
from pathlib import Path

__all__ = ["detect_commit", "detect_version", "merge_tags"]

_SHA = re.compile(r"^[0-9a-f]{40}(?:[0-9a-f]{24})?$")


def _upwards(start: Path) -> Iterable[Path]:
    start = start.resolve()
    yield start
    yield from start.parents


def detect_version(root: Path) -> str | None:
    """`[project].version` of the nearest pyproject.toml at or above `root`, or the installed
    distribution's version where the project declares its version dynamic."""
    for directory in _upwards(root):
        candidate = directory / "pyproject.toml"
        if candidate.is_file():
            try:
                data = tomllib.loads(candidate.read_text(encoding="utf-8"))
            except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
                return None
            project = data.get("project", {})
            version = project.get("version")
            if isinstance(version, str) and version:
                return version
            dynamic = project.get("dynamic")
            name = project.get("name")
            if isinstance(dynamic, list) and "version" in dynamic and isinstance(name, str):
                return _installed_version(name)
            return None
    return None


def _installed_version(name: str) -> str | None:
    """The version of the installed distribution `name` (a version the build computes, from
    a file or a VCS tag, is only known there); None when it is not installed."""
    from importlib import metadata

    try:
        return metadata.version(name)
    except (metadata.PackageNotFoundError, ValueError):
        return None


def _git_dir(root: Path) -> Path | None:
    for directory in _upwards(root):
        dot_git = directory / ".git"
        if dot_git.is_dir():
            return dot_git
        if dot_git.is_file():  # a worktree or submodule: "gitdir: <path>"
            try:
                text = dot_git.read_text(encoding="utf-8").strip()
            except OSError:
                return None
            if text.startswith("gitdir:"):
                target = Path(text[len("gitdir:") :].strip())
                return target if target.is_absolute() else (directory / target).resolve()
            return None
    return None


def _read_ref(git_dir: Path, common: Path, ref: str) -> str | None:
    for base in (git_dir, common):
        loose = base / ref
        if loose.is_file():
            try:
                value = loose.read_text(encoding="utf-8").strip()
            except OSError:
                return None
            return value if _SHA.match(value) else None
    packed = common / "packed-refs"
    if packed.is_file():
        try:
            lines = packed.read_text(encoding="utf-8").splitlines()
        except OSError:
            return None
        for line in lines:
            sha, _, name = line.partition(" ")
            if name.strip() == ref and _SHA.match(sha):
                return sha
    return None


def detect_commit(root: Path) -> str | None:
    """The commit checked out in the nearest git repository at or above `root`."""
    git_dir = _git_dir(root)
    if git_dir is None:
        return None
    common = git_dir
    commondir = git_dir / "commondir"
    if commondir.is_file():
        try:
            rel = commondir.read_text(encoding="utf-8").strip()
        except OSError:
            rel = ""
        if rel:
            common = (git_dir / rel).resolve()
    try:
        head = (git_dir / "HEAD").read_text(encoding="utf-8").strip()
    except OSError:
        return None
    if head.startswith("ref:"):
        return _read_ref(git_dir, common, head[len("ref:") :].strip())
    return head if _SHA.match(head) else None


def merge_tags(tags: Sequence[str] | None, automatic: Sequence[str]) -> list[str]:
    """The caller's tags, then each automatic tag whose prefix (`version:`, `commit:`) the
    caller did not already use. Duplicates are dropped, order kept."""
    own = list(dict.fromkeys(tags or ()))
    used = {t.split(":", 1)[0] + ":" for t in own if ":" in t}
    extra = [t for t in automatic if t.split(":", 1)[0] + ":" not in used]
    return own + [t for t in extra if t not in own]
