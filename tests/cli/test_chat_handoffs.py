"""`tether chat` says who is answering when it changes: at a handoff inside a turn, and when
a later chat on the scope reaches the agent holding it."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import Project, lines, write_project

LAB = """
from tether.lab import Runtime
from tether.testing import script_client


def triage_reply(request):
    last = request["messages"][-1]
    if last["role"] == "user" and "invoice" in last["content"][0]["text"]:
        return {"tool_use": [{"name": "transfer_to_billing", "input": {"reason": "an invoice"}}]}
    return {"text": "triage here"}


def billing_reply(request):
    return {"text": f"billing saw {len(request['messages'])}"}


lab = Runtime(version=False)
billing = lab.create_agent(
    id="billing", system_prompt="You are billing.", model=script_client([billing_reply] * 9)
)
triage = lab.create_agent(
    id="triage",
    system_prompt="You are triage.",
    model=script_client([triage_reply] * 9),
    handoffs=[billing],
)
"""

CONFIG = """
runtime = "APP.lab:lab"
agents = ["APP.lab:triage", "APP.lab:billing"]
store = "sqlite:///.tether/cli.db"
"""


@pytest.fixture
def team(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Project:
    root = tmp_path / "team"
    root.mkdir()
    package = write_project(root, LAB, CONFIG)
    monkeypatch.chdir(root)
    return Project(root, package)


def test_chat_prints_who_answers_when_it_changes(team: Project) -> None:
    result = team.invoke("chat", "triage", "-s", "c", input="hello\nmy invoice?\nthanks\n")
    assert result.exit_code == 0, result.output
    assert lines(result.stdout) == ["triage here", "billing saw 5", "billing saw 7"]
    notices = [x for x in lines(result.stderr) if x.startswith("[") and not x.startswith("[tool]")]
    # Said once, at the handoff; the next turn goes to billing without a new notice.
    assert notices == ["[triage hands over to billing: an invoice]", "[billing is answering]"]
    assert [r.get("agent") for r in team.stored("c") if r["role"] == "assistant"] == [
        "triage",
        "triage",
        "billing",
        "billing",
    ]
    # A new chat on the scope says at once who holds it.
    again = team.invoke("chat", "triage", "-s", "c", input="still there?\n")
    assert again.exit_code == 0, again.output
    assert lines(again.stdout) == ["billing saw 9"]
    assert "[billing is answering]" in lines(again.stderr)
