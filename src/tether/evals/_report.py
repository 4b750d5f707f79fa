"""Reports: an experiment as `show` prints it, and two experiments compared case by case.

`report(state)` is the JSON `tether eval show --json` (and `eval run --json`) prints:

```
{"experiment", "status", "target", "dataset", "versions", "repeat",
 "evaluators": {name: {"passed", "total", "rate"}},
 "cases": [{"id", "run_id", "status", "results": {name: {"passed", "score", "reason"}},
            "runs", "pass_rate", "latency_ms", "tokens", "cost_usd", "error"}],
 "summary": {...}, "latency_ms": {...}, "tokens": {...}, "cost_usd": {...}}
```

A case's status is `passed` when every repeat passed every evaluator, `failed` when a repeat
failed one, `error` when a run or an evaluator raised, `pending` while repeats are missing.
An evaluator's `passed`/`total` count runs (repeats included); a verdict that cannot be decided
(an unknown cost) counts in neither.

`compare(a, b)` is what `tether eval compare A B --json` prints:
`{"a", "b", "fixed", "broken", "changed", "only_a", "only_b", "cases", "summary", "regressed"}`.
`broken` holds the cases A passed that B failed or errored: B regressed when it is not empty.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ._record import ExperimentState

__all__ = ["compare", "percentiles", "report"]


def percentiles(values: Sequence[float]) -> dict[str, float | int | None]:
    """count, mean, p50, p90, p99 and max of `values` (nearest rank); None when empty."""
    data = sorted(values)
    if not data:
        return {"count": 0, "mean": None, "p50": None, "p90": None, "p99": None, "max": None}

    def rank(p: float) -> float:
        return data[max(0, math.ceil(p / 100 * len(data)) - 1)]

    return {
        "count": len(data),
        "mean": round(sum(data) / len(data), 6),
        "p50": rank(50),
        "p90": rank(90),
        "p99": rank(99),
        "max": data[-1],
    }


def _tokens(usage: Any) -> int:
    if not isinstance(usage, dict):
        return 0
    return int(usage.get("input_tokens", 0) or 0) + int(usage.get("output_tokens", 0) or 0)


def _aggregate(runs: list[dict[str, Any]], names: list[str]) -> dict[str, dict[str, Any]]:
    """One case's result per evaluator over its repeats: passed only if every run passed, the
    mean score, the first failing run's reason."""
    out: dict[str, dict[str, Any]] = {}
    for name in names:
        first: dict[str, Any] | None = None
        failing: dict[str, Any] | None = None
        known, passed = False, True
        scores: list[float] = []
        error = False
        for run in runs:
            results = run.get("results", {})
            if name not in results:
                continue
            verdict = results[name]
            if first is None:
                first = verdict
            verdict_passed = verdict.get("passed")
            if verdict_passed is not None:
                known = True
                if passed and not verdict_passed:
                    passed = False
                if failing is None and verdict_passed is False:
                    failing = verdict
            score = verdict.get("score")
            if isinstance(score, (int, float)):
                scores.append(score)
            if not error and verdict.get("error"):
                error = True
        if first is None:
            continue
        entry: dict[str, Any] = {
            "passed": passed if known else None,
            "score": round(sum(scores) / len(scores), 6) if scores else None,
            "reason": (failing or first).get("reason"),
        }
        if error:
            entry["error"] = True
        out[name] = entry
    return out


class _Totals:
    """What the experiment's summary counts, run by run (`add`)."""

    __slots__ = ("costs", "counts", "latencies", "runs_done", "runs_passed", "tokens", "unknown")

    def __init__(self, names: list[str]) -> None:
        self.counts = {name: [0, 0] for name in names}
        self.latencies: list[float] = []
        self.tokens: list[float] = []
        self.costs: list[float] = []
        self.unknown = 0
        self.runs_done = self.runs_passed = 0

    def add(self, run: dict[str, Any]) -> tuple[float, int, Any]:
        """Count `run` in; its latency, tokens and cost."""
        self.runs_done += 1
        self.runs_passed += run.get("status") == "passed"
        latency = float(run.get("latency_ms") or 0.0)
        self.latencies.append(latency)
        tokens = _tokens(run.get("usage"))
        self.tokens.append(tokens)
        cost = run.get("cost_usd")
        if cost is None:
            self.unknown += 1
        else:
            self.costs.append(float(cost))
        for name, verdict in run.get("results", {}).items():
            if verdict.get("passed") is not None:
                self.counts[name][1] += 1
                self.counts[name][0] += verdict["passed"] is True
        return latency, tokens, cost


def _case(
    case_id: str, runs: list[dict[str, Any]], repeat: int, names: list[str], totals: _Totals
) -> dict[str, Any]:
    """One case's entry of the report (its runs counted into `totals`), each run read once."""
    entries: list[dict[str, Any]] = []
    statuses: list[Any] = []
    case_tokens = 0
    case_latency = 0.0
    case_cost: float | None = 0.0
    error = None
    for run in runs:
        latency, tokens, cost = totals.add(run)
        statuses.append(run.get("status"))
        case_latency += latency
        case_tokens += tokens
        if cost is None:
            case_cost = None
        elif case_cost is not None:
            case_cost += float(cost)
        if error is None and run.get("error"):
            error = run.get("error")
        entries.append(
            {
                "repeat": run.get("repeat"),
                "run_id": run.get("run_id"),
                "status": statuses[-1],
                "results": run.get("results", {}),
                "latency_ms": run.get("latency_ms"),
                "tokens": tokens,
                "cost_usd": cost,
                "error": run.get("error"),
                "output": run.get("output"),
            }
        )
    if "error" in statuses:
        status = "error"
    elif "failed" in statuses:
        status = "failed"
    elif len(runs) < repeat:
        status = "pending"
    else:
        status = "passed"
    return {
        "id": case_id,
        "run_id": runs[0]["run_id"] if runs else None,
        "status": status,
        "results": _aggregate(runs, names),
        "runs": entries,
        "pass_rate": round(statuses.count("passed") / len(runs), 6) if runs else None,
        "latency_ms": round(case_latency / len(runs), 3) if runs else None,
        "tokens": case_tokens if runs else None,
        "cost_usd": round(case_cost, 9) if runs and case_cost is not None else None,
        "error": error,
    }


def report(state: ExperimentState) -> dict[str, Any]:
    """The experiment as `show` reports it."""
    header = state.header
    repeat = state.repeat
    finished = state.finished
    names: list[str] = list(header.get("evaluators", []))
    for run in finished.values():
        for name in run.get("results", {}):
            if name not in names:
                names.append(name)
    run_totals = _Totals(names)
    counts = run_totals.counts
    latencies, tokens, costs = run_totals.latencies, run_totals.tokens, run_totals.costs
    cases: list[dict[str, Any]] = []
    totals = {"passed": 0, "failed": 0, "error": 0, "pending": 0}
    ids = state.case_ids or sorted({k[0] for k in finished})
    for case_id in ids:
        runs = [finished[k] for k in [(case_id, r) for r in range(repeat)] if k in finished]
        case = _case(case_id, runs, repeat, names, run_totals)
        totals[case["status"]] += 1
        cases.append(case)
    runs_done, runs_passed, unknown_cost = (
        run_totals.runs_done,
        run_totals.runs_passed,
        run_totals.unknown,
    )
    done_cases = len(ids) - totals["pending"]
    return {
        "experiment": state.name,
        "status": state.info.status,
        "generation": state.generation,
        "target": header.get("target"),
        "dataset": {
            "name": header.get("dataset"),
            "path": header.get("dataset_path"),
            "hash": header.get("dataset_hash"),
            "cases": len(ids),
        },
        "versions": header.get("versions", []),
        "repeat": repeat,
        "evaluators": {
            name: {
                "passed": passed,
                "total": total,
                "rate": round(passed / total, 6) if total else None,
            }
            for name, (passed, total) in counts.items()
        },
        "cases": cases,
        "summary": {
            "cases": len(ids),
            "done": done_cases,
            **totals,
            "runs": runs_done,
            "runs_passed": runs_passed,
            "pass_rate": round(runs_passed / runs_done, 6) if runs_done else None,
        },
        "latency_ms": percentiles(latencies),
        "tokens": {**percentiles(tokens), "total": int(sum(tokens))},
        "cost_usd": {
            **percentiles(costs),
            "total": round(sum(costs), 9) if costs else None,
            "unknown": unknown_cost,
        },
    }


_BAD = ("failed", "error")


def _delta(a: Any, b: Any) -> float | None:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return round(float(b) - float(a), 9)
    return None


def compare(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Two reports (`report()`), case by case."""
    a_cases = {c["id"]: c for c in a["cases"]}
    b_cases = {c["id"]: c for c in b["cases"]}
    fixed: list[str] = []
    broken: list[str] = []
    changed: list[str] = []
    rows: list[dict[str, Any]] = []
    for case_id, ca in a_cases.items():
        cb = b_cases.get(case_id)
        if cb is None:
            continue
        sa, sb = ca["status"], cb["status"]
        score_changes = {
            name: _delta(ra.get("score"), cb["results"].get(name, {}).get("score"))
            for name, ra in ca["results"].items()
            if name in cb["results"]
        }
        score_changes = {k: v for k, v in score_changes.items() if v}
        verdict_changes = sorted(
            name
            for name, ra in ca["results"].items()
            if name in cb["results"] and ra.get("passed") != cb["results"][name].get("passed")
        )
        if sa == "passed" and sb in _BAD:
            kind = "broken"
            broken.append(case_id)
        elif sa in _BAD and sb == "passed":
            kind = "fixed"
            fixed.append(case_id)
        elif sa != sb or score_changes or verdict_changes:
            kind = "changed"
            changed.append(case_id)
        else:
            kind = "same"
        rows.append(
            {
                "id": case_id,
                "change": kind,
                "a": {"status": sa, "run_id": ca["run_id"]},
                "b": {"status": sb, "run_id": cb["run_id"]},
                "score_deltas": score_changes,
                "verdict_changes": verdict_changes,
                "latency_ms_delta": _delta(ca["latency_ms"], cb["latency_ms"]),
                "tokens_delta": _delta(ca["tokens"], cb["tokens"]),
                "cost_usd_delta": _delta(ca["cost_usd"], cb["cost_usd"]),
            }
        )
    sa_, sb_ = a["summary"], b["summary"]
    return {
        "a": a["experiment"],
        "b": b["experiment"],
        "fixed": fixed,
        "broken": broken,
        "changed": changed,
        "only_a": [i for i in a_cases if i not in b_cases],
        "only_b": [i for i in b_cases if i not in a_cases],
        "cases": rows,
        "summary": {
            "pass_rate": {
                "a": sa_["pass_rate"],
                "b": sb_["pass_rate"],
                "delta": _delta(sa_["pass_rate"], sb_["pass_rate"]),
            },
            "latency_ms_p50": {
                "a": a["latency_ms"]["p50"],
                "b": b["latency_ms"]["p50"],
                "delta": _delta(a["latency_ms"]["p50"], b["latency_ms"]["p50"]),
            },
            "tokens_total": {
                "a": a["tokens"]["total"],
                "b": b["tokens"]["total"],
                "delta": _delta(a["tokens"]["total"], b["tokens"]["total"]),
            },
            "cost_usd_total": {
                "a": a["cost_usd"]["total"],
                "b": b["cost_usd"]["total"],
                "delta": _delta(a["cost_usd"]["total"], b["cost_usd"]["total"]),
            },
        },
        "regressed": bool(broken),
    }
