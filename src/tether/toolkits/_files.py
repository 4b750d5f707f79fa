"""`file_tools`: read, list, glob and grep files under a root (and write, edit, delete them).

Every path goes through `_paths`: resolved inside the root by a descriptor walk that lets the
kernel follow no symbolic link (it walks a link's target itself, beneath the root). Writes are
atomic (a new file in the same directory, renamed over the old one: a rename replaces the
directory entry, so a hard link at the target is not written through; a symbolic link inside
the root is resolved first, and its target replaced).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import secrets
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..context import RunContext
from ..errors import ConfigError, ToolError
from ..tools import Tool, define_tool
from . import _paths
from ._paths import PathRefused
from ._toolkit import PathSpec, Toolkit, from_run, trace

__all__ = ["file_tools"]

_WORKER = str(Path(__file__).with_name("_grep_worker.py"))


class _Files:
    """The shared state of one `file_tools` call: the root and the limits."""

    def __init__(
        self,
        root: PathSpec,
        max_bytes: int,
        max_entries: int,
        grep_timeout: float,
    ) -> None:
        self.root = root
        self.max_bytes = max_bytes
        self.max_entries = max_entries
        self.grep_timeout = grep_timeout

    @contextlib.contextmanager
    def opened_root(self, ctx: RunContext) -> Iterator[int]:
        root: Any = from_run(self.root, ctx)
        try:
            path = os.fspath(root)
        except TypeError:
            raise ToolError(f"the file tools' root is not a path: {root!r:.80}") from None
        if not isinstance(path, str):
            raise ToolError("the file tools' root must be a str path")
        try:
            fd = _paths.open_root(os.path.realpath(path))
        except PathRefused as exc:
            raise ToolError(str(exc)) from None
        try:
            yield fd
        finally:
            os.close(fd)

    # -- reading ---------------------------------------------------------------------------

    def read(self, root_fd: int, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        path = args["path"]
        parts = _nonempty(path)
        start = args.get("start_line", 1)
        end = args.get("end_line")
        if start < 1 or (end is not None and end < start):
            raise PathRefused("start_line must be 1 or more, and end_line at least start_line")
        dir_fd, name = _paths.locate(root_fd, parts)
        try:
            fd, st = _paths.open_file(dir_fd, name, path)
        finally:
            os.close(dir_fd)
        with os.fdopen(fd, "rb") as f:
            head = f.read(8192)
            if b"\x00" in head or not _is_text(head):
                raise PathRefused(
                    f"{path!r} is a binary file ({st.st_size} bytes): read_file shows text only"
                )
            f.seek(0)
            lines: list[bytes] = []
            size = 0
            number = 0  # lines seen (a long line arrives in pieces)
            shown_end = start - 1
            at_line_start = True
            scanned = 0
            cut = False
            while piece := f.readline(65536):  # bounded: a line of gigabytes is not one read
                scanned += len(piece)
                if at_line_start:
                    number += 1
                at_line_start = piece.endswith(b"\n")
                if number < start:
                    if scanned > self.max_bytes * 256:
                        raise PathRefused(
                            f"line {start} of {path!r} is beyond its first {scanned} bytes; "
                            "use grep to find what you need"
                        )
                    continue
                if end is not None and number > end:
                    number -= 1
                    break
                if size + len(piece) > self.max_bytes:
                    lines.append(piece[: self.max_bytes - size])
                    shown_end = number
                    cut = True
                    break
                lines.append(piece)
                shown_end = number
                size += len(piece)
        text = b"".join(lines).decode("utf-8", "replace")
        data = {"path": path, "bytes": len(text.encode()), "size": st.st_size}
        if cut:
            text += (
                f"\n[cut at {self.max_bytes} bytes, in line {shown_end}; read on with "
                f"start_line={shown_end}]"
            )
            data["truncated"] = True
        elif start > 1 or end is not None:
            if not lines:
                text = f"[{path} has {number} lines; none from line {start}]"
            else:
                text += (
                    "" if text.endswith("\n") else "\n"
                ) + f"[lines {start}-{shown_end} of {path}]"
        return text, data

    def list_dir(self, root_fd: int, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        path = args.get("path", ".")
        fd = _paths.open_dir(root_fd, _paths.split(path))
        try:
            rows: list[str] = []
            total = 0
            for entry in sorted(os.scandir(fd), key=lambda e: e.name):
                total += 1
                if len(rows) >= self.max_entries:
                    continue
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                kind = _paths.stat_kind(st.st_mode)
                if kind == "directory":
                    rows.append(f"{entry.name}/")
                elif kind == "file":
                    rows.append(f"{entry.name}\t{st.st_size} bytes")
                else:
                    rows.append(f"{entry.name}\t({kind})")
        finally:
            os.close(fd)
        if total > len(rows):
            rows.append(f"[{total - len(rows)} more entries not shown]")
        return "\n".join(rows) if rows else "(empty directory)", {"path": path, "entries": total}

    def glob(self, root_fd: int, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        pattern = args["pattern"]
        _no_parent(pattern)  # the pattern obeys the path rules too
        if not pattern.strip("/"):
            raise PathRefused("the pattern is empty")
        base = args.get("path", ".")
        parts = _paths.split(base)
        regex = re.compile(_paths.glob_regex(pattern.strip("/")))
        prefix = "/".join(parts) + "/" if parts else ""
        fd = _paths.open_dir(root_fd, parts)
        budget = [self.max_entries * 20]
        found: list[str] = []
        try:
            for rel, entry, _ in _paths.walk(fd, prefix, budget):
                if regex.match(rel[len(prefix) :]):
                    found.append(rel + ("/" if entry.is_dir(follow_symlinks=False) else ""))
                    if len(found) >= self.max_entries:
                        break
        finally:
            os.close(fd)
        text = "\n".join(found) if found else f"no path matches {pattern!r}"
        if len(found) >= self.max_entries or budget[0] <= 0:
            text += f"\n[stopped after {len(found)} matches / {self.max_entries * 20} entries]"
        return text, {"pattern": pattern, "path": base, "matches": len(found)}

    async def grep(self, root_fd: int, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        pattern = args["pattern"]
        try:
            re.compile(pattern)
        except re.error as exc:
            raise PathRefused(f"the pattern is not a valid regular expression: {exc}") from None
        path = args.get("path", ".")
        parts = _paths.split(path)
        only = args.get("glob")
        if only is not None:
            _no_parent(only)
        is_file = False
        if parts:
            dir_fd, name = _paths.locate(root_fd, parts)
            try:
                kind = _existing_kind(dir_fd, name, path)
                if kind not in ("file", "directory"):
                    raise PathRefused(f"{path!r} is a {kind}, not a file or directory")
                is_file = kind == "file"
            finally:
                os.close(dir_fd)
        job = {
            "fd": root_fd,
            "parts": parts,
            "is_file": is_file,
            "pattern": pattern,
            "ignore_case": bool(args.get("ignore_case", False)),
            "glob": _paths.glob_regex(only) if only else None,
            "max_matches": self.max_entries,
            "max_line": 500,
            "max_file_bytes": 8 * self.max_bytes,
        }
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-E",
            "-s",
            _WORKER,
            json.dumps(job),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            pass_fds=(root_fd,),
        )
        assert proc.stdout is not None
        rows: list[str] = []
        summary: dict[str, Any] = {}
        timed_out = False
        size = 0
        try:
            async with asyncio.timeout(self.grep_timeout):
                async for raw in proc.stdout:
                    item = json.loads(raw)
                    if "done" in item:
                        summary = item["done"]
                    elif "refused" in item:
                        raise PathRefused(item["refused"])
                    elif size < self.max_bytes:
                        row = f"{item['path']}:{item['line']}: {item['text']}"
                        rows.append(row)
                        size += len(row) + 1
                await proc.wait()
        except TimeoutError:
            timed_out = True
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        if proc.returncode and not timed_out and not summary:
            err = b"" if proc.stderr is None else await proc.stderr.read()
            raise PathRefused(f"grep failed: {err.decode(errors='replace')[-300:]}")
        text = "\n".join(rows) if rows else f"no line matches {pattern!r}"
        if timed_out:
            text += (
                f"\n[grep stopped after {self.grep_timeout:g}s: the pattern is too slow or the "
                "tree too big; narrow the path or simplify the pattern]"
            )
        elif summary.get("limited") or size >= self.max_bytes:
            text += f"\n[stopped after {len(rows)} matches]"
        if summary.get("skipped"):
            text += (
                f"\n[{summary['skipped']} files not searched: binary, larger than "
                f"{8 * self.max_bytes} bytes, linked or unreadable]"
            )
        data = {"pattern": pattern, "path": path, "matches": len(rows), "timed_out": timed_out}
        return text, data

    # -- writing ---------------------------------------------------------------------------

    def write(self, root_fd: int, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        path, content = args["path"], args["content"]
        data = content.encode("utf-8")
        if len(data) > self.max_bytes:
            raise PathRefused(
                f"the content is {len(data)} bytes; write_file takes {self.max_bytes} at most"
            )
        parts = _nonempty(path)
        dir_fd, name = _paths.locate(root_fd, parts, create=True)  # through a link: its target
        try:
            mode = _existing_mode(dir_fd, name, path)
            _replace(dir_fd, name, data, 0o644 if mode is None else mode)
        finally:
            os.close(dir_fd)
        verb = "created" if mode is None else "replaced"
        return f"{verb} {path} ({len(data)} bytes)", {"path": path, "bytes": len(data)}

    def edit(self, root_fd: int, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        path, old, new = args["path"], args["old_string"], args["new_string"]
        if not old:
            raise PathRefused("old_string is empty: give the exact text to replace")
        parts = _nonempty(path)
        dir_fd, name = _paths.locate(root_fd, parts)
        try:
            fd, st = _paths.open_file(dir_fd, name, path)
            with os.fdopen(fd, "rb") as f:
                raw = f.read(self.max_bytes + 1)
            if len(raw) > self.max_bytes:
                raise PathRefused(f"{path!r} is larger than {self.max_bytes} bytes")
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise PathRefused(f"{path!r} is not UTF-8 text") from None
            count = text.count(old)
            if count == 0:
                raise PathRefused(
                    f"old_string was not found in {path!r}; read the file and copy the text "
                    "exactly (whitespace included)"
                )
            if count > 1:
                raise PathRefused(
                    f"old_string appears {count} times in {path!r}; include more of the "
                    "surrounding text so it matches exactly once"
                )
            updated = text.replace(old, new, 1).encode("utf-8")
            if len(updated) > self.max_bytes:
                raise PathRefused(f"the edited file would exceed {self.max_bytes} bytes")
            _replace(dir_fd, name, updated, stat.S_IMODE(st.st_mode))
        finally:
            os.close(dir_fd)
        line = text[: text.index(old)].count("\n") + 1
        return f"edited {path} at line {line}", {"path": path, "bytes": len(updated)}

    def delete(self, root_fd: int, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        path = args["path"]
        parts = _nonempty(path)
        dir_fd, name = _paths.locate(root_fd, parts, follow=False)  # a link itself is deleted
        try:
            try:
                st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            except FileNotFoundError:
                raise PathRefused(f"{path!r} does not exist") from None
            if stat.S_ISDIR(st.st_mode):
                raise PathRefused(f"{path!r} is a directory; delete_file deletes files")
            os.unlink(name, dir_fd=dir_fd)  # unlink never follows a link: it removes it
        finally:
            os.close(dir_fd)
        return f"deleted {path}", {"path": path}


def _no_parent(pattern: object) -> None:
    if ".." in _paths.split(pattern):
        raise PathRefused("a pattern matches paths under the root: it cannot go up with '..'")


def _nonempty(path: object) -> list[str]:
    parts = _paths.split(path)
    if not parts:
        raise PathRefused("give a file's path, not the root")
    return parts


def _is_text(head: bytes) -> bool:
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start >= len(head) - 3  # only a character cut by the 8 KiB window
    return True


def _existing_kind(dir_fd: int, name: str, shown: str) -> str:
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        raise PathRefused(f"{shown!r} does not exist") from None
    kind = _paths.stat_kind(st.st_mode)
    if kind == "symlink":
        raise PathRefused(f"{shown!r} is a symbolic link, which these tools do not follow")
    return kind


def _existing_mode(dir_fd: int, name: str, shown: str) -> int | None:
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode):
        raise PathRefused(f"{shown!r} is a symbolic link, which these tools do not follow")
    if not stat.S_ISREG(st.st_mode):
        raise PathRefused(f"{shown!r} is a {_paths.stat_kind(st.st_mode)}, not a regular file")
    return stat.S_IMODE(st.st_mode)


def _replace(dir_fd: int, name: str, data: bytes, mode: int) -> None:
    tmp = f".{name[:200]}.tether-{secrets.token_hex(4)}"
    fd = os.open(
        tmp,
        os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
        mode,
        dir_fd=dir_fd,
    )
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            os.fchmod(f.fileno(), mode)
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise


_PATH = {"type": "string", "description": "A path relative to the root, with '/' separators."}

_READ = {
    "type": "object",
    "properties": {
        "path": _PATH,
        "start_line": {"type": "integer", "minimum": 1, "description": "First line (1-based)."},
        "end_line": {"type": "integer", "minimum": 1, "description": "Last line, included."},
    },
    "required": ["path"],
    "additionalProperties": False,
}
_LIST = {
    "type": "object",
    "properties": {"path": {**_PATH, "description": "A directory; '.' (the default) is the root."}},
    "additionalProperties": False,
}
_GLOB = {
    "type": "object",
    "properties": {
        "pattern": {
            "type": "string",
            "description": "A glob: '*' and '?' within a name, '**' across directories "
            "(e.g. '**/*.py').",
        },
        "path": {**_PATH, "description": "The directory to search under (default: the root)."},
    },
    "required": ["pattern"],
    "additionalProperties": False,
}
_GREP = {
    "type": "object",
    "properties": {
        "pattern": {"type": "string", "description": "A Python regular expression."},
        "path": {**_PATH, "description": "A file, or a directory searched recursively."},
        "glob": {"type": "string", "description": "Only files whose path matches this glob."},
        "ignore_case": {"type": "boolean"},
    },
    "required": ["pattern"],
    "additionalProperties": False,
}
_WRITE = {
    "type": "object",
    "properties": {"path": _PATH, "content": {"type": "string"}},
    "required": ["path", "content"],
    "additionalProperties": False,
}
_EDIT = {
    "type": "object",
    "properties": {
        "path": _PATH,
        "old_string": {"type": "string", "description": "Text that occurs exactly once."},
        "new_string": {"type": "string"},
    },
    "required": ["path", "old_string", "new_string"],
    "additionalProperties": False,
}
_DELETE = {
    "type": "object",
    "properties": {"path": _PATH},
    "required": ["path"],
    "additionalProperties": False,
}


def file_tools(
    root: PathSpec,
    *,
    write: bool = False,
    max_bytes: int = 256 * 1024,
    max_entries: int = 1000,
    grep_timeout: float = 10.0,
    prefix: str = "",
) -> Toolkit:
    """Tools that read (and with ``write=True`` change) the files under `root`, and nothing else.

    Args:
        root: The directory the tools see, or a function of the call's `RunContext` returning
            it (``lambda ctx: ctx.services["workspace"]``). Its own path may contain symbolic
            links; under it, a link is followed only while it stays inside the root.
        write: Add ``write_file``, ``edit_file`` and ``delete_file``.
        max_bytes: The most a read returns, a write takes, a grep prints.
        max_entries: The most entries ``list_dir`` shows and matches ``glob`` / ``grep`` give.
        grep_timeout: Seconds a ``grep`` may take (it runs in a process that is then killed).
        prefix: Put before each tool's name (``"ws_"`` gives ``ws_read_file``).

    Returns:
        A `Toolkit` of ``read_file``, ``list_dir``, ``glob``, ``grep`` (and the writers).
    """
    for name, value in (("max_bytes", max_bytes), ("max_entries", max_entries)):
        if type(value) is not int or value < 1:
            raise ConfigError(f"file_tools: {name} must be a positive int, got {value!r}")
    if not isinstance(grep_timeout, int | float) or grep_timeout <= 0:
        raise ConfigError(
            f"file_tools: grep_timeout must be positive seconds, not {grep_timeout!r}"
        )
    if not callable(root):
        path = os.fspath(root)
        if not os.path.isdir(path):
            raise ConfigError(f"file_tools: the root {path!r} is not a directory")
    files = _Files(root, max_bytes, max_entries, grep_timeout)
    where = "Paths are relative to the workspace root, with '/' separators."

    def make(
        name: str, description: str, schema: dict[str, Any], action: str, run: Any, is_async: bool
    ) -> Tool:
        async def execute(args: dict[str, Any], ctx: RunContext) -> str:
            with files.opened_root(ctx) as root_fd:
                try:
                    text: str
                    if is_async:
                        text, data = await run(root_fd, args)
                    else:
                        text, data = run(root_fd, args)
                except PathRefused as exc:
                    trace(ctx, f"file:{action}:refused", {**_shown(args), "reason": str(exc)})
                    raise ToolError(f"{prefix}{name}: {exc}") from None
            trace(ctx, f"file:{action}", data)
            return text

        return define_tool(
            name=f"{prefix}{name}",
            description=f"{description} {where}",
            input_schema=schema,
            execute=execute,
        )

    def threaded(fn: Any) -> Any:
        async def run(root_fd: int, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
            return await asyncio.to_thread(fn, root_fd, args)

        return run

    tools = [
        make(
            "read_file",
            f"Read a UTF-8 text file (at most {max_bytes} bytes; give start_line/end_line for "
            "part of a long file). Binary files are refused.",
            _READ,
            "read",
            files.read,
            False,
        ),
        make("list_dir", "List a directory's entries.", _LIST, "list", files.list_dir, False),
        make(
            "glob",
            "Find paths matching a glob pattern.",
            _GLOB,
            "glob",
            threaded(files.glob),
            True,
        ),
        make(
            "grep",
            "Search file contents with a regular expression; prints path:line: text.",
            _GREP,
            "grep",
            files.grep,
            True,
        ),
    ]
    if write:
        tools += [
            make(
                "write_file",
                "Create or replace a text file (parent directories are made).",
                _WRITE,
                "write",
                files.write,
                False,
            ),
            make(
                "edit_file",
                "Replace old_string with new_string in a file; old_string must occur exactly once.",
                _EDIT,
                "edit",
                files.edit,
                False,
            ),
            make("delete_file", "Delete a file.", _DELETE, "delete", files.delete, False),
        ]
    return Toolkit(tools)


def _shown(args: dict[str, Any]) -> dict[str, Any]:
    return {k: v[:300] if isinstance(v, str) else v for k, v in args.items() if k != "content"}
