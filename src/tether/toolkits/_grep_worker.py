"""The grep tool's worker: a separate process, so a regular expression that backtracks without
end is stopped by killing it (Python's `re` cannot be interrupted inside one match).

Run as ``python -E -s _grep_worker.py JSON`` with the root's descriptor inherited; it imports
`_paths` from its own directory (standard library only) and prints one JSON line per match,
then a summary line.
"""

from __future__ import annotations

import json
import os
import re
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what the script imports, seen as the package's module
    from ._paths import PathRefused, check_regular, locate, open_dir, walk
else:  # run as a script: `_paths` stands beside it on sys.path[0]
    from _paths import PathRefused, check_regular, locate, open_dir, walk

_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOCTTY


class _Limit(Exception):
    pass


class Grep:
    def __init__(self, args: dict[str, Any]) -> None:
        self.regex = re.compile(args["pattern"], re.IGNORECASE if args["ignore_case"] else 0)
        self.only = re.compile(args["glob"]) if args["glob"] else None
        self.limit: int = args["max_matches"]
        self.max_line: int = args["max_line"]
        self.max_file: int = args["max_file_bytes"]
        self.state = {"matches": 0, "files": 0, "skipped": 0}

    def search(self, dir_fd: int, name: str, rel: str) -> None:
        try:
            fd = os.open(name, _FILE_FLAGS, dir_fd=dir_fd)
        except OSError:
            self.state["skipped"] += 1
            return
        with os.fdopen(fd, "rb") as f:
            try:
                st = os.fstat(fd)
                check_regular(st, rel)
            except PathRefused:
                self.state["skipped"] += 1
                return
            data = f.read(self.max_file + 1)
        if len(data) > self.max_file or b"\x00" in data[:8192]:
            self.state["skipped"] += 1  # too big, or binary
            return
        self.state["files"] += 1
        for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
            if self.regex.search(line):
                shown = line if len(line) <= self.max_line else line[: self.max_line] + "…"
                sys.stdout.write(json.dumps({"path": rel, "line": number, "text": shown}) + "\n")
                self.state["matches"] += 1
                if self.state["matches"] >= self.limit:
                    raise _Limit

    def walk(self, dir_fd: int, prefix: str) -> None:
        for rel, entry, parent_fd in walk(dir_fd, prefix, [sys.maxsize]):
            if entry.is_file(follow_symlinks=False) and (self.only is None or self.only.match(rel)):
                self.search(parent_fd, entry.name, rel)


def main() -> None:
    args = json.loads(sys.argv[1])
    grep = Grep(args)
    parts: list[str] = args["parts"]
    try:
        if args["is_file"]:
            dir_fd, name = locate(args["fd"], parts)
        else:
            dir_fd, name = open_dir(args["fd"], parts), ""
        try:
            if args["is_file"]:
                grep.search(dir_fd, name, "/".join(parts))
            else:
                grep.walk(dir_fd, "/".join(parts) + "/" if parts else "")
        finally:
            os.close(dir_fd)
    except _Limit:
        grep.state["limited"] = 1
    except PathRefused as exc:
        sys.stdout.write(json.dumps({"refused": str(exc)}) + "\n")
    sys.stdout.write(json.dumps({"done": grep.state}) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
