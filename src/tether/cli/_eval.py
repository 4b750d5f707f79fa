"""`tether eval run|show|compare|list`: experiments on the command line.

`eval run` runs an agent or workflow over a dataset (resuming a stored experiment of the same
name), `eval show` reports one, `eval compare A B` compares two case by case and exits 1 when B
regresses on a case A passed, so CI can gate on it.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, cast

import typer

from ..errors import ConfigError, DatasetError, ExperimentMismatchError
from ._errors import EXIT_RUN_FAILED, CommandLineError, reports_errors
from ._project import load_project, options_of, reach_stores, run_async, store_runtime
from ._render import clean, emit, emit_err, emit_json, format_time, key_values, table

if TYPE_CHECKING:
    from ..evals import (
        Dataset,
        ProgressEvent,
    )
    from ..lab import Runtime

__all__ = ["eval_app"]

eval_app = typer.Typer(
    name="eval",
    help="Run an agent or workflow over a dataset of cases, and report or compare experiments.",
    no_args_is_help=True,
)

_MARKS = {True: "pass", False: "FAIL", None: "?"}


# -- run -------------------------------------------------------------------------------------


@eval_app.command("run")
@reports_errors
def run_experiment(
    ctx: typer.Context,
    target: Annotated[
        str,
        typer.Argument(
            metavar="TARGET",
            help="An agent or workflow id (agent:ID / workflow:ID when one id names both).",
        ),
    ],
    dataset: Annotated[
        Path,
        typer.Option(
            "--dataset",
            "-d",
            metavar="FILE",
            help="The cases: a .jsonl file (one case per line) or a .yaml file.",
        ),
    ],
    experiment: Annotated[
        str | None,
        typer.Option(
            "--experiment",
            "-e",
            metavar="NAME",
            help="The experiment's name. Default: TARGET-DATASET-VERSION (the commit, else the "
            "project version). Running a stored experiment again resumes it.",
        ),
    ] = None,
    engine: Annotated[
        str,
        typer.Option("--engine", metavar="local|ray", help="Where the cases run."),
    ] = "local",
    address: Annotated[
        str | None,
        typer.Option(
            "--address",
            metavar="auto|ray://HOST:PORT",
            help="The Ray cluster (with --engine ray). Default: a local Ray instance.",
        ),
    ] = None,
    concurrency: Annotated[
        int,
        typer.Option(
            "--concurrency", "-c", min=1, metavar="N", help="Cases at once (per Ray actor)."
        ),
    ] = 8,
    repeat: Annotated[
        int,
        typer.Option(
            "--repeat",
            min=1,
            metavar="K",
            help="Runs per case; a case passes only if all K pass.",
        ),
    ] = 1,
    evaluators: Annotated[
        Path | None,
        typer.Option(
            "--evaluators",
            metavar="FILE",
            help="A YAML or JSON list of evaluator specs applied to every case.",
        ),
    ] = None,
    restart: Annotated[
        bool,
        typer.Option(
            "--restart",
            help="Run a stored experiment again from the start, even if its dataset or the "
            "target's version changed (its earlier results stay in the record).",
        ),
    ] = False,
    fail_under: Annotated[
        float | None,
        typer.Option(
            "--fail-under",
            metavar="RATE",
            min=0.0,
            max=1.0,
            help="Exit 0 when at least this share of the cases passed (0.9: nine in ten), "
            "instead of only when every case passed.",
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the report as JSON (as `eval show --json`).")
    ] = False,
) -> None:
    """Run TARGET over the cases of --dataset and score every run.

    Exits 1 when a case failed (or errored, or did not finish), as a test runner does, so CI
    can gate on it; --fail-under RATE accepts a pass rate below 1 instead.

    Each case is an ordinary episode or workflow run, tagged experiment:NAME and case:ID.
    Running the same experiment again resumes it: finished cases are not run again. A rerun
    whose dataset (by content hash) or target version changed is refused (exit 2) unless
    --restart. The report goes to stdout; a progress bar to stderr on a terminal.
    """
    from ..evals import load_dataset, resolve_target

    options = options_of(ctx)
    if engine not in ("local", "ray"):
        raise CommandLineError(f"--engine must be local or ray, got {engine!r}")
    if address is not None and engine != "ray":
        raise CommandLineError("--address goes with --engine ray")
    try:
        data = load_dataset(dataset, evaluators=evaluators)
    except DatasetError as exc:
        raise CommandLineError(str(exc), kind="DatasetError", hint=_dataset_hint(exc)) from None
    registry = load_project(options)
    runtime = registry.runtime
    try:
        resolve_target(runtime, target)
    except ConfigError as exc:
        raise CommandLineError(
            str(exc),
            kind="RegistryError",
            hint="`tether agent list` and `tether workflow list` show what can run.",
        ) from None
    result = run_async(
        _run(
            runtime,
            options,
            target,
            data,
            experiment,
            engine,
            address,
            concurrency,
            repeat,
            restart,
        )
    )
    if as_json:
        emit_json(result)
    else:
        emit(render_report(result))
    _gate(result["summary"], fail_under)


def _gate(summary: dict[str, Any], fail_under: float | None) -> None:
    """Exit 1 when fewer cases passed than asked: all of them, or `fail_under` of them."""
    cases = int(summary["cases"])
    passed = int(summary["passed"])
    rate = passed / cases if cases else 1.0
    needed = 1.0 if fail_under is None else fail_under
    if rate >= needed:
        return
    why = f"{cases - passed} of {cases} case(s) did not pass"
    if fail_under is not None:
        why += f": a pass rate of {rate:.1%} is under --fail-under {fail_under:g}"
    emit_err(f"{why} (exit {EXIT_RUN_FAILED})")
    raise typer.Exit(EXIT_RUN_FAILED)


def _dataset_hint(exc: DatasetError) -> str | None:
    """What to do about a dataset that does not load: fix the line it names, or (a problem
    with the file itself: missing, unreadable, a YAML file without PyYAML) nothing more than
    the message says."""
    if exc.line is not None:
        return "Fix that line of the dataset and run again."
    if "no such file" in str(exc):
        return "A relative --dataset path is relative to the current directory."
    return None


async def _run(
    runtime: Runtime,
    options: Any,
    target: str,
    data: Dataset,
    experiment: str | None,
    engine: str,
    address: str | None,
    concurrency: int,
    repeat: int,
    restart: bool,
) -> dict[str, Any]:
    from ..evals import evaluate

    bar = _ProgressBar() if sys.stderr.isatty() else None
    async with runtime:
        await reach_stores(runtime, options)
        try:
            return await evaluate(
                runtime,
                target,
                data,
                experiment=experiment,
                engine=cast(Literal["local", "ray"], engine),  # checked by the command
                concurrency=concurrency,
                repeat=repeat,
                restart=restart,
                address=address,
                progress=bar.update if bar is not None else None,
            )
        except DatasetError as exc:
            raise CommandLineError(str(exc), kind="DatasetError") from None
        except ExperimentMismatchError as exc:
            changed = "; ".join(
                f"{k}: stored {v['stored']!r}, now {v['now']!r}" for k, v in exc.differences.items()
            )
            raise CommandLineError(
                str(exc),
                kind="ExperimentMismatchError",
                hint=f"What changed: {changed}. Use --experiment NEW-NAME, or --restart.",
            ) from None
        finally:
            if bar is not None:
                bar.close()


class _ProgressBar:
    """A rich progress bar on stderr (or `console`): cases done, failing, rate, ETA."""

    def __init__(self, console: Any = None) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
        )

        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[failing]} failing"),
            TextColumn("{task.fields[rate]}"),
            TimeRemainingColumn(),
            console=console if console is not None else Console(stderr=True),
            transient=False,
        )
        self.task: Any = None
        self.failing = 0
        self.started = 0.0
        self.ran = 0

    def update(self, event: ProgressEvent) -> None:
        import time

        kind = event["type"]
        if kind == "start":
            self.failing = event["failing"]
            self.started = time.monotonic()
            self.progress.start()
            verb = "resuming" if event["resumed"] else "running"
            self.task = self.progress.add_task(
                f"{verb} {event['experiment']}",
                total=event["total"],
                completed=event["done"],
                failing=self.failing,
                rate="",
            )
        elif kind == "case" and self.task is not None:
            self.ran += 1
            if event["record"].get("status") != "passed":
                self.failing += 1
            elapsed = max(time.monotonic() - self.started, 1e-9)
            self.progress.update(
                self.task,
                advance=1,
                failing=self.failing,
                rate=f"{self.ran / elapsed:.1f} cases/s",
            )

    def close(self) -> None:
        self.progress.stop()


# -- show ------------------------------------------------------------------------------------


@eval_app.command("show")
@reports_errors
def show_experiment(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(metavar="NAME", help="The experiment's name.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Report experiment NAME: pass rates per evaluator, each case's result, and the latency,
    token and cost percentiles."""
    runtime = store_runtime(options_of(ctx))
    result = run_async(_report(runtime, options_of(ctx), name))
    if as_json:
        emit_json(result)
    else:
        emit(render_report(result))


async def _report(runtime: Runtime, options: Any, name: str) -> dict[str, Any]:
    [found] = await _reports(runtime, options, [name])
    return found


async def _reports(runtime: Runtime, options: Any, names: list[str]) -> list[dict[str, Any]]:
    from ..evals import read_experiment, report

    out = []
    async with runtime:
        await reach_stores(runtime, options)
        for name in names:
            state = await read_experiment(runtime.run_store, name)
            if state is None:
                raise CommandLineError(
                    f"there is no experiment {name!r} in the store",
                    hint="`tether eval list` shows the stored experiments.",
                )
            out.append(report(state))
    return out


# -- compare ---------------------------------------------------------------------------------


@eval_app.command("compare")
@reports_errors
def compare_experiments(
    ctx: typer.Context,
    a: Annotated[str, typer.Argument(metavar="A", help="The baseline experiment.")],
    b: Annotated[str, typer.Argument(metavar="B", help="The experiment compared with it.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the comparison as JSON.")] = False,
) -> None:
    """Compare experiments A and B case by case: fixed, broken, changed scores, cost and
    latency deltas. Exits 1 when B fails a case that A passed (for CI gates)."""
    from ..evals import compare

    runtime = store_runtime(options_of(ctx))
    first, second = run_async(_reports(runtime, options_of(ctx), [a, b]))
    result = compare(first, second)
    if as_json:
        emit_json(result)
    else:
        emit(render_comparison(result))
    if result["regressed"]:
        emit_err(
            f"{b} regressed on {len(result['broken'])} case(s) that {a} passed: "
            + ", ".join(result["broken"][:10])
        )
        raise typer.Exit(EXIT_RUN_FAILED)


# -- list ------------------------------------------------------------------------------------


@eval_app.command("list")
@reports_errors
def list_all(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Print the list as JSON.")] = False,
) -> None:
    """List the stored experiments, newest first."""
    runtime = store_runtime(options_of(ctx))
    rows = run_async(_list(runtime, options_of(ctx)))
    if as_json:
        emit_json(rows)
        return
    if not rows:
        emit_err("No experiments yet: `tether eval run TARGET --dataset FILE` runs one.")
        return
    emit(
        table(
            ("NAME", "STATUS", "TARGET", "STARTED"),
            [(r["name"], r["status"], r["target"], format_time(r["started_at"])) for r in rows],
        )
    )


async def _list(runtime: Runtime, options: Any) -> list[dict[str, Any]]:
    from ..evals import list_experiments

    async with runtime:
        await reach_stores(runtime, options)
        infos = await list_experiments(runtime.run_store)
    out = []
    for info in infos:
        target = info.meta.get("target") or {}
        out.append(
            {
                "name": info.name,
                "status": info.status,
                "target": f"{target.get('kind', '?')} {target.get('id', '?')}",
                "started_at": info.started_at,
                "tags": info.tags,
            }
        )
    return out


# -- text ------------------------------------------------------------------------------------


def _pct(rate: float | None) -> str:
    return "-" if rate is None else f"{rate * 100:.1f}%"


def _num(value: Any, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def render_report(data: dict[str, Any]) -> str:
    """The report as text: a header, evaluators, cases, then percentiles."""
    summary = data["summary"]
    target = data.get("target") or {}
    dataset = data["dataset"]
    head = key_values(
        [
            ("experiment", f"{data['experiment']} ({data['status']})"),
            ("target", f"{target.get('kind')} {target.get('id')}"),
            ("versions", " ".join(data["versions"]) or "-"),
            (
                "dataset",
                f"{dataset['name']}: {dataset['cases']} cases x {data['repeat']} "
                f"(sha256 {str(dataset['hash'])[:12]})",
            ),
            (
                "result",
                f"{summary['passed']} passed, {summary['failed']} failed, "
                f"{summary['error']} error, {summary['pending']} pending "
                f"(runs passed: {_pct(summary['pass_rate'])})",
            ),
        ]
    )
    names = list(data["evaluators"])
    evaluators = table(
        ("EVALUATOR", "PASSED", "TOTAL", "RATE"),
        [
            (name, str(v["passed"]), str(v["total"]), _pct(v["rate"]))
            for name, v in data["evaluators"].items()
        ],
    )
    rows = []
    for case in data["cases"]:
        marks = []
        for name in names:
            verdict = case["results"].get(name)
            marks.append("-" if verdict is None else _MARKS[verdict.get("passed")])
        rows.append(
            (case["id"], case["status"], *marks, _num(case["latency_ms"]), case["run_id"] or "-")
        )
    cases = table(("CASE", "STATUS", *[n.upper() for n in names], "MS", "RUN"), rows)
    latency, tokens, cost = data["latency_ms"], data["tokens"], data["cost_usd"]
    stats = key_values(
        [
            (
                "latency ms",
                f"p50 {_num(latency['p50'])}  p90 {_num(latency['p90'])}  "
                f"p99 {_num(latency['p99'])}  max {_num(latency['max'])}",
            ),
            (
                "tokens",
                f"p50 {_num(tokens['p50'])}  p90 {_num(tokens['p90'])}  total {tokens['total']}",
            ),
            (
                "cost usd",
                (
                    f"total {_num(cost['total'], 6)}  p50 {_num(cost['p50'], 6)}  "
                    f"p90 {_num(cost['p90'], 6)}"
                    + (f"  (unknown for {cost['unknown']} runs)" if cost["unknown"] else "")
                ),
            ),
        ]
    )
    # Reasons and errors quote what a model answered: escaped, like every stored value.
    failing = [
        "  " + clean(f"{c['id']}: {name}: {v.get('reason')}")
        for c in data["cases"]
        if c["status"] in ("failed", "error")
        for name, v in c["results"].items()
        if v.get("passed") is False
    ]
    errors = ["  " + clean(f"{c['id']}: {c['error']}") for c in data["cases"] if c.get("error")]
    parts = [head, evaluators, cases, stats]
    if errors:
        parts.append("run errors:\n" + "\n".join(errors[:20]))
    if failing:
        parts.append("why cases failed:\n" + "\n".join(failing[:20]))
    return "\n\n".join(parts)


def render_comparison(data: dict[str, Any]) -> str:
    """The comparison as text."""
    rows = [
        (
            r["id"],
            r["change"],
            r["a"]["status"],
            r["b"]["status"],
            _num(r["latency_ms_delta"]),
            _num(r["cost_usd_delta"], 6),
        )
        for r in data["cases"]
        if r["change"] != "same"
    ]
    s = data["summary"]
    head = key_values(
        [
            ("compared", f"{data['a']} (A) with {data['b']} (B)"),
            ("fixed", ", ".join(data["fixed"]) or "-"),
            ("broken", ", ".join(data["broken"]) or "-"),
            ("changed", ", ".join(data["changed"]) or "-"),
            (
                "pass rate",
                f"{_pct(s['pass_rate']['a'])} -> {_pct(s['pass_rate']['b'])}",
            ),
            (
                "latency p50 ms",
                f"{_num(s['latency_ms_p50']['a'])} -> {_num(s['latency_ms_p50']['b'])}",
            ),
            (
                "cost usd",
                f"{_num(s['cost_usd_total']['a'], 6)} -> {_num(s['cost_usd_total']['b'], 6)}",
            ),
        ]
    )
    parts = [head]
    if rows:
        parts.append(table(("CASE", "CHANGE", "A", "B", "MS DELTA", "USD DELTA"), rows))
    if data["only_a"] or data["only_b"]:
        parts.append(
            key_values(
                [
                    ("only in A", ", ".join(data["only_a"]) or "-"),
                    ("only in B", ", ".join(data["only_b"]) or "-"),
                ]
            )
        )
    return "\n\n".join(parts)
