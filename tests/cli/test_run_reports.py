"""What `agent run`, `workflow run` and `runs` report, and when: the turn as soon as it is
stored (the title gets a short grace that Ctrl-C gives up alone), the prompt as an argument and
a model for one run, a workflow's run id at its start, text input for a `str` workflow, a run
that failed on its input, the registry's runs only unless --all, run-id prefixes, and every
failure as one JSON object with --json."""

from __future__ import annotations

import json
import signal
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from tether.cli import EXIT_PROJECT, EXIT_RUN_FAILED, EXIT_USAGE

from .conftest import Project, lines, write_project
from .test_entry_point import TETHER, env, posix_only, read_until

LAB = '''
"""Agents with a title workflow, a text workflow, one that fails on its input."""

import asyncio
import os
import sys

from tether import WorkflowInputError
from tether.lab import Runtime
from tether.testing import script_client

lab = Runtime(version=False, defaults={"model": script_client([{"text": "hi there"}] * 20)})

namer = lab.create_agent(id="namer", model=script_client([{"text": "Greeting"}] * 5))


async def title(input, ctx):
    if os.environ.get("TITLE_BLOCKS"):
        print("TITLING", file=sys.stderr, flush=True)
        await asyncio.Event().wait()
    reply = await namer.run(memory_scope=ctx.memory_scope_with_suffix("namer"), user="t").result
    return {"title": reply.text}


conversation_title = lab.create_workflow("conversation-title", title)

titled = lab.create_agent(id="titled", title_workflow=conversation_title)

remote = lab.create_agent(
    id="remote",
    model={"model": "openai:gpt-4o", "base_url": os.environ.get("FAKE_OPENAI", "http://x/v1"),
           "api_key": "sk-test", "max_retries": 0},
)


async def ask(input: str, ctx):
    """Takes text."""
    return await ctx.step("echo", lambda: f"{type(input).__name__}:{input}")


ask_workflow = lab.create_workflow("ask", ask)


async def sized(input, ctx):
    """Takes {"size": int}."""
    if not isinstance(input, dict) or not isinstance(input.get("size"), int):
        raise WorkflowInputError(f"sized takes {{'size': int}}, got {input!r}")
    return await ctx.step("size", lambda: input["size"] * 2)


sized_workflow = lab.create_workflow("sized", sized)


async def blocked(input, ctx):
    async def wait():
        print("BLOCKED", file=sys.stderr, flush=True)
        await asyncio.Event().wait()

    return await ctx.step("wait", wait)


blocked_workflow = lab.create_workflow("blocked", blocked)
'''

CONFIG = """
runtime = "APP.lab:lab"
agents = ["APP.lab:titled", "APP.lab:remote"]
workflows = ["APP.lab:ask_workflow", "APP.lab:sized_workflow", "APP.lab:blocked_workflow"]
store = "sqlite:///.tether/cli.db"
"""


@pytest.fixture
def app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Project:
    root = tmp_path / "project"
    root.mkdir()
    package = write_project(root, LAB, CONFIG)
    monkeypatch.chdir(root)
    monkeypatch.delenv("TITLE_BLOCKS", raising=False)
    return Project(root, package)


def run_in(project: Project, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(TETHER), *args],
        cwd=project.root,
        env={**env(), **extra},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


# -- agent run -------------------------------------------------------------------------------


def test_the_prompt_is_an_argument_or_input_but_not_both(app: Project) -> None:
    result = app.invoke("agent", "run", "titled", "Hello there", "--title-wait", "0")
    assert result.exit_code == 0, result.output
    assert result.stdout == "hi there\n"
    both = app.invoke("agent", "run", "titled", "Hello", "--input", "Hello")
    assert both.exit_code == EXIT_USAGE
    assert "give the user message once: as PROMPT or with --input" in both.stderr
    neither = app.invoke("agent", "run", "titled")
    assert neither.exit_code == EXIT_USAGE
    assert "there is no user message: give PROMPT or --input TEXT" in neither.stderr
    empty = app.invoke("agent", "run", "titled", " ")
    assert empty.exit_code == EXIT_USAGE and "PROMPT is empty" in empty.stderr


class FakeOpenAI(BaseHTTPRequestHandler):
    bodies: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:
        length = int(self.headers["content-length"])
        FakeOpenAI.bodies.append(json.loads(self.rfile.read(length)))
        chunks = [
            {"choices": [{"index": 0, "delta": {"content": "from the wire"}}]},
            {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        ]
        body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def fake_openai(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[dict[str, Any]]]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeOpenAI)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    FakeOpenAI.bodies = []
    monkeypatch.setenv("FAKE_OPENAI", f"http://127.0.0.1:{server.server_address[1]}/v1")
    yield FakeOpenAI.bodies
    server.shutdown()
    thread.join()
    server.server_close()


def test_model_runs_one_episode_on_another_model_with_the_agents_config(
    app: Project, fake_openai: list[dict[str, Any]]
) -> None:
    plain = app.invoke("agent", "run", "remote", "one")
    other = app.invoke("agent", "run", "remote", "two", "-m", "openai:gpt-4o-mini")
    assert plain.exit_code == other.exit_code == 0, other.output
    assert other.stdout == "from the wire\n"
    # The base URL and the key of the agent's model config still apply.
    assert [b["model"] for b in fake_openai] == ["gpt-4o", "gpt-4o-mini"]
    bad = app.invoke("agent", "run", "remote", "x", "--model", "gpt-4o")
    assert bad.exit_code == EXIT_USAGE and "is not 'provider:model'" in bad.stderr


def test_the_turn_is_reported_at_once_and_a_slow_title_is_given_up(
    app: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TITLE_BLOCKS", "1")
    result = app.invoke("agent", "run", "titled", "-s", "greet", "Hello", "--title-wait", "0.2")
    monkeypatch.delenv("TITLE_BLOCKS")
    assert result.exit_code == 0, result.output
    assert result.stdout == "hi there\n"
    err = lines(result.stderr)
    assert err[-1] == "title  given up (not done after 0.2 s)"
    assert any(line.startswith("scope  greet") for line in err)
    assert app.run_status(next(x.split()[1] for x in err if x.startswith("run "))) == "completed"
    titled = app.invoke("agent", "run", "titled", "-s", "named", "Hello")
    assert titled.exit_code == 0, titled.output
    assert lines(titled.stderr)[-1] == "title  Greeting"  # done within the grace: named


@posix_only
def test_ctrl_c_while_waiting_for_the_title_gives_up_only_the_title(app: Project) -> None:
    child = subprocess.Popen(
        [str(TETHER), "agent", "run", "titled", "-s", "greet", "Hello"],
        cwd=app.root,
        env={**env(), "TITLE_BLOCKS": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stderr is not None
        seen = read_until(child.stderr, "TITLING")
        if "run " not in seen:
            seen += child.stderr.readline() + child.stderr.readline()
            seen += child.stderr.readline() + child.stderr.readline()
        assert "scope  greet" in seen and "\nrun " in "\n" + seen
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()
    assert child.returncode == 0, seen + err
    assert out == "hi there\n"
    assert "title  given up (interrupted)" in err and "Traceback" not in err
    assert app.stored("greet")[-1]["content"][0]["text"] == "hi there"


# -- workflow run ----------------------------------------------------------------------------


def test_a_str_workflow_gets_its_input_as_text(app: Project) -> None:
    for given in ("42", '{"a": 1}', "hello"):
        result = app.invoke("workflow", "run", "ask", "--input", given)
        assert result.exit_code == 0, result.output
        assert result.stdout == f"str:{given}\n"


def test_a_run_that_failed_on_its_input_says_so_and_offers_no_resume(app: Project) -> None:
    result = app.invoke("workflow", "run", "sized", "--input", '"big"')
    assert result.exit_code == EXIT_RUN_FAILED
    err = result.stderr
    assert "failed on its input: sized takes {'size': int}, got 'big'" in err
    assert "Error: WorkflowInputError: run " in err
    assert "--run-id" not in err and "resume" not in err.replace("Resuming it would fail", "")
    assert "start a new run with the input it takes" in err
    fine = app.invoke("workflow", "run", "sized", "--input", '{"size": 2}')
    assert fine.exit_code == 0 and fine.stdout == "4\n"


@posix_only
def test_workflow_run_says_its_run_id_when_it_starts(app: Project) -> None:
    child = subprocess.Popen(
        [str(TETHER), "workflow", "run", "blocked", "--input", "x"],
        cwd=app.root,
        env=env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stderr is not None
        seen = read_until(child.stderr, "BLOCKED").splitlines()
    finally:
        child.kill()  # a crash: the run id on stderr is all that is left to resume it by
        child.communicate()
    assert seen[0].startswith("run ") and seen[0].endswith(" of workflow blocked")
    run_id = seen[0].split()[1]
    assert app.run_status(run_id) == "running"


# -- runs ------------------------------------------------------------------------------------


def test_runs_list_shows_the_registrys_runs_unless_all(app: Project) -> None:
    assert app.invoke("agent", "run", "titled", "Hello").exit_code == 0
    listed = json.loads(app.invoke("runs", "list", "--json").stdout)
    assert [(r["kind"], r["name"]) for r in listed] == [("agent", "titled")]
    every = json.loads(app.invoke("runs", "list", "--all", "--json").stdout)
    assert sorted((r["kind"], r["name"]) for r in every) == [
        ("agent", "namer"),
        ("agent", "titled"),
        ("workflow", "conversation-title"),
    ]
    table = app.invoke("runs", "list")
    assert "titled" in table.stdout and "namer" not in table.stdout


def test_runs_show_takes_a_unique_run_id_prefix(app: Project) -> None:
    for run_id in ("abcd-1", "abcd-2", "xyzw-1"):
        assert app.invoke("workflow", "run", "ask", "--run-id", run_id, "-i", "x").exit_code == 0
    shown = app.invoke("runs", "show", "xyzw", "--json")
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout)["run"]["run_id"] == "xyzw-1"
    ambiguous = app.invoke("runs", "show", "abcd")
    assert ambiguous.exit_code == EXIT_USAGE
    assert "run id prefix 'abcd' is ambiguous: it starts abcd-" in ambiguous.stderr
    assert "Give more characters of the run id." in ambiguous.stderr
    short = app.invoke("runs", "show", "xyz")
    assert short.exit_code == EXIT_USAGE and "at least its first 4 characters" in short.stderr


# -- --json failures -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "kind", "code"),
    [
        (["agent", "run", "nobody", "hi", "--json"], "RegistryError", EXIT_USAGE),
        (["agent", "run", "titled", "--json"], "CommandLineError", EXIT_USAGE),
        (["workflow", "run", "sized", "-i", "1", "--json"], "WorkflowInputError", 1),
        (["workflow", "run", "nope", "-i", "1", "--json"], "RegistryError", EXIT_USAGE),
        (["runs", "show", "missing-run", "--json"], "CommandLineError", EXIT_USAGE),
        (["--store", "mongo://x", "runs", "list", "--json"], "ConfigError", EXIT_PROJECT),
    ],
)
def test_with_json_every_failure_is_one_json_object_on_stdout(
    app: Project, args: list[str], kind: str, code: int
) -> None:
    result = app.invoke(*args)
    assert result.exit_code == code, result.output
    error = json.loads(result.stdout)["error"]
    assert (error["type"], error["exit_code"]) == (kind, code)
    # The human message is on stderr as well.
    assert "Error: " in result.stderr
    assert " ".join(error["message"].split())[:40] in " ".join(result.stderr.split())


@pytest.mark.parametrize(
    ("args", "kind"),
    [
        (["agent", "list", "--json", "--bogus"], "NoSuchOption"),
        (["agent", "run", "--json"], "MissingParameter"),
    ],
)
def test_with_json_a_malformed_command_line_is_one_json_object_too(
    app: Project, args: list[str], kind: str
) -> None:
    result = run_in(app, *args)  # parsing happens before any command: the console script
    code = EXIT_USAGE
    assert result.returncode == code, result.stderr
    error = json.loads(result.stdout)["error"]
    assert (error["type"], error["exit_code"]) == (kind, code)
    # The human message is on stderr as well.
    assert "Error: " in result.stderr
    assert " ".join(error["message"].split())[:40] in " ".join(result.stderr.split())
