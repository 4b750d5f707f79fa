"""`evaluate(runtime, target, dataset, ...)`: run an experiment, resume it, report it.

The local engine runs the cases on this event loop, `concurrency` at a time; the Ray engine
(`engine="ray"`) hands them to a pool of Ray actors. Either way each case is an ordinary episode
or workflow run in the runtime's stores, and the experiment's record collects their results.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from os import PathLike
from typing import Any, Literal

from ..errors import ConfigError
from ..lab import Runtime
from ..stores.workflow_store import RunStatus
from ._case import Plan, check_inputs, resolve_target, run_case, run_together
from ._changes import changes_tag
from ._dataset import Case, Dataset, check_expected, load_dataset
from ._evaluators import Evaluator, to_evaluator
from ._record import ExperimentLog, ExperimentState, read_experiment
from ._report import report

__all__ = ["Engine", "Progress", "ProgressEvent", "evaluate", "show"]

Engine = Literal["local", "ray"]

ProgressEvent = dict[str, Any]
"""`{"type": "start", "total", "done", "failing", "experiment", "resumed"}`, then one
`{"type": "case", "record"}` per finished case run, then `{"type": "end"}`."""
Progress = Callable[[ProgressEvent], None]


@dataclass(slots=True)
class _Work:
    case: Case
    repeat: int
    evaluators: list[Evaluator]


async def evaluate(
    runtime: Runtime,
    target: Any,
    dataset: str | PathLike[str] | Dataset | Sequence[Case | Mapping[str, Any]],
    *,
    evaluators: Sequence[Any] = (),
    experiment: str | None = None,
    engine: Engine = "local",
    concurrency: int = 8,
    repeat: int = 1,
    restart: bool = False,
    address: str | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Run `target` over the cases of `dataset`, score each run, and record it all.

    Re-running an experiment resumes it: finished cases are not run again (a workflow case
    resumes from its journal). A rerun whose dataset (by content hash), target or target
    version differs is refused unless `restart=True`, which runs it again from the start
    (the earlier results stay in the record).

    Args:
        target: An agent or workflow of `runtime`, or its id (``agent:ID`` / ``workflow:ID``
            when one id names both).
        dataset: A `.jsonl` / `.yaml` path, a Dataset, or a list of cases (dicts or Case).
        evaluators: Applied to every case after the dataset's own header evaluators: spec
            dicts, Evaluator objects or callables `(case, result)`.
        experiment: Its name (default: ``<target>-<dataset name>[-<version>]``).
        engine: ``"local"`` (asyncio on this loop) or ``"ray"`` (needs `tether[ray]`).
        concurrency: Cases run at once (per Ray actor with the Ray engine).
        repeat: Runs per case; a case passes only if every run passes.
        restart: Run a stored experiment again from the start even when it changed.
        address: The Ray cluster (``auto``, ``ray://host:10001``); None starts or joins the
            local one.
        progress: Called with each progress event (the CLI draws its progress bar from them).

    Returns:
        The report, as `show()` returns it.

    Raises:
        ConfigError: a bad argument or target; DatasetError: a dataset that does not load;
        ExperimentMismatchError: a changed experiment rerun without `restart`.
    """
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ConfigError(f"concurrency must be an integer >= 1, got {concurrency!r}")
    if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
        raise ConfigError(f"repeat must be an integer >= 1, got {repeat!r}")
    if engine not in ("local", "ray"):
        raise ConfigError(f"engine must be 'local' or 'ray', got {engine!r}")
    resolved, obj = resolve_target(runtime, target)
    if isinstance(dataset, Dataset):
        data = dataset
    elif isinstance(dataset, (str, PathLike)):
        data = load_dataset(dataset)
    else:
        data = Dataset.of(dataset)
    extra = [to_evaluator(e, f"evaluators[{i}]") for i, e in enumerate(evaluators)]
    if extra:
        data = Dataset(data.cases, [*extra, *data.evaluators], data.path, data.name)
        check_expected(data)
    check_inputs(resolved, data.cases, data.path)
    versions = tuple(runtime.provenance_tags())
    if runtime.version is not False:
        # An edit since the last commit (or, without git, any edit) is another version.
        changes = await asyncio.to_thread(changes_tag, runtime.root)
        if changes is not None:
            versions = (*versions, changes)
    name = experiment or _default_name(resolved.id, data.name, versions)
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"an experiment name must be a non-empty string, got {name!r}")
    per_case = {c.id: data.evaluators_for(c) for c in data.cases}
    header = {
        "target": resolved.to_json(),
        "dataset": data.name,
        "dataset_path": data.path,
        "dataset_hash": data.content_hash(),
        "versions": list(versions),
        "evaluators": list(dict.fromkeys(e.name for es in per_case.values() for e in es)),
        "repeat": repeat,
        "engine": engine,
        "cases": [c.id for c in data.cases],
    }
    log = ExperimentLog(runtime.run_store, name)
    state, resumed = await log.open(header, restart=restart)
    done = set(state.finished) if state is not None else set()
    plan = Plan(name, log.generation, resolved, versions, fresh=not resumed)
    work = [
        _Work(case, r, per_case[case.id])
        for case in data.cases
        for r in range(repeat)
        if (case.id, r) not in done
    ]
    failing = (
        sum(1 for k in done if state is not None and state.finished[k].get("status") != "passed")
        if state is not None
        else 0
    )
    notify = progress or (lambda event: None)
    notify(
        {
            "type": "start",
            "experiment": name,
            "total": len(data.cases) * repeat,
            "done": len(done & {(c.id, r) for c in data.cases for r in range(repeat)}),
            "failing": failing,
            "resumed": resumed,
        }
    )

    def finished(record: dict[str, Any]) -> None:
        log.record(record)
        notify({"type": "case", "record": record})

    status: RunStatus = "failed"
    try:
        if engine == "local":
            await _run_local(runtime, obj, plan, work, concurrency, finished)
        else:
            from ._ray import run_ray

            await run_ray(
                runtime,
                plan,
                [(w.case, w.repeat, w.evaluators) for w in work],
                concurrency=concurrency,
                address=address,
                on_finished=finished,
                header=list(data.evaluators),
            )
        status = "completed"
    finally:
        await asyncio.shield(log.close(status, {"ran": len(work)}))
        notify({"type": "end"})
    return _report(name, await log.final_state())


async def _run_local(
    runtime: Runtime,
    target: Any,
    plan: Plan,
    work: list[_Work],
    concurrency: int,
    finished: Callable[[dict[str, Any]], None],
) -> None:
    items = iter(work)

    async def worker() -> None:
        for item in items:
            record = await run_case(runtime, target, plan, item.case, item.repeat, item.evaluators)
            finished(record)

    await run_together([worker() for _ in range(min(concurrency, len(work)))])


async def show(runtime: Runtime, name: str) -> dict[str, Any]:
    """The report of stored experiment `name` (see `tether.evals.report`).

    Raises:
        ConfigError: there is no experiment of that name.
    """
    return _report(name, await read_experiment(runtime.run_store, name))


def _report(name: str, state: ExperimentState | None) -> dict[str, Any]:
    if state is None:
        raise ConfigError(
            f"there is no experiment {name!r} in the store; `tether eval list` shows them"
        )
    return report(state)


def _default_name(target: str, dataset: str, versions: Sequence[str]) -> str:
    tags = dict(t.split(":", 1) for t in versions if ":" in t)
    version = tags.get("commit", "")[:8] or tags.get("version", "")
    changes = tags.get("changes", "")[:8]
    if changes:
        version = f"{version}+{changes}" if version else changes
    return f"{target}-{dataset}" + (f"-{version}" if version else "")
