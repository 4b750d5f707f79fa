"""`tether runs list [--limit N] [--kind agent|workflow] [--status S] [--json]`,
`tether runs show RUN_ID [--json]`: what the RunStore recorded; and
`tether runs resume RUN --approve ID | --deny ID [--reason TEXT] | --result ID JSON`: decide
a paused agent run's calls and continue it here."""

from __future__ import annotations

import enum
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..run_events import MODEL_CALL_FINISHED, WORKFLOW_WAITING
from ._errors import CommandLineError, reports_errors
from ._project import (
    GlobalOptions,
    load_project,
    options_of,
    reach_stores,
    run_async,
    store_project,
    store_runtime,
)
from ._render import (
    clean,
    clean_lines,
    emit,
    emit_err,
    emit_json,
    event_lines,
    format_cost,
    format_duration,
    format_time,
    format_tokens,
    key_values,
    resume_command,
    run_to_json,
    table,
)

if TYPE_CHECKING:
    from ..lab import Runtime
    from ..stores import RunEvent, RunInfo
    from ..stores.run_store import RunQuery

__all__ = ["RunKind", "runs_app"]

runs_app = typer.Typer(
    name="runs",
    help="Inspect recorded runs (episodes, workflow runs) and their events.",
    no_args_is_help=True,
)


_MAX_DEPTH = 32
"""How deep `tether runs show` follows workflow runs nested in workflow runs."""
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
    show_all: Annotated[
        bool,
        typer.Option(
            "--all",
            help="Also the runs nested in workflow runs and episodes, the cases of "
            "experiments, and the runs of agents and workflows the project's registry does "
            "not list (title workflows, helper agents, removed ones).",
        ),
    ] = False,
    status: Annotated[
        str | None,
        typer.Option(
            "--status",
            metavar="STATUS",
            help="Only runs of this status (running, completed, failed, cancelled, "
            "interrupted, waiting, paused).",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the runs as JSON.")] = False,
) -> None:
    """List recorded runs, newest first.

    As the UI does: only the runs nothing else started (not those nested in a workflow run
    or an episode, nor an experiment's cases: `tether runs show` lists those under their
    parent, `tether eval show` the cases), and only of the agents and workflows the
    project's registry lists (with --store and no project, of any). --all shows every run.
    --status paused lists the nested paused runs too: each waits for a decision.
    """
    from ..lab import DEFAULT_STORE
    from ..stores.run_store import RunQuery
    from ..stores.workflow_store import READ_STATUSES

    if status is not None and status not in READ_STATUSES:
        raise CommandLineError(
            f"--status {status!r} is not a run status",
            hint=f"Give one of {', '.join(READ_STATUSES)}.",
        )
    options = options_of(ctx)
    runtime, registry = store_project(options)
    query = RunQuery(kind=kind.value if kind else None, status=status)
    if not show_all:
        # A paused run waits for a decision wherever it sits (in a workflow step too, the
        # workflow waiting with it): --status paused lists the nested ones as well.
        roots = status != "paused"
        query = RunQuery(kind=query.kind, status=status, roots_only=roots)
        if registry is not None:
            query = RunQuery(
                kind=query.kind,
                status=status,
                roots_only=roots,
                agents=tuple(sorted(registry.agents)),
                workflows=tuple(sorted(registry.workflows)),
            )
    infos = run_async(_list(runtime, options, limit, query, hide_cases=not show_all))
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
            clean(str(i.meta.get("model") or "-")),
            format_tokens(i.usage),
            format_cost(i.cost_usd),
            clean(i.memory_scope or "-"),
        )
        for i in infos
    ]
    emit(
        table(
            (
                "RUN ID",
                "KIND",
                "NAME",
                "STATUS",
                "STARTED",
                "TIME",
                "MODEL",
                "TOKENS",
                "COST",
                "SCOPE",
            ),
            rows,
        )
    )
    paused = [i for i in infos if i.status == "paused"]
    if paused:
        first = paused[0]
        ids = " ".join(f"--approve {clean(str(p.get('id')))}" for p in first.pending)
        emit_err(
            f"{len(paused)} paused run(s) wait for decisions on their calls; continue with "
            f"`tether runs resume {first.run_id} {ids}` (or --deny ID --reason TEXT, --result "
            "ID JSON)"
        )
    commands = [c for c in map(resume_command, infos) if c is not None]
    if commands:
        emit_err(
            f"{len(commands)} interrupted workflow run(s) (their process died); resume with "
            + ", ".join(f"`{clean(c)}`" for c in commands[:3])
            + (" ..." if len(commands) > 3 else "")
        )


async def _list(
    runtime: Runtime, options: GlobalOptions, limit: int, query: RunQuery, *, hide_cases: bool
) -> list[RunInfo]:
    """Up to `limit` runs matching `query`, newest first; with `hide_cases`, without the runs
    an experiment made for its cases (read page after page until `limit` are found)."""
    async with runtime:
        await reach_stores(runtime, options)
        found: list[RunInfo] = []
        cursor: str | None = None
        while len(found) < limit:
            page = await runtime.run_store.query_runs(query, limit=limit, cursor=cursor)
            found.extend(r for r in page.runs if not (hide_cases and _is_case(r)))
            cursor = page.next_cursor
            if cursor is None:
                break
        return found[:limit]


def _is_case(info: RunInfo) -> bool:
    """Whether an experiment ran `info` for one of its cases (the experiment's own record is
    not a case)."""
    # Inlined here, not imported from tether.evals: the command loads no more than it needs.
    return info.kind != "experiment" and any(t.startswith("experiment:") for t in info.tags)


# -- show ------------------------------------------------------------------------------------


def _waiting(info: RunInfo, events: Sequence[RunEvent]) -> str | None:
    """What a waiting workflow run waits for, and the command that sends it."""
    if info.status != "waiting":
        return None
    waits = [e["data"] for e in events if e["type"] == WORKFLOW_WAITING]
    name = waits[-1].get("name") if waits else None
    paused = waits[-1].get("paused_run_id") if waits else None
    if isinstance(paused, str):
        command = f"tether runs resume {paused} --approve ID"
        return (
            f"for paused agent run {clean(paused)}, whose calls need a decision; decide them "
            f"with `{clean(command)}` (`tether runs show {clean(paused)}` lists them)"
        )
    if not isinstance(name, str):
        return None
    command = f"tether workflow signal {info.run_id} {name} JSON"
    return f"for signal {clean(name)!r}; send it with `{clean(command)}`"


@runs_app.command("show")
@reports_errors
def show_run(
    ctx: typer.Context,
    run_id: Annotated[
        str, typer.Argument(metavar="RUN_ID", help="The run's id (see `tether runs list`).")
    ],
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="Print the run, its runs inside (each with its own children) and its events "
            "as JSON.",
        ),
    ] = False,
) -> None:
    """Show one run: summary, tags, runs inside it, events.

    The runs inside a workflow run are listed as a tree, each with the step it ran in. The
    events are listed in order, consecutive text deltas joined into one line.
    """
    options = options_of(ctx)
    runtime = store_runtime(options)
    info, inside, events = run_async(_show(runtime, options, run_id))
    if as_json:
        emit_json(
            {
                "run": run_to_json(info),
                "children": [_nested_json(n) for n in inside],
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
    if info.usage:
        pairs.append(("tokens", " ".join(f"{k}={v}" for k, v in info.usage.items())))
        cost = format_cost(info.cost_usd)
        why = _unpriced(events) if info.cost_usd is None else None
        pairs.append(("cost", f"{cost} (unpriced: {clean(why)})" if why else cost))
    if info.memory_scope is not None:
        pairs.append(("scope", clean(info.memory_scope)))
    if info.workflow_run_id is not None:
        step = f" (step {clean(info.step_id)})" if info.step_id else ""
        pairs.append(("workflow", f"{info.workflow_run_id}{step}"))
    if info.parent_run_id is not None:
        call = f" (tool call {clean(info.parent_tool_call_id)})" if info.parent_tool_call_id else ""
        pairs.append(("started by", f"{clean(info.parent_run_id)}{call}"))
    for key, value in sorted(info.meta.items()):
        pairs.append((clean(key), clean(str(value))))
    if info.error:
        pairs.append(("error", clean(info.error)))
    if info.status == "interrupted":
        # Its process died: the run stopped renewing its lease.
        command = resume_command(info)
        if command is not None:
            what = f"; resume it with `{clean(command)}`"
        elif info.kind == "workflow":
            root = info.meta.get("root_run_id") or info.workflow_run_id
            what = f"; resume its root run, {clean(str(root))}, and it resumes this one"
        else:
            what = "; what it completed is stored"
        pairs.append(("interrupted", f"its process died mid-run{what}"))
    waiting = _waiting(info, events)
    if waiting is not None:
        pairs.append(("waiting", waiting))
    pairs.append(("tags", ", ".join(clean(t) for t in info.tags) or "-"))
    emit(key_values(pairs))
    if info.traceback:
        emit()
        emit("traceback")
        emit(clean_lines(info.traceback.rstrip("\n")))
    if inside:
        rows = [
            ("  " * depth + n.info.run_id, n.info.kind, n.info.name, n.info.status, n.step or "-")
            for depth, n in _walk(inside)
        ]
        emit()
        emit(f"runs inside ({len(rows)})")
        emit(table(("RUN ID", "KIND", "NAME", "STATUS", "STEP"), rows))
    emit()
    emit(f"events ({len(events)})")
    for line in event_lines(events):
        emit(line)


@dataclass(slots=True)
class _Nested:
    """A run inside another, with the runs inside it."""

    info: RunInfo
    step: str | None
    """The step of the enclosing workflow run it ran in."""
    children: list[_Nested] = field(default_factory=list)


def _walk(nodes: list[_Nested], depth: int = 0) -> Iterator[tuple[int, _Nested]]:
    for node in nodes:
        yield depth, node
        yield from _walk(node.children, depth + 1)


def _nested_json(node: _Nested) -> dict[str, Any]:
    return {
        **run_to_json(node.info),
        "step_id": node.step,
        "children": [_nested_json(c) for c in node.children],
    }


async def _inside(runtime: Runtime, run_id: str, seen: set[str], depth: int = 0) -> list[_Nested]:
    """The runs nested in `run_id`, oldest first, each with those nested in it."""
    store = runtime.run_store
    children: list[RunInfo] = []
    while batch := await store.list_runs(workflow_run_id=run_id, limit=500, offset=len(children)):
        children.extend(batch)
    nodes = []
    for child in reversed(children):
        if child.run_id in seen:  # a cycle in corrupt links
            continue
        seen.add(child.run_id)
        node = _Nested(child, child.step_id)
        if child.kind == "workflow":
            # A nested workflow run's record, not its run summary, names the step it ran in.
            record = await runtime.workflow_store.get_run(child.run_id)
            node.step = record.parent_step_id if record is not None else None
            if depth < _MAX_DEPTH:
                node.children = await _inside(runtime, child.run_id, seen, depth + 1)
        nodes.append(node)
    return nodes


MIN_PREFIX = 4
"""The shortest run-id prefix `runs show` looks up."""


async def _by_prefix(runtime: Runtime, prefix: str) -> RunInfo:
    """The one run whose id starts with `prefix`.

    Raises:
        CommandLineError: no run, or several, start with it (naming a few of them).
    """
    from ..lab import DEFAULT_STORE
    from ..stores.run_store import RunQuery

    where = runtime.store_url or DEFAULT_STORE
    if len(prefix) < MIN_PREFIX:
        raise CommandLineError(
            f"no run {prefix!r} in {where}",
            hint=f"Give the run's id, or at least its first {MIN_PREFIX} characters "
            "(`tether runs list` shows them).",
        )
    found: list[RunInfo] = []
    cursor: str | None = None
    while True:  # every run's id is read once: a terminal's worth of runs is cheap
        page = await runtime.run_store.query_runs(RunQuery(), limit=500, cursor=cursor)
        found.extend(i for i in page.runs if i.run_id.startswith(prefix))
        if len(found) > 1 or page.next_cursor is None:
            break
        cursor = page.next_cursor
    if not found:
        raise CommandLineError(
            f"no run {prefix!r} in {where}",
            hint="`tether runs list` shows the most recent runs and their ids.",
        )
    if len(found) > 1:
        some = ", ".join(i.run_id for i in found[:5])
        raise CommandLineError(
            f"run id prefix {prefix!r} is ambiguous: it starts {some}"
            + (" and more" if len(found) > 5 else ""),
            hint="Give more characters of the run id.",
        )
    return found[0]


async def _show(
    runtime: Runtime, options: GlobalOptions, run_id: str
) -> tuple[RunInfo, list[_Nested], list[RunEvent]]:
    async with runtime:
        await reach_stores(runtime, options)
        store = runtime.run_store
        info = await store.get_run(run_id) or await _by_prefix(runtime, run_id)
        run_id = info.run_id
        inside = await _inside(runtime, run_id, {run_id})
        events = await store.events(run_id)
        return info, inside, events


def _unpriced(events: Sequence[Mapping[str, Any]]) -> str | None:
    """Why a run has no cost: the reason its first unpriced model call gave."""
    for event in events:
        data = event.get("data")
        if event.get("type") == MODEL_CALL_FINISHED and isinstance(data, Mapping):
            why = data.get("unpriced")
            if isinstance(why, str):
                return why
    return None


# -- resume ----------------------------------------------------------------------------------


@runs_app.command(
    "resume", context_settings={"allow_extra_args": True, "ignore_unknown_options": True}
)
@reports_errors
def resume_run(
    ctx: typer.Context,
    run_id: Annotated[
        str,
        typer.Argument(metavar="RUN", help="The paused run (`tether runs list --status paused`)."),
    ],
    approve: Annotated[
        list[str] | None,
        typer.Option("--approve", metavar="ID", help="Approve pending call ID (repeatable)."),
    ] = None,
    deny: Annotated[
        list[str] | None,
        typer.Option("--deny", metavar="ID", help="Deny pending call ID (repeatable)."),
    ] = None,
    reason: Annotated[
        list[str] | None,
        typer.Option(
            "--reason",
            metavar="TEXT",
            help="Why: the Nth --reason goes with the Nth --deny (default 'denied').",
        ),
    ] = None,
    as_json: Annotated[
        bool,
        typer.Option("--json", help="Print the run id, status, text and pending calls as JSON."),
    ] = False,
) -> None:
    """Decide every pending call of paused agent run RUN and continue the run here.

    --result ID JSON gives the result of external call ID: JSON, or else taken as a string
    (repeatable).

    The answer streams to stdout. Each decision is recorded with the run (who decided: your
    user name). When the turn pauses again, its new pending calls are listed and the command
    ends; run it again to decide them.
    """
    from .. import approvals

    denials = list(deny or [])
    reasons = list(reason or [])
    if len(reasons) > len(denials):
        raise CommandLineError(
            f"{len(reasons)} --reason for {len(denials)} --deny",
            hint="Give each --reason after the --deny it explains.",
        )
    decisions: dict[str, Any] = {}

    def decide(call_id: str, decision: Any) -> None:
        if not call_id.strip():
            raise CommandLineError("a call id is empty", hint="`tether runs show RUN`.")
        if call_id in decisions:
            raise CommandLineError(
                f"call {call_id!r} is decided twice", hint="Give one decision per call."
            )
        decisions[call_id] = decision

    for call_id in approve or []:
        decide(call_id, approvals.approve())
    for i, call_id in enumerate(denials):
        decide(call_id, approvals.deny(reasons[i] if i < len(reasons) else "denied"))
    for call_id, text in _results(list(ctx.args)):
        decide(call_id, approvals.result(_result_value(text)))
    if not decisions:
        raise CommandLineError(
            "no decision given",
            hint="Give --approve ID, --deny ID [--reason TEXT] or --result ID JSON for each "
            "pending call (`tether runs show RUN` lists them).",
        )
    options = options_of(ctx)
    registry = load_project(options)
    run_async(_resume(registry.runtime, options, run_id, decisions, as_json=as_json))


def _results(args: list[str]) -> list[tuple[str, str]]:
    """The `--result ID JSON` pairs among the command's extra arguments (two values each,
    which an option of the command line parser cannot take repeated)."""
    pairs: list[tuple[str, str]] = []
    i = 0
    while i < len(args):
        if args[i] != "--result":
            raise CommandLineError(
                f"unexpected argument {args[i]!r}",
                hint="tether runs resume RUN --approve ID | --deny ID --reason TEXT | "
                "--result ID JSON",
            )
        if len(args) - i < 3:
            raise CommandLineError(
                "--result takes two values: the call id and its result",
                hint="--result ID JSON, e.g. --result call_1 '{\"ok\": true}'",
            )
        pairs.append((args[i + 1], args[i + 2]))
        i += 3
    return pairs


def _result_value(text: str) -> Any:
    import json

    try:
        return json.loads(text)
    except ValueError:
        return text


async def _resume(
    runtime: Runtime,
    options: GlobalOptions,
    run_id: str,
    decisions: dict[str, Any],
    *,
    as_json: bool,
) -> None:
    import getpass

    from ..errors import DecisionError, RunNotFoundError, RunNotPausedError

    async with runtime:
        await reach_stores(runtime, options)
        info = await runtime.run_store.get_run(run_id) or await _by_prefix(runtime, run_id)
        run_id = info.run_id
        if info.status == "paused":
            pending = {str(p.get("id")) for p in info.pending}
            listed = ", ".join(sorted(pending))
            for call_id in decisions:
                if call_id not in pending:
                    raise CommandLineError(
                        f"call {call_id!r} is not a pending call of run {run_id}; "
                        f"pending: {listed}",
                        hint="`tether runs show RUN` lists the pending calls.",
                    )
            missing = sorted(pending - set(decisions))
            if missing:
                raise CommandLineError(
                    f"no decision for pending call(s) {', '.join(missing)} of run {run_id}",
                    hint="Give a decision for every pending call.",
                )
        try:
            who = getpass.getuser()
        except Exception:  # no user name in this environment
            who = "cli"
        try:
            handle = await runtime.resume_stream(run_id, decisions, decided_by=who)
        except (RunNotPausedError, RunNotFoundError, DecisionError) as exc:
            raise CommandLineError(
                str(exc), hint="`tether runs list --status paused` lists the paused runs."
            ) from None
        async for text in handle.text_stream:
            if not as_json:
                emit(text, nl=False)
        outcome = await handle.result
    if as_json:
        emit_json(
            {
                "run_id": run_id,
                "status": "paused" if outcome.paused else "completed",
                "text": outcome.text,
                "pending": [dict(p) for p in outcome.pending],
            }
        )
        return
    if outcome.text:
        emit("")
    if outcome.paused:
        calls = ", ".join(
            f"{clean(p['name'])} ({p['kind']}, {clean(p['id'])})" for p in outcome.pending
        )
        emit_err(
            f"run {run_id} paused again, waiting for decisions on {calls}: `tether runs resume "
            f"{run_id} --approve ID ...`"
        )
