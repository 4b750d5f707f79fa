"""`tether runs list` and `tether runs show`: what the RunStore recorded, as text and JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tether.cli import EXIT_USAGE

from .conftest import Project, lines


def agent_run(project: Project, *args: str) -> str:
    result = project.invoke("agent", "run", *args, "--json")
    assert result.exit_code == 0, result.output
    run_id: str = json.loads(result.stdout)["run_id"]
    return run_id


def test_runs_list_newest_first_with_kind_name_status_and_scope(project: Project) -> None:
    first = agent_run(project, "echo", "-s", "notes", "-i", "one")
    assert project.invoke("workflow", "run", "greet", "--run-id", "w1", "-i", "x").exit_code == 0
    result = project.invoke("runs", "list")
    assert result.exit_code == 0, result.output
    rows = lines(result.stdout)
    assert rows[0].split() == [
        "RUN", "ID", "KIND", "NAME", "STATUS", "STARTED", "TIME", "MODEL", "TOKENS", "COST",
        "SCOPE",
    ]  # fmt: skip
    assert rows[1].split()[:4] == ["w1", "workflow", "greet", "completed"]
    assert rows[1].split()[-1] == "-"
    assert rows[2].split()[:4] == [first, "agent", "echo", "completed"]
    assert rows[2].split()[-1] == "notes"
    # The model column: the episode's model label; a workflow run has none.
    model_at = rows[0].index("MODEL")
    assert rows[1][model_at:].split()[0] == "-"
    assert rows[2][model_at:].split()[0] not in ("-", "")
    shown = project.invoke("runs", "show", first).stdout
    assert "model" in shown


def test_tables_align_wide_characters_by_display_width() -> None:
    from rich.cells import cell_len

    from tether.cli._render import table

    drawn = table(("NAME", "STATUS"), [("天気予報", "ok"), ("weather", "ok"), ("\x1b[31mred", "x")])
    header, *rows = drawn.splitlines()
    column = cell_len(header[: header.index("STATUS")])
    for row in rows:
        name, status = row.rsplit(" ", 1)[0].rstrip(), row.rsplit(" ", 1)[1]
        assert cell_len(name) + 2 <= column
        assert cell_len(row) - cell_len(status) == column  # the second column starts aligned
    assert "\x1b" not in drawn and "\\x1b[31mred" in drawn  # escaped, never interpreted


def test_runs_list_and_show_give_tokens_and_cost(project: Project) -> None:
    import asyncio

    from tether.stores.run_store import RunInfo
    from tether.stores.sqlite import SqliteRunStore

    assert project.invoke("runs", "list").exit_code == 0  # the store exists

    async def record() -> None:
        store = SqliteRunStore.open(project.db)
        try:
            await store.start_run(RunInfo("priced", "agent", "echo", started_at=2e9))
            await store.finish_run(
                "priced", "completed", usage={"input_tokens": 1200, "output_tokens": 80},
                cost_usd=0.0021,
            )  # fmt: skip
            await store.start_run(RunInfo("unpriced", "agent", "echo", started_at=1e9))
            await store.finish_run("unpriced", "completed", usage={"input_tokens": 5})
        finally:
            await store.aclose()

    asyncio.run(record())
    rows = lines(project.invoke("runs", "list").stdout)
    priced = next(r for r in rows if r.startswith("priced"))
    assert "1200→80" in priced and "$0.0021" in priced
    unpriced = next(r for r in rows if r.startswith("unpriced"))
    assert "$" not in unpriced  # no price is shown as "-", never as a guess
    shown = project.invoke("runs", "show", "priced").stdout
    assert "cost     $0.0021" in shown or "$0.0021" in shown
    as_json = json.loads(project.invoke("runs", "list", "--json").stdout)
    assert as_json[0]["cost_usd"] == 0.0021 and as_json[1]["cost_usd"] is None


def test_runs_show_says_why_a_run_is_unpriced(project: Project) -> None:
    import asyncio

    from tether.stores.run_store import RunInfo
    from tether.stores.sqlite import SqliteRunStore

    assert project.invoke("runs", "list").exit_code == 0  # the store exists
    why = "pricing=False in the model config (a prices entry for 'openai:m' gives it a price)"

    async def record() -> None:
        store = SqliteRunStore.open(project.db)
        try:
            await store.start_run(RunInfo("off", "agent", "echo", started_at=2e9))
            await store.append_events(
                "off",
                [
                    {
                        "type": "model_call_finished",
                        "at": 2e9,
                        "data": {"call": 1, "model": "openai:m", "usage": {"input_tokens": 5},
                                 "cost_usd": None, "unpriced": why},
                    }
                ],
            )  # fmt: skip
            await store.finish_run("off", "completed", usage={"input_tokens": 5})
        finally:
            await store.aclose()

    asyncio.run(record())
    shown = project.invoke("runs", "show", "off").stdout
    [line] = [row for row in lines(shown) if row.startswith("cost")]
    assert line.split(None, 1)[1] == f"- (unpriced: {why})"


def test_runs_list_filters_by_kind_and_limits(project: Project) -> None:
    ids = [agent_run(project, "echo", "-i", str(i)) for i in range(3)]
    assert project.invoke("workflow", "run", "greet", "-i", "x").exit_code == 0
    result = project.invoke("runs", "list", "--kind", "agent", "--limit", "2", "--json")
    assert result.exit_code == 0, result.output
    runs = json.loads(result.stdout)
    assert [r["run_id"] for r in runs] == [ids[2], ids[1]]
    assert {r["kind"] for r in runs} == {"agent"}
    assert runs[0]["tags"] == ["version:1.2.3"]
    workflows = json.loads(project.invoke("runs", "list", "--kind", "workflow", "--json").stdout)
    assert [r["name"] for r in workflows] == ["greet"]


@pytest.mark.parametrize(
    ("args", "complaint"),
    [
        (["--kind", "tool"], "Invalid value for '--kind'"),
        (["-n", "0"], "Invalid value for '--limit'"),
        (["-n", str(2**63)], "Invalid value for '--limit'"),  # more than SQL can count
    ],
)
def test_runs_list_rejects_a_bad_kind_or_limit(
    project: Project, args: list[str], complaint: str
) -> None:
    result = project.invoke("runs", "list", *args)
    assert result.exit_code == EXIT_USAGE
    assert complaint in result.stderr


def test_runs_list_of_an_empty_store_says_so(project: Project) -> None:
    result = project.invoke("runs", "list")
    assert result.exit_code == 0
    assert result.stdout == ""
    assert result.stderr == "No runs recorded in sqlite:///.tether/cli.db.\n"


def test_runs_show_prints_the_run_its_tags_and_its_events(project: Project) -> None:
    result = project.invoke(
        "agent", "run", "sandboxed", "-s", "box", "-c", '{"a": 1}', "-i", "where"
    )
    run_id = result.stderr.split("run  ")[-1].strip()
    shown = project.invoke("runs", "show", run_id)
    assert shown.exit_code == 0, shown.output
    head, events = shown.stdout.split("\nevents (12)\n")
    fields = dict(line.split(None, 1) for line in head.strip().splitlines())
    assert fields["run"] == run_id
    assert fields["kind"] == "agent" and fields["name"] == "sandboxed"
    assert fields["status"] == "completed"
    assert fields["scope"] == "box"
    assert fields["model"] == "script"
    assert fields["tags"] == "version:1.2.3"
    assert [line.split()[:2] for line in events.splitlines()] == [
        ["1", "agent_started"],
        ["2", "model_call_started"],
        ["3", "agent_text"],
        ["4", "model_call_finished"],
        ["5", "agent_tool_call"],
        ["6", "agent_tool_result"],
        ["7", "agent_messages_committed"],
        ["8", "model_call_started"],
        ["9", "agent_text"],
        ["10", "model_call_finished"],
        ["11", "agent_messages_committed"],
        ["12", "agent_finished"],
    ]
    assert events.splitlines()[5].endswith('where -> {"a": 1}')
    assert events.splitlines()[8].endswith('the tool said {"a": 1}')
    assert "call 1 to script" in events.splitlines()[1]


def test_runs_show_joins_text_deltas_and_escapes_control_characters(project: Project) -> None:
    run_id = agent_run(project, "echo", "-i", "bell\x07 and\nnewline")
    shown = project.invoke("runs", "show", run_id)
    text_line = next(line for line in shown.stdout.splitlines() if "agent_text " in line)
    # Four deltas (see echo_reply) on one line, the bell and the newline escaped.
    assert text_line.split()[0] == "3-6"
    assert text_line.endswith("you said: bell\\x07 and\\nnewline (1 messages)")
    assert "\x07" not in shown.stdout


def test_runs_show_json_has_the_run_its_children_and_every_event(project: Project) -> None:
    assert project.invoke("workflow", "run", "ask", "--run-id", "a1", "-i", "hey").exit_code == 0
    shown = project.invoke("runs", "show", "a1", "--json")
    assert shown.exit_code == 0, shown.output
    data = json.loads(shown.stdout)
    assert data["run"]["run_id"] == "a1" and data["run"]["kind"] == "workflow"
    assert data["run"]["status"] == "completed"
    assert [e["type"] for e in data["events"]] == [
        "workflow_started",
        "workflow_step_started",
        "workflow_step_finished",
        "workflow_finished",
    ]
    assert [e["seq"] for e in data["events"]] == [1, 2, 3, 4]
    (child,) = data["children"]
    assert child["kind"] == "agent" and child["step_id"] == "ask"
    text = project.invoke("runs", "show", "a1").stdout
    assert "runs inside (1)" in text
    assert f"{child['run_id']}  agent  echo  completed" in text


def test_runs_show_of_an_unknown_run(project: Project) -> None:
    result = project.invoke("runs", "show", "nope")
    assert result.exit_code == EXIT_USAGE
    assert result.stderr.splitlines() == [
        "Error: no run 'nope' in sqlite:///.tether/cli.db",
        "`tether runs list` shows the most recent runs and their ids.",
    ]


def test_runs_read_any_store_with_store_and_no_config(
    project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_id = agent_run(project, "echo", "-i", "x")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    relative = "sqlite:///../project/.tether/cli.db"
    listed = project.invoke("--store", relative, "runs", "list", "--json")
    assert listed.exit_code == 0, listed.output
    assert [r["run_id"] for r in json.loads(listed.stdout)] == [run_id]
    shown = project.invoke("--store", f"sqlite:///{project.db}", "runs", "show", run_id)
    assert shown.exit_code == 0, shown.output
    assert shown.stdout.startswith(f"run      {run_id}\n")


def test_control_characters_in_ids_never_reach_the_terminal_raw(project: Project) -> None:
    """A run id, a scope or an error message can hold anything a caller or a server put there;
    an OSC sequence (which retitles the terminal) or a carriage return is shown escaped."""
    rid = "r\x1b]0;owned\x07\r"
    shown = "r\\x1b]0;owned\\x07\\r"
    ran = project.invoke("workflow", "run", "greet", "--run-id", rid, "-i", "x")
    assert ran.exit_code == 0, ran.output
    assert ran.stderr.splitlines()[-1] == f"run {shown} completed"
    failed = project.invoke("workflow", "run", "flaky", "--run-id", rid + "2", "-i", "x")
    assert failed.exit_code == 1
    agent = project.invoke("agent", "run", "echo", "-s", "s\x1b[2J", "-i", "hi")
    assert agent.exit_code == 0, agent.output
    assert "scope  s\\x1b[2J" in agent.stderr
    listed = project.invoke("runs", "list")
    detail = project.invoke("runs", "show", rid)
    for result in (ran, failed, agent, listed, detail):
        assert "\x1b" not in result.output and "\x07" not in result.output
        assert "\r" not in result.output
    assert f"run {shown}2 of workflow 'flaky' failed" in failed.stderr
    assert any(row.startswith(shown) for row in listed.stdout.splitlines())
    assert detail.stdout.splitlines()[0].split() == ["run", shown]
    # JSON keeps the value itself; the C1 controls and DEL that JSON leaves raw are escaped.
    c1 = "c1\x9b31m\x7f"
    assert project.invoke("workflow", "run", "greet", "--run-id", c1, "-i", "x").exit_code == 0
    as_json = project.invoke("runs", "list", "--json")
    assert "\x9b" not in as_json.stdout and "\x7f" not in as_json.stdout
    assert c1 in [r["run_id"] for r in json.loads(as_json.stdout)]


def test_runs_with_a_store_file_that_does_not_exist_say_so_and_create_nothing(
    project: Project,
) -> None:
    for args in (["runs", "list"], ["runs", "show", "x"]):
        result = project.invoke("--store", "sqlite:///typo.db", *args)
        assert result.exit_code == EXIT_USAGE, result.output
        assert result.stderr.splitlines()[0] == (
            f"Error: --store sqlite:///typo.db: there is no SQLite database at "
            f"{project.root / 'typo.db'}"
        )
        assert not (project.root / "typo.db").exists()


def test_runs_show_of_a_workflow_shows_every_run_nested_in_it_as_a_tree(project: Project) -> None:
    ran = project.invoke("workflow", "run", "nested", "--run-id", "n1", "-i", "hi", "--json")
    assert ran.exit_code == 0, ran.output
    shown = project.invoke("runs", "show", "n1")
    assert shown.exit_code == 0, shown.output
    inside = shown.stdout.split("runs inside (2)\n")[1].split("\n\n")[0].splitlines()
    assert inside[0].split() == ["RUN", "ID", "KIND", "NAME", "STATUS", "STEP"]
    # The ask workflow ran in step "inner"; the echo episode in ask's own step, one level down.
    assert inside[1].split()[1:] == ["workflow", "ask", "completed", "inner"]
    assert inside[2].startswith("  ") and inside[2].split()[1:] == [
        "agent",
        "echo",
        "completed",
        "ask",
    ]
    data = json.loads(project.invoke("runs", "show", "n1", "--json").stdout)
    (ask,) = data["children"]
    assert (ask["name"], ask["step_id"]) == ("ask", "inner")
    (echo,) = ask["children"]
    assert (echo["name"], echo["step_id"], echo["children"]) == ("echo", "ask", [])
    assert echo["workflow_run_id"] == ask["run_id"] == inside[1].split()[0]


def test_runs_show_gives_the_traceback_and_the_run_that_started_it(project: Project) -> None:
    import asyncio

    from tether.stores import RunInfo, SqliteRunStore

    failed = project.invoke("agent", "run", "echo", "-i", "fail", "--json")
    assert failed.exit_code != 0
    [failed_id] = [
        line.split()[0] for line in project.invoke("runs", "list").stdout.splitlines()[1:]
    ]
    shown = project.invoke("runs", "show", failed_id)
    head, _, rest = shown.stdout.partition("\ntraceback\n")
    assert "error" in head and "failed" in head
    assert rest.startswith("Traceback (most recent call last):")
    assert "LLMError: the provider is down" in rest.split("\nevents (")[0]
    data = json.loads(project.invoke("runs", "show", failed_id, "--json").stdout)
    assert "the provider is down" in data["run"]["traceback"]

    async def child() -> None:
        store = SqliteRunStore.open(project.db)
        try:
            await store.start_run(
                RunInfo("kid", "agent", "echo", "completed", 5.0, parent_run_id=failed_id,
                        parent_tool_call_id="call_7")
            )  # fmt: skip
        finally:
            await store.aclose()

    asyncio.run(child())
    kid = project.invoke("runs", "show", "kid")
    fields = dict(
        line.split("  ", 1) for line in kid.stdout.split("\n\n")[0].splitlines() if "  " in line
    )
    assert fields["started by"].strip() == f"{failed_id} (tool call call_7)"
    kid_json = json.loads(project.invoke("runs", "show", "kid", "--json").stdout)["run"]
    assert (kid_json["parent_run_id"], kid_json["parent_tool_call_id"]) == (failed_id, "call_7")


def test_runs_list_hides_nested_runs_and_experiment_cases_unless_all(project: Project) -> None:
    assert project.invoke("workflow", "run", "ask", "--input", "nested hello").exit_code == 0
    dataset = project.root / "cases.jsonl"
    dataset.write_text('{"id": "c1", "input": "case one"}\n{"id": "c2", "input": "two"}\n')
    ran = project.invoke("eval", "run", "echo", "--dataset", str(dataset), "-e", "exp")
    assert ran.exit_code == 0, ran.output
    assert project.invoke("agent", "run", "echo", "-i", "top").exit_code == 0
    listed = json.loads(project.invoke("runs", "list", "--json").stdout)
    assert [(r["kind"], r["name"]) for r in listed] == [
        ("agent", "echo"),
        ("experiment", "exp"),
        ("workflow", "ask"),
    ]
    every = json.loads(project.invoke("runs", "list", "--all", "--json").stdout)
    names = sorted((r["kind"], r["name"], "experiment:exp" in r["tags"]) for r in every)
    assert names == [
        ("agent", "echo", False),  # the top-level episode
        ("agent", "echo", False),  # the one inside the workflow run
        ("agent", "echo", True),
        ("agent", "echo", True),
        ("experiment", "exp", True),
        ("workflow", "ask", False),
    ]
    # The limit counts the runs shown, not those left out.
    limited = json.loads(project.invoke("runs", "list", "-n", "2", "--json").stdout)
    assert [r["name"] for r in limited] == ["echo", "exp"]
