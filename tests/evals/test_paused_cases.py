"""Experiments never pause: a case whose run pauses on a call that waits for a decision is an
error case, unless the case's `decisions` (by tool name or call id) answer every pause."""

from __future__ import annotations

from typing import Any

import pytest

from tether import define_tool
from tether.errors import DatasetError
from tether.evals import Dataset, evaluate
from tether.lab import Runtime
from tether.testing import script_client


def guarded(request: Any) -> dict[str, Any]:
    """Asks to send an email first; answers with what came back."""
    results = [p for m in request["messages"] for p in m["content"] if p["type"] == "tool_result"]
    if not results:
        return {"tool_use": [{"name": "send_email", "input": {"to": "ann@example.com"}}]}
    return {"text": f"sent? {results[-1]['output']}"}


@pytest.fixture
async def mailer() -> Any:
    lab = Runtime(store="memory", version=False)
    sent: list[Any] = []
    send = define_tool(
        name="send_email",
        input_schema={"type": "object"},
        execute=lambda value: sent.append(value) or "sent",
        approval=True,
    )
    lab.create_agent(id="mailer", model=script_client([guarded] * 12), tools=[send])
    yield lab, sent
    await lab.aclose()


async def test_a_case_that_pauses_without_decisions_is_an_error_case(mailer: Any) -> None:
    lab, sent = mailer
    report = await evaluate(lab, "mailer", [{"id": "a", "input": "write to ann"}])
    [case] = report["cases"]
    assert case["status"] == "error" and sent == []
    assert "send_email (approval" in case["error"] and "give the case 'decisions'" in case["error"]


async def test_a_cases_decisions_answer_each_pause(mailer: Any) -> None:
    lab, sent = mailer
    cases: list[dict[str, Any]] = [
        {"id": "yes", "input": "write to ann", "decisions": {"send_email": "approve"}},
        {
            "id": "no",
            "input": "write to ann",
            "decisions": {"send_email": {"action": "deny", "reason": "not today"}},
            "evaluators": [{"type": "contains", "value": "not today"}],
        },
        {"id": "other", "input": "write to ann", "decisions": {"lookup": "approve"}},
    ]
    report = await evaluate(lab, "mailer", cases)
    by_id = {c["id"]: c for c in report["cases"]}
    assert by_id["yes"]["status"] == "passed" and by_id["yes"]["runs"][0]["output"] == "sent? sent"
    assert by_id["no"]["status"] == "passed"
    assert by_id["other"]["status"] == "error" and "name no 'send_email'" in by_id["other"]["error"]
    assert sent == [{"to": "ann@example.com"}]
    run = await lab.run_store.get_run(by_id["yes"]["run_id"])
    assert run is not None and run.status == "completed"
    events = await lab.run_store.events(by_id["yes"]["run_id"])
    assert [e["data"]["decided_by"] for e in events if e["type"] == "decision"] == ["experiment"]


def test_bad_decisions_are_dataset_errors() -> None:
    for bad, message in (
        ([1], "must be an object"),
        ({"x": "maybe"}, "a decision is 'approve', 'deny'"),
        ({"x": {"action": "result"}}, "needs a string 'output'"),
    ):
        with pytest.raises(DatasetError, match=message):
            Dataset.of([{"id": "a", "input": "x", "decisions": bad}])
