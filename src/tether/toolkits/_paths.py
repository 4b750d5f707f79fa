"""Paths a model names, opened inside a root and nowhere else.

Every open walks from a descriptor of the root, one component at a time, with ``O_NOFOLLOW``
at each step (``openat`` semantics through ``dir_fd=``), holding a descriptor of each directory
on the way. The kernel never follows a symbolic link: when the walk meets one it reads it
(``readlinkat``) and walks its target itself, the way ``openat2(RESOLVE_BENEATH)`` does —
``..`` goes back to a directory the walk holds, never above the root, and an absolute target
is refused. So a link swapped in between a check and the open cannot lead out (there is no
check-then-open by name). Absolute paths, backslashes, NUL bytes and over-long names are
refused before anything is opened; device files, FIFOs, sockets and files with more than one
hard link (a link to a file outside the root looks like any other file) are refused after it.

This module uses the standard library only: the grep worker process imports it by file path.
"""

from __future__ import annotations

import contextlib
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
    "locate",
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
MAX_LINKS = 40
"""Symbolic links one path may go through (Linux's limit)."""

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


class _Walk:
    """The directories a walk holds, from the root down; `..` pops, never the root."""

    __slots__ = ("links", "shown", "stack")

    def __init__(self, root_fd: int, shown: str) -> None:
        self.stack = [os.dup(root_fd)]
        self.shown = shown
        self.links = 0

    @property
    def fd(self) -> int:
        return self.stack[-1]

    def up(self) -> None:
        if len(self.stack) == 1:
            raise PathRefused(f"{self.shown!r} leads outside the root")
        os.close(self.stack.pop())

    def link(self, name: str, todo: list[str]) -> None:
        """Put the target of the link `name` in front of the components still to walk."""
        self.links += 1
        if self.links > MAX_LINKS:
            raise PathRefused(f"{self.shown!r} goes through more than {MAX_LINKS} symbolic links")
        try:
            target = os.readlink(name, dir_fd=self.fd)
        except OSError as exc:
            raise PathRefused(f"{self.shown!r} cannot be resolved: {exc.strerror}") from None
        if target.startswith("/") or "\x00" in target:
            raise PathRefused(
                f"{self.shown!r} goes through a symbolic link to an absolute path ({target[:200]}),"
                " which these tools do not follow: links are followed only inside the root"
            )
        todo[:0] = [p for p in target.split("/") if p not in ("", ".")]

    def enter(self, name: str, create: bool, todo: list[str]) -> None:
        """Walk into the directory `name` (or the link there)."""
        try:
            nxt = os.open(name, _DIR_FLAGS, dir_fd=self.fd)
        except FileNotFoundError:
            if not create:
                raise PathRefused(f"{self.shown!r} does not exist") from None
            with contextlib.suppress(FileExistsError):  # made meanwhile: open what is there
                os.mkdir(name, 0o777, dir_fd=self.fd)
            return self.enter(name, False, todo)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR) and _is_link(self.fd, name):
                return self.link(name, todo)
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise _why_not(self.fd, name, self.shown, "directory") from None
            if exc.errno == errno.ENAMETOOLONG:
                raise PathRefused(f"{self.shown[:60]!r}... is too long") from None
            raise PathRefused(f"{self.shown!r} cannot be opened: {exc.strerror}") from None
        self.stack.append(nxt)

    def close(self, keep: int | None = None) -> None:
        for fd in self.stack:
            if fd != keep:
                os.close(fd)
        self.stack = []


def _is_link(dir_fd: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _walk(
    root_fd: int, parts: list[str], shown: str, *, final: bool, follow: bool, create: bool
) -> tuple[int, str | None]:
    """Walk `parts` from the root. With `final`, the last component is not entered: returns a
    descriptor of its directory and its name (a link there followed when `follow`); else a
    descriptor of the directory the whole path names, and None."""
    walk = _Walk(root_fd, shown)
    todo = list(parts)
    try:
        while todo:
            part = todo.pop(0)
            if part == "..":
                walk.up()
                continue
            if final and not todo:
                if follow and _is_link(walk.fd, part):
                    walk.link(part, todo)
                    if todo:
                        continue
                    raise PathRefused(f"{shown!r} is a symbolic link to the root itself")
                fd = walk.fd
                walk.close(keep=fd)
                return fd, part
            walk.enter(part, create, todo)
        if final:
            raise PathRefused(f"{shown!r} names a directory, not a file")
        fd = walk.fd
        walk.close(keep=fd)
        return fd, None
    except BaseException:
        walk.close()
        raise


def open_dir(root_fd: int, parts: list[str], *, create: bool = False) -> int:
    """A descriptor of the directory `parts` names under `root_fd` (made when `create`)."""
    fd, _ = _walk(root_fd, parts, "/".join(parts) or ".", final=False, follow=True, create=create)
    return fd


def locate(
    root_fd: int, parts: list[str], *, follow: bool = True, create: bool = False
) -> tuple[int, str]:
    """(a descriptor of the directory holding the file `parts` names, the file's name there),
    a link in the last place followed when `follow`, missing directories made when `create`."""
    fd, name = _walk(root_fd, parts, "/".join(parts), final=True, follow=follow, create=create)
    assert name is not None
    return fd, name


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


def walk(
    dir_fd: int, prefix: str, budget: list[int]
) -> Iterator[tuple[str, os.DirEntry[str], int]]:
    """Every entry under `dir_fd` as (root-relative path, entry, the descriptor of the directory
    it is in: open until the next entry), in sorted order, a directory's entries right after it,
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
        yield rel, entry, dir_fd
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
