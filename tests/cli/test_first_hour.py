"""The first hour without a project: `tether prompt` (and `tether TEXT`), `tether models`,
`tether keys set`, the runs they log; and `tether init`'s scaffold, through the real command."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner, Result

from tether.cli import EXIT_PROJECT, EXIT_USAGE, app
from tether.cli._app import _with_prompt
from tether.llm._keys import keys_path
from tether.llm.openai_chat import OpenAIChatClient

SRC = Path(__file__).resolve().parents[2] / "src"


def invoke(*args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(app, list(args), input=input, prog_name="tether")


@pytest.fixture
def nowhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory in no project."""
    here = tmp_path / "nowhere"
    here.mkdir()
    monkeypatch.chdir(here)
    return here


def tether(*args: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """The real `tether` command, on this checkout's sources."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["PYTHONPATH"] = str(SRC)
    return subprocess.run(
        [sys.executable, "-m", "tether", *args],
        cwd=cwd,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


# -- prompt ----------------------------------------------------------------------------------


def test_prompt_streams_the_answer_and_logs_the_run_where_runs_list_finds_it(
    nowhere: Path,
) -> None:
    asked = invoke("prompt", "What is 2 + 2?", "-m", "test")
    assert asked.exit_code == 0, asked.output
    assert asked.stdout == "What is 2 + 2?\n"
    assert "run " in asked.stderr
    listed = invoke("runs", "list", "--json")
    assert listed.exit_code == 0, listed.output
    (run,) = json.loads(listed.stdout)
    assert run["name"] == "prompt" and run["status"] == "completed"
    shown = invoke("runs", "show", run["run_id"])
    assert shown.exit_code == 0 and "What is 2 + 2?" in shown.stdout


def test_prompt_takes_a_system_prompt_and_attached_files(nowhere: Path) -> None:
    notes = nowhere / "notes.md"
    notes.write_text("# Notes\nbuy milk\n", encoding="utf-8")
    asked = invoke("prompt", "Summarize", "-m", "test", "-s", "Be brief.", "--attach", str(notes))
    assert asked.exit_code == 0, asked.output
    # The echo model answers with the whole user message: the text, then the file.
    assert asked.stdout == 'Summarize\n\n<file name="notes.md">\n# Notes\nbuy milk\n</file>\n'
    run_id = json.loads(invoke("runs", "list", "--json").stdout)[0]["run_id"]
    shown = json.loads(invoke("runs", "show", run_id, "--json").stdout)
    assert "Be brief." in json.dumps(shown["events"])


def test_a_binary_attachment_or_an_empty_prompt_is_refused(nowhere: Path) -> None:
    blob = nowhere / "x.bin"
    blob.write_bytes(b"\xff\xfe\x00")
    refused = invoke("prompt", "look", "-m", "test", "--attach", str(blob))
    assert refused.exit_code == EXIT_USAGE and "not a UTF-8 text file" in refused.stderr
    empty = invoke("prompt", "  ", "-m", "test")
    assert empty.exit_code == EXIT_USAGE and "the prompt is empty" in empty.stderr


def test_prompt_without_a_model_or_a_key_says_what_to_do(nowhere: Path) -> None:
    asked = invoke("prompt", "hi")
    assert asked.exit_code == EXIT_PROJECT
    assert asked.stderr.startswith("Error: no model: no provider key is set")
    assert "-m test" in asked.stderr and "tether keys set" in asked.stderr
    bad = invoke("prompt", "hi", "-m", "gpt-4o")
    assert bad.exit_code == EXIT_USAGE and "--model is not 'provider:model'" in bad.stderr


def test_tether_model_env_is_the_default(nowhere: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TETHER_MODEL", "test:echo")
    asked = invoke("prompt", "from the env")
    assert (asked.exit_code, asked.stdout) == (0, "from the env\n")


def test_a_bare_text_is_a_prompt_and_commands_stay_commands() -> None:
    assert _with_prompt(["hello there"]) == ["prompt", "hello there"]
    assert _with_prompt(["--store", "memory", "hi", "-m", "test"]) == [
        "--store",
        "memory",
        "prompt",
        "hi",
        "-m",
        "test",
    ]
    assert _with_prompt(["runs", "list"]) == ["runs", "list"]
    assert _with_prompt(["init"]) == ["init"]
    assert _with_prompt(["--help"]) == ["--help"]
    assert _with_prompt(["agnet", "list"]) == ["agnet", "list"]  # a typo stays a typo
    assert _with_prompt(["hello"]) == ["prompt", "hello"]


def test_a_mistyped_command_is_named_with_the_command_meant() -> None:
    # The commands are built as they are named: a typo still sees all of them.
    typo = invoke("agnet", "list")
    assert typo.exit_code == EXIT_USAGE
    assert "No such command 'agnet'. Did you mean 'agent'?" in typo.stderr


def test_tether_text_through_the_real_command(tmp_path: Path) -> None:
    done = tether("Hello, command", "-m", "test", cwd=tmp_path)
    assert (done.returncode, done.stdout) == (0, "Hello, command\n"), done.stderr


# -- models and keys -------------------------------------------------------------------------


def test_keys_set_stores_the_key_private_and_it_is_used_after_the_environment(
    nowhere: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = json.loads(invoke("models", "--json").stdout)
    assert {m["model"]: m["key"] for m in before}["openai:gpt-4o"] is False
    assert {m["model"]: m["key_from"] for m in before}["test"] == "not needed"
    stored = invoke("keys", "set", "openai", input="sk-stored-0123456789\n")
    assert stored.exit_code == 0, stored.output
    path = keys_path()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert json.loads(path.read_text()) == {"openai": "sk-stored-0123456789"}
    after = {m["model"]: m for m in json.loads(invoke("models", "--json").stdout)}
    assert after["openai:gpt-4o"]["key"] is True
    assert after["openai:gpt-4o"]["key_from"] == str(path)
    assert after["openai-responses:gpt-5"]["key_from"] == str(path)  # one key for both APIs
    assert after["anthropic:claude-sonnet-4-5"]["key"] is False
    assert OpenAIChatClient("gpt-4o").api_key == "sk-stored-0123456789"
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    assert OpenAIChatClient("gpt-4o").api_key == "sk-from-env"  # the environment comes first
    env = {m["model"]: m for m in json.loads(invoke("models", "--json").stdout)}
    assert env["openai:gpt-4o"]["key_from"] == "$OPENAI_API_KEY"
    listed = invoke("models")
    assert listed.exit_code == 0 and "openai:gpt-4o-mini" in listed.stdout
    assert "`tether prompt` without -m uses openai:gpt-4o-mini" in listed.stderr


def test_keys_set_refuses_an_unknown_provider_or_an_empty_key(nowhere: Path) -> None:
    unknown = invoke("keys", "set", "opnai", input="k\n")
    assert unknown.exit_code == EXIT_USAGE and "no provider 'opnai'" in unknown.stderr
    empty = invoke("keys", "set", "openai", input="\n")
    assert empty.exit_code == EXIT_USAGE and "no key given" in empty.stderr
    assert not keys_path().exists()


# -- init ------------------------------------------------------------------------------------


def test_init_writes_the_scaffold_and_refuses_to_overwrite(tmp_path: Path) -> None:
    target = tmp_path / "proj"
    made = invoke("init", str(target), "--model", "anthropic:claude-sonnet-4-5")
    assert made.exit_code == 0, made.output
    assert 'MODEL = "anthropic:claude-sonnet-4-5"' in (target / "app.py").read_text()
    assert (target / ".gitignore").read_text().startswith("# tether's store")
    (target / "app.py").write_text("# mine\n")
    again = invoke("init", str(target))
    assert again.exit_code == EXIT_USAGE
    assert "already exists" in again.stderr and "overwrites nothing" in again.stderr
    assert (target / "app.py").read_text() == "# mine\n"
    bad = invoke("init", str(tmp_path / "other"), "-m", "gpt-4o")
    assert bad.exit_code == EXIT_USAGE and not (tmp_path / "other").exists()


@pytest.fixture
def scaffold(tmp_path: Path) -> Path:
    project = tmp_path / "first"
    made = tether("init", str(project), cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    return project


def test_the_scaffold_works_with_every_command_at_once(scaffold: Path) -> None:
    listed = tether("agent", "list", "--json", cwd=scaffold)
    assert [(a["id"], a["model"]) for a in json.loads(listed.stdout)] == [("assistant", "test")]
    ran = tether("agent", "run", "assistant", "Hello", cwd=scaffold)
    assert (ran.returncode, ran.stdout) == (0, "Hello\n"), ran.stderr
    chatted = tether("chat", "assistant", cwd=scaffold, stdin="one\ntwo\n")
    assert chatted.returncode == 0 and "one" in chatted.stdout and "two" in chatted.stdout
    evaluated = tether(
        "eval", "run", "assistant", "--dataset", "datasets/smoke.jsonl", cwd=scaffold
    )
    assert evaluated.returncode == 0, evaluated.stdout + evaluated.stderr
    assert "2 passed, 0 failed" in evaluated.stdout
    tools = tether("agent", "run", "assistant", "count", "-m", "test:tools", cwd=scaffold)
    assert (tools.returncode, tools.stdout) == (0, '{"count_words": "1"}\n'), tools.stderr
    assert "count_words" in tools.stderr  # the tool call is shown


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def ui_process(scaffold: Path) -> Iterator[tuple[subprocess.Popen[str], int]]:
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["PYTHONPATH"] = str(SRC)
    process = subprocess.Popen(
        [sys.executable, "-m", "tether", "ui", "--port", str(port)],
        cwd=scaffold,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        yield process, port
    finally:
        process.terminate()
        process.wait(30)


def _get(port: int, path: str, process: subprocess.Popen[str]) -> httpx.Response:
    deadline = time.monotonic() + 60
    while True:
        try:
            return httpx.get(f"http://127.0.0.1:{port}{path}", timeout=10)
        except httpx.TransportError:
            assert process.poll() is None, "tether ui exited"
            assert time.monotonic() < deadline, "tether ui did not answer"
            time.sleep(0.1)


def test_the_scaffold_is_served_by_tether_ui(ui_process: tuple[subprocess.Popen[str], int]) -> None:
    process, port = ui_process
    agents = _get(port, "/agents", process)
    assert agents.status_code == 200 and "assistant" in agents.text


def test_a_port_in_use_is_one_line_naming_the_port_and_exits_3(scaffold: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        for command in ("ui", "serve"):
            done = tether(command, "--port", str(port), cwd=scaffold)
            assert done.returncode == EXIT_PROJECT, done.stderr
            first, *rest = done.stderr.splitlines()
            assert first.startswith(f"Error: port {port} on 127.0.0.1 is in use")
            assert rest == [f"Stop what listens there, or pass --port N (e.g. --port {port + 1}; "
                            "--port 0 picks a free one)."]  # fmt: skip


def test_ui_outside_a_project_shows_the_prompts(
    nowhere: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tether.serve._server

    assert invoke("prompt", "logged", "-m", "test").exit_code == 0
    calls: list[dict[str, Any]] = []

    def serve_with(runtime: Any, options: Any, **kwargs: Any) -> None:
        import asyncio

        calls.append({"runs": asyncio.run(runtime.run_store.list_runs()), **kwargs})

    # The server itself is not started: what it would serve is what this test reads.
    monkeypatch.setattr(tether.serve._server, "serve_with", serve_with)
    served = invoke("ui", "--port", "0")
    assert served.exit_code == 0, served.output
    (call,) = calls
    assert [r.name for r in call["runs"]] == ["prompt"]
    assert sorted(call["registry"].agents) == ["prompt"]


def test_the_first_project_page_shows_the_scaffold_as_written() -> None:
    from tether.cli._init import SCAFFOLD

    page = (Path(__file__).resolve().parents[2] / "docs" / "first-project.md").read_text()
    app = SCAFFOLD["app.py"].format(model='"test"')
    assert "```python\n" + app + "```" in page
    for name in SCAFFOLD:
        assert f"`{name}`" in page
