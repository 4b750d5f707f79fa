"""`tether agent list` and `tether agent run`: streaming, scopes, tool context, structured
output, JSON, and each way a run can be asked for wrongly or fail."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from tests.helpers import texts

from tether.cli import EXIT_INTERRUPTED, EXIT_PROJECT, EXIT_RUN_FAILED, EXIT_USAGE

from .conftest import Project, lines
from .test_entry_point import env


def summary(stderr: str) -> dict[str, str]:
    """The `key  value` lines `agent run` ends with on stderr."""
    out = {}
    for line in stderr.splitlines():
        key, _, value = line.partition(" ")
        if key in ("scope", "turns", "usage", "run"):
            out[key] = value.strip()
    return out


# -- list ------------------------------------------------------------------------------------


def test_agent_list_shows_ids_models_and_marks_tool_provider_agents(project: Project) -> None:
    result = project.invoke("agent", "list")
    assert result.exit_code == 0, result.output
    rows = lines(result.stdout)
    assert rows[0].split() == ["ID", "MODEL", "DESCRIPTION"]
    by_id = {row.split()[0]: row for row in rows[1:]}
    assert sorted(by_id) == ["echo", "keyless", "sandboxed", "stopper", "summarizer"]
    assert "(tool-context)" in by_id["sandboxed"]
    assert [i for i, row in by_id.items() if "(tool-context)" in row] == ["sandboxed"]
    assert "script (ScriptClient)" in by_id["echo"] and "Repeats you." in by_id["echo"]
    assert "openai:gpt-4o" in by_id["keyless"]


def test_agent_list_json(project: Project) -> None:
    result = project.invoke("agent", "list", "--json")
    assert result.exit_code == 0, result.output
    entries = {e["id"]: e for e in json.loads(result.stdout)}
    assert entries["sandboxed"]["tool_context"] is True
    assert entries["echo"] == {
        "id": "echo",
        "model": "script (ScriptClient)",
        "tool_context": False,
        "structured_output": False,
        "description": "Repeats you.",
    }
    assert entries["summarizer"]["structured_output"] is True


# -- run -------------------------------------------------------------------------------------


def test_agent_run_streams_the_answer_and_ends_with_scope_turns_usage(project: Project) -> None:
    result = project.invoke("agent", "run", "echo", "--input", "hello")
    assert result.exit_code == 0, result.output
    assert result.stdout == "you said: hello (1 messages)\n"
    info = summary(result.stderr)
    assert info["turns"] == "1"
    assert info["usage"] == "input_tokens=1 output_tokens=1"
    assert project.run_status(info["run"]) == "completed"
    assert texts(project.stored(info["scope"])) == [
        ("system", "Echo the user."),
        ("user", "hello"),
        ("assistant", "you said: hello (1 messages)"),
    ]


def test_agent_run_with_a_scope_continues_the_conversation(project: Project) -> None:
    first = project.invoke("agent", "run", "echo", "--scope", "notes", "--input", "one")
    second = project.invoke("agent", "run", "echo", "-s", "notes", "-i", "two")
    assert first.exit_code == second.exit_code == 0, second.output
    assert summary(second.stderr)["scope"] == "notes"
    # The second request carried the first exchange: user, assistant, user.
    assert second.stdout == "you said: two (3 messages)\n"
    assert [t for _, t in texts(project.stored("notes"))][1:] == [
        "one",
        "you said: one (1 messages)",
        "two",
        "you said: two (3 messages)",
    ]


def test_agent_run_reads_the_message_from_stdin(project: Project) -> None:
    result = project.invoke("agent", "run", "echo", "--input", "-", input="from a pipe\n")
    assert result.exit_code == 0, result.output
    assert result.stdout == "you said: from a pipe (1 messages)\n"


def test_tool_context_json_reaches_the_tool_provider(project: Project) -> None:
    result = project.invoke(
        "agent", "run", "sandboxed", "-c", '{"root": "/srv/box", "n": [1, 2]}', "--input", "where"
    )
    assert result.exit_code == 0, result.output
    # Each step's text on its own line; the tool call on stderr.
    assert result.stdout == 'calling where\nthe tool said {"root": "/srv/box", "n": [1, 2]}\n'
    assert "[tool] where {}" in result.stderr
    assert summary(result.stderr)["turns"] == "2"


def test_without_tool_context_the_provider_gets_none(project: Project) -> None:
    result = project.invoke("agent", "run", "sandboxed", "--input", "where")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-1] == "the tool said null"


def test_structured_output_is_printed_as_json(project: Project) -> None:
    result = project.invoke("agent", "run", "summarizer", "--input", "summarize")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"summary": "short"}
    assert summary(result.stderr)["turns"] == "1"


def test_json_prints_one_object_and_streams_nothing(project: Project) -> None:
    result = project.invoke("agent", "run", "summarizer", "--input", "summarize", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["output"] == {"summary": "short"}
    assert data["text"] == '{"summary": "short"}'
    assert data["agent"] == "summarizer"
    assert data["turns"] == 1 and data["stop_reason"] == "end_turn"
    assert data["usage"] == {"input_tokens": 1, "output_tokens": 1}
    assert project.run_status(data["run_id"]) == "completed"
    assert result.stderr == ""


# -- wrong arguments -------------------------------------------------------------------------


def test_an_unknown_agent_lists_the_known_ones(project: Project) -> None:
    result = project.invoke("agent", "run", "nobody", "--input", "hi")
    assert result.exit_code == EXIT_USAGE
    assert result.stderr.splitlines()[0] == (
        "Error: RegistryError: no agent 'nobody' in the registry "
        "(known: echo, keyless, sandboxed, stopper, summarizer)"
    )
    assert "tether agent list" in result.stderr
    assert result.stdout == ""


def test_malformed_tool_context_shows_where_the_json_breaks(project: Project) -> None:
    result = project.invoke("agent", "run", "sandboxed", "-c", '{"root": /tmp}', "--input", "x")
    assert result.exit_code == EXIT_USAGE
    err = result.stderr.splitlines()
    assert err[0] == "Error: --tool-context is not valid JSON: Expecting value (line 1, column 10)"
    assert err[1:3] == ['  {"root": /tmp}', "           ^"]
    assert not project.db.exists()  # refused before anything ran


def test_tool_context_for_an_agent_without_a_tool_provider_is_refused(project: Project) -> None:
    result = project.invoke("agent", "run", "echo", "--tool-context", "{}", "--input", "hi")
    assert result.exit_code == EXIT_USAGE
    assert "agent 'echo' takes no --tool-context: its tools are not a ToolProvider" in (
        result.stderr
    )
    assert "(tool-context)" in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--input", "  "], "Error: --input is empty: there is no user message to send"),
        (["--input", "hi", "--scope", ""], "Error: --scope is empty"),
    ],
)
def test_empty_input_or_scope_is_refused(project: Project, args: list[str], message: str) -> None:
    result = project.invoke("agent", "run", "echo", *args)
    assert result.exit_code == EXIT_USAGE
    assert result.stderr.splitlines()[0] == message


def test_empty_stdin_is_refused(project: Project) -> None:
    result = project.invoke("agent", "run", "echo", "--input", "-", input="")
    assert result.exit_code == EXIT_USAGE
    assert "stdin is empty" in result.stderr


def test_missing_input_is_typers_usage_error(project: Project) -> None:
    result = project.invoke("agent", "run", "echo")
    assert result.exit_code == EXIT_USAGE
    assert "--input" in result.stderr


# -- failures --------------------------------------------------------------------------------


def test_a_missing_provider_key_says_which_variable_to_set(project: Project) -> None:
    result = project.invoke("agent", "run", "keyless", "--input", "hi")
    assert result.exit_code == EXIT_PROJECT
    assert result.stderr.splitlines()[0] == (
        "Error: MissingKeyError: no API key for openai: set OPENAI_API_KEY in the environment, "
        "store one with `tether keys set openai`, or pass model={'model': ..., 'api_key': ...}"
    )
    assert "export OPENAI_API_KEY=" in result.stderr


def test_a_failed_episode_prints_the_error_and_exits_1(project: Project) -> None:
    result = project.invoke("agent", "run", "echo", "--scope", "s", "--input", "fail")
    assert result.exit_code == EXIT_RUN_FAILED
    first = result.stderr.splitlines()[0]
    assert first == "Error: LLMError: the episode of agent 'echo' failed: the provider is down"
    run_id = result.stderr.split("tether runs show ")[1].split("`")[0]
    assert project.run_status(run_id) == "failed"
    assert project.stored("s") == []


def test_structured_output_that_does_not_parse_shows_the_models_text(project: Project) -> None:
    result = project.invoke("agent", "run", "summarizer", "--input", "prose")
    assert result.exit_code == EXIT_RUN_FAILED
    assert result.stderr.startswith("Error: NoObjectGeneratedError: ")
    assert "The model's text: no JSON here" in result.stderr


# -- Ctrl-C ----------------------------------------------------------------------------------


def test_ctrl_c_cancels_the_episode_and_keeps_its_completed_steps(project: Project) -> None:
    # The first step (a call of noop) completes; during the second, the tool presses Ctrl-C.
    result = project.invoke(
        "agent", "run", "stopper", "-s", "job", "--input", "noop then interrupt"
    )
    assert result.exit_code == EXIT_INTERRUPTED
    assert result.stdout == "calling noop\ncalling interrupt\n"
    assert "Error: interrupted: the episode of agent 'stopper' was cancelled" in result.stderr
    assert "failed:" not in result.stderr  # the aborted tool call is not reported as a failure
    run_id = result.stderr.split("tether runs show ")[1].split("`")[0]
    assert project.run_status(run_id) == "cancelled"
    assert texts(project.stored("job")) == [
        ("user", "noop then interrupt"),
        ("assistant", "calling noop <call noop>"),
        ("tool", "<result ok>"),
    ]
    # The stored transcript is one a provider accepts: the conversation goes on.
    again = project.invoke("agent", "run", "stopper", "-s", "job", "--input", "noop")
    assert again.exit_code == 0, again.output
    assert again.stdout.splitlines()[-1] == "the tool said ok"
    assert len(project.stored("job")) == 3 + 4


@pytest.mark.skipif(sys.platform == "win32", reason="the loop takes no handlers there anyway")
def test_ctrl_c_where_the_loop_takes_no_signal_handlers(project: Project) -> None:
    """As on Windows: asyncio.run cancels the command's task instead, with the same outcome.

    In a process of its own, so that the Ctrl-C handling is a fresh interpreter's. That process
    starts with Python's own SIGINT handler, as a command run from a terminal does: a shell
    starts a background job (`bash -c 'pytest … &'`, nohup, many CI runners) with SIGINT
    ignored, the ignoring is inherited, and asyncio.run then installs no handler of its own, so
    the fallback path would never see the Ctrl-C the tool raises (it waited forever there)."""
    code = (
        "import asyncio, signal, sys\n"
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "def unsupported(*args): raise NotImplementedError\n"
        "asyncio.SelectorEventLoop.add_signal_handler = unsupported\n"
        "from tether.cli import main\n"
        "sys.argv[1:] = ['agent', 'run', 'stopper', '-s', 'job', '--input', 'noop then interrupt']\n"
        "main()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=project.root,
        env=env(),
        capture_output=True,
        text=True,
        timeout=40,
    )
    assert done.returncode == EXIT_INTERRUPTED, done.stderr
    assert "was cancelled" in done.stderr
    run_id = done.stderr.split("tether runs show ")[1].split("`")[0]
    assert project.run_status(run_id) == "cancelled"
    assert len(project.stored("job")) == 3


# -- bytes that are not UTF-8 ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "what"),
    [
        (["agent", "run", "echo", "--input", "hi \udcff"], "--input"),
        (["agent", "run", "echo", "-s", "a\udcffb", "--input", "hi"], "--scope"),
        (["agent", "run", "sandboxed", "-c", '"\udcff"', "--input", "where"], "--tool-context"),
        (["agent", "run", "e\udcffcho", "--input", "hi"], "ID"),
        (["workflow", "run", "greet", "--input", "hi \udcff"], "--input"),
        (["workflow", "run", "greet", "--run-id", "r\udcff", "--input", "x"], "--run-id"),
        (["runs", "show", "r\udcff"], "RUN_ID"),
        (["--store", "sqlite:///\udcff.db", "runs", "list"], "--store"),
    ],
)
def test_an_argument_that_is_not_utf8_is_refused_before_anything_runs(
    project: Project, args: list[str], what: str
) -> None:
    """The shell hands Python undecodable bytes as lone surrogates, which no store and no
    provider accepts: refused up front, instead of failing an episode after the model call."""
    result = project.invoke(*args)
    assert result.exit_code == EXIT_USAGE, result.output
    assert result.stderr.splitlines()[0].startswith(f"Error: {what} is not valid UTF-8: byte 0xff")
    assert not project.db.exists()


def test_stdin_that_is_not_utf8_is_refused(project: Project) -> None:
    result = project.invoke("agent", "run", "echo", "--input", "-", input=b"hi \xff there")
    assert result.exit_code == EXIT_USAGE, result.output
    assert result.stderr.splitlines()[0].startswith("Error: stdin is not valid UTF-8: byte 0xff")
    assert not project.db.exists()


@pytest.mark.parametrize(
    "args",
    [
        ["agent", "run", "echo", "--input", "fail", "--json"],
        ["agent", "run", "nobody", "--input", "x", "--json"],
        ["agent", "run", "summarizer", "--input", "prose", "--json"],
        ["workflow", "run", "flaky", "--input", "x", "--json"],
        ["runs", "show", "nope", "--json"],
    ],
)
def test_with_json_stdout_is_always_one_json_document(project: Project, args: list[str]) -> None:
    """A script reading stdout gets one JSON document, a failure too: `{"error": {"type",
    "message", "exit_code"}}` (the human message is on stderr, the status is the exit code)."""
    result = project.invoke(*args)
    assert result.exit_code != 0
    error = json.loads(result.stdout)["error"]
    assert error["exit_code"] == result.exit_code
    assert error["message"].split("\n")[0] in result.stderr
    assert "Error: " in result.stderr


def test_on_a_terminal_the_answer_cannot_drive_it(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A model's answer is data: on a terminal an escape sequence in it (OSC 52 writes the
    clipboard) is shown escaped; into a pipe or a file the answer is written as it is."""
    attack = "\x1b]52;c;cHduZWQ=\x07"
    piped = project.invoke("agent", "run", "echo", "-i", attack)
    assert piped.stdout == f"you said: {attack} (1 messages)\n"
    monkeypatch.setattr("tether.cli._render.stdout_is_terminal", lambda: True)
    shown = project.invoke("agent", "run", "echo", "-i", f"a\tb {attack}")
    assert shown.exit_code == 0, shown.output
    assert shown.stdout == "you said: a\tb \\x1b]52;c;cHduZWQ=\\x07 (1 messages)\n"
    workflow = project.invoke("workflow", "run", "ask", "-i", attack)
    assert workflow.stdout == "you said: \\x1b]52;c;cHduZWQ=\\x07 (1 messages)\n"
