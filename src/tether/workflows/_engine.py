"""The durable workflow engine: `create_workflow`, `ctx.step`, resumable and nested runs.

A run executes `run(input, ctx)` in its own task. Each `ctx.step(name, fn)` is looked up in the
run's journal (a WorkflowStore) first: a step that completed in an earlier attempt is not
executed again, and its journaled output is returned instead. So running a failed, cancelled or
crashed run again with the same `workflow_run_id` picks up where it stopped — provided the
workflow body is deterministic: the same input reaches the same steps in the same order.

Steps are matched by name and occurrence: the first `ctx.step("fetch", …)` of a run is step id
`fetch`, the second `fetch#2`, and so on; a step run inside step `fetch` is `fetch/<name>`.

A run started while another run is active (inside its body or one of its steps) is **nested**: it
joins the active run's tree (`parent_run_id`, `root_run_id`), shares its store and recorders, and
gets a run id derived from its parent, so the parent's resume resumes the child too. A nested run
that the parent leaves unfinished is cancelled when the parent's body ends, and the parent
records its own end only after the child has recorded its cancellation. `isolated=True` starts a
separate root run instead (same store and recorders, its own tree, a fresh id).

A running run holds a lease in the store (`RunLease`), renewed on a heartbeat (every sixth of
`lease_ttl`, 30 s by default) by the process running it; the runs nested in it share the lease
of their root. A process that dies stops renewing: its run reads as "interrupted" once the
lease expires, and may then be resumed — by any process, taking the run over with one
conditional update of the lease. Of two processes resuming the same run at once, exactly one
gets it; the other fails at once with `WorkflowRunBusyError` naming the holder (or, with
`lease_wait=`, waits that long for the lease first). So a step never runs twice while its
holder is alive. A holder that finds its lease taken over (it stalled past the lease) stops the
run with `LeaseLostError` instead of finishing it over the new holder's head: every write it
makes under the lease (a step, the run's end, its run record) carries the lease, and the store
refuses it in the same statement once another owner holds the run.

The active run and step are kept in context variables, so code running inside a step — an agent
run, a tool — reads them with `current_run()` / `current_step()` without being handed them.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import inspect
import math
import time
import traceback
import uuid
import warnings
from collections.abc import Awaitable, Callable, Generator, Iterable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import (
    TYPE_CHECKING,
    Any,
    Generic,
    Literal,
    NoReturn,
    TypedDict,
    TypeVar,
    Unpack,
    cast,
    overload,
)

from .._heartbeat import Heartbeat
from .._json import check_json_safe, dumps
from .._owners import holder_gone, owner_name
from ..errors import (
    LeaseLostError,
    NotJSONSafeError,
    StepOutputError,
    StoreError,
    WorkflowError,
    WorkflowNotWaitingError,
    WorkflowRunBusyError,
    WorkflowSignalError,
    WorkflowWaitingError,
    WorkflowWaitTimeoutError,
)
from ._events import WorkflowEvent, WorkflowEventHandler
from ._store import (
    InMemoryWorkflowStore,
    RunLease,
    WaitRecord,
    WatchesRuns,
    WorkflowRunRecord,
    WorkflowStore,
    not_waiting_error,
)
from ._waits import (
    Suspended,
    check_name,
    check_timeout,
    signal_output,
    timeout_output,
    wait_schema,
    wrong_value,
)

if TYPE_CHECKING:
    from ..signals import AbortSignal

__all__ = [
    "LEASE_TTL",
    "RunSlot",
    "StepLink",
    "Workflow",
    "WorkflowContext",
    "WorkflowHandle",
    "answer_paused_run",
    "create_workflow",
    "current_run",
    "current_step",
    "lease_owner",
    "resume_expired_waits",
]

LEASE_TTL = 30.0
"""Seconds a run's lease lasts unless renewed; the heartbeat renews it every sixth of that."""


def lease_owner() -> str:
    """A new owner name for a lease: `host:pid.start:token`, unique per execution, saying where
    the holder runs (for the messages that name it, and so that a holder on this host whose
    process is gone is taken over at once: `tether._owners`)."""
    return owner_name(uuid.uuid4().hex[:8])


In = TypeVar("In")
Out = TypeVar("Out")
T = TypeVar("T")

_NAMESPACE = uuid.UUID("6f0f6c2e-4d1b-4c5e-9a39-2b8f3f1d7a10")

_current_run: ContextVar[WorkflowContext[Any] | None] = ContextVar(
    "tether_workflow_run", default=None
)
_current_step: ContextVar[str | None] = ContextVar("tether_workflow_step", default=None)


class _Unset:
    def __repr__(self) -> str:
        return "<unset>"


_UNSET: Any = _Unset()


@dataclass(frozen=True, slots=True)
class StepLink:
    """Where the calling code runs: the active workflow run, and its step if inside one.

    This is what an agent run started inside a workflow records as its `workflow` link.
    """

    workflow_id: str
    workflow_run_id: str
    root_run_id: str
    step_id: str | None
    """The running step's id, or None in the workflow body outside any step."""


def current_run() -> WorkflowContext[Any] | None:
    """The context of the workflow run the caller is running inside, if any."""
    return _current_run.get()


def current_step() -> StepLink | None:
    """The active workflow run and step, or None outside every workflow run."""
    ctx = _current_run.get()
    if ctx is None:
        return None
    return StepLink(ctx.workflow_id, ctx.workflow_run_id, ctx.root_run_id, _current_step.get())


def _error(exc: BaseException) -> dict[str, Any]:
    return {"type": type(exc).__name__, "message": str(exc)}


_TRACEBACK_CHARS = 20_000
"""How much of a failed run's traceback its `workflow_failed` event carries (the last part)."""


def _traceback(exc: BaseException) -> str:
    return "".join(traceback.format_exception(exc))[-_TRACEBACK_CHARS:]


class _Recorders:
    """The recorders of one run tree; warns once per run when one raises (a `StoreError`
    fails the run instead)."""

    __slots__ = ("handlers", "warned")

    def __init__(self, handlers: list[WorkflowEventHandler]) -> None:
        self.handlers = handlers
        self.warned = False

    async def emit(self, event: WorkflowEvent) -> None:
        for handler in self.handlers:
            try:
                result = handler(event)
                if inspect.isawaitable(result):
                    await result
            except StoreError:
                # A recorder that could not store the event (the lab's run record): the run
                # fails rather than go on with a gap in what that record's readers see.
                raise
            except Exception as exc:
                if not self.warned:
                    self.warned = True
                    warnings.warn(
                        f"workflow recorder raised {exc!r}; the run goes on",
                        RuntimeWarning,
                        stacklevel=2,
                    )


class WorkflowContext(Generic[In]):
    """What a durable workflow's `run(input, ctx)` receives as `ctx`."""

    def __init__(
        self,
        *,
        workflow_id: str,
        record: WorkflowRunRecord,
        store: WorkflowStore,
        recorders: _Recorders,
        lease: RunLease,
    ) -> None:
        self.workflow_id = workflow_id
        """The workflow's id (what `create_workflow` was given)."""
        self.workflow_run_id = record.run_id
        """This run's id: pass it to `.run(workflow_run_id=…)` to resume the run."""
        self.parent_run_id = record.parent_run_id
        """The run this one is nested in, or None for a root run."""
        self.root_run_id = record.root_run_id
        """The root of this run's nest tree (its own id for a root run)."""
        self.input: In = record.input
        """The run's input (the journaled copy, so a resume sees exactly what the first try saw)."""
        self.attempt = record.attempts
        """1 on the first try, 2 on the first resume, …"""
        self.store = store
        """The WorkflowStore journaling this run (nested runs share it)."""
        self.lease = lease
        """The lease this run (and its whole tree) is held by while it runs."""
        self._recorders = recorders
        self._opened_wait = record.waiting_for
        self._step_counts: dict[str, int] = {}
        self._child_counts: dict[str, int] = {}
        self._children: list[asyncio.Task[Any]] = []

    def memory_scope_with_suffix(self, suffix: str) -> str:
        """`f"{root_run_id}:{suffix}"`: a conversation shared by every run of this nest tree."""
        return f"{self.root_run_id}:{suffix}"

    def run_local_scope(self, suffix: str) -> str:
        """`f"{workflow_run_id}:{suffix}"`: a conversation private to this run."""
        return f"{self.workflow_run_id}:{suffix}"

    async def _end_children(self) -> None:
        """Cancel the nested runs the body left unfinished and wait until each has recorded
        its end, so the tree is settled (and its store still open) when this run ends."""
        pending = [child for child in self._children if not child.done()]
        for child in pending:
            child.cancel()
        if pending:
            await asyncio.wait(pending)

    def _event_base(self) -> dict[str, Any]:
        return {
            "workflow_id": self.workflow_id,
            "workflow_run_id": self.workflow_run_id,
            "parent_run_id": self.parent_run_id,
            "root_run_id": self.root_run_id,
            "at": time.time(),
        }

    async def _emit(self, type_: str, **fields: Any) -> None:
        event = {"type": type_, **self._event_base(), **fields}
        await self._recorders.emit(cast("WorkflowEvent", event))

    async def _step_finished(self, step_id: str, step: str, output: Any, *, replayed: bool) -> None:
        """Tell the recorders a step is done: run now, or read back from the journal."""
        await self._emit(
            "workflow_step_finished", step_id=step_id, step=step, output=output, replayed=replayed
        )

    def _next_step_id(self, name: str) -> str:
        if not isinstance(name, str) or not name or "#" in name or "/" in name:
            raise WorkflowError(
                f"a step name must be a non-empty string without '#' or '/': {name!r}"
            )
        # A step inside another step is scoped by it: when the outer step is replayed, the
        # inner ones are not reached, and must not shift the numbering of later steps.
        outer = _current_step.get()
        base = name if outer is None else f"{outer}/{name}"
        n = self._step_counts.get(base, 0) + 1
        self._step_counts[base] = n
        return base if n == 1 else f"{base}#{n}"

    def _next_child_id(self, workflow_id: str, input: Any) -> str:
        # Counted per enclosing step for the same reason as step ids; derived from this run's
        # id so that a resumed parent finds (and resumes) the same child. The input is part of
        # the key: a step that runs again after a failure may start its child with another
        # input (a model chose the arguments of a tool), and that is a new child, not a
        # conflict with the one the failed attempt left behind.
        key = f"{_current_step.get() or ''}/{workflow_id}"
        if input is not _UNSET:
            key += "/" + hashlib.sha256(dumps(input).encode()).hexdigest()
        n = self._child_counts.get(key, 0) + 1
        self._child_counts[key] = n
        return str(uuid.uuid5(_NAMESPACE, f"{self.workflow_run_id}/{key}/{n}"))

    @overload
    async def step(self, name: str, fn: Callable[[], Awaitable[T]]) -> T: ...
    @overload
    async def step(self, name: str, fn: Callable[[], T]) -> T: ...

    async def step(self, name: str, fn: Callable[[], Any]) -> Any:
        """Run `fn()` (sync or async) once per run and journal what it returns.

        If this step completed in an earlier attempt of the run, `fn` is not called and the
        journaled output is returned. The output must be JSON-safe; anything else raises
        StepOutputError naming the step and the path. What is returned is the journaled copy,
        on the first try and on a resume alike.
        """
        step_id = self._next_step_id(name)
        journaled = await self.store.get_step(self.workflow_run_id, step_id)
        if journaled is not None:
            await self._step_finished(step_id, name, journaled.output, replayed=True)
            return journaled.output
        await self._emit("workflow_step_started", step_id=step_id, step=name)
        token = _current_step.set(step_id)
        try:
            value = fn()
            if inspect.isawaitable(value):
                value = await value
            try:
                check_json_safe(value, "output")
            except NotJSONSafeError as exc:
                raise StepOutputError(step_id, exc.path, exc.what) from exc
        except Suspended:
            raise  # the run waits: the step is not failed, it runs again on the resume
        except BaseException as exc:
            await self._emit("workflow_step_failed", step_id=step_id, step=name, error=_error(exc))
            raise
        finally:
            _current_step.reset(token)
        # Fenced by the run's lease: a holder that was taken over journals nothing more.
        record = await self.store.append_step(
            self.workflow_run_id, step_id=step_id, name=name, output=value, lease=self.lease
        )
        await self._step_finished(step_id, name, record.output, replayed=False)
        return record.output

    def run_slot(self, name: str) -> RunSlot:
        """Reserve the place in this run's journal of a run started here that may pause (a lab
        episode): numbered like a step (`name`, `name#2`, inside the running step), so a replay
        reaches the same place. The lab does this for each episode started inside a workflow
        run; `RunSlot` says how the pause becomes the workflow's wait."""
        return RunSlot(self, self._next_step_id(name))

    async def wait_for(
        self,
        name: str,
        schema: dict[str, Any] | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 - a durable wait, not a deadline of this call
    ) -> Any:
        """Wait for signal `name` and return its value (the journaled copy).

        The first time the run gets here, the wait is journaled and the run stops: it is
        stored as `waiting`, its lease is released and its task ends (the handle raises
        `WorkflowWaitingError`), so no process holds anything while it waits.
        `runtime.signal(run_id, name, value)` or `Workflow.signal(...)` stores the value and
        resumes the run from its journal, in whichever process sends it: the steps before the
        wait are replayed and this call returns the value.

        Args:
            name: The signal's name (no '#' or '/'); a run may wait for one name several
                times, each wait answered by its own signal.
            schema: A JSON Schema the value must match: a signal that does not is refused
                with `WorkflowSignalError`, and nothing is stored.
            timeout: Seconds to wait at most, from the first time the run got here (a resume
                does not restart it). Once it passes, the run is resumed without the value
                (by `tether serve`'s sweep or `resume_expired_waits`) and this call raises
                `WorkflowWaitTimeoutError`, at every replay alike.

        Raises:
            WorkflowWaitTimeoutError: the wait timed out.
            WorkflowError: a bad name, schema or timeout (raised before anything is stored).
        """
        check_name(name)
        limit = check_timeout(name, timeout)
        checked = wait_schema(name, schema)
        step_id = self._next_step_id(f"wait:{name}")
        journaled = await self.store.get_step(self.workflow_run_id, step_id)
        replayed = journaled is not None
        if journaled is None:
            now = time.time()
            prior = self._opened_wait
            if prior is not None and (prior.run_id, prior.step_id) == (
                self.workflow_run_id,
                step_id,
            ):
                since, deadline = prior.since, prior.deadline  # a resume keeps the first clock
            else:
                since, deadline = now, None if limit is None else now + limit
            if deadline is None or deadline > now:
                wait = WaitRecord(self.workflow_run_id, name, step_id, checked, deadline, since)
                raise Suspended(wait)
            journaled = await self.store.append_step(
                self.workflow_run_id,
                step_id=step_id,
                name=f"wait:{name}",
                output=timeout_output(deadline),
                lease=self.lease,
            )
        answer = journaled.output
        await self._step_finished(step_id, f"wait:{name}", answer, replayed=replayed)
        if isinstance(answer, dict) and answer.get("timed_out"):
            deadline = float(answer.get("deadline") or 0.0)
            raise WorkflowWaitTimeoutError(
                f"workflow run {self.workflow_run_id!r}: no signal {name!r} came before the "
                f"wait's timeout",
                name=name,
                deadline=deadline,
            )
        if not isinstance(answer, dict) or "signal" not in answer:
            raise WorkflowError(
                f"workflow run {self.workflow_run_id!r}: the journal's step {step_id!r} is not "
                "the answer of a wait (a ctx.step of the same name?)"
            )
        return answer["signal"]


class RunSlot:
    """The journal place of a run started inside a workflow run that may pause (a lab episode
    whose turn waits for decisions): `WorkflowContext.run_slot`.

    When the run pauses, `suspend(run_id)` makes the workflow wait for it — stored `waiting`,
    its process returns, exactly as at a `ctx.wait_for` — and whoever ends the paused run
    journals its outcome here (`answer_paused_run`), which resumes the workflow from its
    journal: on that replay, `answer()` returns the outcome instead of the run starting again.
    """

    __slots__ = ("ctx", "step_id")

    def __init__(self, ctx: WorkflowContext[Any], step_id: str) -> None:
        self.ctx = ctx
        self.step_id = step_id
        """The slot's id in the run's journal (where the outcome is journaled)."""

    async def answer(self) -> Any | None:
        """The journaled outcome of the run that paused here, or None (always None on a run's
        first attempt: nothing can have answered it yet, and nothing is read)."""
        ctx = self.ctx
        if ctx.attempt <= 1:
            return None
        journaled = await ctx.store.get_step(ctx.workflow_run_id, self.step_id)
        if journaled is None:
            return None
        await ctx._step_finished(
            self.step_id, self.step_id.rsplit("/", 1)[-1], journaled.output, replayed=True
        )
        return journaled.output

    def waited_run(self) -> str | None:
        """The paused run the workflow waited for here when this attempt began, unanswered
        (the run was resumed without its answer, `tether workflow run --run-id`): the place
        waits for that run again rather than start a new one. None otherwise."""
        prior = self.ctx._opened_wait
        if prior is None or prior.paused_run is None:
            return None
        if (prior.run_id, prior.step_id) != (self.ctx.workflow_run_id, self.step_id):
            return None
        return prior.paused_run

    def suspend(self, paused_run_id: str) -> NoReturn:
        """Make the workflow wait for paused run `paused_run_id` (raised through the caller,
        as a wait is)."""
        ctx = self.ctx
        name = self.step_id.rsplit("/", 1)[-1]
        raise Suspended(
            WaitRecord(
                ctx.workflow_run_id,
                name,
                self.step_id,
                since=time.time(),
                paused_run=paused_run_id,
            )
        )


class WorkflowHandle(Generic[Out]):
    """A started run: its id at once, its outcome when `result` is awaited.

    `await handle` is the same as `await handle.result`.
    """

    __slots__ = ("result", "workflow_id", "workflow_run_id")

    def __init__(self, workflow_id: str, workflow_run_id: str, task: asyncio.Task[Out]) -> None:
        self.workflow_id = workflow_id
        self.workflow_run_id = workflow_run_id
        """Keep it to resume the run after a failure, a cancellation or a crash."""
        self.result: asyncio.Task[Out] = task
        """Resolves to the run's output, or raises what the run raised."""

    def cancel(self) -> None:
        """Cancel the run; it is stored as "cancelled" and can be resumed later."""
        self.result.cancel()

    def __await__(self) -> Generator[Any, None, Out]:
        return self.result.__await__()


_default_store: WorkflowStore | None = None


async def _answer_wait(
    store: WorkflowStore, run_id: str, wait: WaitRecord, output: Any, ttl: float = 0.0
) -> RunLease:
    """Journal `output` as the answer of `wait` in root run `run_id`'s tree, in one write
    (`deliver_signal`), the tree then held by a new lease of this process for `ttl` seconds;
    that lease. With no ttl, by nobody alive: the lease ends as it is taken, and whoever resumes
    the run takes it over."""
    lease = RunLease(lease_owner(), ttl)
    await store.deliver_signal(
        run_id,
        name=wait.name,
        step_id=wait.step_id,
        waiter_run_id=wait.run_id,
        output=output,
        lease=lease,
    )
    return lease


def _fallback_store() -> WorkflowStore:
    # The process-wide in-memory journal is created only when a run names no store at all.
    global _default_store
    if _default_store is None:
        _default_store = InMemoryWorkflowStore()
    return _default_store


@dataclass(frozen=True, slots=True)
class _Placement:
    """Where a run to execute goes: its id and input, and the tree and store it belongs to."""

    run_id: str
    input: Any
    explicit_id: bool
    """The caller named the run (to resume it), rather than one being made up."""
    parent: WorkflowContext[Any] | None
    parent_step: str | None
    store: WorkflowStore


class WorkflowRunOptions(TypedDict, total=False):
    """What `Workflow.run` takes besides the input (each documented there; every key
    optional)."""

    isolated: bool
    workflow_run_id: str | None
    store: WorkflowStore | None
    on_event: WorkflowEventHandler | None
    signal: AbortSignal | None
    wait: bool | float


class Workflow(Generic[In, Out]):
    """A durable workflow: `run(input, ctx)` whose `ctx.step`s are journaled."""

    def __init__(
        self,
        id: str,
        run: Callable[[In, WorkflowContext[In]], Awaitable[Out]],
        *,
        store: WorkflowStore | None = None,
        on_event: WorkflowEventHandler | None = None,
        lease_ttl: float = LEASE_TTL,
    ) -> None:
        if not isinstance(id, str) or not id:
            raise WorkflowError(f"a workflow id must be a non-empty string, got {id!r}")
        if not callable(run):
            raise WorkflowError(f"workflow {id!r}: run must be an async function (input, ctx)")
        self.id = id
        self.fn = run
        self.store = store
        """The default store of this workflow's root runs (None: the process-wide in-memory one)."""
        self.on_event = on_event
        if not isinstance(lease_ttl, int | float) or not lease_ttl > 0:
            raise WorkflowError(f"workflow {id!r}: lease_ttl must be a positive number of seconds")
        self.lease_ttl = float(lease_ttl)
        """Seconds a run's lease lasts unless its heartbeat renews it (every sixth of it)."""

    def __repr__(self) -> str:
        return f"Workflow({self.id!r})"

    def run(self, input: In = _UNSET, **options: Unpack[WorkflowRunOptions]) -> WorkflowHandle[Out]:
        """Start (or resume) a run in a new task and return its handle at once.

        Args:
            input: The run's input; must be JSON-safe. May be omitted when resuming.
            isolated: Start a separate root run even when called inside another run.
            workflow_run_id: Resume this run: completed steps are not executed again, and a
                completed run returns its stored output. An id that is not stored yet starts a
                new run under that id (it then needs `input`).
            store: Where to journal. Defaults to the enclosing run's store, then the
                workflow's, then a process-wide in-memory store.
            on_event: A recorder for this run, in addition to the workflow's and the enclosing
                run's.
            signal: Aborting it cancels the run.
            wait: When another live process holds the run (it is running it now): True (the
                default) waits for it — an attach: the run's output once that process completed
                it, or the run resumed here once it failed, was cancelled or its holder died — a
                number of seconds waits at most that long, and False (or 0) fails at once with
                `WorkflowRunBusyError`. A holder on this host whose process is gone is taken
                over at once, without waiting for its lease to expire.

        Raises:
            NotJSONSafeError: `input` is not JSON-safe (raised here, before anything starts).
            WorkflowError: called outside a running event loop.
        """
        return self._launch(input, options)

    def _launch(
        self, input: Any, options: WorkflowRunOptions, lease: RunLease | None = None
    ) -> WorkflowHandle[Out]:
        workflow_run_id = options.get("workflow_run_id")
        wait = options.get("wait", True)
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            raise WorkflowError(
                f"workflow {self.id!r}: .run() starts a task; call it inside a running event "
                "loop (for example from an async function run with asyncio.run)"
            ) from None
        if input is not _UNSET:
            check_json_safe(input, "input")
        enclosing = _current_run.get()
        parent = None if options.get("isolated", False) else enclosing
        handlers: list[WorkflowEventHandler] = []
        if enclosing is not None:
            handlers.extend(enclosing._recorders.handlers)
        for h in (self.on_event, options.get("on_event")):
            if h is not None and h not in handlers:
                handlers.append(h)
        # A tree lives in one store: an enclosing run's store wins over the workflow's own.
        chosen = next(
            (
                s
                for s in (options.get("store"), enclosing.store if enclosing else None, self.store)
                if s is not None
            ),
            None,
        )
        if chosen is None:
            chosen = _fallback_store()
        if workflow_run_id is not None:
            run_id = workflow_run_id
        elif parent is not None:
            run_id = parent._next_child_id(self.id, input)
        else:
            run_id = uuid.uuid4().hex
        at = _Placement(
            run_id,
            input,
            explicit_id=workflow_run_id is not None,
            parent=parent,
            parent_step=_current_step.get() if parent is not None else None,
            store=chosen,
        )
        task = asyncio.ensure_future(self._execute(at, _Recorders(handlers), wait, lease))
        if parent is not None:
            parent._children.append(task)
        signal = options.get("signal")
        if signal is not None:

            def abort() -> None:
                task.cancel()

            remove = signal.add_callback(abort)
            task.add_done_callback(lambda _: remove())
        return WorkflowHandle(self.id, run_id, task)

    async def signal(
        self,
        run_id: str,
        name: str,
        value: Any,
        *,
        store: WorkflowStore | None = None,
        on_event: WorkflowEventHandler | None = None,
    ) -> WorkflowHandle[Out]:
        """Send signal `name` with `value` to run `run_id`, waiting for it, and resume the run
        here; the handle of the resumed run.

        The value is journaled as the wait's answer and the run taken (its lease held by this
        process) in one write, so of two signals only one answers a wait, and a process that
        dies before the run ends leaves it interrupted — taken over from its journal like any
        other (`tether serve` does) — never waiting again. `run_id` may name the root run or
        the nested run that waits; the root is resumed.

        Raises:
            WorkflowNotWaitingError: the run does not wait for `name` (the message says what
                it waits for, if anything); nothing is stored.
            WorkflowSignalError: `value` does not match the wait's schema, or the wait timed
                out already; nothing is stored.
            NotJSONSafeError: `value` is not JSON-safe.
            WorkflowError: there is no such run, or it is a run of another workflow.
        """
        chosen = store or self.store or _fallback_store()
        root, wait = await self._signalled(chosen, run_id, name, value)
        return await self._answer(root, wait, signal_output(value), chosen, on_event)

    async def store_signal(
        self, run_id: str, name: str, value: Any, *, store: WorkflowStore | None = None
    ) -> str:
        """Like `signal`, but the run is not resumed here: the value is journaled and the run
        left to whichever process takes it over (it reads as `interrupted` at once, so a
        `tether serve` worker's sweep resumes it, as `tether workflow run ID --run-id RUN`
        would). The root run's id.

        Raises what `signal` raises, before anything is stored.
        """
        chosen = store or self.store or _fallback_store()
        root, wait = await self._signalled(chosen, run_id, name, value)
        await _answer_wait(chosen, root.run_id, wait, signal_output(value))
        return root.run_id

    async def _signalled(
        self, store: WorkflowStore, run_id: str, name: str, value: Any
    ) -> tuple[WorkflowRunRecord, WaitRecord]:
        """The waiting root run and its wait a signal answers; the refusals of `signal`."""
        check_json_safe(value, "value")
        root = await self._waiting_root(store, run_id)
        wait = root.waiting_for
        if (
            root.status != "waiting"
            or wait is None
            or wait.name != name
            or wait.paused_run is not None  # answered by deciding that run, not by a signal
        ):
            raise not_waiting_error(run_id, name, root.status, wait)
        if wait.deadline is not None and wait.deadline <= time.time():
            raise WorkflowSignalError(
                f"signal {name!r} to workflow run {run_id!r} came after the wait's timeout "
                "(nothing was stored): the run goes on without it once it is resumed",
                run_id=run_id,
                name=name,
            )
        refused = wrong_value(run_id, wait, value)
        if refused is not None:
            raise refused
        return root, wait

    async def _waiting_root(self, store: WorkflowStore, run_id: str) -> WorkflowRunRecord:
        record = await store.get_run(run_id)
        if record is None:
            raise WorkflowError(f"workflow {self.id!r}: there is no stored run {run_id!r}")
        if record.parent_run_id is not None:
            root = await store.get_run(record.root_run_id)
            if root is None:
                raise WorkflowError(
                    f"workflow run {run_id!r}: its root run {record.root_run_id!r} is not stored"
                )
            record = root
        if record.workflow_id != self.id:
            raise WorkflowError(
                f"run {record.run_id!r} belongs to workflow {record.workflow_id!r}, not {self.id!r}"
            )
        return record

    async def _answer(
        self,
        root: WorkflowRunRecord,
        wait: WaitRecord,
        output: Any,
        store: WorkflowStore,
        on_event: WorkflowEventHandler | None,
    ) -> WorkflowHandle[Out]:
        """Journal `output` as the answer of the root's wait and resume the run here."""
        lease = await _answer_wait(store, root.run_id, wait, output, self.lease_ttl)
        resume: WorkflowRunOptions = {
            "workflow_run_id": root.run_id,
            "store": store,
            "on_event": on_event,
            "wait": False,
        }
        return self._launch(_UNSET, resume, lease)

    async def _open(self, at: _Placement, lease: RunLease, wait: bool | float) -> WorkflowRunRecord:
        """The run to execute, created or taken over (a completed run is returned as is).

        Raises:
            WorkflowRunBusyError: another live owner holds the run, and it did not end within
                `wait`.
        """
        run_id, store = at.run_id, at.store
        bound = None if wait is True else max(float(wait), 0.0)
        deadline = None if bound is None else time.monotonic() + bound
        async with contextlib.AsyncExitStack() as stack:
            delay = _FIRST_POLL
            watching = False
            woken: asyncio.Event | None = None
            while True:
                record, created = await self._load(at, lease)
                if created or record.status == "completed":
                    return record
                try:
                    return await store.start_attempt(run_id, lease=lease)
                except WorkflowRunBusyError as busy:
                    seen = busy
                if holder_gone(seen.holder):
                    # Its process on this host is gone and will never renew the lease: take
                    # the run over now rather than when the lease expires.
                    try:
                        return await store.start_attempt(run_id, lease=lease, replace=seen.holder)
                    except WorkflowRunBusyError as busy:
                        seen = busy  # another resumer was quicker
                left = math.inf if deadline is None else deadline - time.monotonic()
                if left <= 0:
                    raise seen
                if not watching and isinstance(store, WatchesRuns):
                    # Watched from now on, then looked at once more: a holder that let the
                    # run go in between is seen by that look, and any later one wakes us.
                    watching = True
                    woken = await stack.enter_async_context(store.watch_run(run_id))
                    continue
                if woken is not None:
                    # The store wakes us when the holder lets the run go; looked at again
                    # when its lease would end (a holder that stalled or died on another
                    # host) and at its renewal beat (one that died on this host).
                    pause = min(left, _poll(seen), self.lease_ttl / 6)
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(woken.wait(), pause)
                    woken.clear()
                    continue
                # Looked at again soon, then less often (at most as often as the holder
                # renews); the run ends or its lease expires in between.
                await asyncio.sleep(min(left, delay, _poll(seen)))
                delay = min(delay * 2, self.lease_ttl / 6)

    async def _load(self, at: _Placement, lease: RunLease) -> tuple[WorkflowRunRecord, bool]:
        """The run to execute, and whether it was created just now."""
        run_id, input, store, parent = at.run_id, at.input, at.store, at.parent
        existing = await store.get_run(run_id)
        if existing is None:
            if input is _UNSET:
                raise WorkflowError(
                    f"workflow {self.id!r}: there is no stored run {run_id!r} to resume; "
                    "pass input= to start a new run under that id"
                    if at.explicit_id
                    else f"workflow {self.id!r}: pass input= to start a run"
                )
            created = await store.create_run(
                run_id=run_id,
                workflow_id=self.id,
                input=input,
                parent_run_id=parent.workflow_run_id if parent else None,
                root_run_id=parent.root_run_id if parent else None,
                parent_step_id=at.parent_step,
                lease=lease,
            )
            return created, True
        if existing.workflow_id != self.id:
            raise WorkflowError(
                f"run {run_id!r} belongs to workflow {existing.workflow_id!r}, not {self.id!r}"
            )
        if input is not _UNSET and input != existing.input:
            raise WorkflowError(
                f"workflow {self.id!r}: run {run_id!r} was started with a different input; "
                "resume it without input= (or with the same input)"
            )
        return existing, False

    async def _execute(
        self, at: _Placement, recorders: _Recorders, wait: bool | float, lease: RunLease | None
    ) -> Out:
        run_id, store, parent = at.run_id, at.store, at.parent
        # A nested run is held by its root's lease; a root run takes a lease of its own (or
        # the one a signal took for it when it answered the run's wait).
        if parent is not None:
            lease = parent.lease
        elif lease is None:
            lease = RunLease(lease_owner(), self.lease_ttl)
        opening = asyncio.ensure_future(self._open(at, lease, wait))
        try:
            await asyncio.wait([opening])  # wait() never cancels the store writes themselves
        except asyncio.CancelledError as exc:
            # Cancelled while the run's record is being written: let the write end, then say
            # on the record that the run was cancelled instead of leaving it "running".
            await asyncio.wait([opening])
            opened = None
            if not opening.cancelled() and opening.exception() is None:
                opened = opening.result()
            if opened is not None and opened.status == "running":
                await store.finish_run(run_id, status="cancelled", error=_error(exc), lease=lease)
            raise
        record = opening.result()
        if record.status == "completed":
            return cast("Out", record.output)
        ctx: WorkflowContext[In] = WorkflowContext(
            workflow_id=self.id, record=record, store=store, recorders=recorders, lease=lease
        )
        heartbeat = _Heartbeat(store, run_id, lease) if parent is None else None
        run_token = _current_run.set(ctx)
        step_token = _current_step.set(None)
        try:
            try:
                await ctx._emit("workflow_started", input=record.input, attempt=record.attempts)
                try:
                    output = await self.fn(ctx.input, ctx)
                finally:
                    await ctx._end_children()
                check_json_safe(output, "output")
                if heartbeat is not None:
                    heartbeat.check()
                done = await store.finish_run(
                    run_id, status="completed", output=output, lease=lease
                )
            except asyncio.CancelledError as exc:
                lost = heartbeat.taken_over(exc) if heartbeat is not None else None
                if lost is not None:
                    # Not ours to finish any more: the new holder runs it now, and this
                    # process writes nothing more of it.
                    raise lost from None
                await _finish_as(store, run_id, "cancelled", exc, lease)
                await ctx._emit("workflow_failed", status="cancelled", error=_error(exc))
                raise
            except LeaseLostError:
                # Taken over meanwhile (found by a renewal or refused by a fenced write): the
                # store refuses whatever this process would write now, so it stops here.
                raise
            except Suspended as suspended:
                # The run waits: stored so (its lease released), reported, and the tree above
                # it unwinds the same way; the root's handle says what it waits for.
                waited = suspended.wait
                await store.suspend_run(run_id, wait=waited, lease=lease)
                extra = {} if waited.paused_run is None else {"paused_run_id": waited.paused_run}
                await ctx._emit(
                    "workflow_waiting",
                    name=waited.name,
                    step_id=waited.step_id,
                    waiter_run_id=waited.run_id,
                    schema=waited.schema,
                    deadline=waited.deadline,
                    **extra,
                )
                if parent is not None:
                    raise
                raise _waiting_error(run_id, waited) from None
            except Exception as exc:
                await _finish_as(store, run_id, "failed", exc, lease)
                await ctx._emit(
                    "workflow_failed",
                    status="failed",
                    error=_error(exc),
                    traceback=_traceback(exc),
                )
                raise
            await ctx._emit("workflow_finished", output=done.output)
            return cast("Out", done.output)
        finally:
            if heartbeat is not None:
                await heartbeat.stop()
            _current_step.reset(step_token)
            _current_run.reset(run_token)


def _waiting_error(run_id: str, waited: WaitRecord) -> WorkflowWaitingError:
    """What the handle of root run `run_id` raises when its tree stopped at `waited`."""
    if waited.paused_run is not None:
        return WorkflowWaitingError(
            f"workflow run {run_id!r} waits for paused agent run {waited.paused_run!r}, whose "
            f"calls need a decision; decide them with `tether runs resume {waited.paused_run} "
            "--approve ID` (or runtime.resume(...)) to resume both",
            run_id=run_id,
            waiting_for=waited.name,
            waiter_run_id=waited.run_id,
            deadline=None,
            paused_run_id=waited.paused_run,
        )
    return WorkflowWaitingError(
        f"workflow run {run_id!r} waits for signal {waited.name!r}; send it with "
        f"`tether workflow signal {run_id} {waited.name} JSON` (or runtime.signal(...)) to "
        "resume it",
        run_id=run_id,
        waiting_for=waited.name,
        waiter_run_id=waited.run_id,
        deadline=waited.deadline,
    )


_FIRST_POLL = 0.02
"""Seconds before a resume that waits for a busy run looks at it again, in a store that cannot
tell it when the run is let go (it doubles each time, up to a sixth of the lease)."""


def _poll(busy: WorkflowRunBusyError) -> float:
    """How long to sleep before looking at a busy run again: until its lease would end, at
    least a tenth of a second."""
    if busy.expires_at is None:
        return 0.1
    return max(busy.expires_at - time.time(), 0.1)


async def _finish_as(
    store: WorkflowStore,
    run_id: str,
    status: Literal["failed", "cancelled"],
    exc: BaseException,
    lease: RunLease,
) -> None:
    """Record how the run ended, unless another owner took it over meanwhile (then the run
    is theirs, and what ended here is only this attempt)."""
    try:
        await store.finish_run(run_id, status=status, error=_error(exc), lease=lease)
    except LeaseLostError:
        pass


class _Heartbeat:
    """Renews a root run's lease (and so its tree's) every sixth of its length while the run
    goes on (a `tether._heartbeat.Heartbeat` of its own). When a renewal finds the run taken
    over — this process stalled past its lease and another took the run — it cancels the run:
    a step must not run twice at once."""

    def __init__(self, store: WorkflowStore, run_id: str, lease: RunLease) -> None:
        self._store = store
        self._run_id = run_id
        self._lease = lease
        self._run = asyncio.current_task()
        self._lost: LeaseLostError | None = None
        self._beat = Heartbeat(lease.ttl, name=f"tether-workflow-lease:{run_id}")
        self._beat.hold(run_id, self._renew, self._taken)

    async def _renew(self) -> bool:
        return await self._store.renew_lease(self._run_id, self._lease)

    async def _taken(self) -> None:
        record = await self._store.get_run(self._run_id)
        holder = record.lease_owner if record else None
        self._lost = LeaseLostError("workflow run", self._run_id, holder)
        if self._run is not None:
            self._run.cancel()

    def check(self) -> None:
        """Raise the takeover a renewal found, if one did."""
        if self._lost is not None:
            raise self._lost

    def taken_over(self, cancelled: asyncio.CancelledError) -> LeaseLostError | None:
        """The takeover, when that is why the run was cancelled (the cancellation is taken
        back: the run ends with the takeover instead)."""
        if self._lost is None:
            return None
        if self._run is not None:
            self._run.uncancel()
        return self._lost

    async def stop(self) -> None:
        try:
            await self._beat.aclose()
        except asyncio.CancelledError:
            # The cancel this heartbeat sent the run when it found the lease lost, arriving
            # only now (the run had stopped already, refused by a fenced write): taken back,
            # so the run ends with the LeaseLostError it met. Any other cancel goes on.
            run = self._run
            if self._lost is None or run is None or run.uncancel() > 0:
                raise
            await self._beat.aclose()


async def resume_expired_waits(
    workflows: Mapping[str, Workflow[Any, Any]] | Iterable[Workflow[Any, Any]],
    store: WorkflowStore,
    *,
    limit: int = 100,
    on_event: WorkflowEventHandler | None = None,
) -> list[WorkflowHandle[Any]]:
    """Resume the waiting runs (of `workflows`, in `store`) whose wait timed out: each goes on
    from its journal and its `ctx.wait_for` raises `WorkflowWaitTimeoutError`. The handles of
    the runs resumed here; a run another process answered first is left to it.

    `tether serve` calls this on its sweep; call it on a timer where nothing else does.
    """
    by_id = dict(workflows) if isinstance(workflows, Mapping) else {w.id: w for w in workflows}
    handles: list[WorkflowHandle[Any]] = []
    for root in await store.expired_waits(limit=limit):
        workflow = by_id.get(root.workflow_id)
        wait = root.waiting_for
        if workflow is None or wait is None or wait.deadline is None:
            continue
        try:
            handle = await workflow._answer(
                root, wait, timeout_output(wait.deadline), store, on_event
            )
        except WorkflowNotWaitingError:
            continue  # a signal or another sweeper answered it meanwhile
        handles.append(handle)
    return handles


async def answer_paused_run(
    workflows: Mapping[str, Workflow[Any, Any]] | Iterable[Workflow[Any, Any]],
    store: WorkflowStore,
    workflow_run_id: str,
    paused_run_id: str,
    outcome: Any,
    *,
    on_event: WorkflowEventHandler | None = None,
) -> WorkflowHandle[Any] | str | None:
    """The paused run `paused_run_id`, which the tree of workflow run `workflow_run_id` waits
    for (`RunSlot.suspend`), ended: journal `outcome` where it paused and resume the workflow.

    Returns the handle of the run resumed here; the root run's id when its workflow is not
    among `workflows` (the outcome is journaled all the same, and the run left to whichever
    process takes it over: it reads as interrupted at once); None when no run waits for it
    (never did, or another process answered it first).
    """
    by_id = dict(workflows) if isinstance(workflows, Mapping) else {w.id: w for w in workflows}
    record = await store.get_run(workflow_run_id)
    if record is not None and record.parent_run_id is not None:
        record = await store.get_run(record.root_run_id)
    wait = record.waiting_for if record is not None else None
    if record is None or record.status != "waiting" or wait is None:
        return None
    if wait.paused_run != paused_run_id:
        return None
    workflow = by_id.get(record.workflow_id)
    try:
        if workflow is not None:
            return await workflow._answer(record, wait, outcome, store, on_event)
        await _answer_wait(store, record.run_id, wait, outcome)
    except WorkflowNotWaitingError:
        return None  # answered meanwhile
    return record.run_id


def create_workflow(
    id: str,
    run: Callable[[In, WorkflowContext[In]], Awaitable[Out]],
    *,
    store: WorkflowStore | None = None,
    on_event: WorkflowEventHandler | None = None,
    lease_ttl: float = LEASE_TTL,
) -> Workflow[In, Out]:
    """Declare a durable workflow.

    ```python
    async def review(input: dict, ctx: WorkflowContext[dict]) -> dict:
        papers = await ctx.step("search", lambda: search(input["topic"]))
        summary = await ctx.step("summarize", lambda: summarize(papers))
        return {"summary": summary}

    literature_review = create_workflow("literature-review", review)
    handle = literature_review.run({"topic": "CRISPR delivery"})
    output = await handle.result
    ```

    Args:
        id: The workflow's id, stored on each of its runs.
        run: `async def run(input, ctx)`; its return value is the run's output (JSON-safe).
        store: Default WorkflowStore for this workflow's root runs.
        on_event: A recorder that receives every run event of every run of this workflow.
        lease_ttl: Seconds a run's lease lasts unless its heartbeat renews it (every sixth of
            it): how long after its process died a run reads as interrupted and may be resumed
            elsewhere.
    """
    return Workflow(id, run, store=store, on_event=on_event, lease_ttl=lease_ttl)
