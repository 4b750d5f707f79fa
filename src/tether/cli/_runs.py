"""`tether runs list [--limit N] [--kind agent|workflow] [--json]` and
`tether runs show RUN_ID [--json]`: what the RunStore recorded."""

from __future__ import annotations

import enum
from typing import Annotated

import typer

from ..lab import DEFAULT_STORE, Runtime
from ..stores import RunEvent, RunInfo
from ._errors import CommandLineError, reports_errors
from ._project import GlobalOptions, options_of, reach_stores, run_async, store_runtime
from ._render import (
    clean,
    emit,
    emit_err,
    emit_json,
    event_lines,
    format_duration,
    format_time,
    key_values,
    run_to_json,
    table,
)

__all__ = ["RunKind", "runs_app"]

runs_app = typer.Typer(
    name="runs",
    help="Inspect recorded runs (episodes, workflow runs) and their events.",
    no_args_is_help=True,
)


_MAX_LIMIT = 1_000_000
"""A bound SQL can take (it counts in 64 bits); more runs than this are not read in a terminal."""


class RunKind(enum.StrEnum):
    """What `--kind` accepts."""

    agent = "agent"
    workflow = "workflow"


# -- list ------------------------------------------------------------------------------------


@runs_app.command("list")
@reports_errors
def list_runs(
    ctx: typer.Context,
    limit: Annotated[
        int,
        typer.Option(
            "--limit", "-n", metavar="N", min=1, max=_MAX_LIMIT, help="Show at most N runs."
        ),
    ] = 20,
    kind: Annotated[
        RunKind | None, typer.Option("--kind", help="Only agent episodes, or only workflow runs.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the runs as JSON.")] = False,
) -> None:
    """List recorded runs, newest first."""
    options = options_of(ctx)
    runtime = store_runtime(options)
    infos = run_async(_list(runtime, options, limit, kind.value if kind else None))
    if as_json:
        emit_json([run_to_json(i) for i in infos])
        return
    if not infos:
        emit_err(f"No runs recorded in {runtime.store_url or DEFAULT_STORE}.")
        return
    rows = [
        (
            i.run_id,
            i.kind,
            clean(i.name),
            i.status,
            format_time(i.started_at),
            format_duration(i.started_at, i.ended_at),
            clean(i.memory_scope or "-"),
        )
        for i in infos
    ]
    emit(table(("RUN ID", "KIND", "NAME", "STATUS", "STARTED", "TIME", "SCOPE"), rows))


async def _list(
    runtime: Runtime, options: GlobalOptions, limit: int, kind: str | None
) -> list[RunInfo]:
    async with runtime:
        await reach_stores(runtime, options)
        return await runtime.run_store.list_runs(kind=kind, limit=limit)


# -- show ------------------------------------------------------------------------------------


@runs_app.command("show")
@reports_errors
def show_run(
    ctx: typer.Context,
    run_id: Annotated[
        str, typer.Argument(metavar="RUN_ID", help="The run's id (see `tether runs list`).")
    ],
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the run, its runs inside and its events as JSON.")
    ] = False,
) -> None:
    """Show one run: summary, tags, runs inside it, events.

    The events are listed in order, consecutive text deltas joined into one line.
    """
    options = options_of(ctx)
    runtime = store_runtime(options)
    info, children, events = run_async(_show(runtime, options, run_id))
    if as_json:
        emit_json(
            {
                "run": run_to_json(info),
                "children": [run_to_json(c) for c in children],
                "events": list(events),
            }
        )
        return
    pairs = [
        ("run", info.run_id),
        ("kind", info.kind),
        ("name", clean(info.name)),
        ("status", info.status),
        ("started", format_time(info.started_at)),
        (
            "ended",
            f"{format_time(info.ended_at)} ({format_duration(info.started_at, info.ended_at)})"
            if info.ended_at is not None
            else "-",
        ),
    ]
    if info.memory_scope is not None:
        pairs.append(("scope", clean(info.memory_scope)))
    if info.workflow_run_id is not None:
        step = f" (step {clean(info.step_id)})" if info.step_id else ""
        pairs.append(("workflow", f"{info.workflow_run_id}{step}"))
    for key, value in sorted(info.meta.items()):
        pairs.append((clean(key), clean(str(value))))
    if info.error:
        pairs.append(("error", clean(info.error)))
    pairs.append(("tags", ", ".join(clean(t) for t in info.tags) or "-"))
    emit(key_values(pairs))
    if children:
        emit()
        emit(f"runs inside ({len(children)})")
        rows = [(c.run_id, c.kind, clean(c.name), c.status) for c in children]
        emit(table(("RUN ID", "KIND", "NAME", "STATUS"), rows))
    emit()
    emit(f"events ({len(events)})")
    for line in event_lines(events):
        emit(line)


async def _show(
    runtime: Runtime, options: GlobalOptions, run_id: str
) -> tuple[RunInfo, list[RunInfo], list[RunEvent]]:
    async with runtime:
        await reach_stores(runtime, options)
        store = runtime.run_store
        info = await store.get_run(run_id)
        if info is None:
            raise CommandLineError(
                f"no run {run_id!r} in {runtime.store_url or DEFAULT_STORE}",
                hint="`tether runs list` shows the most recent runs and their ids.",
            )
        children = list(reversed(await store.list_runs(workflow_run_id=run_id, limit=1000)))
        events = await store.events(run_id)
        return info, children, events
