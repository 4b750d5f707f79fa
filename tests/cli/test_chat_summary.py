"""`tether chat` says where older turns were summarized, and /summary shows the summary."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import Project, write_project

LAB = """
from tether import summarize
from tether.lab import Runtime
from tether.testing import script_client

def reply(request):
    return {"text": "answer " + "x" * 300}

lab = Runtime(version="1.2.3")
writer = script_client([{"text": "The user said hello several times."}])
talker = lab.create_agent(
    id="talker",
    model=script_client([reply] * 20),
    history=[summarize(model=writer, when_tokens_over=300, keep_last_turns=2)],
)
"""

CONFIG = """
runtime = "APP.lab:lab"
agents = ["APP.lab:talker"]
store = "sqlite:///.tether/cli.db"
"""


@pytest.fixture
def summarizing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Project:
    root = tmp_path / "project"
    root.mkdir()
    package = write_project(root, LAB, CONFIG)
    monkeypatch.chdir(root)
    return Project(root, package)


def test_the_chat_marks_the_summary_and_shows_it(summarizing: Project) -> None:
    turns = "\n".join(f"hello {i}" for i in range(5))
    result = summarizing.invoke("chat", "talker", "-s", "long", input=f"{turns}\n/summary\n")
    assert result.exit_code == 0, result.output
    err = result.stderr
    assert err.count("were summarized here") == 1
    assert "records 0-" in err  # no pinned prompt: the transcript starts at 0
    assert "The newest summary of older turns:\nThe user said hello several times." in err
    roles: list[str] = [r["role"] for r in summarizing.stored("long")]
    assert roles.count("summary") == 1 and roles.count("user") == 5


def test_summary_says_when_there_is_none(summarizing: Project) -> None:
    result = summarizing.invoke("chat", "talker", "-s", "short", input="hi\n/summary\n")
    assert "No older turns of this conversation were summarized." in result.stderr
