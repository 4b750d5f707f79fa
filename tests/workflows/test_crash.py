"""Workflow processes that die and processes that race, on SQLite and on PostgreSQL.

- A process killed with SIGKILL in the middle of step 3 of 5 leaves its run holding a lease it
  no longer renews: its holder's process on this host is gone, so a resume right away takes it
  over (without waiting for the lease to expire) and skips steps 1 and 2.
- Two live processes resuming one run at the same moment: exactly one resumes it, the other
  exits saying who holds it (with no wait), and no step runs twice; waiting, the second gets
  the output the first stored.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.postgres_server import postgres_url

from tether.stores import SqliteWorkflowStore, WorkflowStore
from tether.workflows import WorkflowContext

SCRIPT = Path(__file__).with_name("crash_workflow.py")
TTL = 1.0
"""The lease of the runs of these tests: a dead holder's run is free a second after it died."""

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs SIGKILL")


@pytest.fixture(params=["sqlite", "postgres"])
def store_spec(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "crash.db")
    return postgres_url()


async def _never_runs(input: Any, ctx: WorkflowContext[Any]) -> Any:
    raise AssertionError("a run another process holds must not run here")


def _open(spec: str) -> WorkflowStore:
    if spec.startswith("postgresql://"):
        from tether.stores.postgres import PostgresWorkflowStore

        return PostgresWorkflowStore(spec)
    return SqliteWorkflowStore.open(spec)


def _start(*args: str | Path, wait: float = 0) -> subprocess.Popen[str]:
    env = {**os.environ, "LEASE_TTL": str(TTL), "LEASE_WAIT": str(wait)}
    return subprocess.Popen(
        [sys.executable, str(SCRIPT), *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _expect(proc: subprocess.Popen[str], prefix: str) -> str:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith(prefix):
        proc.kill()
        _, err = proc.communicate()
        raise AssertionError(f"expected {prefix!r} from the workflow process, got {line!r}\n{err}")
    return line[len(prefix) :].strip()


def _finish(proc: subprocess.Popen[str]) -> tuple[int, dict[str, str]]:
    """The exit status and the last line of each kind the process printed."""
    out, err = proc.communicate(timeout=60)
    lines: dict[str, str] = {}
    for line in out.splitlines():
        kind, _, rest = line.partition(" ")
        lines[kind] = rest
    if proc.returncode not in (0, 1, 3):
        raise AssertionError(f"workflow process exited {proc.returncode}\n{out}\n{err}")
    return proc.returncode, lines


def _steps(path: Path) -> list[str]:
    """The steps executed, in order (each line: step name, pid)."""
    return [line.split()[0] for line in path.read_text(encoding="utf-8").splitlines()]


def _pids(path: Path) -> list[int]:
    return [int(line.split()[1]) for line in path.read_text(encoding="utf-8").splitlines()]


def _run(spec: str, run_id: str) -> Any:
    async def read() -> Any:
        store = _open(spec)
        try:
            run = await store.get_run(run_id)
            steps = [s.step_id for s in await store.list_steps(run_id)]
        finally:
            await store.aclose()
        return run, steps

    return asyncio.run(read())


@pytest.fixture
def killed(store_spec: str, tmp_path: Path) -> Iterator[tuple[str, Path, str, int]]:
    """A run whose process was SIGKILLed inside step 3: (store, side effects, run id, pid)."""
    side = tmp_path / "side-effects.txt"
    proc = _start(store_spec, side, "crash")
    run_id = _expect(proc, "RUN-ID")
    _expect(proc, "IN-STEP-3")
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    assert proc.returncode == -signal.SIGKILL
    yield store_spec, side, run_id, proc.pid


def test_sigkill_in_step_3_then_resume_skips_steps_1_and_2(
    killed: tuple[str, Path, str, int], tmp_path: Path
) -> None:
    spec, side, run_id, dead_pid = killed
    assert _steps(side) == ["step1", "step2", "step3"]

    # Right after the kill the run still holds a live lease nobody renews. Its holder ran on
    # this host and its process is gone (the lease names its pid and start time), so a resume
    # right away takes the run over instead of waiting for the lease to expire.
    run, steps = _run(spec, run_id)
    assert (run.status, steps) == ("running", ["step-1", "step-2"])
    assert run.lease_owner is not None and f":{dead_pid}." in run.lease_owner
    code, lines = _finish(_start(spec, side, "run", run_id))
    assert code == 0, lines
    assert _steps(side) == ["step1", "step2", "step3", "step3", "step4", "step5"]
    resumed = json.loads(lines["OUTPUT"])
    assert resumed["final"] == ((((7 * 3 + 1) * 3 + 2) * 3 + 3) * 3 + 4) * 3 + 5

    clean = tmp_path / "clean-side-effects.txt"
    code, lines = _finish(_start(str(tmp_path / "clean.db"), clean, "run"))
    assert code == 0 and json.loads(lines["OUTPUT"]) == resumed
    assert _steps(clean) == ["step1", "step2", "step3", "step4", "step5"]

    run, steps = _run(spec, run_id)
    assert (run.status, run.attempts, run.lease_owner) == ("completed", 2, None)
    assert steps == ["step-1", "step-2", "step-3", "step-4", "step-5"]


def _failed_run(spec: str, side: Path) -> str:
    code, lines = _finish(_start(spec, side, "fail"))
    assert code == 1 and "step 3 failed" in lines["FAILED"]
    return lines["RUN-ID"]


def _race(spec: str, side: Path, run_id: str, *, waits: tuple[float, float]) -> list[Any]:
    """Two processes resume `run_id` at the same moment; their exit statuses and lines."""
    procs = [_start(spec, side, "race", run_id, wait=w) for w in waits]
    for proc in procs:
        _expect(proc, "READY")
    Path(f"{side}.go").touch()
    return [(proc.pid, *_finish(proc)) for proc in procs]


def test_two_live_processes_resuming_one_run_exactly_one_resumes_it(
    store_spec: str, tmp_path: Path
) -> None:
    side = tmp_path / "side-effects.txt"
    run_id = _failed_run(store_spec, side)
    assert _steps(side) == ["step1", "step2", "step3"]

    results = _race(store_spec, side, run_id, waits=(0, 0))
    winners = [r for r in results if r[1] == 0]
    losers = [r for r in results if r[1] == 3]
    assert len(winners) == 1 and len(losers) == 1, results
    winner_pid = winners[0][0]
    # The loser names the winner as the holder and runs nothing.
    assert f":{winner_pid}." in losers[0][2]["BUSY"]
    assert _steps(side) == ["step1", "step2", "step3", "step3", "step4", "step5"]
    assert _pids(side)[3:] == [winner_pid] * 3
    run, _ = _run(store_spec, run_id)
    assert (run.status, run.attempts) == ("completed", 2)


def test_a_second_resumer_that_waits_gets_the_output_the_holder_stored(
    store_spec: str, tmp_path: Path
) -> None:
    side = tmp_path / "side-effects.txt"
    run_id = _failed_run(store_spec, side)
    results = _race(store_spec, side, run_id, waits=(30, 30))
    assert [r[1] for r in results] == [0, 0], results
    assert results[0][2]["OUTPUT"] == results[1][2]["OUTPUT"]
    # Steps 3 to 5 ran once, in whichever process got the lease first.
    assert _steps(side) == ["step1", "step2", "step3", "step3", "step4", "step5"]
    assert len(set(_pids(side)[3:])) == 1
