"""Every evaluator type, passing and failing; Python callables; an evaluator that raises."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from tether.errors import ConfigError
from tether.evals import Case, CaseResult, EvaluationResult, FunctionEvaluator, evaluate
from tether.evals._evaluators import coerce, evaluator_from_spec
from tether.lab import Runtime


def result(output: Any = "", **fields: Any) -> CaseResult:
    text = output if isinstance(output, str) else __import__("json").dumps(output)
    base: dict[str, Any] = {
        "output": output,
        "text": text,
        "run_id": "r1",
        "kind": "agent",
        "latency_ms": 10.0,
    }
    return CaseResult(**{**base, **fields})


async def verdict(
    spec: dict[str, Any], res: CaseResult, case: Case | None = None
) -> EvaluationResult:
    evaluator = evaluator_from_spec(spec)
    return await evaluator.evaluate(case or Case("c", "in"), res, None)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("spec", "output", "case", "passed"),
    [
        ({"type": "equals"}, " Paris\n", Case("c", "q", "Paris", has_expected=True), True),
        ({"type": "equals"}, "Lyon", Case("c", "q", "Paris", has_expected=True), False),
        ({"type": "equals"}, '{"a": 1}', Case("c", "q", {"a": 1}, has_expected=True), True),
        ({"type": "equals"}, {"a": 2}, Case("c", "q", {"a": 1}, has_expected=True), False),
        ({"type": "contains", "value": "Par"}, "Paris", None, True),
        ({"type": "contains", "value": "par"}, "Paris", None, False),
        ({"type": "contains", "value": "par", "case_sensitive": False}, "Paris", None, True),
        ({"type": "contains", "value": 2}, [1, 2], None, True),
        ({"type": "contains", "value": {"k": 1}}, {"k": 1, "j": 2}, None, True),
        ({"type": "contains", "value": "zz"}, {"k": 1}, None, False),
        ({"type": "regex", "pattern": r"\d{3}"}, "call 555 now", None, True),
        ({"type": "regex", "pattern": r"^\d+$"}, "call 555", None, False),
        (
            {"type": "json_schema", "schema": {"type": "object", "required": ["a"]}},
            '{"a": 1}',
            None,
            True,
        ),
        (
            {
                "type": "json_schema",
                "schema": {"type": "object", "properties": {"a": {"type": "string"}}},
            },
            {"a": 1},
            None,
            False,
        ),
        ({"type": "json_schema", "schema": {"type": "object"}}, "not json", None, False),
    ],
)
async def test_output_evaluators(
    spec: dict[str, Any], output: Any, case: Any, passed: bool
) -> None:
    got = await verdict(spec, result(output), case)
    assert got.passed is passed
    assert got.score == (1.0 if passed else 0.0)
    assert (got.reason is None) is passed


async def test_a_json_schema_failure_says_where() -> None:
    spec = {
        "type": "json_schema",
        "schema": {"type": "object", "properties": {"a": {"type": "string"}}},
    }
    got = await verdict(spec, result({"a": 1}))
    assert got.reason == "a: 1 is not of type 'string'"


async def test_equals_without_expected_is_an_error_of_that_case() -> None:
    with pytest.raises(ConfigError, match="has no 'expected'"):
        await verdict({"type": "equals"}, result("x"))


async def test_tool_called_by_name_and_by_arguments() -> None:
    calls = [{"name": "lookup", "arguments": {"q": "x", "n": {"deep": 1, "other": 2}}}]
    res = result("done", tool_calls=calls)
    assert (await verdict({"type": "tool_called", "name": "lookup"}, res)).passed is True
    subset = {"type": "tool_called", "name": "lookup", "arguments": {"n": {"deep": 1}}}
    assert (await verdict(subset, res)).passed is True
    wrong = {"type": "tool_called", "name": "lookup", "arguments": {"q": "y"}}
    got = await verdict(wrong, res)
    assert got.passed is False and "never with" in (got.reason or "")
    other = await verdict({"type": "tool_called", "name": "search"}, res)
    assert other.passed is False and other.reason == "search was not called (called: lookup)"
    named = evaluator_from_spec(
        {"type": "tool_called", "name": "lookup", "evaluator_name": "looked up"}
    )
    assert named.name == "looked up"


async def test_max_latency_and_max_cost() -> None:
    spec = {"type": "max_latency_ms", "value": 100}
    assert (await verdict(spec, result(latency_ms=99.0))).passed is True
    slow = await verdict(spec, result(latency_ms=250.0))
    assert slow.passed is False and slow.reason == "250 ms (limit 100 ms)"
    cost = {"type": "max_cost_usd", "value": 0.01}
    assert (await verdict(cost, result(cost_usd=0.004))).passed is True
    assert (await verdict(cost, result(cost_usd=0.02))).passed is False
    unknown = await verdict(cost, result(cost_usd=None, cost_note="no price for 'script'"))
    assert (unknown.passed, unknown.score) == (None, None)
    assert unknown.reason == "cost unknown: no price for 'script'"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (True, (True, 1.0, None)),
        (False, (False, 0.0, None)),
        (0.7, (True, 0.7, None)),
        (0.2, (False, 0.2, None)),
        ({"score": 0.9, "reason": "close"}, (True, 0.9, "close")),
        ({"score": 0.9, "passed": False}, (False, 0.9, None)),
        ({"passed": True, "reason": "ok"}, (True, 1.0, "ok")),
    ],
)
def test_what_a_python_evaluator_may_return(value: Any, expected: tuple[Any, ...]) -> None:
    got = coerce(value)
    assert (got.passed, got.score, got.reason) == expected


@pytest.mark.parametrize("value", [None, "yes", {"grade": 1}, {"score": "high"}])
def test_what_a_python_evaluator_may_not_return(value: Any) -> None:
    with pytest.raises(TypeError):
        coerce(value)


async def test_callables_judges_and_raising_evaluators_in_an_experiment(lab: Runtime) -> None:
    def says_echo(case: Case, res: CaseResult) -> bool:
        return res.text.startswith("echo")

    async def length(case: Case, res: CaseResult) -> dict[str, Any]:
        return {"score": len(res.text) / 100, "reason": f"{len(res.text)} chars"}

    def explodes(case: Case, res: CaseResult) -> bool:
        if case.id == "b":
            raise ValueError("cannot grade b")
        return True

    report = await evaluate(
        lab,
        "echo",
        [
            {"id": "a", "input": "hello"},
            {"id": "b", "input": "there"},
            {"id": "c", "input": "fail"},
        ],
        evaluators=[
            says_echo,
            FunctionEvaluator(length, name="length", threshold=0.1),
            explodes,
            {"type": "judge", "agent": "judge", "rubric": "The answer echoes the input."},
        ],
        experiment="graded",
    )
    cases = {c["id"]: c for c in report["cases"]}
    assert cases["a"]["status"] == "passed"
    assert cases["a"]["results"]["says_echo"] == {"passed": True, "score": 1.0, "reason": None}
    assert cases["a"]["results"]["length"] == {"passed": True, "score": 0.11, "reason": "11 chars"}
    assert cases["a"]["results"]["judge"] == {"passed": True, "score": 1.0, "reason": "says echo"}
    # An evaluator that raises makes that case an error, with its message; the rest went on.
    assert cases["b"]["status"] == "error"
    assert cases["b"]["results"]["explodes"] == {
        "passed": False,
        "score": None,
        "reason": "ValueError: cannot grade b",
        "error": True,
    }
    assert cases["b"]["results"]["judge"]["passed"] is True
    # A run that fails is an error of its case; its evaluators did not run on nothing.
    assert cases["c"]["status"] == "error"
    assert cases["c"]["error"] == "LLMError: the provider is down"
    assert cases["c"]["results"]["says_echo"]["reason"].startswith("not evaluated: the run failed")
    assert report["evaluators"]["explodes"] == {"passed": 1, "total": 3, "rate": 0.333333}
    # The judge's own episodes are recorded, tagged with the case.
    judged = [r for r in await lab.run_store.list_runs(limit=100) if r.name == "judge"]
    assert sorted(t for r in judged for t in r.tags if t.startswith("case:")) == [
        "case:a",
        "case:b",
    ]
    assert all("judge:judge" in r.tags for r in judged)


async def test_a_judge_naming_an_unknown_agent_is_an_error_of_each_case(lab: Runtime) -> None:
    report = await evaluate(
        lab,
        "echo",
        [{"id": "a", "input": "x"}],
        evaluators=[{"type": "judge", "agent": "nobody", "rubric": "r"}],
        experiment="nojudge",
    )
    [case] = report["cases"]
    assert case["status"] == "error"
    assert "no agent 'nobody'" in case["results"]["judge"]["reason"]


async def test_tool_called_sees_the_episode_tool_calls(lab: Runtime) -> None:
    report = await evaluate(
        lab,
        "tooler",
        [{"id": "t", "input": "cats"}],
        evaluators=[
            {"type": "tool_called", "name": "lookup", "arguments": {"q": "cats"}},
            {"type": "contains", "value": "<cats>"},
        ],
        experiment="tools",
    )
    [case] = report["cases"]
    assert case["status"] == "passed", case


def test_the_experiment_engines_load_jsonschema_only_for_a_json_schema_evaluator() -> None:
    # A Ray worker imports tether.evals._ray before its first case: JSON Schema's validators
    # (over 0.1 s of imports) are loaded by the json_schema evaluator only.
    code = "import sys, tether.evals._ray; print('jsonschema' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False"]


def test_the_experiment_engines_build_no_pydantic_model_before_a_judge_runs() -> None:
    # The judge's structured output (a pydantic model) is built on its first use: importing
    # tether.evals._ray (a Ray worker's import before its first case) builds no model, which
    # would load pydantic's model machinery (tens of milliseconds).
    code = "import sys, tether.evals._ray; print('pydantic.main' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False"]
