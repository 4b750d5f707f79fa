"""Lease owner names, and telling a holder whose process on this host is gone."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys

import pytest

from tether._owners import holder_gone, owner_name

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs POSIX processes")


def _owner_of(pid: int, start: str) -> str:
    return f"{socket.gethostname()}:{pid}.{start}:tok"


def _start_of(pid: int) -> str:
    owner = owner_name("x") if pid == os.getpid() else ""
    if owner:
        return owner.split(":")[1].split(".", 1)[1]
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        return f.read().rsplit(")", 1)[1].split()[19]


def test_an_owner_name_says_host_pid_and_start_time() -> None:
    owner = owner_name("token")
    host, where, token = owner.split(":")
    pid, start = where.split(".")
    assert start.isdigit()
    assert (host, int(pid), token) == (socket.gethostname(), os.getpid(), "token")
    assert not holder_gone(owner)  # this very process


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="needs /proc")
def test_a_live_other_process_is_not_gone_but_a_dead_zombie_or_reused_pid_is() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        start = _start_of(child.pid)
        alive = _owner_of(child.pid, start)
        assert not holder_gone(alive)
        # The same pid with another start time: the pid was reused by another process.
        assert holder_gone(_owner_of(child.pid, str(int(start) + 1)))
        child.send_signal(signal.SIGKILL)
        os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # dead, not yet reaped
        assert holder_gone(alive)  # a zombie holds nothing
    finally:
        child.kill()
        child.wait()
    assert holder_gone(alive)  # reaped: no such pid at all


def test_holders_elsewhere_or_of_another_shape_are_never_judged() -> None:
    assert not holder_gone(f"another-host:{os.getpid() + 10**6}.1:tok")
    assert not holder_gone("host-b:2:bbbb")  # no start time: not one of our names
    assert not holder_gone(None) and not holder_gone("") and not holder_gone("junk")
