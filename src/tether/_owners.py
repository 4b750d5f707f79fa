"""Who holds a lease, and whether that holder is gone.

A lease's owner name says where its holder runs: `host:pid.start:token`, where `start` is the
process's start time (clock ticks since boot, field 22 of `/proc/PID/stat`; empty where there
is no `/proc`). A holder on this host whose process is gone — its pid is not alive, or it is a
zombie, or the pid now belongs to another process (another start time) — can never renew its
lease again, so a store may let another owner take the lease over at once instead of after it
expires. Holders on other hosts are never judged: only their lease's expiry says they died.
"""

from __future__ import annotations

import os
import socket
from functools import cache

__all__ = ["holder_gone", "owner_name"]


@cache
def _host() -> str:
    return socket.gethostname()


def _start_time(pid: int) -> str | None:
    """The start time of process `pid` ('' where /proc is not there), or None when no live
    process has that pid (none at all, or a zombie waiting to be reaped)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            stat = f.read()
    except FileNotFoundError:
        return None
    except OSError:
        return _alive(pid)
    # "pid (comm) state ppid ...": comm may hold spaces and parentheses; the last ")" ends it.
    fields = stat[stat.rfind(")") + 2 :].split()
    if not fields or fields[0] in ("Z", "X"):
        return None
    return fields[19] if len(fields) > 19 else ""


def _alive(pid: int) -> str | None:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        return ""  # alive, owned by another user
    return ""


_SELF: dict[int, str] = {}


def owner_name(token: str) -> str:
    """The owner name of a lease this process takes: `host:pid.start:token` (`token` makes it
    unique per holder)."""
    pid = os.getpid()
    start = _SELF.get(pid)
    if start is None:  # once per process (a forked child has a pid of its own)
        start = _SELF[pid] = _start_time(pid) or ""
    return f"{_host()}:{pid}.{start}:{token}"


def holder_gone(owner: str | None) -> bool:
    """Whether `owner` is a holder on this host whose process is gone (see the module
    docstring). False for an owner of another host, of this process, or not named this way."""
    if not owner:
        return False
    host, _, rest = owner.partition(":")
    where, _, _token = rest.partition(":")
    pid_text, dot, start = where.partition(".")
    if host != _host() or not dot or not pid_text.isdigit():
        return False
    pid = int(pid_text)
    if pid == os.getpid():
        return False
    now = _start_time(pid)
    if now is None:
        return True
    return bool(start) and bool(now) and now != start
