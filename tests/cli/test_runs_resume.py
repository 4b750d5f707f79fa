"""`tether runs list --status paused` and `tether runs resume RUN --approve ID | --deny ID
--reason TEXT | --result ID JSON`: a paused episode decided and continued from the command
line, in a process of its own (each invocation imports the project afresh)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tether.cli import EXIT_USAGE

from .conftest import Project, write_project

LAB = '''
from tether import define_tool
from tether.lab import Runtime
from tether.testing import script_client


def reply(request):
    """Asks to wipe and to ask the user; then reports what came back."""
    results = [p for m in request["messages"] for p in m["content"] if p["type"] == "tool_result"]
    if not results:
        return {"tool_use": [
            {"id": "w1", "name": "wipe", "input": {"path": "/tmp"}},
            {"id": "q1", "name": "ask_user", "input": {"question": "which?"}},
        ]}
    return {"text": " | ".join(f"{p['name']}: {p['output']}" for p in results)}


lab = Runtime(version=False, defaults={"model": script_client([reply] * 20)})
wipe = define_tool(
    name="wipe",
    input_schema={"type": "object"},
    execute=lambda value: f"wiped {value['path']}",
    approval=True,
)
ask = define_tool(name="ask_user", input_schema={"type": "object"}, external=True)
janitor = lab.create_agent(id="janitor", tools=[wipe, ask])


async def tidy(room, ctx):
    """Plans, then has the janitor tidy (its pause makes the workflow wait)."""
    plan = await ctx.step("plan", lambda: f"tidy {room}")

    async def clean():
        return (await janitor.run(memory_scope=ctx.run_local_scope("j"), user=plan).result).text

    return await ctx.step("clean", clean)


tidy_workflow = lab.create_workflow("tidy", tidy)
'''

CONFIG = """
runtime = "APP.lab:lab"
agents = ["APP.lab:janitor"]
workflows = ["APP.lab:tidy_workflow"]
store = "sqlite:///.tether/cli.db"
"""


@pytest.fixture
def janitor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Project:
    root = tmp_path / "project"
    root.mkdir()
    package = write_project(root, LAB, CONFIG)
    monkeypatch.chdir(root)
    return Project(root, package)


def paused_run(project: Project) -> str:
    result = project.invoke("agent", "run", "janitor", "-i", "tidy", "--json")
    assert result.exit_code == 0, result.output
    run_id: str = json.loads(result.stdout)["run_id"]
    assert project.run_status(run_id) == "paused"
    return run_id


def test_paused_runs_are_listed_and_resumed_with_decisions(janitor: Project) -> None:
    run_id = paused_run(janitor)
    listed = janitor.invoke("runs", "list", "--status", "paused", "--json")
    assert listed.exit_code == 0, listed.output
    [run] = json.loads(listed.stdout)
    assert run["run_id"] == run_id and run["status"] == "paused"
    assert [p["id"] for p in run["pending"]] == ["w1", "q1"]
    table = janitor.invoke("runs", "list", "--status", "paused")
    assert run_id in table.stdout and f"tether runs resume {run_id} --approve w1" in table.stderr
    assert janitor.invoke("runs", "list", "--status", "completed", "--json").stdout.strip() == "[]"

    done = janitor.invoke(
        "runs", "resume", run_id, "--approve", "w1", "--result", "q1", '{"room": "attic"}'
    )
    assert done.exit_code == 0, done.output
    assert done.stdout.strip() == 'wipe: wiped /tmp | ask_user: {"room":"attic"}'
    assert janitor.run_status(run_id) == "completed"
    shown = janitor.invoke("runs", "show", run_id, "--json")
    events = json.loads(shown.stdout)["events"]
    decided = [e["data"] for e in events if e["type"] == "decision"]
    assert [(d["call_id"], d["action"]) for d in decided] == [("w1", "approve"), ("q1", "result")]
    assert all(d["decided_by"] for d in decided)


def test_a_denial_with_its_reason(janitor: Project) -> None:
    run_id = paused_run(janitor)
    done = janitor.invoke(
        "runs", "resume", run_id, "--deny", "w1", "--reason", "not now", "--deny", "q1", "--json"
    )
    assert done.exit_code == 0, done.output
    out = json.loads(done.stdout)
    assert out["status"] == "completed" and "not now" in out["text"]


@pytest.mark.parametrize(
    ("args", "complaint"),
    [
        (["--approve", "w1", "--approve", "zz", "--deny", "q1"], "call 'zz' is not a pending call"),
        (["--approve", "w1"], "no decision for pending call(s) q1"),
        (["--approve", "w1", "--approve", "w1"], "call 'w1' is decided twice"),
        ([], "no decision given"),
        (["--approve", "w1", "--result", "q1"], "--result takes two values"),
        (["--reason", "why"], "1 --reason for 0 --deny"),
    ],
)
def test_bad_decisions_are_one_line_usage_errors(
    janitor: Project, args: list[str], complaint: str
) -> None:
    run_id = paused_run(janitor)
    result = janitor.invoke("runs", "resume", run_id, *args)
    assert result.exit_code == EXIT_USAGE, result.output
    assert complaint in result.stderr.splitlines()[0]
    assert janitor.run_status(run_id) == "paused"


def test_resuming_a_run_that_is_not_paused_says_so(janitor: Project) -> None:
    run_id = paused_run(janitor)
    assert janitor.invoke("runs", "resume", run_id, "--deny", "w1", "--deny", "q1").exit_code == 0
    again = janitor.invoke("runs", "resume", run_id, "--deny", "w1", "--deny", "q1")
    assert again.exit_code == EXIT_USAGE
    assert "resumed it first" in again.stderr
    unknown = janitor.invoke("runs", "resume", "nope-nope", "--approve", "w1")
    assert unknown.exit_code == EXIT_USAGE and "no run 'nope-nope'" in unknown.stderr
    bad = janitor.invoke("runs", "list", "--status", "snoozing")
    assert bad.exit_code == EXIT_USAGE and "is not a run status" in bad.stderr


def test_a_workflow_waiting_for_a_paused_run_is_resumed_by_deciding_that_run(
    janitor: Project,
) -> None:
    started = janitor.invoke("workflow", "run", "tidy", "--input", "the attic", "--json")
    assert started.exit_code == 0, started.output
    out = json.loads(started.stdout)
    workflow_run, child = out["workflow_run_id"], out["paused_run_id"]
    assert out["status"] == "waiting" and child
    told = janitor.invoke("workflow", "run", "tidy", "--run-id", workflow_run)
    assert f"waits for paused agent run {child}" in told.stderr
    # The workflow run is listed waiting, the run to decide paused with its calls.
    waiting = json.loads(janitor.invoke("runs", "list", "--status", "waiting", "--json").stdout)
    assert [r["run_id"] for r in waiting] == [workflow_run]
    paused = json.loads(janitor.invoke("runs", "list", "--status", "paused", "--json").stdout)
    assert [(r["run_id"], [p["id"] for p in r["pending"]]) for r in paused] == [
        (child, ["w1", "q1"])
    ]
    shown = janitor.invoke("runs", "show", workflow_run)
    assert f"for paused agent run {child}" in shown.stdout + shown.stderr
    assert f"tether runs resume {child} --approve ID" in shown.stdout + shown.stderr

    done = janitor.invoke("runs", "resume", child, "--approve", "w1", "--deny", "q1")
    assert done.exit_code == 0, done.output
    assert janitor.run_status(child) == "completed"
    assert janitor.run_status(workflow_run) == "completed"  # resumed by that same command
    result = janitor.invoke("workflow", "run", "tidy", "--run-id", workflow_run, "--json")
    assert json.loads(result.stdout)["output"].startswith("wipe: wiped /tmp | ask_user:")
