"""`tether workflow list` and `tether workflow run`: inputs, output, failure, resume, Ctrl-C."""

from __future__ import annotations

import asyncio
import json
import signal

import pytest

from tether.cli import EXIT_INTERRUPTED, EXIT_RUN_FAILED, EXIT_USAGE
from tether.stores import SqliteWorkflowStore

from .conftest import Project, lines


def run_id_of(stderr: str) -> str:
    """The run id from `--run-id RUN_ID` in a resume hint."""
    return stderr.split("--run-id ")[1].split("`")[0]


def test_workflow_list_shows_ids_and_the_first_docstring_line(project: Project) -> None:
    result = project.invoke("workflow", "list")
    assert result.exit_code == 0, result.output
    rows = lines(result.stdout)
    assert rows[0].split() == ["ID", "DESCRIPTION"]
    assert [r.split()[0] for r in rows[1:]] == ["ask", "flaky", "greet", "nested", "waiting"]
    assert rows[3] == "greet    Greets whoever the input names."


def test_workflow_list_json(project: Project) -> None:
    result = project.invoke("workflow", "list", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)[2] == {
        "id": "greet",
        "description": "Greets whoever the input names.",
    }


@pytest.mark.parametrize(
    ("given", "greeting"),
    [("world", "hello world"), ('"42"', "hello 42"), ('{"name": "x"}', "hello {'name': 'x'}")],
)
def test_workflow_run_takes_json_or_text_and_prints_the_output(
    project: Project, given: str, greeting: str
) -> None:
    result = project.invoke("workflow", "run", "greet", "--input", given)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"greeting": greeting}
    err = result.stderr.splitlines()
    assert err[0].startswith("run ") and err[0].endswith(" of workflow greet")
    assert err[1:3] == ["[greet] hello ...", "[greet] hello done"]
    assert err[3] == f"{err[0].split(' of ')[0]} completed"


def test_workflow_run_json(project: Project) -> None:
    result = project.invoke("workflow", "run", "greet", "-i", "you", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["output"] == {"greeting": "hello you"}
    assert data["status"] == "completed" and data["resumed"] is False
    assert project.run_status(data["workflow_run_id"]) == "completed"
    assert result.stderr == f"run {data['workflow_run_id']} of workflow greet\n"


def test_a_workflow_that_runs_an_agent_records_both_runs(project: Project) -> None:
    result = project.invoke("workflow", "run", "ask", "--input", "hi", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["output"] == "you said: hi (1 messages)"
    shown = json.loads(project.invoke("runs", "show", data["workflow_run_id"], "--json").stdout)
    assert [(c["kind"], c["name"], c["status"]) for c in shown["children"]] == [
        ("agent", "echo", "completed")
    ]


def test_a_failed_run_exits_1_and_resumes_where_it_stopped(project: Project) -> None:
    failed = project.invoke("workflow", "run", "flaky", "--input", "abc")
    assert failed.exit_code == EXIT_RUN_FAILED
    assert "Error: RuntimeError: run " in failed.stderr
    assert "failed: the second step is broken" in failed.stderr
    run_id = run_id_of(failed.stderr)
    assert project.run_status(run_id) == "failed"
    (project.root / "fixed").write_text("", encoding="utf-8")
    resumed = project.invoke("workflow", "run", "flaky", "--run-id", run_id)
    assert resumed.exit_code == 0, resumed.output
    assert json.loads(resumed.stdout) == {"first": {"count": 3}, "second": "repaired"}
    assert lines(resumed.stderr)[:4] == [
        f"resuming run {run_id} of workflow flaky",
        "[flaky] first done (replayed)",
        "[flaky] second ...",
        "[flaky] second done",
    ]
    # A completed run answers with its stored output.
    again = project.invoke("workflow", "run", "flaky", "--run-id", run_id, "--input", "abc")
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["second"] == "repaired"
    assert "already completed" in again.stderr


def test_run_id_of_a_new_run_with_input_starts_it_under_that_id(project: Project) -> None:
    result = project.invoke("workflow", "run", "greet", "--run-id", "mine", "--input", "a")
    assert result.exit_code == 0, result.output
    assert project.run_status("mine") == "completed"


def test_ctrl_c_cancels_the_run_which_can_be_resumed(project: Project) -> None:
    handler = signal.getsignal(signal.SIGINT)
    result = project.invoke("workflow", "run", "waiting", "--input", "x")
    assert result.exit_code == EXIT_INTERRUPTED, result.output
    # A second Ctrl-C would have ended the process; after the command, Ctrl-C is as it was.
    assert signal.getsignal(signal.SIGINT) is handler
    assert "Error: interrupted: run " in result.stderr
    # The step the cancellation stopped is not reported as a failure: the user stopped it.
    assert "failed" not in result.stderr
    run_id = run_id_of(result.stderr)
    assert lines(result.stderr)[:5] == [
        f"run {run_id} of workflow waiting",
        "[waiting] done-first ...",
        "[waiting] done-first done",
        "[waiting] block ...",
        "WAITING",
    ]
    assert project.run_status(run_id) == "cancelled"
    shown = json.loads(project.invoke("runs", "show", run_id, "--json").stdout)
    assert [e["type"] for e in shown["events"]][-2:] == ["workflow_step_failed", "workflow_failed"]


# -- wrong arguments -------------------------------------------------------------------------


def test_an_unknown_workflow_lists_the_known_ones(project: Project) -> None:
    result = project.invoke("workflow", "run", "nope", "--input", "x")
    assert result.exit_code == EXIT_USAGE
    assert result.stderr.splitlines()[0] == (
        "Error: RegistryError: no workflow 'nope' in the registry "
        "(known: ask, flaky, greet, nested, waiting)"
    )


def test_neither_input_nor_run_id_is_refused(project: Project) -> None:
    result = project.invoke("workflow", "run", "greet")
    assert result.exit_code == EXIT_USAGE
    assert result.stderr.splitlines()[0] == (
        "Error: give --input to start a run, or --run-id to resume one"
    )


def test_input_that_looks_like_json_must_parse(project: Project) -> None:
    result = project.invoke("workflow", "run", "greet", "--input", '{"name": x}')
    assert result.exit_code == EXIT_USAGE
    err = result.stderr.splitlines()
    assert err[0] == (
        "Error: --input looks like JSON but does not parse: Expecting value (line 1, column 10)"
    )
    assert err[1:3] == ['  {"name": x}', "           ^"]


def test_resuming_a_run_that_is_not_stored(project: Project) -> None:
    result = project.invoke("workflow", "run", "greet", "--run-id", "ghost")
    assert result.exit_code == EXIT_USAGE
    assert "there is no stored run 'ghost' of workflow 'greet' to resume" in result.stderr
    assert "tether runs list --kind workflow" in result.stderr


def test_resuming_another_workflows_run(project: Project) -> None:
    assert project.invoke("workflow", "run", "greet", "--run-id", "g1", "-i", "a").exit_code == 0
    result = project.invoke("workflow", "run", "flaky", "--run-id", "g1")
    assert result.exit_code == EXIT_USAGE
    assert "run 'g1' is a run of workflow 'greet', not 'flaky'" in result.stderr
    assert "tether workflow run greet --run-id g1" in result.stderr


def test_resuming_with_a_different_input(project: Project) -> None:
    assert project.invoke("workflow", "run", "flaky", "--run-id", "f1", "-i", "a").exit_code == 1
    result = project.invoke("workflow", "run", "flaky", "--run-id", "f1", "-i", "b")
    assert result.exit_code == EXIT_USAGE
    assert "run 'f1' was started with a different input: a" in result.stderr
    assert "Resume it without --input." in result.stderr


def test_resuming_a_nested_run_points_at_its_root(project: Project) -> None:
    result = project.invoke("workflow", "run", "ask", "--input", "hi", "--json")
    root = json.loads(result.stdout)["workflow_run_id"]

    # A run nested under it, journaled by hand as a child workflow run would be.
    async def nest() -> None:
        store = SqliteWorkflowStore.open(project.db)
        try:
            await store.create_run(
                run_id="child",
                workflow_id="greet",
                input="x",
                parent_run_id=root,
                root_run_id=root,
            )
        finally:
            await store.aclose()

    asyncio.run(nest())
    nested = project.invoke("workflow", "run", "greet", "--run-id", "child")
    assert nested.exit_code == EXIT_USAGE
    assert f"run 'child' runs nested inside run {root!r}" in nested.stderr


def test_input_dash_reads_the_runs_input_from_stdin(project: Project) -> None:
    result = project.invoke(
        "workflow", "run", "greet", "--input", "-", "--json", input='{"name": "piped"}\n'
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["output"] == {"greeting": "hello {'name': 'piped'}"}
    empty = project.invoke("workflow", "run", "greet", "--input", "-", input="")
    assert empty.exit_code == EXIT_USAGE
    assert empty.stderr.splitlines()[0] == "Error: stdin is empty: there is no input to run with"
