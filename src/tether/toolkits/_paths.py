"""Paths a model names, opened inside a root and nowhere else.

Every open walks from a descriptor of the root, one component at a time, with ``O_NOFOLLOW``
at each step (``openat`` semantics through ``dir_fd=``): no symbolic link is ever followed, so
a link swapped in between a check and the open cannot lead out (there is no check-then-open by
name). ``..``, absolute paths, backslashes, NUL bytes and over-long names are refused before
anything is opened; device files, FIFOs, sockets and files with more than one hard link (a
link to a file outside the root looks like any other file) are refused after it.

This module uses the standard library only: the grep worker process imports it by file path.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Iterator

__all__ = [
    "MAX_NAME",
    "MAX_PATH",
    "PathRefused",
    "check_regular",
    "glob_regex",
    "open_dir",
    "open_file",
    "open_root",
    "split",
    "stat_kind",
    "walk",
]

MAX_PATH = 4096
"""Longest path accepted, in characters (Linux's PATH_MAX)."""
MAX_NAME = 255
"""Longest component accepted, in bytes of UTF-8 (Linux's NAME_MAX)."""

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOCTTY


class PathRefused(Exception):
    """A path the tools will not open; the message says why, for the model."""


def split(path: object) -> list[str]:
    """The components of a root-relative `path` ('' or '.' is the root itself: no component)."""
    if not isinstance(path, str):
        raise PathRefused(f"path must be a string, got {type(path).__name__}")
    if "\x00" in path:
        raise PathRefused("path contains a NUL byte")
    if len(path) > MAX_PATH:
        raise PathRefused(f"path is longer than {MAX_PATH} characters")
    if "\\" in path:
        raise PathRefused(f"path {path[:200]!r} contains a backslash: separate components with '/'")
    if path.startswith("/") or path.startswith("~"):
        raise PathRefused(
            f"path {path[:200]!r} is absolute: give a path relative to the root "
            "(e.g. 'src/main.py')"
        )
    parts = [p for p in path.split("/") if p not in ("", ".")]
    for part in parts:
        if part == "..":
            raise PathRefused(f"path {path[:200]!r} contains '..': paths stay inside the root")
        if len(part.encode("utf-8", "surrogateescape")) > MAX_NAME:
            raise PathRefused(f"a component of path {path[:60]!r}... is longer than 255 bytes")
    return parts


def open_root(root: str) -> int:
    """A directory descriptor of `root` (the caller's own path, trusted: links in it resolve)."""
    try:
        return os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise PathRefused(f"the root {root!r} cannot be opened: {exc.strerror}") from None


def stat_kind(mode: int) -> str:
    """What a file of `mode` is, in a word."""
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "directory"
    if stat.S_ISLNK(mode):
        return "symlink"
    if stat.S_ISFIFO(mode):
        return "fifo"
    if stat.S_ISSOCK(mode):
        return "socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "device"
    return "other"


def _why_not(dir_fd: int, name: str, shown: str, want: str) -> PathRefused:
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return PathRefused(f"{shown!r} does not exist")
    except OSError as exc:
        return PathRefused(f"{shown!r} cannot be opened: {exc.strerror}")
    kind = stat_kind(st.st_mode)
    if kind == "symlink":
        return PathRefused(f"{shown!r} is a symbolic link, which these tools do not follow")
    return PathRefused(f"{shown!r} is a {kind}, not a {want}")


def open_dir(root_fd: int, parts: list[str], *, create: bool = False) -> int:
    """A descriptor of the directory `parts` names under `root_fd` (made when `create`)."""
    fd = os.dup(root_fd)
    try:
        for i, part in enumerate(parts):
            shown = "/".join(parts[: i + 1])
            try:
                nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise PathRefused(f"{shown!r} does not exist") from None
                try:
                    os.mkdir(part, 0o777, dir_fd=fd)
                except FileExistsError:
                    pass  # made meanwhile: open what is there, still without following links
                try:
                    nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
                except OSError:
                    raise _why_not(fd, part, shown, "directory") from None
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise _why_not(fd, part, shown, "directory") from None
                if exc.errno == errno.ENAMETOOLONG:
                    raise PathRefused(f"{shown[:60]!r}... is too long") from None
                raise PathRefused(f"{shown!r} cannot be opened: {exc.strerror}") from None
            os.close(fd)
            fd = nxt
        return fd
    except BaseException:
        os.close(fd)
        raise


def open_file(dir_fd: int, name: str, shown: str) -> tuple[int, os.stat_result]:
    """A read descriptor of the regular file `name` in `dir_fd`, and its stat."""
    try:
        fd = os.open(name, _FILE_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        raise PathRefused(f"{shown!r} does not exist") from None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EISDIR, errno.ENXIO):
            raise _why_not(dir_fd, name, shown, "regular file") from None
        raise PathRefused(f"{shown!r} cannot be opened: {exc.strerror}") from None
    try:
        st = os.fstat(fd)
        check_regular(st, shown)
        os.set_blocking(fd, True)
        return fd, st
    except BaseException:
        os.close(fd)
        raise


def check_regular(st: os.stat_result, shown: str) -> None:
    """Refuse anything but a regular file with one link."""
    if not stat.S_ISREG(st.st_mode):
        raise PathRefused(f"{shown!r} is a {stat_kind(st.st_mode)}, not a regular file")
    if st.st_nlink > 1:
        raise PathRefused(
            f"{shown!r} has {st.st_nlink} hard links; a hard link may lead outside the root, "
            "so these tools do not open such files"
        )


def walk(dir_fd: int, prefix: str, budget: list[int]) -> Iterator[tuple[str, os.DirEntry[str]]]:
    """Every entry under `dir_fd` as (root-relative path, entry), directories first-seen order,
    never descending through a symbolic link; `budget[0]` entries at most (it counts down)."""
    try:
        entries = sorted(os.scandir(dir_fd), key=lambda e: e.name)
    except OSError:
        return
    for entry in entries:
        if budget[0] <= 0:
            return
        budget[0] -= 1
        rel = f"{prefix}{entry.name}"
        yield rel, entry
        if entry.is_dir(follow_symlinks=False):
            try:
                sub = os.open(entry.name, _DIR_FLAGS, dir_fd=dir_fd)
            except OSError:
                continue  # swapped for a link, or gone: not followed
            try:
                yield from walk(sub, rel + "/", budget)
            finally:
                os.close(sub)


def glob_regex(pattern: str) -> str:
    """A regular expression matching the root-relative paths `pattern` names: ``*`` and ``?``
    within one component, ``**`` across any number of them, ``[...]`` a character class."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "*":
            if pattern.startswith("**", i):
                i += 2
                if pattern.startswith("/", i):
                    i += 1
                    out.append("(?:.*/)?")
                else:
                    out.append(".*")
                continue
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            end = pattern.find("]", i + 2 if pattern.startswith("[!", i) else i + 1)
            if end == -1:
                out.append(r"\[")
            else:
                body = pattern[i + 1 : end]
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = end
        else:
            out.append(re.escape(c))
        i += 1
    return "(?s:" + "".join(out) + r")\Z"
