"""Fenced leases against a real stall, on one SQLite file and on one PostgreSQL database.

A holder is stopped with SIGSTOP in the middle of its turn (or its workflow step) for longer
than its lease lasts; a second process takes the scope (or the run) over and writes; then the
first is let go with SIGCONT. Every write the first makes from then on carries its lease and is
refused by the store, so the first stops with `LeaseLostError` and the store holds exactly the
second writer's records.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from tests.postgres_server import postgres_url

from tether.lab import Runtime

WORKER = Path(__file__).with_name("stall_worker.py")
TTL = 1.0
"""The workers' lease: the stalled holder's lease has expired 1 s after it stopped renewing."""

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs SIGSTOP")


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'fenced.db'}" if request.param == "sqlite" else postgres_url()


def _start(url: str, kind: str, role: str, release: Path, *run_id: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(WORKER), url, kind, role, *run_id],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "LEASE_TTL": str(TTL), "RELEASE": str(release)},
    )


def _line(proc: subprocess.Popen[str]) -> str:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        proc.kill()
        raise AssertionError(f"the worker ended early:\n{proc.communicate()[1]}")
    return line.strip()


def _writing(url: str) -> bool:
    """Whether some other connection holds a write transaction open on the store: SQLite's
    write lock, or a PostgreSQL backend inside a transaction."""
    if url.startswith("sqlite:///"):
        conn = sqlite3.connect(url.removeprefix("sqlite:///"), timeout=0)
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.rollback()
            return False
        except sqlite3.OperationalError:
            return True
        finally:
            conn.close()
    import psycopg

    with psycopg.connect(url, autocommit=True) as pg:
        row = pg.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE pid <> pg_backend_pid() "
            "AND datname = current_database() AND xact_start IS NOT NULL"
        ).fetchone()
    return bool(row and row[0])


def _stop_outside_a_write(url: str, proc: subprocess.Popen[str]) -> None:
    """SIGSTOP the holder, but not in the middle of one of its writes (a lease renewal runs
    every ttl/6): a process stopped inside a write transaction holds SQLite's one write lock
    (or PostgreSQL's row locks) and blocks every other writer until it goes on, which no lease
    can fence. Such a stop is let go at once and tried again."""
    for _ in range(200):
        proc.send_signal(signal.SIGSTOP)
        if not _writing(url):
            return
        proc.send_signal(signal.SIGCONT)
        time.sleep(0.005)
    raise AssertionError("the holder was inside a write at each of 200 stops")


def _stall_and_take_over(url: str, kind: str, tmp_path: Path, mark: str) -> tuple[str, str, str]:
    """Run the first writer into its stall, stop it past its lease, let the second take over
    and finish, then let the first go. Returns the run id and both workers' last lines."""
    release = tmp_path / "release"
    first = _start(url, kind, "first", release)
    try:
        run = _line(first)
        assert run.startswith("RUN ")
        run_id = run.split()[1]
        assert _line(first) == mark
        _stop_outside_a_write(url, first)
        time.sleep(TTL * 2)  # its lease expires: nobody renews it
        second = _start(url, kind, "second", release, *([run_id] if kind == "workflow" else []))
        out, err = second.communicate(timeout=60)
        assert second.returncode == 0, err
        assert out.splitlines()[-1].startswith("DONE"), out + err
        release.touch()
        first.send_signal(signal.SIGCONT)
        out_first, err_first = first.communicate(timeout=60)
        assert first.returncode == 0, err_first
        return run_id, out_first.splitlines()[-1], out.splitlines()[-1]
    finally:
        if first.poll() is None:
            first.send_signal(signal.SIGCONT)
            first.kill()
            first.communicate()


async def _read(url: str, *what: str) -> Any:
    lab = Runtime(store=url, version=False)
    try:
        if what[0] == "scope":
            return list(await lab.message_store.load("s"))
        run_id = what[1]
        record = await lab.workflow_store.get_run(run_id)
        steps = [(s.step_id, s.output) for s in await lab.workflow_store.list_steps(run_id)]
        info = await lab.run_store.get_run(run_id)
        events = await lab.run_store.events(run_id)
        return record, steps, info, events
    finally:
        await lab.aclose()


def test_a_stalled_episode_taken_over_writes_nothing_more_to_its_scope(
    url: str, tmp_path: Path
) -> None:
    _, first, second = _stall_and_take_over(url, "episode", tmp_path, "IN-MODEL")
    assert second == "DONE second's answer"
    assert first.startswith("LOST ") and "memory scope 's'" in first
    stored = asyncio.run(_read(url, "scope"))
    # Exactly the second episode's turn: its pinned prompt, its question, its answer.
    assert [(r["role"], r["content"][0]["text"]) for r in stored] == [
        ("system", "You answer."),
        ("user", "second's question"),
        ("assistant", "second's answer"),
    ]


def test_a_stalled_workflow_run_taken_over_journals_and_records_nothing_more(
    url: str, tmp_path: Path
) -> None:
    run_id, first, second = _stall_and_take_over(url, "workflow", tmp_path, "IN-STEP")
    assert second == "DONE second's two then done"
    # Whichever write of the stalled holder comes first is refused: a journaled step names the
    # "workflow run", a batch of its run events the "run" (the same lease, the same id).
    assert first.startswith("LOST ") and f"run {run_id!r} was lost" in first
    record, steps, info, events = asyncio.run(_read(url, "run", run_id))
    assert (record.status, record.output, record.attempts) == (
        "completed",
        "second's two then done",
        2,
    )
    # Step one was journaled by the first before it stalled (the second replayed it); step
    # two and the end are the second's alone.
    assert steps == [("one", "first's one"), ("two", "second's two")]
    assert (info.status, info.output_text) == ("completed", "second's two then done")
    kinds = [e["type"] for e in events]
    assert kinds.count("workflow_started") == 2  # each attempt's start
    assert kinds[-1] == "workflow_finished" and "workflow_failed" not in kinds
    finished = [e["data"] for e in events if e["type"] == "workflow_step_finished"]
    assert [(d["step_id"], d["output"]) for d in finished] == [
        ("one", "first's one"),
        ("one", "first's one"),
        ("two", "second's two"),
    ]
