"""`tether chat` on an agent whose tools wait for a person: a paused turn asks inline (`allow
send_email {...}? [y/N/e(dit)]`, a result for an external tool) and goes on with the answer —
piped in-process, and under a real pseudo-terminal (pexpect)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pexpect
import pytest

from .conftest import Project, lines, write_project

TETHER = Path(sys.executable).parent / "tether"

LAB = """
from tether import define_tool
from tether.lab import Runtime
from tether.testing import script_client


def reply(request):
    last = request["messages"][-1]
    if last["role"] == "tool":
        outputs = [p["output"] for p in last["content"] if p["type"] == "tool_result"]
        return {"text": "Done: " + outputs[-1]}
    text = last["content"][-1].get("text", "")
    if text.startswith("mail "):
        return {"tool_use": [{"name": "send_email", "input": {"to": text.split()[1]}}]}
    if text.startswith("color"):
        return {"tool_use": [{"name": "pick_color", "input": {"hint": "warm"}}]}
    return {"text": "Nothing to do."}


lab = Runtime(defaults={"model": script_client([reply] * 50)})
clerk = lab.create_agent(
    id="clerk",
    system_prompt="You send mail.",
    tools=[
        define_tool(
            name="send_email",
            input_schema={"type": "object", "properties": {"to": {"type": "string"}},
                          "required": ["to"]},
            execute=lambda value: "sent to " + value["to"],
            approval=True,
        ),
        define_tool(name="pick_color", input_schema={"type": "object"}, external=True),
    ],
)
"""

CONFIG = """
runtime = "APP.lab:lab"
agents = ["APP.lab:clerk"]
store = "sqlite:///.tether/cli.db"
"""


@pytest.fixture
def clerk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Project:
    root = tmp_path / "project"
    root.mkdir()
    package = write_project(root, LAB, CONFIG)
    monkeypatch.chdir(root)
    return Project(root, package)


def test_piped_answers_decide_the_paused_calls(clerk: Project) -> None:
    script = 'mail ann\ny\nmail bob\nn\ncolor\n"teal"\nmail cy\ne\nnot json\n{"to": "dee"}\n'
    result = clerk.invoke("chat", "clerk", "--scope", "mail", input=script)
    assert result.exit_code == 0, result.output
    assert lines(result.stdout) == [
        "Done: sent to ann",
        "Done: The call to send_email was denied: denied in tether chat",
        "Done: teal",
        "Done: sent to dee",
    ]
    assert 'allow send_email {"to": "ann"}? [y/N/e(dit)]' in result.stderr
    assert 'result of pick_color {"hint": "warm"}' in result.stderr
    assert "That is not JSON" in result.stderr
    stored = clerk.stored("mail")
    outputs = [p["output"] for r in stored for p in r["content"] if p["type"] == "tool_result"]
    assert outputs[0] == "sent to ann" and "denied in tether chat" in outputs[1]
    assert outputs[2:] == ["teal", "sent to dee"]


def test_the_end_of_input_at_a_question_leaves_the_run_paused(clerk: Project) -> None:
    result = clerk.invoke("chat", "clerk", "--scope", "left", input="mail ann\n")
    assert result.exit_code == 0, result.output
    assert "stays paused, waiting for decisions" in result.stderr
    run_id = result.stderr.split("(run ", 1)[1].split()[0]
    assert clerk.run_status(run_id) == "paused"


@pytest.mark.skipif(sys.platform == "win32", reason="a POSIX pseudo-terminal")
def test_a_terminal_chat_asks_and_edits(clerk: Project) -> None:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(TERM="xterm-256color", COLUMNS="100", LINES="40", PYTHONUNBUFFERED="1")
    child = pexpect.spawn(
        str(TETHER),
        ["chat", "clerk", "--scope", "tty"],
        cwd=str(clerk.root),
        env=env,
        encoding="utf-8",
        timeout=120,  # bounds a hang; every expect waits for the text it names
        dimensions=(40, 100),
    )
    child.expect("you> ")
    child.sendline("mail ann")
    child.expect_exact('allow send_email {"to": "ann"}? [y/N/e(dit)] ')
    child.sendline("e")
    child.expect_exact("input JSON> ")
    child.sendline('{"to": "bob"}')
    child.expect("Done: sent to bob")
    child.expect("you> ")
    child.sendline("color")
    child.expect_exact('result of pick_color {"hint": "warm"}')
    child.sendline("teal")
    child.expect("Done: teal")
    child.expect("you> ")
    child.sendline("/exit")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    outputs = [
        p["output"] for r in clerk.stored("tty") for p in r["content"] if p["type"] == "tool_result"
    ]
    assert outputs == ["sent to bob", "teal"]


ASKING = """
from tether.lab import Runtime
from tether.mcp import mcp_server
from tether.testing import create_test_mcp_server, script_client


def reply(request):
    last = request["messages"][-1]
    if last["role"] == "tool":
        return {"text": "Done: " + last["content"][-1]["output"]}
    return {"tool_use": [{"name": "whoami", "input": {}}]}


async def whoami(arguments, call):
    answer = await call.elicit(
        "Who are you?",
        {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
    )
    return "hello " + answer["content"]["name"] if answer["action"] == "accept" else "no name"


server = create_test_mcp_server(tools=[{"name": "whoami", "run": whoami}], modern=True, sse=True)
lab = Runtime(defaults={"model": script_client([reply] * 50)})
greeter = lab.create_agent(
    id="greeter", integrations=[mcp_server(server.url, transport=server, elicitation="pause")]
)
"""


def test_chat_asks_for_the_input_an_mcp_server_elicits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "project"
    root.mkdir()
    config = CONFIG.replace(":clerk", ":greeter")
    project = Project(root, write_project(root, ASKING, config))
    monkeypatch.chdir(root)
    script = 'hi\n{"age": 3}\n{"name": "Ada"}\nhi again\n\n'
    result = project.invoke("chat", "greeter", "--scope", "ask", input=script)
    assert result.exit_code == 0, result.output
    assert lines(result.stdout) == ["Done: hello Ada", "Done: no name"]
    assert "whoami asks: Who are you?" in result.stderr
    assert "answer {name} (a JSON object; empty declines)> " in result.stderr
    # A wrong answer is refused before anything is taken, and asked again.
    assert "does not match the schema asked for" in result.stderr
    assert "decide again" in result.stderr
