"""`tether chat`: piped input (each line a message, plain text out) in-process, and the
interactive chat under a real pseudo-terminal (pexpect): streaming, history, multi-line input,
Ctrl-C cancelling the turn and not the chat, /new, /scope, /exit, Ctrl-D."""

from __future__ import annotations

import io
import os
import re
import sys
from pathlib import Path

import pexpect
import pyte
import pytest

from tether.cli._chat import _messages

from .conftest import Project, lines

TETHER = Path(sys.executable).parent / "tether"


def test_piped_messages_are_one_conversation(project: Project) -> None:
    result = project.invoke("chat", "echo", "--scope", "piped", input="Hello\nAgain\n")
    assert result.exit_code == 0, result.output
    assert lines(result.stdout) == [
        "you said: Hello (1 messages)",
        "you said: Again (3 messages)",  # the second turn sees the first: one scope
    ]
    assert [r["role"] for r in project.stored("piped")] == [
        "system",
        "user",
        "assistant",
        "user",
        "assistant",
    ]


def test_piped_multi_line_messages_and_commands(project: Project) -> None:
    script = "\n".join(
        [
            "first \\",
            "line",
            '"""',
            "a block",
            "",
            "of lines",
            '"""',
            "/scope",
            "/new",
            "fresh",
            "/scope piped-2",
            "//slash",
            "/nope",
            "/exit",
            "never sent",
        ]
    )
    result = project.invoke("chat", "echo", "-s", "piped-1", input=script + "\n")
    assert result.exit_code == 0, result.output
    assert lines(result.stdout) == [
        "you said: first",
        "line (1 messages)",
        "you said: a block",
        "of lines (3 messages)",
        "you said: fresh (1 messages)",  # /new: a conversation of its own
        "you said: /slash (1 messages)",  # //slash sends /slash, on scope piped-2
    ]
    assert "scope piped-1" in result.stderr
    assert "Now on scope piped-2 (0 messages stored)" in result.stderr
    assert "Unknown command /nope" in result.stderr
    assert "never sent" not in result.stdout
    assert len(project.stored("piped-1")) == 5  # the pinned prompt, then two turns
    first = project.stored("piped-1")[1]
    assert first["content"][0]["text"] == "first \nline"


def test_a_failed_turn_does_not_end_the_chat(project: Project) -> None:
    result = project.invoke("chat", "echo", "-s", "f", input="fail\nafter\n")
    assert result.exit_code == 0, result.output
    assert "Error: the turn failed: LLMError" in result.stderr
    assert lines(result.stdout)[-1].startswith("you said: after")


def test_an_unknown_agent_is_a_usage_error(project: Project) -> None:
    result = project.invoke("chat", "nobody", input="hi\n")
    assert result.exit_code == 2
    assert "tether agent list" in result.stderr


# -- a real terminal -----------------------------------------------------------------------------


def spawn(project: Project, *args: str) -> pexpect.spawn[str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(TERM="xterm-256color", COLUMNS="100", LINES="40", PYTHONUNBUFFERED="1")
    child = pexpect.spawn(
        str(TETHER),
        ["chat", *args],
        cwd=str(project.root),
        env=env,
        encoding="utf-8",
        # Every expect waits for the text it names; this only bounds a hang (the command's
        # start under load on a busy machine takes seconds, not tens of them).
        timeout=120,
        dimensions=(40, 100),
    )
    child.expect("Ctrl-D leaves")
    return child


def plain(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text)


@pytest.mark.skipif(sys.platform == "win32", reason="a POSIX pseudo-terminal")
def test_the_interactive_chat_under_a_terminal(project: Project) -> None:
    child = spawn(project, "echo", "--scope", "tty")
    child.expect("you> ")
    child.sendline("Hello **there**")
    child.expect("you said: Hello")
    child.expect("you> ")
    assert "**" not in plain(child.before or "")  # Markdown rendered, not printed as is
    # A backslash continues the message on the next line.
    child.sendline("one \\")
    child.expect(r"\.\.\.  ")
    child.sendline("two")
    child.expect(r"\(3 messages\)")
    child.expect("you> ")
    # Ctrl-C at the prompt clears the line and the chat goes on.
    child.send("half a thought")
    # Ctrl-C only once readline has read the keys: a SIGINT that lands while it is handling them
    # (not waiting in select) is seen only at the next key press.
    child.expect("thought")
    child.sendintr()
    child.expect("you> ")
    child.sendline("/scope")
    child.expect("scope tty")
    child.expect("you> ")
    child.sendline("/exit")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    assert len(project.stored("tty")) == 5


@pytest.mark.skipif(sys.platform == "win32", reason="a POSIX pseudo-terminal")
def test_ctrl_c_cancels_the_turn_not_the_chat_and_ctrl_d_leaves(project: Project) -> None:
    child = spawn(project, "stopper", "--scope", "cancel")
    child.expect("you> ")
    child.sendline("wait")  # the tool waits until cancelled
    child.expect("WAITING")
    child.sendintr()
    child.expect("marked cancelled")
    child.expect("you> ")
    child.sendline("noop")  # the chat is still there, on the same conversation
    child.expect("the tool said ok")
    child.expect("you> ")
    child.sendeof()  # Ctrl-D
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    stored = project.stored("cancel")
    # The cancelled turn completed no round: its message is kept, with what the answer had
    # said, marked cancelled (no dangling tool call); the next turn is whole.
    assert [r["role"] for r in stored] == ["user", "assistant", "user", "assistant", "tool", "assistant"]  # fmt: skip
    assert stored[0]["content"][0]["text"] == "wait"
    assert stored[1].get("cancelled") is True
    assert stored[1]["content"][0]["text"].startswith("calling wait\n\n[cancelled by the user")
    assert stored[2]["content"][0]["text"] == "noop"
    history = project.root / ".tether" / "chat_history"
    assert "noop" in history.read_text()


@pytest.mark.skipif(sys.platform == "win32", reason="a POSIX pseudo-terminal")
def test_a_cancelled_answer_is_on_the_screen_once(project: Project) -> None:
    # What the terminal shows, not the bytes written to it: a live answer is drawn again as it
    # grows (cursor moves and rewrites), which a terminal emulator turns back into a screen.
    screen = pyte.Screen(100, 40)
    terminal = pyte.Stream(screen)
    child = spawn(project, "stopper", "--scope", "once")
    child.expect("you> ")
    shown = io.StringIO()
    child.logfile_read = shown
    # Two rounds: "calling noop" streams and its tool runs, then "calling wait" streams and its
    # tool waits until the Ctrl-C.
    child.sendline("noop then wait")
    child.expect("WAITING")
    child.sendintr()
    child.expect("marked cancelled")
    child.expect("you> ")
    child.logfile_read = None
    child.sendeof()
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    terminal.feed(shown.getvalue())
    lines = [line.rstrip() for line in screen.display if line.strip()]
    # The partial answer stays on the screen as it streamed, once; nothing prints it again.
    assert [line for line in lines if "calling" in line] == ["calling noop", "calling wait"], (
        "\n".join(lines) + repr(shown.getvalue())
    )
    assert sum("marked cancelled" in line for line in lines) == 1, lines
    stored = project.stored("once")
    assert stored[0]["content"][0]["text"] == "noop then wait"
    assert [r["role"] for r in stored] == ["user", "assistant", "tool"]  # the round completed


def test_input_lines_make_messages() -> None:
    given = ["one\\", "two", "", '"""', "in", "", "block", '"""', "three", '"""', "unclosed"]
    assert list(_messages(iter(given))) == ["one\ntwo", "in\n\nblock", "three", "unclosed"]
    assert list(_messages(iter(given), interactive=True)) == ["one\ntwo"]
    assert list(_messages(iter(['"""', "a", '"""', "b"]), interactive=True)) == ["a"]
    assert list(_messages(iter(["", "a"]), interactive=True)) == []
