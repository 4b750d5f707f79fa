"""A workflow run whose `tether workflow run` process was killed: while it lives another
`tether workflow run --run-id --no-wait` refuses, naming the holder; once it expired `tether runs list` and
`tether runs show` (and their JSON) say "interrupted" and print the command that resumes it,
and that command resumes it from its journal. (Real processes, one SQLite file.)"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import Project, write_project

LAB = '''
import os
import sys
from pathlib import Path

from tether.lab import Runtime
from tether.testing import script_client

HERE = Path(__file__).resolve().parent
lab = Runtime(version=False, defaults={"model": script_client([])}, lease_ttl=float(os.environ["TTL"]))


async def blocker(input, ctx):
    """Blocks in its second step until the file 'unblock' exists."""

    def first():
        with open(HERE.parent / "steps.log", "a") as log:
            log.write("first\\n")
        return 1

    await ctx.step("first", first)

    async def second():
        import asyncio

        print("IN-STEP", file=sys.stderr, flush=True)
        while not (HERE.parent / "unblock").exists():
            await asyncio.sleep(0.05)
        return 2

    return {"sum": 1 + await ctx.step("second", second)}


blocker_workflow = lab.create_workflow("blocker", blocker)
'''

CONFIG = """
runtime = "APP.lab:lab"
workflows = ["APP.lab:blocker_workflow"]
store = "sqlite:///.tether/cli.db"
"""

TTL = 1.0

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs SIGKILL")


@pytest.fixture
def killable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Project:
    root = tmp_path / "project"
    root.mkdir()
    package = write_project(root, LAB, CONFIG)
    monkeypatch.chdir(root)
    monkeypatch.setenv("TTL", str(TTL))
    return Project(root, package)


def _tether(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", "from tether.cli import main; main()", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ},
    )


def test_a_killed_workflow_run_is_refused_then_interrupted_then_resumed(
    killable: Project,
) -> None:
    proc = _tether("workflow", "run", "blocker", "--input", "x")
    assert proc.stderr is not None
    first_line = proc.stderr.readline()
    assert first_line.startswith("run "), first_line
    run_id = first_line.split()[1]
    while "IN-STEP" not in (line := proc.stderr.readline()):
        assert line, proc.communicate()
    # The holder is alive: a resume that may not wait refuses, naming it.
    held = killable.invoke("workflow", "run", "blocker", "--run-id", run_id, "--no-wait")
    assert held.exit_code == 1, held.output
    assert "is being run by another process" in held.output
    assert f":{proc.pid}." in held.output and "without --no-wait" in held.output
    assert killable.run_status(run_id) == "running"

    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    time.sleep(TTL + 0.3)

    listed = killable.invoke("runs", "list", "--json")
    assert listed.exit_code == 0, listed.output
    (row,) = [r for r in json.loads(listed.stdout) if r["run_id"] == run_id]
    assert row["status"] == "interrupted"
    assert row["resume"] == f"tether workflow run blocker --run-id {run_id}"
    table = killable.invoke("runs", "list")
    assert "interrupted" in table.stdout
    assert f"`tether workflow run blocker --run-id {run_id}`" in table.stderr
    shown = killable.invoke("runs", "show", run_id)
    assert "its process died mid-run; resume it with" in shown.stdout
    assert f"tether workflow run blocker --run-id {run_id}" in shown.stdout

    (killable.root / "unblock").touch()
    resumed = killable.invoke("workflow", "run", "blocker", "--run-id", run_id)
    assert resumed.exit_code == 0, resumed.output
    assert json.loads(resumed.stdout) == {"sum": 3}
    # The first step ran once, before the kill.
    assert (killable.root / "steps.log").read_text().splitlines() == ["first"]
    assert killable.run_status(run_id) == "completed"


def test_a_resume_with_wait_waits_for_the_holder_to_finish(killable: Project) -> None:
    proc = _tether("workflow", "run", "blocker", "--input", "x")
    assert proc.stderr is not None
    run_id = proc.stderr.readline().split()[1]
    while "IN-STEP" not in (line := proc.stderr.readline()):
        assert line, proc.communicate()
    waiter = _tether("workflow", "run", "blocker", "--run-id", run_id, "--wait", "60")
    time.sleep(0.5)
    assert waiter.poll() is None  # waiting for the holder
    (killable.root / "unblock").touch()
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0 and json.loads(out) == {"sum": 3}
    out, err = waiter.communicate(timeout=60)
    assert waiter.returncode == 0, err
    assert json.loads(out) == {"sum": 3} and "already completed" in err
