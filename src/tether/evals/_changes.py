"""The project's uncommitted changes, as one short hash in an experiment's version.

A rerun of an experiment after an edit must be a new version, not a silent resume of the old
results. In a git checkout the hash covers what `git status` lists (modified, added, deleted
and untracked files, by content); a clean checkout has none (its commit says it all). Without
git, every file of the project is "uncommitted": the hash covers them all.

Only source files count (`SOURCE_SUFFIXES`: code, config, prompt templates): a log or an
output file the agent's tools write while the experiment runs must not make the rerun that
resumes it another version.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path

__all__ = ["SKIPPED_DIRS", "SOURCE_SUFFIXES", "changes_tag"]

SKIPPED_DIRS = frozenset(
    {".git", ".tether", "__pycache__", ".venv", "venv", "node_modules", ".mypy_cache",
     ".pytest_cache", ".ruff_cache", "dist", "build"}
)  # fmt: skip
"""Directories that hold no source (stores, caches, environments) and are never hashed."""

SOURCE_SUFFIXES = frozenset(
    {".py", ".pyi", ".toml", ".cfg", ".ini", ".md", ".txt", ".jinja", ".jinja2", ".j2",
     ".prompt", ".yaml", ".yml"}
)  # fmt: skip
"""The files whose changes make another version."""

_MAX_FILES = 5000
_MAX_BYTES = 64 * 1024 * 1024
"""Past these, the rest of a project without git is left out of the hash (a data directory
does not make every experiment read gigabytes)."""


def _git_changes(root: Path) -> list[str] | None:
    """The paths `git status` lists under `root` (relative to it), [] for a clean checkout,
    or None when `root` is in no git checkout (or git is not installed)."""
    git = shutil.which("git")
    if git is None:
        return None
    try:
        done = subprocess.run(
            [git, "status", "--porcelain=v1", "-z", "--untracked-files=all", "--", "."],
            cwd=root,
            capture_output=True,
            timeout=30,
            env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"},  # never take the index lock
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    top = subprocess.run(
        [git, "rev-parse", "--show-toplevel"], cwd=root, capture_output=True, timeout=30
    )
    base = Path(top.stdout.decode().strip()) if top.returncode == 0 else root
    paths: list[str] = []
    entries = done.stdout.decode("utf-8", "surrogateescape").split("\0")
    skip = False
    for entry in entries:
        if skip:  # the source path of a rename
            skip = False
            continue
        if len(entry) < 4:
            continue
        status, path = entry[:2], entry[3:]
        skip = "R" in status or "C" in status
        # The directory resolved, not the file: an untracked symlink (a `.venv` pointing
        # elsewhere) is a path of the project, wherever it points.
        where = (base / path).parent.resolve() / Path(path).name
        paths.append(str(where.relative_to(root.resolve())))
    return sorted(paths)


def _all_files(root: Path) -> Iterable[str]:
    for directory, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS and not d.endswith(".egg-info"))
        for name in sorted(files):
            yield str((Path(directory) / name).relative_to(root))


def changes_tag(root: str | os.PathLike[str]) -> str | None:
    """``changes:HASH`` (12 hex digits) for the uncommitted changes of the project at `root`,
    or None when a git checkout has none."""
    base = Path(root)
    changed = _git_changes(base)
    every = _all_files(base) if changed is None else changed
    paths = [p for p in every if Path(p).suffix.lower() in SOURCE_SUFFIXES]
    if changed is not None and not paths:
        return None
    digest = hashlib.sha256()
    size = 0
    for files, rel in enumerate(paths):
        if files >= _MAX_FILES or size >= _MAX_BYTES:
            break
        digest.update(rel.encode("utf-8", "surrogateescape") + b"\0")
        try:
            data = (base / rel).read_bytes()
        except OSError:
            data = b"\0(deleted)"  # gone from the work tree: still a change
        size += len(data)
        digest.update(hashlib.sha256(data).digest())
    return f"changes:{digest.hexdigest()[:12]}"
