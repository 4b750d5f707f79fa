"""WorkflowStore: the journal of durable workflow runs and their completed steps.

A run is one execution tree node: its workflow id, input, status, output or error, and where it
sits in a nest tree (`parent_run_id`, `root_run_id`). A step is one completed `ctx.step(...)`:
its id within the run and its JSON-safe output. Steps are only ever appended; a step id is
journaled at most once per run, and the first output written for it wins — so two processes that
race to finish the same step agree on its output.

A running run carries a lease (`RunLease`: an owner and how long a renewal lasts) that its
executor renews on a heartbeat. A run still marked running whose lease expired is read back as
`"interrupted"` — its process died — and only then (or once it has ended) may another owner take
it over, which `start_attempt(run_id, lease=...)` does as one conditional write: of two processes
resuming the same run, exactly one gets it. Expiry is judged by the store's clock (the database
server's, for PostgreSQL).

Every implementation passes the contract suite in `tests/stores/test_workflow_store_contract.py`.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, replace
from typing import (
    Any,
    Final,
    Literal,
    Protocol,
    Required,
    TypeAlias,
    TypedDict,
    Unpack,
    cast,
    runtime_checkable,
)

from .._json import check_json_safe, dumps
from .._wakeups import Wakeups
from ..errors import (
    LeaseLostError,
    StoreCorruptError,
    StoreError,
    WorkflowNotWaitingError,
    WorkflowRunBusyError,
)

__all__ = [
    "FINISHED_STATUSES",
    "READ_STATUSES",
    "RUN_STATUSES",
    "InMemoryWorkflowStore",
    "NewWorkflowRun",
    "RunLease",
    "RunStatus",
    "SignalDelivery",
    "StepRecord",
    "StepWrite",
    "WaitRecord",
    "WatchesRuns",
    "WorkflowEnd",
    "WorkflowListing",
    "WorkflowRunRecord",
    "WorkflowStore",
    "busy_error",
    "check_finish",
    "check_signal",
    "check_status",
    "decode_error",
    "decode_json",
    "encode_json",
    "encode_wait",
    "not_waiting_error",
    "parse_run_error",
]

RunStatus: TypeAlias = Literal[
    "running", "completed", "failed", "cancelled", "interrupted", "waiting", "paused"
]
"""How a run stands. `"interrupted"` is never written: it is how a run still marked running
reads once its lease expired (the process running it died). `"waiting"`: the run stopped at a
`ctx.wait_for(name)` and no process holds it; a signal (or its timeout) resumes it.
`"paused"` (lab agent runs): the turn waits for decisions on its pending calls and no process
holds it; `runtime.resume(run_id, decisions)` continues it."""
RUN_STATUSES: Final[tuple[RunStatus, ...]] = (
    "running",
    "completed",
    "failed",
    "cancelled",
    "waiting",
    "paused",
)
"""The statuses a store writes."""
READ_STATUSES: Final[tuple[RunStatus, ...]] = (*RUN_STATUSES, "interrupted")
"""The statuses a store reads back."""
FINISHED_STATUSES: Final[frozenset[str]] = frozenset({"completed", "failed", "cancelled"})


@dataclass(frozen=True, slots=True)
class RunLease:
    """Who holds a running run, and for how long each renewal of the hold lasts."""

    owner: str
    """Unique per execution; says where it runs (`host:pid:token`), for the messages that name
    the holder."""
    ttl: float
    """Seconds the lease lasts after it is taken or renewed."""


@dataclass(frozen=True, slots=True)
class WaitRecord:
    """Where a run stopped to wait for a signal (`ctx.wait_for(name, ...)`)."""

    run_id: str
    """The run that waits: the run itself, or a run nested in it (a tree waits as one)."""
    name: str
    """The signal's name."""
    step_id: str
    """The wait's id in the waiter's journal, where the signal's value is journaled."""
    schema: dict[str, Any] | None = None
    """The JSON Schema the signal's value must match (None: any JSON value)."""
    deadline: float | None = None
    """When the wait times out (Unix time); None: never."""
    since: float = 0.0
    """When the run first reached the wait (Unix time)."""
    paused_run: str | None = None
    """The paused agent run the workflow waits for (a lab episode inside the run paused on
    calls that need a decision): deciding that run answers the wait, and no signal does. None:
    a wait for signal `name`."""

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "run_id": self.run_id,
            "name": self.name,
            "step_id": self.step_id,
            "schema": self.schema,
            "deadline": self.deadline,
            "since": self.since,
        }
        if self.paused_run is not None:
            data["paused_run"] = self.paused_run
        return data


@dataclass(frozen=True, slots=True)
class WorkflowRunRecord:
    """One stored workflow run."""

    run_id: str
    workflow_id: str
    status: RunStatus
    input: Any
    """The run's JSON-safe input, as given when the run was created."""
    output: Any = None
    """The run's output once `status == "completed"`."""
    error: dict[str, Any] | None = None
    """`{"type", "message"}` of the exception a failed or cancelled run ended with."""
    parent_run_id: str | None = None
    """The run this one was started inside; None for a root run (and for an isolated run)."""
    root_run_id: str = ""
    """The root of this run's nest tree; its own id for a root run."""
    parent_step_id: str | None = None
    """The parent's step that was running when this run started, if any."""
    attempts: int = 1
    """How many times the run was started (1, plus one for each resume)."""
    created_at: float = 0.0
    """Unix time in seconds."""
    updated_at: float = 0.0
    """Unix time in seconds."""
    lease_owner: str | None = None
    """Who holds (or last held) the run while it runs; None once it ended."""
    lease_expires_at: float | None = None
    """When that hold ends unless it is renewed (Unix time, by the store's clock)."""
    waiting_for: WaitRecord | None = None
    """The wait the run stopped at: what it waits for while `status == "waiting"`, kept while a
    resume replays up to it; None once a signal or its timeout answered it, or the run ended."""


@dataclass(frozen=True, slots=True)
class StepRecord:
    """One journaled step: what `ctx.step(name, fn)` returned the first time it completed."""

    run_id: str
    step_id: str
    """Unique within the run: the step name, plus `#n` for its n-th occurrence (n ≥ 2)."""
    name: str
    seq: int
    """1-based position in the run's journal."""
    output: Any
    created_at: float


class NewWorkflowRun(TypedDict, total=False):
    """What `WorkflowStore.create_run` takes."""

    run_id: Required[str]
    workflow_id: Required[str]
    input: Required[Any]
    """JSON-safe."""
    parent_run_id: str | None
    root_run_id: str | None
    """Defaults to `run_id`."""
    parent_step_id: str | None
    lease: RunLease | None
    """Who holds the new run (None: nobody)."""


class WorkflowEnd(TypedDict, total=False):
    """What `WorkflowStore.finish_run` takes besides the run."""

    status: Required[Literal["completed", "failed", "cancelled"]]
    output: Any
    """A completed run's output (JSON-safe)."""
    error: dict[str, Any] | None
    """Why a failed or cancelled run ended (`parse_run_error`)."""
    lease: RunLease | None
    """The holder's lease: the end is written only while it holds the run."""


class WorkflowListing(TypedDict, total=False):
    """What `WorkflowStore.list_runs` takes: filters (None or left out: any) and a limit."""

    workflow_id: str | None
    root_run_id: str | None
    limit: int | None


class SignalDelivery(TypedDict):
    """What `WorkflowStore.deliver_signal` takes besides the root run: the wait it answers
    (its `name`, `step_id` and waiter `run_id`), the value, and the deliverer's lease."""

    name: str
    step_id: str
    waiter_run_id: str
    output: Any
    lease: RunLease


class StepWrite(TypedDict, total=False):
    """What `WorkflowStore.append_step` takes besides the run."""

    step_id: Required[str]
    name: Required[str]
    output: Required[Any]
    lease: RunLease | None
    """The holder's lease: the step is journaled only while it holds the running run."""


@runtime_checkable
class WorkflowStore(Protocol):
    """Where durable workflow runs and their steps are journaled.

    Every method is a coroutine. Values given to a store must be JSON-safe (`NotJSONSafeError`
    otherwise); values read back are fresh copies. A stored record that does not parse raises
    `StoreCorruptError` and is left as it is.
    """

    async def create_run(self, **run: Unpack[NewWorkflowRun]) -> WorkflowRunRecord:
        """Store a new run with status "running", held by `lease` if given. `root_run_id`
        defaults to `run_id`.

        Raises StoreError when `run_id` is already taken.
        """
        ...

    async def get_run(self, run_id: str) -> WorkflowRunRecord | None:
        """The run, or None when there is no such run."""
        ...

    async def start_attempt(
        self, run_id: str, *, lease: RunLease | None = None, replace: str | None = None
    ) -> WorkflowRunRecord:
        """Mark an existing run "running" again and count one more attempt (a resume).

        With `lease`, this is a takeover, done as one conditional write: it succeeds only when
        the run is not running, or nobody holds it, or `lease.owner` already does, or the
        holder's lease expired, or the holder is `replace` (a holder the caller knows is gone:
        its process on this host died); then the runs nested in it that are still marked
        running pass to the same owner (one tree, one holder).

        Raises:
            WorkflowRunBusyError: another owner holds a live lease on the run (nothing written).
            StoreError: there is no such run.
        """
        ...

    async def renew_lease(self, run_id: str, lease: RunLease) -> bool:
        """Extend `lease` on the run and on the running runs of its tree it holds, to `ttl`
        seconds from now; False (and nothing renewed) when the run is no longer held by
        `lease.owner` (another owner took it over, or it ended)."""
        ...

    async def finish_run(self, run_id: str, **end: Unpack[WorkflowEnd]) -> WorkflowRunRecord:
        """Record how a run ended, and release its lease.

        Raises:
            LeaseLostError: `lease` is given and does not hold the running run any more:
                another owner took it over (or ended it) meanwhile; nothing is written.
        """
        ...

    async def list_runs(self, **listing: Unpack[WorkflowListing]) -> list[WorkflowRunRecord]:
        """Runs, most recently created first, optionally filtered."""
        ...

    async def suspend_run(
        self, run_id: str, *, wait: WaitRecord, lease: RunLease | None = None
    ) -> WorkflowRunRecord:
        """Mark the run "waiting" for `wait`, and release its lease (nobody holds a waiting
        run).

        Raises:
            LeaseLostError: `lease` is given and does not hold the running run any more;
                nothing is written.
        """
        ...

    async def deliver_signal(
        self, run_id: str, **signal: Unpack[SignalDelivery]
    ) -> WorkflowRunRecord:
        """Answer the wait of root run `run_id`, in one write: journal `output` as step
        `step_id` of `waiter_run_id`, and mark every waiting run of the tree "running" under
        `lease` (the deliverer resumes it; if it dies, the run reads as interrupted once the
        lease expires, and is taken over as any other). Only while the run waits for exactly
        that wait.

        Raises:
            WorkflowNotWaitingError: the run does not wait for it (it waits for another name,
                or for nothing: its status says why); nothing is written.
            StoreError: there is no such run.
        """
        ...

    async def expired_waits(self, *, limit: int = 100) -> list[WorkflowRunRecord]:
        """Waiting root runs whose wait's deadline has passed (by the store's clock), the
        longest overdue first."""
        ...

    async def append_step(self, run_id: str, **step: Unpack[StepWrite]) -> StepRecord:
        """Journal a completed step atomically.

        If `step_id` is already journaled for the run, nothing is written and the stored record
        is returned: the first output wins. With `lease`, the step is journaled only while that
        owner holds the running run, checked in the same write.

        Raises:
            LeaseLostError: `lease` is given and another owner took the run over (or it
                ended); nothing is written.
        """
        ...

    async def get_step(self, run_id: str, step_id: str) -> StepRecord | None:
        """The journaled step, or None when it has not completed."""
        ...

    async def list_steps(self, run_id: str) -> list[StepRecord]:
        """The run's journal, in the order the steps completed."""
        ...

    async def aclose(self) -> None:
        """Release what the store opened itself. Idempotent."""
        ...


@runtime_checkable
class WatchesRuns(Protocol):
    """A WorkflowStore that tells a waiter when a run's holder lets the run go, so that a
    resume waiting for a busy run (an attach) wakes then instead of polling.

    The in-memory store hears its own writes and the PostgreSQL store `LISTEN`s for the
    `NOTIFY` its `finish_run` and `suspend_run` send; SQLite has no such thing, and its waiters
    poll with a backoff.
    """

    def watch_run(self, run_id: str) -> AbstractAsyncContextManager[asyncio.Event | None]:
        """While entered, an event set each time the run may have been let go (it ended or
        started to wait) — look at the run again then. The watch is in place when the block
        begins, so a change after that is never missed. None: this store cannot tell now (poll)."""
        ...


def encode_wait(wait: WaitRecord) -> str:
    """The JSON text a store keeps for a run's wait."""
    return encode_json(wait.to_json(), "wait")


def check_signal(run_id: str, status: str, wait: WaitRecord | None, signal: SignalDelivery) -> None:
    """Refuse `signal` unless run `run_id` (read with `status`) waits for exactly that wait.

    Raises:
        WorkflowNotWaitingError: it waits for another, or for nothing (the message says).
    """
    wanted = (signal["name"], signal["step_id"], signal["waiter_run_id"])
    if status != "waiting" or wait is None or (wait.name, wait.step_id, wait.run_id) != wanted:
        raise not_waiting_error(run_id, signal["name"], status, wait)


def not_waiting_error(
    run_id: str, name: str, status: str, wait: WaitRecord | None
) -> WorkflowNotWaitingError:
    """The error for a signal `name` to a run that does not wait for it, saying what it does
    wait for."""
    if status == "waiting" and wait is not None and wait.paused_run is not None:
        why = (
            f"it waits for paused agent run {wait.paused_run!r}, whose calls need a decision "
            f"(`tether runs resume {wait.paused_run} --approve ID`, or runtime.resume(...)); "
            "deciding that run resumes the workflow"
        )
        waiting_for: str | None = None
    elif status == "waiting" and wait is not None:
        why = f"it waits for {wait.name!r}"
        if wait.run_id != run_id:
            why += f" (in nested run {wait.run_id!r})"
        waiting_for = wait.name
    else:
        why = f"it is {status} and waits for no signal"
        waiting_for = None
    return WorkflowNotWaitingError(
        f"workflow run {run_id!r} is not waiting for signal {name!r}: {why}",
        run_id=run_id,
        name=name,
        status=status,
        waiting_for=waiting_for,
    )


def parse_run_error(exc: BaseException) -> dict[str, Any]:
    """The JSON-safe `{"type", "message"}` stored for a run that ended with `exc`."""
    return {"type": type(exc).__name__, "message": str(exc)}


# -- what every backend shares --------------------------------------------------------------


def busy_error(run_id: str, holder: str | None, expires_at: float | None) -> WorkflowRunBusyError:
    """The error for a run another owner holds, naming it and when its lease ends."""
    left = ""
    if expires_at is not None:
        left = (
            f"; its lease ends in {max(expires_at - time.time(), 0):.0f} s unless it is "
            "renewed, so a holder that died releases the run then"
        )
    return WorkflowRunBusyError(
        f"workflow run {run_id!r} is being run by {holder or 'another process'}{left}",
        run_id=run_id,
        holder=holder,
        expires_at=expires_at,
    )


def encode_json(value: Any, path: str) -> str:
    """`value` as the JSON text a store keeps; NotJSONSafeError naming `path` otherwise."""
    check_json_safe(value, path)
    return dumps(value)


def check_finish(status: str, error: dict[str, Any] | None, output: Any) -> tuple[str, str | None]:
    """The stored texts of a run's output and error; ValueError for a status that is not an end."""
    if status not in FINISHED_STATUSES:
        raise ValueError(f"finish_run status must be completed, failed or cancelled: {status!r}")
    return encode_json(output, "output"), None if error is None else encode_json(error, "error")


def decode_json(text: Any, where: str) -> Any:
    """The value stored as JSON `text`; StoreCorruptError naming `where` otherwise."""
    if not isinstance(text, str):
        raise StoreCorruptError(f"{where}: expected JSON text, found {type(text).__name__}")
    try:
        return json.loads(text)
    except ValueError as exc:
        raise StoreCorruptError(f"{where}: stored JSON does not parse: {exc}") from exc


def check_status(status: Any, where: str) -> RunStatus:
    if status not in READ_STATUSES:
        raise StoreCorruptError(f"{where}: unknown status {status!r}")
    return cast(RunStatus, status)


def decode_error(text: Any, where: str) -> dict[str, Any] | None:
    if text is None:
        return None
    error = decode_json(text, f"{where}.error")
    if not isinstance(error, dict):
        raise StoreCorruptError(f"{where}.error: expected an object")
    return error


# -- in-memory -------------------------------------------------------------------------------


@dataclass(slots=True)
class _Run:
    """A run as the in-memory store keeps it: its JSON values as text, as a database would."""

    run_id: str
    workflow_id: str
    status: RunStatus
    input: str
    parent_run_id: str | None
    root_run_id: str
    parent_step_id: str | None
    created_at: float
    updated_at: float
    lease_owner: str | None
    lease_expires_at: float | None
    output: str | None = None
    error: str | None = None
    attempts: int = 1
    wait: WaitRecord | None = None

    def free_for(self, owner: str, now: float) -> bool:
        """Whether `owner` may take this run (it is free, or already theirs)."""
        return (
            self.status != "running"
            or self.lease_owner is None
            or self.lease_owner == owner
            or (self.lease_expires_at is not None and self.lease_expires_at < now)
        )

    def read(self) -> WorkflowRunRecord:
        status: RunStatus = self.status
        expires = self.lease_expires_at
        if status == "running" and expires is not None and expires < time.time():
            status = "interrupted"
        where = f"workflow run {self.run_id!r}"
        return WorkflowRunRecord(
            run_id=self.run_id,
            workflow_id=self.workflow_id,
            status=check_status(status, where),
            input=decode_json(self.input, f"{where}.input"),
            output=None if self.output is None else decode_json(self.output, f"{where}.output"),
            error=decode_error(self.error, where),
            parent_run_id=self.parent_run_id,
            root_run_id=self.root_run_id,
            parent_step_id=self.parent_step_id,
            attempts=self.attempts,
            created_at=self.created_at,
            updated_at=self.updated_at,
            lease_owner=self.lease_owner,
            lease_expires_at=self.lease_expires_at,
            waiting_for=self.wait,
        )


def _fence(run: _Run, lease: RunLease) -> None:
    """Refuse a write under `lease` unless it still holds the running run."""
    if run.status != "running" or run.lease_owner != lease.owner:
        raise LeaseLostError("workflow run", run.run_id, run.lease_owner)


def _read_step(step: StepRecord) -> StepRecord:
    """A fresh copy of a kept step (whose output is its JSON text)."""
    where = f"workflow step {step.run_id!r}/{step.step_id!r}.output"
    return replace(step, output=decode_json(step.output, where))


class InMemoryWorkflowStore:
    """A WorkflowStore in a dict: for tests and for runs that need not outlive the process.

    Runs and steps keep their JSON values as the text a database holds, so what a caller reads
    is a fresh copy and a value that is not JSON-safe is refused at the same point.
    """

    def __init__(self) -> None:
        self._runs: dict[str, _Run] = {}
        """Insertion order is creation order."""
        self._steps: dict[str, dict[str, StepRecord]] = {}
        """run_id -> step_id -> the step (output as text); insertion order is journal order."""
        self._wakeups = Wakeups()
        self._closed = False

    def _live(self) -> None:
        if self._closed:
            raise StoreError("the workflow store is closed")

    def _get(self, run_id: str) -> _Run:
        self._live()
        run = self._runs.get(run_id)
        if run is None:
            raise StoreError(f"no workflow run {run_id!r}")
        return run

    async def create_run(self, **run: Unpack[NewWorkflowRun]) -> WorkflowRunRecord:
        self._live()
        run_id, lease = run["run_id"], run.get("lease")
        encoded = encode_json(run["input"], "input")
        if run_id in self._runs:
            raise StoreError(f"workflow run {run_id!r} already exists")
        now = time.time()
        new = self._runs[run_id] = _Run(
            run_id=run_id,
            workflow_id=run["workflow_id"],
            status="running",
            input=encoded,
            parent_run_id=run.get("parent_run_id"),
            root_run_id=run.get("root_run_id") or run_id,
            parent_step_id=run.get("parent_step_id"),
            created_at=now,
            updated_at=now,
            lease_owner=None if lease is None else lease.owner,
            lease_expires_at=None if lease is None else now + lease.ttl,
        )
        self._steps[run_id] = {}
        return new.read()

    async def get_run(self, run_id: str) -> WorkflowRunRecord | None:
        self._live()
        run = self._runs.get(run_id)
        return None if run is None else run.read()

    async def start_attempt(
        self, run_id: str, *, lease: RunLease | None = None, replace: str | None = None
    ) -> WorkflowRunRecord:
        run = self._get(run_id)
        now = time.time()
        if lease is not None:
            gone = replace is not None and run.lease_owner == replace
            if not gone and not run.free_for(lease.owner, now):
                raise busy_error(run_id, run.lease_owner, run.lease_expires_at)
            for other in self._runs.values():
                nested = other is not run and other.root_run_id == run.root_run_id
                if nested and other.status == "running":
                    other.lease_owner, other.lease_expires_at = lease.owner, now + lease.ttl
        run.status = "running"
        run.attempts += 1
        run.updated_at = now
        run.lease_owner = None if lease is None else lease.owner
        run.lease_expires_at = None if lease is None else now + lease.ttl
        return run.read()

    async def renew_lease(self, run_id: str, lease: RunLease) -> bool:
        run = self._get(run_id)
        if run.status != "running" or run.lease_owner != lease.owner:
            return False
        expires = time.time() + lease.ttl
        for other in self._runs.values():
            mine = other.root_run_id == run.root_run_id and other.lease_owner == lease.owner
            if mine and other.status == "running":
                other.lease_expires_at = expires
        return True

    async def finish_run(self, run_id: str, **end: Unpack[WorkflowEnd]) -> WorkflowRunRecord:
        run = self._get(run_id)
        status, lease = end["status"], end.get("lease")
        out, err = check_finish(status, end.get("error"), end.get("output"))
        if lease is not None:
            _fence(run, lease)
        run.output, run.error = out, err
        run.status = status
        run.updated_at = time.time()
        run.lease_owner = run.lease_expires_at = None
        run.wait = None
        self._wakeups.wake(run_id)
        return run.read()

    async def suspend_run(
        self, run_id: str, *, wait: WaitRecord, lease: RunLease | None = None
    ) -> WorkflowRunRecord:
        run = self._get(run_id)
        encode_wait(wait)  # refused here as a database would refuse it
        if lease is not None:
            _fence(run, lease)
        run.status = "waiting"
        run.wait = wait
        run.updated_at = time.time()
        run.lease_owner = run.lease_expires_at = None
        self._wakeups.wake(run_id)
        return run.read()

    @asynccontextmanager
    async def watch_run(self, run_id: str) -> AsyncIterator[asyncio.Event | None]:
        with self._wakeups.watch(run_id) as event:
            yield event

    async def deliver_signal(
        self, run_id: str, **signal: Unpack[SignalDelivery]
    ) -> WorkflowRunRecord:
        run = self._get(run_id)
        encoded = encode_json(signal["output"], "output")
        check_signal(run_id, run.read().status, run.wait, signal)
        name, step_id, waiter_run_id = signal["name"], signal["step_id"], signal["waiter_run_id"]
        lease = signal["lease"]
        steps = self._steps.setdefault(waiter_run_id, {})
        if step_id not in steps:
            steps[step_id] = StepRecord(
                waiter_run_id, step_id, f"wait:{name}", len(steps) + 1, encoded, time.time()
            )
        now = time.time()
        for other in self._runs.values():
            if other.root_run_id == run.root_run_id and other.status == "waiting":
                other.status = "running"
                other.wait = None
                other.updated_at = now
                other.lease_owner, other.lease_expires_at = lease.owner, now + lease.ttl
        return run.read()

    async def expired_waits(self, *, limit: int = 100) -> list[WorkflowRunRecord]:
        self._live()
        now = time.time()
        due = [
            run
            for run in self._runs.values()
            if run.status == "waiting"
            and run.parent_run_id is None
            and run.wait is not None
            and run.wait.deadline is not None
            and run.wait.deadline < now
        ]
        due.sort(key=lambda run: cast(float, cast(WaitRecord, run.wait).deadline))
        return [run.read() for run in due[:limit]]

    async def list_runs(self, **listing: Unpack[WorkflowListing]) -> list[WorkflowRunRecord]:
        self._live()
        workflow_id, root_run_id = listing.get("workflow_id"), listing.get("root_run_id")
        limit = listing.get("limit")
        out: list[WorkflowRunRecord] = []
        for run in reversed(self._runs.values()):
            if workflow_id is not None and run.workflow_id != workflow_id:
                continue
            if root_run_id is not None and run.root_run_id != root_run_id:
                continue
            if limit is not None and len(out) >= limit:
                break
            out.append(run.read())
        return out

    async def append_step(self, run_id: str, **step: Unpack[StepWrite]) -> StepRecord:
        run = self._get(run_id)
        step_id, lease = step["step_id"], step.get("lease")
        encoded = encode_json(step["output"], "output")
        if lease is not None:
            _fence(run, lease)
        steps = self._steps[run_id]
        found = steps.get(step_id)
        if found is None:
            found = steps[step_id] = StepRecord(
                run_id, step_id, step["name"], len(steps) + 1, encoded, time.time()
            )
        return _read_step(found)

    async def get_step(self, run_id: str, step_id: str) -> StepRecord | None:
        self._live()
        step = self._steps.get(run_id, {}).get(step_id)
        return None if step is None else _read_step(step)

    async def list_steps(self, run_id: str) -> list[StepRecord]:
        self._live()
        return [_read_step(step) for step in self._steps.get(run_id, {}).values()]

    async def aclose(self) -> None:
        self._closed = True

    async def __aenter__(self) -> InMemoryWorkflowStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
