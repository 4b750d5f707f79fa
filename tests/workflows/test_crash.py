"""A workflow process killed with SIGKILL in the middle of step 3 of 5 resumes from its journal."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tether.stores import SqliteWorkflowStore

SCRIPT = Path(__file__).with_name("crash_workflow.py")

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs SIGKILL")


def _start(*args: str | Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(SCRIPT), *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _expect(proc: subprocess.Popen[str], prefix: str) -> str:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith(prefix):
        proc.kill()
        _, err = proc.communicate()
        raise AssertionError(f"expected {prefix!r} from the workflow process, got {line!r}\n{err}")
    return line[len(prefix) :].strip()


def _run_to_end(*args: str | Path) -> tuple[str, Any]:
    proc = _start(*args)
    out, err = proc.communicate()
    assert proc.returncode == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("RUN-ID ") and lines[1].startswith("OUTPUT "), out
    return lines[0].removeprefix("RUN-ID "), json.loads(lines[1].removeprefix("OUTPUT "))


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def test_sigkill_in_step_3_then_resume_skips_steps_1_and_2(tmp_path: Path) -> None:
    db, side = tmp_path / "crash.db", tmp_path / "side-effects.txt"

    proc = _start(db, side, "crash")
    run_id = _expect(proc, "RUN-ID")
    _expect(proc, "IN-STEP-3")
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    assert proc.returncode == -signal.SIGKILL
    assert _lines(side) == ["step1", "step2", "step3"]

    async def journal() -> tuple[str, list[str]]:
        async with SqliteWorkflowStore.open(db) as store:
            run = await store.get_run(run_id)
            assert run is not None
            return run.status, [s.step_id for s in await store.list_steps(run_id)]

    # The process died without a word: the run still reads as running, steps 1-2 are journaled.
    assert asyncio.run(journal()) == ("running", ["step-1", "step-2"])

    resumed_id, resumed = _run_to_end(db, side, "run", run_id)
    assert resumed_id == run_id
    lines = _lines(side)
    assert lines == ["step1", "step2", "step3", "step3", "step4", "step5"]
    assert lines.count("step1") == lines.count("step2") == 1

    clean_db, clean_side = tmp_path / "clean.db", tmp_path / "clean-side-effects.txt"
    _, uninterrupted = _run_to_end(clean_db, clean_side, "run")
    assert _lines(clean_side) == ["step1", "step2", "step3", "step4", "step5"]
    assert resumed == uninterrupted
    assert uninterrupted["final"] == ((((7 * 3 + 1) * 3 + 2) * 3 + 3) * 3 + 4) * 3 + 5

    async def finished() -> tuple[str, int, list[str]]:
        async with SqliteWorkflowStore.open(db) as store:
            run = await store.get_run(run_id)
            assert run is not None
            return run.status, run.attempts, [s.step_id for s in await store.list_steps(run_id)]

    assert asyncio.run(finished()) == (
        "completed",
        2,
        ["step-1", "step-2", "step-3", "step-4", "step-5"],
    )
