"""`tether workflow run` of a run that waits, then `tether workflow signal` from another process:
the first process exits holding nothing, the second resumes the run from its journal. On SQLite
and on PostgreSQL (skipped where initdb is not installed)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.postgres_server import postgres_url

from tether.cli import EXIT_RUN_FAILED, EXIT_USAGE

from .conftest import CONFIG, LAB, Project, write_project

REVIEW = '''

def drafted(input):
    with open(HERE.parent / "drafts.log", "a") as f:
        f.write(f"{input['doc']}\\n")
    return f"draft of {input['doc']}"


async def review(input, ctx):
    """Drafts, waits for a reviewer's verdict, then publishes."""
    draft = await ctx.step("draft", lambda: drafted(input))
    verdict = await ctx.wait_for(
        "verdict",
        schema={"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]},
    )
    if not verdict["ok"]:
        return {"published": False}
    note = await ctx.wait_for("note")
    return {"published": True, "draft": draft, "note": note}


review_workflow = lab.create_workflow("review", review)


async def hang(input, ctx):
    """Waits for 'go', then uses it in a step that blocks while the file 'block' exists."""
    value = await ctx.wait_for("go")

    async def use():
        if (HERE.parent / "block").exists():
            print("BLOCKED", file=sys.stderr, flush=True)
            await asyncio.Event().wait()
        return {"used": value}

    return await ctx.step("use", use)


hang_workflow = lab.create_workflow("hang", hang)
'''


@pytest.fixture(params=["sqlite", "postgres"])
def reviewed(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Project, list[str]]:
    root = tmp_path / "project"
    root.mkdir()
    config = CONFIG.replace(
        '"APP.lab:nested_workflow"]',
        '"APP.lab:nested_workflow",\n"APP.lab:review_workflow", "APP.lab:hang_workflow"]',
    )
    package = write_project(root, LAB + REVIEW, config)
    monkeypatch.chdir(root)
    store = [] if request.param == "sqlite" else ["--store", postgres_url()]
    return Project(root, package), store


def _tether(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from tether.cli import main; main()", *args],
        capture_output=True,
        text=True,
        env={**os.environ},
        timeout=120,
    )


def test_a_waiting_run_ends_its_process_and_a_signal_from_another_resumes_it(
    reviewed: tuple[Project, list[str]],
) -> None:
    project, store = reviewed
    started = _tether(*store, "workflow", "run", "review", "--input", '{"doc": "spec"}', "--json")
    assert started.returncode == 0, started.stderr
    waiting = json.loads(started.stdout)
    rid = waiting["workflow_run_id"]
    assert waiting["status"] == "waiting" and waiting["waiting_for"] == "verdict"
    shown = json.loads(_tether(*store, "runs", "show", rid, "--json").stdout)
    assert shown["run"]["status"] == "waiting"
    plain = _tether(*store, "runs", "show", rid).stdout
    assert (
        f"for signal 'verdict'; send it with `tether workflow signal {rid} verdict JSON`" in plain
    )

    # A value the wait's schema refuses: usage error, nothing stored, still waiting.
    bad = _tether(*store, "workflow", "signal", rid, "verdict", '{"ok": "yes"}')
    assert bad.returncode == EXIT_USAGE, bad.stderr
    assert "value['ok']: 'yes' is not of type 'boolean'" in bad.stderr
    # A name it does not wait for: refused, naming the one it waits for.
    wrong = _tether(*store, "workflow", "signal", rid, "note", '"hi"')
    assert wrong.returncode == EXIT_RUN_FAILED, wrong.stderr
    assert "is not waiting for signal 'note': it waits for 'verdict'" in wrong.stderr

    # Another process sends the verdict: the run goes on there, to its next wait.
    first = _tether(*store, "workflow", "signal", rid, "verdict", '{"ok": true}')
    assert first.returncode == 0, first.stderr
    assert f"run {rid} waits for signal 'note'" in first.stderr
    assert "[review] wait:verdict done (replayed)" in first.stderr
    # And a third sends the note (plain text is a string): the run completes there.
    last = _tether(*store, "workflow", "signal", rid, "note", "looks good", "--json")
    assert last.returncode == 0, last.stderr
    done = json.loads(last.stdout)
    assert done["status"] == "completed"
    assert done["output"] == {"published": True, "draft": "draft of spec", "note": "looks good"}
    # The draft step ran once, in the first process, and was replayed by the others.
    assert (project.root / "drafts.log").read_text().splitlines() == ["spec"]
    shown = json.loads(_tether(*store, "runs", "show", rid, "--json").stdout)
    assert shown["run"]["status"] == "completed"
    kinds = [e["type"] for e in shown["events"]]
    assert kinds.count("workflow_waiting") == 2 and kinds[-1] == "workflow_finished"

    again = _tether(*store, "workflow", "signal", rid, "note", '"twice"')
    assert again.returncode == EXIT_RUN_FAILED
    assert "it is completed and waits for no signal" in again.stderr


def test_a_signaller_killed_mid_resume_leaves_the_run_to_be_taken_over_with_its_value(
    reviewed: tuple[Project, list[str]],
) -> None:
    project, store = reviewed
    started = _tether(*store, "workflow", "run", "hang", "--input", "{}", "--json")
    assert started.returncode == 0, started.stderr
    rid = json.loads(started.stdout)["workflow_run_id"]
    (project.root / "block").write_text("")
    signaller = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from tether.cli import main; main()",
            *store,
            "workflow",
            "signal",
            rid,
            "go",
            '"the value"',
        ],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ},
    )
    assert signaller.stderr is not None
    while "BLOCKED" not in (line := signaller.stderr.readline()):
        assert line, "the signaller ended before it blocked"
    signaller.kill()  # SIGKILL, mid-step, after the signal was journaled
    signaller.wait(10)
    signaller.stderr.close()
    (project.root / "block").unlink()
    # Another process takes the run over (its holder's process is gone) and the value the dead
    # one journaled is there: nobody sends the signal again.
    resumed = _tether(*store, "workflow", "run", "hang", "--run-id", rid, "--json")
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["output"] == {"used": "the value"}
