"""Reports from stored records: percentiles, costs known and unknown, repeats, and compare's
fixed / broken / changed."""

from __future__ import annotations

from typing import Any

from tether.evals import compare, percentiles, report
from tether.evals._case import _cost_of
from tether.evals._record import ExperimentState
from tether.stores.run_store import RunInfo


def record(case: str, status: str, *, repeat: int = 0, score: float = 1.0, **extra: Any) -> Any:
    passed = status == "passed"
    return {
        "case": case,
        "repeat": repeat,
        "run_id": f"{case}-{repeat}-{status}",
        "status": status,
        "results": {"check": {"passed": passed, "score": score if passed else 0.0, "reason": None}},
        "latency_ms": extra.get("latency_ms", 10.0),
        "usage": {"input_tokens": 3, "output_tokens": 2},
        "cost_usd": extra.get("cost_usd"),
        "error": None,
        "output": "x",
    }


def state(name: str, records: list[Any], cases: list[str], repeat: int = 1) -> ExperimentState:
    header = {"generation": 1, "cases": cases, "evaluators": ["check"], "repeat": repeat}
    finished = {(r["case"], r["repeat"]): r for r in records}
    return ExperimentState(
        name,
        RunInfo(run_id=f"experiment:{name}", kind="experiment", name=name),
        header,
        repeat,
        finished,
    )


def test_percentiles_are_nearest_rank() -> None:
    got = percentiles([float(i) for i in range(1, 101)])
    assert (got["p50"], got["p90"], got["p99"], got["max"], got["count"]) == (50, 90, 99, 100, 100)
    assert percentiles([])["p50"] is None


def test_costs_add_up_when_every_run_has_one_and_are_unknown_otherwise() -> None:
    known = report(
        state(
            "k",
            [record("a", "passed", cost_usd=0.002), record("b", "passed", cost_usd=0.003)],
            ["a", "b"],
        )
    )
    assert known["cost_usd"]["total"] == 0.005 and known["cost_usd"]["unknown"] == 0
    mixed = report(
        state("m", [record("a", "passed", cost_usd=0.002), record("b", "passed")], ["a", "b"])
    )
    assert mixed["cost_usd"]["total"] == 0.002 and mixed["cost_usd"]["unknown"] == 1
    assert [c["cost_usd"] for c in mixed["cases"]] == [0.002, None]


def test_cost_of_run_records() -> None:
    paid = [
        RunInfo(run_id="1", kind="agent", name="a", cost_usd=0.25),
        RunInfo(run_id="2", kind="agent", name="a", cost_usd=0.5),
    ]
    assert _cost_of(paid) == (0.75, None)
    free = RunInfo(run_id="3", kind="agent", name="a", meta={"model": "script"})
    total, note = _cost_of([*paid, free])
    assert total is None
    assert note == "run 3 records no cost_usd (no price known for model 'script')"


def test_a_case_with_repeats_passes_only_if_all_pass_and_pending_until_all_ran() -> None:
    data = report(
        state(
            "r",
            [
                record("a", "passed", repeat=0),
                record("a", "passed", repeat=1),
                record("b", "passed", repeat=0),
                record("b", "failed", repeat=1),
                record("c", "passed", repeat=0),
            ],
            ["a", "b", "c"],
            repeat=2,
        )
    )
    assert [(c["id"], c["status"], c["pass_rate"]) for c in data["cases"]] == [
        ("a", "passed", 1.0),
        ("b", "failed", 0.5),
        ("c", "pending", 1.0),
    ]
    assert data["evaluators"]["check"] == {"passed": 4, "total": 5, "rate": 0.8}
    assert data["cases"][1]["results"]["check"]["passed"] is False
    assert data["summary"]["pending"] == 1


def test_compare_sorts_cases_into_fixed_broken_changed_and_only_one_side() -> None:
    a = report(
        state(
            "a",
            [
                record("fixme", "failed"),
                record("breakme", "passed"),
                record("score", "passed", score=0.6),
                record("same", "passed", latency_ms=10.0),
                record("gone", "passed"),
            ],
            ["fixme", "breakme", "score", "same", "gone"],
        )
    )
    b = report(
        state(
            "b",
            [
                record("fixme", "passed"),
                record("breakme", "failed"),
                record("score", "passed", score=0.9),
                record("same", "passed", latency_ms=25.0),
                record("new", "passed"),
            ],
            ["fixme", "breakme", "score", "same", "new"],
        )
    )
    diff = compare(a, b)
    assert (diff["fixed"], diff["broken"], diff["changed"]) == (["fixme"], ["breakme"], ["score"])
    assert (diff["only_a"], diff["only_b"]) == (["gone"], ["new"])
    assert diff["regressed"] is True
    same = next(r for r in diff["cases"] if r["id"] == "same")
    assert same["change"] == "same" and same["latency_ms_delta"] == 15.0
    score = next(r for r in diff["cases"] if r["id"] == "score")
    assert score["score_deltas"] == {"check": 0.3}
    assert compare(b, a)["broken"] == ["fixme"]
    assert compare(a, a)["regressed"] is False
