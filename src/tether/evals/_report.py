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
        verdicts = [r["results"][name] for r in runs if name in r.get("results", {})]
        if not verdicts:
            continue
        known = [v["passed"] for v in verdicts if v.get("passed") is not None]
        passed = all(known) if known else None
        scores = [v["score"] for v in verdicts if isinstance(v.get("score"), (int, float))]
        failing = next((v for v in verdicts if v.get("passed") is False), None)
        reason = (failing or verdicts[0]).get("reason")
        entry: dict[str, Any] = {
            "passed": passed,
            "score": round(sum(scores) / len(scores), 6) if scores else None,
            "reason": reason,
        }
        if any(v.get("error") for v in verdicts):
            entry["error"] = True
        out[name] = entry
    return out


def report(state: ExperimentState) -> dict[str, Any]:
    """The experiment as `show` reports it."""
    header = state.header
    repeat = state.repeat
    names: list[str] = list(header.get("evaluators", []))
    for run in state.finished.values():
        for name in run.get("results", {}):
            if name not in names:
                names.append(name)
    counts = {name: [0, 0] for name in names}
    latencies: list[float] = []
    tokens: list[float] = []
    costs: list[float] = []
    unknown_cost = 0
    cases: list[dict[str, Any]] = []
    totals = {"passed": 0, "failed": 0, "error": 0, "pending": 0}
    runs_passed = runs_done = 0
    ids = state.case_ids or sorted({k[0] for k in state.finished})
    for case_id in ids:
        keys = [(case_id, r) for r in range(repeat)]
        runs = [state.finished[k] for k in keys if k in state.finished]
        for run in runs:
            runs_done += 1
            runs_passed += run.get("status") == "passed"
            latencies.append(float(run.get("latency_ms") or 0.0))
            tokens.append(_tokens(run.get("usage")))
            if run.get("cost_usd") is None:
                unknown_cost += 1
            else:
                costs.append(float(run["cost_usd"]))
            for name, verdict in run.get("results", {}).items():
                if verdict.get("passed") is not None:
                    counts[name][1] += 1
                    counts[name][0] += verdict["passed"] is True
        statuses = [r.get("status") for r in runs]
        if "error" in statuses:
            status = "error"
        elif "failed" in statuses:
            status = "failed"
        elif len(runs) < repeat:
            status = "pending"
        else:
            status = "passed"
        totals[status] += 1
        case_costs = [r.get("cost_usd") for r in runs]
        cases.append(
            {
                "id": case_id,
                "run_id": runs[0]["run_id"] if runs else None,
                "status": status,
                "results": _aggregate(runs, names),
                "runs": [
                    {
                        "repeat": r.get("repeat"),
                        "run_id": r.get("run_id"),
                        "status": r.get("status"),
                        "results": r.get("results", {}),
                        "latency_ms": r.get("latency_ms"),
                        "tokens": _tokens(r.get("usage")),
                        "cost_usd": r.get("cost_usd"),
                        "error": r.get("error"),
                        "output": r.get("output"),
                    }
                    for r in runs
                ],
                "pass_rate": (round(statuses.count("passed") / len(runs), 6) if runs else None),
                "latency_ms": (
                    round(sum(float(r.get("latency_ms") or 0) for r in runs) / len(runs), 3)
                    if runs
                    else None
                ),
                "tokens": sum(_tokens(r.get("usage")) for r in runs) if runs else None,
                "cost_usd": (
                    round(sum(float(c) for c in case_costs if c is not None), 9)
                    if runs and all(c is not None for c in case_costs)
                    else None
                ),
                "error": next((r.get("error") for r in runs if r.get("error")), None),
            }
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
