"""`tether eval run|show|compare|list`: the JSON shapes, exit codes, resuming after the process
was killed (SIGKILL), and refusing a changed rerun."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tether.cli import EXIT_RUN_FAILED, EXIT_USAGE

from .conftest import Project, write_project

EVAL_LAB = '''
"""Agents and workflows to run experiments on."""

import asyncio
import os
from pathlib import Path

from tether import define_tool
from tether.lab import Runtime
from tether.testing import script_client

HERE = Path(__file__).resolve().parent


def answer(request):
    """Answers 'yes: <text>'; with BUGGY=1 in the environment, 'no' to 'b'."""
    text = request["messages"][-1]["content"][-1].get("text", "")
    if os.environ.get("BUGGY") == "1" and text == "b":
        return {"text": "no"}
    if text == "esc":
        return {"text": "\x1b]0;pwned\x07 \x1b[31mred"}
    return {"text": f"yes: {text}", "usage": {"input_tokens": 4, "output_tokens": 2}}


def napper(request):
    """Calls the nap tool once, then answers."""
    last = request["messages"][-1]
    if any(p["type"] == "tool_result" for p in last["content"]):
        return {"text": "rested"}
    return {"tool_use": [{"name": "nap", "input": {}}]}


async def nap(args):
    await asyncio.sleep(float(os.environ.get("NAP", "0.05")))
    return "ok"


# A one-second lease: a case killed mid-run is resumed a second after its process died.
lab = Runtime(version="1.0", defaults={"model": script_client([answer] * 10000)}, lease_ttl=1)
answerer = lab.create_agent(id="answerer")
sleeper = lab.create_agent(
    id="sleeper",
    model=script_client([napper] * 10000),
    tools=[define_tool(name="nap", execute=nap)],
)


async def slowflow(input, ctx):
    """Logs each step it really runs (not a replay) to steps.log."""

    async def work():
        with open(HERE.parent / "steps.log", "a") as log:
            log.write(f"work {input}\\n")
        await asyncio.sleep(float(os.environ.get("NAP", "0.05")))
        return input.upper()

    value = await ctx.step("work", work)

    def finish():
        with open(HERE.parent / "steps.log", "a") as log:
            log.write(f"finish {input}\\n")
        return value + "!"

    return await ctx.step("finish", finish)


slow = lab.create_workflow("slowflow", slowflow)
'''

EVAL_CONFIG = """
runtime = "APP.lab:lab"
agents = ["APP.lab:answerer", "APP.lab:sleeper"]
workflows = ["APP.lab:slow"]
store = "sqlite:///.tether/cli.db"
"""


@pytest.fixture
def evalproj(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Project:
    root = tmp_path / "project"
    root.mkdir()
    package = write_project(root, EVAL_LAB, EVAL_CONFIG)
    monkeypatch.chdir(root)
    return Project(root, package)


def dataset(root: Path, name: str, cases: list[dict[str, Any]]) -> str:
    path = root / name
    path.write_text("".join(json.dumps(c) + "\n" for c in cases), encoding="utf-8")
    return str(path)


QA = [
    {"id": "a", "input": "a", "evaluators": [{"type": "contains", "value": "yes"}]},
    {"id": "b", "input": "b", "evaluators": [{"type": "regex", "pattern": "^yes"}]},
    {"id": "c", "input": "c", "expected": "yes: c", "evaluators": [{"type": "equals"}]},
]


def test_eval_run_json_is_the_show_report(evalproj: Project) -> None:
    data = dataset(evalproj.root, "qa.jsonl", QA)
    result = evalproj.invoke("eval", "run", "answerer", "--dataset", data, "-e", "v1", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["experiment"] == "v1"
    assert set(report["evaluators"]) == {"contains", "regex", "equals"}
    assert report["evaluators"]["contains"] == {"passed": 1, "total": 1, "rate": 1.0}
    [case] = [c for c in report["cases"] if c["id"] == "a"]
    assert set(case) >= {"id", "run_id", "status", "results"}
    assert case["status"] == "passed"
    assert case["results"] == {"contains": {"passed": True, "score": 1.0, "reason": None}}
    shown = evalproj.invoke("eval", "show", "v1", "--json")
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout) == report
    text = evalproj.invoke("eval", "show", "v1")
    assert text.exit_code == 0
    assert "3 passed, 0 failed" in text.stdout and "EVALUATOR" in text.stdout
    listed = evalproj.invoke("eval", "list", "--json")
    assert [e["name"] for e in json.loads(listed.stdout)] == ["v1"]
    # The case runs are ordinary runs, listed by `tether runs list --all` (not without it).
    runs = json.loads(evalproj.invoke("runs", "list", "--all", "--json").stdout)
    assert sum(r["name"] == "answerer" for r in runs) == 3
    shown_runs = json.loads(evalproj.invoke("runs", "list", "--json").stdout)
    assert [r["name"] for r in shown_runs] == ["v1"]


def test_compare_exits_1_when_b_breaks_a_case_a_passed(
    evalproj: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = dataset(evalproj.root, "qa.jsonl", QA)
    assert evalproj.invoke("eval", "run", "answerer", "-d", data, "-e", "good").exit_code == 0
    monkeypatch.setenv("BUGGY", "1")
    bad = evalproj.invoke("eval", "run", "answerer", "-d", data, "-e", "bad")
    assert bad.exit_code == EXIT_RUN_FAILED  # a case failed
    worse = evalproj.invoke("eval", "compare", "good", "bad", "--json")
    assert worse.exit_code == EXIT_RUN_FAILED, worse.output
    diff = json.loads(worse.stdout)
    assert (diff["fixed"], diff["broken"], diff["changed"]) == ([], ["b"], [])
    assert diff["regressed"] is True
    assert "bad regressed on 1 case(s) that good passed: b" in worse.stderr
    better = evalproj.invoke("eval", "compare", "bad", "good", "--json")
    assert better.exit_code == 0, better.output
    assert json.loads(better.stdout)["fixed"] == ["b"]
    same = evalproj.invoke("eval", "compare", "good", "good")
    assert same.exit_code == 0 and "broken          -" in same.stdout
    missing = evalproj.invoke("eval", "compare", "good", "nope")
    assert missing.exit_code == EXIT_USAGE and "no experiment 'nope'" in missing.stderr


def test_a_changed_rerun_exits_2_unless_restarted(evalproj: Project) -> None:
    data = dataset(evalproj.root, "qa.jsonl", QA)
    assert evalproj.invoke("eval", "run", "answerer", "-d", data, "-e", "x").exit_code == 0
    dataset(evalproj.root, "qa.jsonl", [*QA, {"id": "d", "input": "d"}])
    refused = evalproj.invoke("eval", "run", "answerer", "-d", data, "-e", "x")
    assert refused.exit_code == EXIT_USAGE
    assert "ExperimentMismatchError" in refused.stderr and "--restart" in refused.stderr
    again = evalproj.invoke("eval", "run", "answerer", "-d", data, "-e", "x", "--restart", "--json")
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["summary"]["done"] == 4


def test_dataset_errors_and_unknown_targets_exit_2(evalproj: Project) -> None:
    bad = evalproj.root / "bad.jsonl"
    bad.write_text('{"id": "a", "input": "x"}\n{"id": "b"}\n', encoding="utf-8")
    result = evalproj.invoke("eval", "run", "answerer", "-d", str(bad))
    assert result.exit_code == EXIT_USAGE
    assert f"Error: DatasetError: {bad}, line 2, field 'input'" in result.stderr
    data = dataset(evalproj.root, "qa.jsonl", QA)
    unknown = evalproj.invoke("eval", "run", "nobody", "-d", data)
    assert unknown.exit_code == EXIT_USAGE and "no agent or workflow 'nobody'" in unknown.stderr
    engine = evalproj.invoke("eval", "run", "answerer", "-d", data, "--engine", "spark")
    assert engine.exit_code == EXIT_USAGE


def _recorded(db: Path, experiment: str) -> list[dict[str, Any]]:
    if not db.exists():
        return []
    conn = sqlite3.connect(db)
    try:
        rows = conn.execute(
            "SELECT data FROM tether_run_events WHERE run_id = ? AND type = 'case_finished'",
            (f"experiment:{experiment}",),
        ).fetchall()
    except sqlite3.OperationalError:
        return []
    finally:
        conn.close()
    return [json.loads(r[0]) for r in rows]


def _completed_runs_per_case(db: Path, kind: str) -> dict[str, int]:
    conn = sqlite3.connect(db)
    try:
        rows = conn.execute(
            "SELECT tags FROM tether_runs WHERE kind = ? AND status = 'completed'", (kind,)
        ).fetchall()
    finally:
        conn.close()
    out: dict[str, int] = {}
    for (tags,) in rows:
        case = next((t for t in json.loads(tags) if t.startswith("case:")), None)
        if case is not None:
            out[case] = out.get(case, 0) + 1
    return out


@pytest.mark.parametrize("target", ["slowflow", "sleeper"])
def test_resume_after_sigkill_runs_no_finished_case_twice(evalproj: Project, target: str) -> None:
    cases = [{"id": f"c{i:02d}", "input": f"c{i:02d}"} for i in range(24)]
    data = dataset(evalproj.root, "many.jsonl", cases)
    command = [
        sys.executable,
        "-c",
        "from tether.cli import main; main()",
        "eval",
        "run",
        target,
        "-d",
        data,
        "-e",
        "killed",
        "--concurrency",
        "3",
    ]
    env = {**os.environ, "NAP": "0.1"}
    proc = subprocess.Popen(
        command, cwd=evalproj.root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    deadline = time.monotonic() + 60
    try:
        while len(_recorded(evalproj.db, "killed")) < 6:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline, "no case finished in time"
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        if proc.stderr is not None:
            proc.stderr.close()
    before = {r["case"] for r in _recorded(evalproj.db, "killed")}
    assert 6 <= len(before) < 24
    done = subprocess.run(
        [*command, "--json"],
        cwd=evalproj.root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["summary"]["done"] == 24 and report["summary"]["passed"] == 24
    records = _recorded(evalproj.db, "killed")
    assert sorted(r["case"] for r in records) == [c["id"] for c in cases]  # each once
    # No finished case was run again: one completed run per case, and for the workflow, the
    # step log shows each finished case's steps once.
    kind = "workflow" if target == "slowflow" else "agent"
    assert _completed_runs_per_case(evalproj.db, kind) == {f"case:{c['id']}": 1 for c in cases}
    if target == "slowflow":
        lines = (evalproj.root / "steps.log").read_text().splitlines()
        for case in before:
            assert lines.count(f"work {case}") == 1, case
            assert lines.count(f"finish {case}") == 1, case


def test_the_progress_bar_counts_done_failing_and_the_rate() -> None:
    import io

    from rich.console import Console

    from tether.cli._eval import _ProgressBar

    out = io.StringIO()
    bar = _ProgressBar(Console(file=out, force_terminal=True, width=120))
    bar.update(
        {"type": "start", "experiment": "x", "total": 4, "done": 1, "failing": 1, "resumed": True}
    )
    bar.update({"type": "case", "record": {"status": "passed"}})
    bar.update({"type": "case", "record": {"status": "error"}})
    task = bar.progress.tasks[0]
    assert (task.completed, task.total, task.fields["failing"]) == (3, 4, 2)
    assert task.fields["rate"].endswith("cases/s")
    bar.close()
    assert "resuming x" in out.getvalue() and "2 failing" in out.getvalue()


def test_the_text_report_escapes_what_the_model_said(evalproj: Project) -> None:
    data = dataset(
        evalproj.root,
        "esc.jsonl",
        [{"id": "e", "input": "esc", "evaluators": [{"type": "contains", "value": "nope"}]}],
    )
    result = evalproj.invoke("eval", "run", "answerer", "-d", data, "-e", "esc")
    assert result.exit_code == EXIT_RUN_FAILED, result.output  # its one case failed
    assert "\x1b" not in result.stdout
    assert "\\x1b]0;pwned" in result.stdout


def test_eval_run_exits_1_when_a_case_fails_unless_the_rate_is_accepted(
    evalproj: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = dataset(evalproj.root, "qa.jsonl", QA)
    monkeypatch.setenv("BUGGY", "1")  # one of the three cases fails
    failed = evalproj.invoke("eval", "run", "answerer", "-d", data, "-e", "gate")
    assert failed.exit_code == EXIT_RUN_FAILED
    assert "2 passed, 1 failed" in failed.stdout  # the report is printed first
    assert failed.stderr.splitlines()[-1] == "1 of 3 case(s) did not pass (exit 1)"
    as_json = evalproj.invoke("eval", "run", "answerer", "-d", data, "-e", "gate", "--json")
    assert as_json.exit_code == EXIT_RUN_FAILED
    assert json.loads(as_json.stdout)["summary"]["failed"] == 1  # one JSON object still
    accepted = evalproj.invoke(
        "eval", "run", "answerer", "-d", data, "-e", "gate", "--fail-under", "0.6"
    )
    assert accepted.exit_code == 0, accepted.output
    strict = evalproj.invoke(
        "eval", "run", "answerer", "-d", data, "-e", "gate", "--fail-under", "0.9"
    )
    assert strict.exit_code == EXIT_RUN_FAILED
    assert "a pass rate of 66.7% is under --fail-under 0.9" in strict.stderr
    bad = evalproj.invoke("eval", "run", "answerer", "-d", data, "--fail-under", "1.5")
    assert bad.exit_code == EXIT_USAGE


def test_equals_cases_without_expected_are_refused_before_any_model_call(
    evalproj: Project,
) -> None:
    data = dataset(
        evalproj.root,
        "eq.jsonl",
        [
            {"id": "ok", "input": "a", "expected": "yes: a", "evaluators": [{"type": "equals"}]},
            {"id": "no1", "input": "b", "evaluators": [{"type": "equals"}]},
            {"id": "no2", "input": "c", "evaluators": [{"type": "equals"}]},
        ],
    )
    result = evalproj.invoke("eval", "run", "answerer", "-d", data, "-e", "eq")
    assert result.exit_code == EXIT_USAGE
    assert "line 2, field 'expected': case 'no1' has no 'expected' for the equals evaluator" in (
        result.stderr
    )
    assert "(and 1 more case(s))" in result.stderr
    runs = json.loads(evalproj.invoke("runs", "list", "--all", "--json").stdout)
    assert runs == []  # nothing ran


def test_a_dataset_that_is_not_there_says_so_not_fix_that_line(evalproj: Project) -> None:
    result = evalproj.invoke("eval", "run", "answerer", "-d", "missing.jsonl")
    assert result.exit_code == EXIT_USAGE
    assert "missing.jsonl: no such file" in result.stderr
    assert "Fix that line" not in result.stderr
    assert "relative to the current directory" in result.stderr
