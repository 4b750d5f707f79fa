"""`tether workflow list`, `tether workflow run ID [--input JSON|TEXT] [--run-id ID]` and
`tether workflow signal RUN NAME JSON`."""

from __future__ import annotations

import asyncio
import inspect
import json
import typing
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from ..errors import (
    RegistryError,
    WorkflowError,
    WorkflowInputError,
    WorkflowNotWaitingError,
    WorkflowRunBusyError,
    WorkflowSignalError,
    WorkflowWaitingError,
)
from ..run_events import (
    WORKFLOW_STARTED,
    WORKFLOW_STEP_FAILED,
    WORKFLOW_STEP_FINISHED,
    WORKFLOW_STEP_STARTED,
)
from ._errors import CommandLineError, Interrupted, RunFailedError, reports_errors, stdin_if_dash
from ._interrupt import CtrlC
from ._project import GlobalOptions, load_project, options_of, reach_stores, run_async
from ._render import (
    clean,
    compact,
    emit,
    emit_answer,
    emit_err,
    emit_json,
    json_error_excerpt,
    table,
)

if TYPE_CHECKING:
    from ..lab import Registry, Runtime
    from ..stores import WorkflowRunRecord
    from ..workflows import Workflow, WorkflowEvent, WorkflowHandle

__all__ = ["workflow_app"]

workflow_app = typer.Typer(
    name="workflow",
    help="List the project's workflows, start or resume a workflow run, signal a waiting one.",
    no_args_is_help=True,
)

_UNSET: Any = object()
T = TypeVar("T")


def find_workflow(registry: Registry, workflow_id: str) -> Workflow[Any, Any]:
    """The registry's workflow `workflow_id`, or a CommandLineError listing the known ones."""
    try:
        return registry.workflow(workflow_id)
    except RegistryError as exc:
        raise CommandLineError(
            str(exc), kind="RegistryError", hint="`tether workflow list` shows every workflow."
        ) from None


def takes_text(workflow: Workflow[Any, Any]) -> bool:
    """True when the workflow's run function declares its input a `str` (`async def run(input:
    str, ctx)`): then `--input` is that text as it is, never parsed as JSON."""
    try:
        first = next(iter(inspect.signature(workflow.fn).parameters), None)
        hints = typing.get_type_hints(workflow.fn)
    except Exception:  # an annotation that does not resolve: read --input as before
        return False
    return first is not None and hints.get(first) is str


def parse_input(text: str) -> Any:
    """`--input` as JSON when it is JSON, else as the string itself. Text that starts like a
    JSON object or array must be valid JSON: a typo there is an error, not a string."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        if text.lstrip().startswith(("{", "[")):
            raise CommandLineError(
                f"--input looks like JSON but does not parse: {exc.msg} "
                f"(line {exc.lineno}, column {exc.colno})\n{json_error_excerpt(text, exc)}",
                hint='Fix the JSON, quoted for your shell, e.g. --input \'{"topic": "x"}\'.',
            ) from None
        return text


def _description(workflow: Workflow[Any, Any]) -> str:
    doc = inspect.getdoc(workflow.fn) or ""
    return doc.strip().splitlines()[0] if doc.strip() else ""


# -- list ------------------------------------------------------------------------------------


@workflow_app.command("list")
@reports_errors
def list_workflows(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Print the workflows as JSON.")] = False,
) -> None:
    """List the project's workflows.

    Each with its id and the first line of its run function's docstring.
    """
    registry = load_project(options_of(ctx))
    entries = [
        {"id": w.id, "description": _description(w)}
        for w in (registry.workflows[k] for k in sorted(registry.workflows))
    ]
    if as_json:
        emit_json(entries)
        return
    if not entries:
        emit_err(f"No workflows in {registry.config_path}: list them under workflows = [...].")
        return
    emit(table(("ID", "DESCRIPTION"), [(clean(e["id"]), clean(e["description"])) for e in entries]))


# -- run -------------------------------------------------------------------------------------


@workflow_app.command("run")
@reports_errors
def run_workflow(
    ctx: typer.Context,
    workflow_id: Annotated[
        str, typer.Argument(metavar="ID", help="The workflow's id (see `tether workflow list`).")
    ],
    input_text: Annotated[
        str | None,
        typer.Option(
            "--input",
            "-i",
            metavar="JSON|TEXT",
            help="The run's input: parsed as JSON when it is JSON, else taken as a string (a "
            "workflow whose input is declared `str` always gets the text as it is); '-' reads "
            "it from stdin. Needed to start a run; optional when resuming one.",
        ),
    ] = None,
    run_id: Annotated[
        str | None,
        typer.Option(
            "--run-id",
            metavar="RUN_ID",
            help="Resume this run: its completed steps are not run again. A completed run "
            "prints its stored output.",
        ),
    ] = None,
    as_json: Annotated[
        bool,
        typer.Option("--json", help="Print the run id, status and output as one JSON object."),
    ] = False,
    wait: Annotated[
        float | None,
        typer.Option(
            "--wait",
            metavar="SECONDS",
            min=0,
            help="When another live process runs the run --run-id names, wait at most SECONDS "
            "for it (by default as long as it runs: its output is printed once it completed).",
        ),
    ] = None,
    no_wait: Annotated[
        bool,
        typer.Option(
            "--no-wait",
            help="When another live process runs the run --run-id names, exit at once "
            "naming it instead of waiting for it.",
        ),
    ] = False,
) -> None:
    """Start a run of workflow ID, or resume one with --run-id.

    The run id goes to stderr as soon as the run starts, then step progress; the output is
    printed on stdout (a string as is, anything else as JSON). A failed or cancelled (Ctrl-C)
    run can be resumed with --run-id, except one that failed on its input; so can an
    interrupted one (its process died: `tether runs list` says so once its lease expired).
    A run another live process is running is not resumed: the command says who holds it.
    """
    options = options_of(ctx)
    if input_text is None and run_id is None:
        raise CommandLineError(
            "give --input to start a run, or --run-id to resume one",
            hint=f'e.g. `tether workflow run {workflow_id} --input \'{{"topic": "x"}}\'`.',
        )
    if run_id is not None and not run_id.strip():
        raise CommandLineError("--run-id is empty", hint="`tether runs list --kind workflow`.")
    registry = load_project(options)
    workflow = find_workflow(registry, workflow_id)
    if input_text is not None:
        input_text = stdin_if_dash(
            input_text,
            "input to run with",
            hint="Pipe the input in, or pass it with --input JSON|TEXT.",
        )
    if input_text is None:
        value = _UNSET
    elif takes_text(workflow):
        value = input_text
    else:
        value = parse_input(input_text)
    waiting: bool | float = False if no_wait else (True if wait is None else wait)
    run_async(
        _run(registry.runtime, workflow, options, value, run_id, as_json=as_json, wait=waiting)
    )


@workflow_app.command("signal")
@reports_errors
def signal_workflow(
    ctx: typer.Context,
    run_id: Annotated[
        str,
        typer.Argument(metavar="RUN", help="The waiting run (`tether runs list --kind workflow`)."),
    ],
    name: Annotated[str, typer.Argument(metavar="NAME", help="The signal it waits for.")],
    value_text: Annotated[
        str,
        typer.Argument(
            metavar="JSON",
            help="The signal's value: parsed as JSON when it is JSON, else taken as a string; "
            "'-' reads it from stdin.",
        ),
    ],
    as_json: Annotated[
        bool,
        typer.Option("--json", help="Print the run id, status and output as one JSON object."),
    ] = False,
    no_run: Annotated[
        bool,
        typer.Option(
            "--no-run",
            help="Store the signal and leave the run to a `tether serve` worker (its next sweep "
            "resumes it) instead of running it here.",
        ),
    ] = False,
) -> None:
    """Send signal NAME with value JSON to workflow run RUN, which waits for it, and resume the
    run here from its journal (or, with --no-run, in a `tether serve` worker).

    The run goes on in this process (step progress on stderr, its output on stdout), until it
    completes, fails, or waits for its next signal. A value that does not match the schema the
    wait declared, or a run that does not wait for NAME, is refused and nothing is stored.
    """
    options = options_of(ctx)
    if not run_id.strip():
        raise CommandLineError("RUN is empty", hint="`tether runs list --kind workflow`.")
    value_text = stdin_if_dash(
        value_text, "value to send", hint="Pipe the value in, or pass it as JSON after NAME."
    )
    value = _parse_value(value_text)
    registry = load_project(options)
    run_async(
        _signal(registry.runtime, options, run_id, name, value, as_json=as_json, no_run=no_run)
    )


def _parse_value(text: str) -> Any:
    try:
        return parse_input(text)
    except CommandLineError as exc:
        raise CommandLineError(
            exc.message.replace("--input", "the value", 1), hint=exc.hint
        ) from None


async def _signal(
    runtime: Runtime,
    options: GlobalOptions,
    run_id: str,
    name: str,
    value: Any,
    *,
    as_json: bool,
    no_run: bool = False,
) -> None:
    async with runtime:
        await reach_stores(runtime, options)
        if no_run:
            root = await _refusing(runtime.store_signal(run_id, name, value), run_id)
            if as_json:
                emit_json({"workflow_run_id": root, "signal": name, "status": "interrupted"})
            else:
                emit_err(
                    f"signal {clean(name)!r} stored; run {root} goes on in the first `tether "
                    "serve` worker that sweeps for it (or here: `tether workflow run WORKFLOW "
                    f"--run-id {root}`)"
                )
            return
        quiet = as_json

        def quieten() -> None:
            nonlocal quiet
            quiet = True

        def on_event(event: WorkflowEvent) -> None:
            if not quiet:
                _progress(event)

        handle = await _refusing(runtime.signal(run_id, name, value, on_event=on_event), run_id)
        rid = handle.workflow_run_id
        emit_err(
            f"signal {clean(name)!r} sent; resuming run {rid} of workflow "
            f"{clean(handle.workflow_id)}"
        )
        outcome = await _follow(handle, quieten)
    _report(handle.workflow_id, rid, outcome, as_json=as_json, resumed=True, already=False)


async def _refusing(call: Awaitable[T], run_id: str) -> T:
    """What a signal gives, or the CLI error for a refused one."""
    try:
        return await call
    except WorkflowNotWaitingError as exc:
        raise RunFailedError(
            str(exc), kind=type(exc).__name__, hint=f"`tether runs show {run_id}`."
        ) from None
    except WorkflowSignalError as exc:
        raise CommandLineError(
            str(exc), hint="The wait's schema: `tether runs show RUN --json`."
        ) from None
    except WorkflowError as exc:
        raise CommandLineError(
            str(exc), hint="`tether runs list --kind workflow` lists the waiting runs."
        ) from None


async def _resumable(
    workflow: Workflow[Any, Any], run_id: str, value: Any
) -> WorkflowRunRecord | None:
    """The stored run `--run-id` names, checked against what the command line asks for."""
    store = workflow.store
    if store is None:
        if value is _UNSET:
            raise CommandLineError(
                f"workflow {workflow.id!r} journals its runs nowhere durable, so no run of it "
                "can be resumed",
                hint="Create it with runtime.create_workflow(...) to journal its runs in the "
                "project's store.",
            )
        return None
    record = await store.get_run(run_id)
    if record is None:
        if value is _UNSET:
            raise CommandLineError(
                f"there is no stored run {run_id!r} of workflow {workflow.id!r} to resume",
                hint="`tether runs list --kind workflow` lists workflow runs; add --input to "
                "start a new run under this id.",
            )
        return None
    if record.workflow_id != workflow.id:
        raise CommandLineError(
            f"run {run_id!r} is a run of workflow {record.workflow_id!r}, not {workflow.id!r}",
            hint=f"`tether workflow run {record.workflow_id} --run-id {run_id}`.",
        )
    if record.parent_run_id is not None:
        raise CommandLineError(
            f"run {run_id!r} runs nested inside run {record.parent_run_id!r}",
            hint=f"Resume the root of its tree, run {record.root_run_id!r}: it resumes this one.",
        )
    if value is not _UNSET and value != record.input:
        raise CommandLineError(
            f"run {run_id!r} was started with a different input: {compact(record.input)}",
            hint="Resume it without --input.",
        )
    return record


def _progress(event: WorkflowEvent) -> None:
    """Step progress on stderr, nested runs named by their workflow."""
    where = event["workflow_id"]
    if event["type"] == WORKFLOW_STEP_STARTED:
        emit_err(f"[{clean(where)}] {clean(event['step_id'])} ...")
    elif event["type"] == WORKFLOW_STEP_FINISHED:
        mark = " (replayed)" if event["replayed"] else ""
        emit_err(f"[{clean(where)}] {clean(event['step_id'])} done{mark}")
    elif event["type"] == WORKFLOW_STEP_FAILED:
        error = event["error"]
        reason = compact(f"{error.get('type')}: {error.get('message')}")
        emit_err(f"[{clean(where)}] {clean(event['step_id'])} failed: {reason}")


def _failed(workflow_id: str, rid: str, failure: BaseException, *, interrupted: bool) -> Exception:
    """The CLI error for a run that ended in `failure`, with what to do next."""
    resume = f"`tether workflow run {workflow_id} --run-id {rid}`"
    if interrupted:
        return Interrupted(
            f"interrupted: run {rid} of workflow {workflow_id!r} was cancelled",
            hint=f"Its completed steps are journaled; resume it with {resume}.",
        )
    if isinstance(failure, WorkflowRunBusyError):
        return RunFailedError(
            f"run {rid} of workflow {workflow_id!r} is being run by another process: "
            f"{failure.holder or 'unknown'}; nothing was run here",
            kind=type(failure).__name__,
            hint=f"Wait for it to finish (`tether runs show {rid}`), or run {resume} without "
            "--no-wait (or with a longer --wait) to wait for it here and print its output.",
        )
    if isinstance(failure, WorkflowInputError):
        return RunFailedError(
            f"run {rid} of workflow {workflow_id!r} failed on its input: {failure}",
            kind=type(failure).__name__,
            hint=f"Resuming it would fail the same way: start a new run with the input it "
            f"takes, `tether workflow run {workflow_id} --input ...`.",
        )
    return RunFailedError(
        f"run {rid} of workflow {workflow_id!r} failed: {failure}",
        kind=type(failure).__name__,
        hint=f"Its events: `tether runs show {rid}`. Once the cause is fixed, resume it "
        f"(completed steps are not run again) with {resume}.",
    )


async def _run(
    runtime: Runtime,
    workflow: Workflow[Any, Any],
    options: GlobalOptions,
    value: Any,
    run_id: str | None,
    *,
    as_json: bool,
    wait: bool | float = True,
) -> None:
    async with runtime:
        await reach_stores(runtime, options)
        record = await _resumable(workflow, run_id, value) if run_id is not None else None
        quiet = as_json
        ran_here = False  # a run that had completed (before us, or while we waited) runs no step

        def quieten() -> None:
            nonlocal quiet
            quiet = True

        def on_event(event: WorkflowEvent) -> None:
            nonlocal ran_here
            if event["type"] == WORKFLOW_STARTED and event["workflow_run_id"] == run_id:
                ran_here = True
            if not quiet:
                _progress(event)

        if value is _UNSET:
            handle = workflow.run(workflow_run_id=run_id, on_event=on_event, wait=wait)
        else:
            handle = workflow.run(value, workflow_run_id=run_id, on_event=on_event, wait=wait)
        started = "resuming run" if record is not None else "run"
        emit_err(f"{started} {handle.workflow_run_id} of workflow {clean(workflow.id)}")
        outcome = await _follow(handle, quieten)
    # Judged by what happened, not by the record read before a --wait: the holder may have
    # completed the run while this process waited for its lease.
    already = record is not None and not ran_here
    rid = handle.workflow_run_id
    _report(workflow.id, rid, outcome, as_json=as_json, resumed=record is not None, already=already)


@dataclass
class _Outcome:
    output: Any = None
    failure: BaseException | None = None
    interrupted: bool = False


async def _follow(handle: WorkflowHandle[Any], quieten: Callable[[], None]) -> _Outcome:
    """Wait for the run's end (Ctrl-C cancels it, and it records that it was)."""
    task = handle.result
    outcome = _Outcome()

    def interrupt() -> None:
        # The step the cancellation stops would report itself failed: noise after Ctrl-C.
        quieten()
        handle.cancel()

    with CtrlC(interrupt) as ctrl_c:
        try:
            outcome.output = await task
        except asyncio.CancelledError:
            if not ctrl_c.fired:
                ctrl_c.cancelled()
            # Let the run record itself as cancelled before the runtime closes.
            await asyncio.wait([task])
            if task.cancelled():
                outcome.failure = asyncio.CancelledError()
            elif task.exception() is not None:
                outcome.failure = task.exception()
            else:
                outcome.output = task.result()
        except Exception as exc:
            outcome.failure = exc
    outcome.interrupted = ctrl_c.fired
    return outcome


def _report(
    workflow_id: str, rid: str, outcome: _Outcome, *, as_json: bool, resumed: bool, already: bool
) -> None:
    """Print how the run ended: its output, what it waits for, or the error to exit with."""
    failure = outcome.failure
    if isinstance(failure, WorkflowWaitingError):
        signal = f"`tether workflow signal {rid} {failure.waiting_for} JSON`"
        paused = failure.paused_run_id
        if as_json:
            emit_json(
                {
                    "workflow": workflow_id,
                    "workflow_run_id": rid,
                    "status": "waiting",
                    "resumed": resumed,
                    "waiting_for": failure.waiting_for,
                    "waiter_run_id": failure.waiter_run_id,
                    "deadline": failure.deadline,
                    "paused_run_id": paused,
                }
            )
            return
        if paused is not None:
            emit_err(
                f"run {rid} waits for paused agent run {clean(paused)}, whose calls need a "
                f"decision; nothing runs until they have one: `tether runs show {clean(paused)}` "
                f"lists them, `tether runs resume {clean(paused)} --approve ID ...` decides "
                "them and resumes the workflow"
            )
            return
        emit_err(
            f"run {rid} waits for signal {clean(failure.waiting_for)!r}; nothing runs until "
            f"it comes: send it with {clean(signal)}"
        )
        return
    if failure is not None:
        raise _failed(workflow_id, rid, failure, interrupted=outcome.interrupted)
    output = outcome.output
    if as_json:
        emit_json(
            {
                "workflow": workflow_id,
                "workflow_run_id": rid,
                "status": "completed",
                "resumed": resumed,
                "output": output,
            }
        )
        return
    if isinstance(output, str):
        emit_answer(output)
    else:
        emit_json(output)
    note = " (it had already completed: this is its stored output)" if already else ""
    emit_err(f"run {rid} completed{note}")
