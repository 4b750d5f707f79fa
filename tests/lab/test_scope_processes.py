"""Turns on one memory scope from several processes, on one SQLite file and on one PostgreSQL
database: they run one after another (each turn is generated from a transcript holding every
turn before it, and the scope holds one pinned prompt), and a process killed in the middle of a
turn frees the scope at once (its process on this host is gone)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from tests.postgres_server import postgres_url

from tether.lab import Runtime

WORKER = Path(__file__).with_name("scope_worker.py")
PROCESSES, EPISODES = 3, 4

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs SIGKILL")


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'scope.db'}" if request.param == "sqlite" else postgres_url()


def _start(url: str, episodes: int, mode: str, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(WORKER), url, str(episodes), mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **env},
    )


def _line(proc: subprocess.Popen[str]) -> str:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        proc.kill()
        raise AssertionError(f"the worker ended early:\n{proc.communicate()[1]}")
    return line.strip()


async def _transcript(url: str) -> list[dict[str, object]]:
    lab = Runtime(store=url, version=False)
    try:
        return list(await lab.message_store.load("s"))  # type: ignore[arg-type]
    finally:
        await lab.aclose()


def test_processes_taking_turns_on_one_scope_run_them_one_after_another(
    url: str, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    procs = [_start(url, EPISODES, "turns", GO=str(go)) for _ in range(PROCESSES)]
    for proc in procs:
        assert _line(proc) == "READY"
    go.touch()
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        assert out.rstrip().endswith("DONE")
    stored = asyncio.run(_transcript(url))
    turns = PROCESSES * EPISODES
    assert [r["role"] for r in stored] == ["system"] + ["user", "assistant"] * turns
    # Turn k (0-based) was generated from the pin-less transcript of the k turns before it plus
    # its own user message: 2k + 1 messages. Any two turns interleaved would repeat a number.
    answers = [r["content"][0]["text"] for r in stored[2::2]]  # type: ignore[index]
    assert answers == [f"saw {2 * k + 1}" for k in range(turns)]


def test_a_process_killed_mid_turn_frees_the_scope_at_once(url: str, tmp_path: Path) -> None:
    ttl = "60"  # far longer than the test: the scope is not freed by its lease expiring
    holder = _start(url, 1, "hang", LEASE_TTL=ttl)
    killed_run = _line(holder).removeprefix("RUN ")
    assert _line(holder) == "IN-MODEL"
    holder.send_signal(signal.SIGKILL)
    holder.communicate()

    # Another process's turn finds the scope held by a process of this host that is gone (its
    # lease names the pid and the start time): it takes the scope at once.
    go = tmp_path / "go"
    go.touch()
    waiter = _start(url, 1, "turns", GO=str(go), LEASE_TTL=ttl)
    _, err = waiter.communicate(timeout=45)
    assert waiter.returncode == 0, err

    async def check() -> None:
        lab = Runtime(store=url, version=False)
        try:
            dead = await lab.run_store.get_run(killed_run)
            # Its run's own lease has not run out yet: it still reads running until it does.
            assert dead is not None and dead.status == "running" and dead.ended_at is None
            stored = await lab.message_store.load("s")
            # The killed turn stored nothing; the next one is the scope's first.
            assert [r["role"] for r in stored] == ["system", "user", "assistant"]
            assert stored[2]["content"][0]["text"] == "saw 1"
        finally:
            await lab.aclose()

    asyncio.run(check())
