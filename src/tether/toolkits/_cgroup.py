"""A pids cgroup for one shell call, where this process may make one.

`RLIMIT_NPROC` counts a user's processes and the kernel does not apply it to root, so a fork
bomb run by root is stopped only by a cgroup's ``pids.max``. One is made beside this process's
own (cgroup v1's pids hierarchy, or a cgroup v2 subtree with the pids controller enabled for
its children); where neither can be written, `PidsCgroup.create` returns None and the rlimit is
all there is. The cgroup also lists every process the call started, a ``setsid`` one included,
so all are killed when the call ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
import time

__all__ = ["PidsCgroup"]


def _own_path(controller: str | None) -> str | None:
    try:
        with open("/proc/self/cgroup", encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:
        _, names, path = line.split(":", 2)
        if (controller is None and names == "") or (
            controller is not None and controller in names.split(",")
        ):
            return path
    return None


def _mounts() -> list[tuple[str, str, str]]:
    """(mount point, fs type, super options) of each cgroup mount."""
    out: list[tuple[str, str, str]] = []
    try:
        with open("/proc/self/mountinfo", encoding="utf-8") as f:
            for line in f:
                left, _, right = line.partition(" - ")
                fields = right.split()
                if len(fields) >= 3 and fields[0] in ("cgroup", "cgroup2"):
                    out.append((left.split()[4], fields[0], fields[2]))
    except OSError:
        pass
    return out


def _candidates() -> list[tuple[str, bool]]:
    """Directories a child cgroup with a pids limit could be made in: (dir, is_v2)."""
    found: list[tuple[str, bool]] = []
    for point, kind, options in _mounts():
        if kind == "cgroup" and "pids" in options.split(","):
            own = _own_path("pids")
            if own is not None:
                found.append((os.path.join(point, own.lstrip("/")), False))
        elif kind == "cgroup2":
            own = _own_path(None)
            if own is None:
                continue
            base = os.path.join(point, own.lstrip("/"))
            try:
                with open(os.path.join(base, "cgroup.subtree_control"), encoding="utf-8") as f:
                    if "pids" in f.read().split():
                        found.append((base, True))
            except OSError:
                continue
    return found


class PidsCgroup:
    """One call's cgroup: `add` the first process, `kill_all` at the end, then `remove`."""

    __slots__ = ("path", "v2")

    def __init__(self, path: str, v2: bool) -> None:
        self.path = path
        self.v2 = v2

    @classmethod
    def create(cls, max_pids: int) -> PidsCgroup | None:
        for base, v2 in _candidates():
            path = os.path.join(base, f"tether-shell-{os.getpid()}-{secrets.token_hex(4)}")
            try:
                os.mkdir(path)
            except OSError:
                continue
            try:
                with open(os.path.join(path, "pids.max"), "w", encoding="utf-8") as f:
                    f.write(str(max_pids))
            except OSError:
                with contextlib.suppress(OSError):
                    os.rmdir(path)
                continue
            return cls(path, v2)
        return None

    def add(self, pid: int) -> None:
        with open(os.path.join(self.path, "cgroup.procs"), "w", encoding="utf-8") as f:
            f.write(str(pid))

    def pids(self) -> list[int]:
        try:
            with open(os.path.join(self.path, "cgroup.procs"), encoding="utf-8") as f:
                return [int(x) for x in f.read().split()]
        except OSError:
            return []

    def kill_all(self) -> None:
        """SIGKILL every process in the cgroup, once (`close` waits until none is left)."""
        if self.v2:
            with (
                contextlib.suppress(OSError),
                open(os.path.join(self.path, "cgroup.kill"), "w", encoding="utf-8") as f,
            ):
                f.write("1")
                return
        for pid in self.pids():
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)

    async def close(self, within: float = 5.0) -> None:
        """Kill what is left until the cgroup is empty (a fork bomb forks while it is being
        killed), then remove it."""
        try:
            deadline = time.monotonic() + within
            while self.pids() and time.monotonic() < deadline:
                self.kill_all()
                await asyncio.sleep(0.002)
            while time.monotonic() < deadline:
                try:
                    os.rmdir(self.path)
                    return
                except FileNotFoundError:
                    return
                except OSError:
                    await asyncio.sleep(0.002)  # the killed are still being reaped
        except asyncio.CancelledError:
            self.kill_all()
            with contextlib.suppress(OSError):
                os.rmdir(self.path)
            raise

    def remove(self) -> None:
        """Remove the (empty) cgroup; for a cgroup no process was put in."""
        with contextlib.suppress(OSError):
            os.rmdir(self.path)
