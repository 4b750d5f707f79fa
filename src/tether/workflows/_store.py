"""WorkflowStore: the journal of durable workflow runs and their completed steps.

A run is one execution tree node: its workflow id, input, status, output or error, and where it
sits in a nest tree (`parent_run_id`, `root_run_id`). A step is one completed `ctx.step(...)`:
its id within the run and its JSON-safe output. Steps are only ever appended; a step id is
journaled at most once per run, and the first output written for it wins — so two processes that
race to finish the same step agree on its output.

Every implementation passes the contract suite in `tests/stores/test_workflow_store_contract.py`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, Protocol, TypeAlias, runtime_checkable

from .._json import check_json_safe, dumps
from ..errors import StoreCorruptError, StoreError

__all__ = [
    "FINISHED_STATUSES",
    "RUN_STATUSES",
    "InMemoryWorkflowStore",
    "RunStatus",
    "StepRecord",
    "WorkflowRunRecord",
    "WorkflowStore",
    "parse_run_error",
]

RunStatus: TypeAlias = Literal["running", "completed", "failed", "cancelled"]
RUN_STATUSES: Final[tuple[RunStatus, ...]] = ("running", "completed", "failed", "cancelled")
FINISHED_STATUSES: Final[frozenset[str]] = frozenset({"completed", "failed", "cancelled"})


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


@runtime_checkable
class WorkflowStore(Protocol):
    """Where durable workflow runs and their steps are journaled.

    Every method is a coroutine. Values given to a store must be JSON-safe (`NotJSONSafeError`
    otherwise); values read back are fresh copies. A stored record that does not parse raises
    `StoreCorruptError` and is left as it is.
    """

    async def create_run(
        self,
        *,
        run_id: str,
        workflow_id: str,
        input: Any,
        parent_run_id: str | None = None,
        root_run_id: str | None = None,
        parent_step_id: str | None = None,
    ) -> WorkflowRunRecord:
        """Store a new run with status "running". `root_run_id` defaults to `run_id`.

        Raises StoreError when `run_id` is already taken.
        """
        ...

    async def get_run(self, run_id: str) -> WorkflowRunRecord | None:
        """The run, or None when there is no such run."""
        ...

    async def start_attempt(self, run_id: str) -> WorkflowRunRecord:
        """Mark an existing run "running" again and count one more attempt (a resume)."""
        ...

    async def finish_run(
        self,
        run_id: str,
        *,
        status: Literal["completed", "failed", "cancelled"],
        output: Any = None,
        error: dict[str, Any] | None = None,
    ) -> WorkflowRunRecord:
        """Record how a run ended."""
        ...

    async def list_runs(
        self,
        *,
        workflow_id: str | None = None,
        root_run_id: str | None = None,
        limit: int | None = None,
    ) -> list[WorkflowRunRecord]:
        """Runs, most recently created first, optionally filtered."""
        ...

    async def append_step(self, run_id: str, *, step_id: str, name: str, output: Any) -> StepRecord:
        """Journal a completed step atomically.

        If `step_id` is already journaled for the run, nothing is written and the stored record
        is returned: the first output wins.
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


def parse_run_error(exc: BaseException) -> dict[str, Any]:
    """The JSON-safe `{"type", "message"}` stored for a run that ended with `exc`."""
    return {"type": type(exc).__name__, "message": str(exc)}


# -- shared (de)serialization ----------------------------------------------------------------


def _encode(value: Any, path: str) -> str:
    check_json_safe(value, path)
    return dumps(value)


def _decode(text: Any, where: str) -> Any:
    if not isinstance(text, str):
        raise StoreCorruptError(f"{where}: expected JSON text, found {type(text).__name__}")
    try:
        return json.loads(text)
    except ValueError as exc:
        raise StoreCorruptError(f"{where}: stored JSON does not parse: {exc}") from exc


def _check_status(status: Any, where: str) -> RunStatus:
    if status not in RUN_STATUSES:
        raise StoreCorruptError(f"{where}: unknown status {status!r}")
    return status  # type: ignore[no-any-return]


def _decode_error(text: Any, where: str) -> dict[str, Any] | None:
    if text is None:
        return None
    error = _decode(text, f"{where}.error")
    if not isinstance(error, dict):
        raise StoreCorruptError(f"{where}.error: expected an object")
    return error


# -- the row shape the SQL backends share ---------------------------------------------------

RUN_COLUMNS: Final = (
    "run_id, workflow_id, status, input, output, error, parent_run_id, root_run_id,"
    " parent_step_id, attempts, created_at, updated_at"
)
"""The columns of a run row, in the order `run_from_row` reads them."""

STEP_COLUMNS: Final = "run_id, step_id, name, seq, output, created_at"
"""The columns of a step row, in the order `step_from_row` reads them."""


def run_from_row(row: Sequence[Any]) -> WorkflowRunRecord:
    """A run read back from a `RUN_COLUMNS` row; StoreCorruptError names what does not parse."""
    run_id = row[0]
    where = f"workflow run {run_id!r}"
    return WorkflowRunRecord(
        run_id=run_id,
        workflow_id=row[1],
        status=_check_status(row[2], where),
        input=_decode(row[3], f"{where}.input"),
        output=None if row[4] is None else _decode(row[4], f"{where}.output"),
        error=_decode_error(row[5], where),
        parent_run_id=row[6],
        root_run_id=row[7],
        parent_step_id=row[8],
        attempts=row[9],
        created_at=row[10],
        updated_at=row[11],
    )


def step_from_row(row: Sequence[Any]) -> StepRecord:
    """A step read back from a `STEP_COLUMNS` row."""
    where = f"workflow step {row[0]!r}/{row[1]!r}"
    return StepRecord(
        run_id=row[0],
        step_id=row[1],
        name=row[2],
        seq=row[3],
        output=_decode(row[4], f"{where}.output"),
        created_at=row[5],
    )


def _check_finish(status: str, error: dict[str, Any] | None, output: Any) -> tuple[str, str | None]:
    if status not in FINISHED_STATUSES:
        raise ValueError(f"finish_run status must be completed, failed or cancelled: {status!r}")
    return _encode(output, "output"), None if error is None else _encode(error, "error")


# -- in-memory -------------------------------------------------------------------------------


@dataclass(slots=True)
class _MemRun:
    run_id: str
    workflow_id: str
    status: str
    input: str
    output: str | None
    error: str | None
    parent_run_id: str | None
    root_run_id: str
    parent_step_id: str | None
    attempts: int
    created_at: float
    updated_at: float
    steps: dict[str, tuple[str, int, str, float]]
    """step_id -> (name, seq, output JSON, created_at); insertion order is journal order."""


class InMemoryWorkflowStore:
    """A WorkflowStore in a dict: for tests and for runs that need not outlive the process.

    Values are kept as JSON text, exactly as a database would hold them, so what a caller reads
    back is a fresh copy and a non-JSON-safe value is refused at the same point.
    """

    def __init__(self) -> None:
        self._runs: dict[str, _MemRun] = {}
        self._closed = False

    def _live(self) -> None:
        if self._closed:
            raise StoreError("the workflow store is closed")

    def _get(self, run_id: str) -> _MemRun:
        self._live()
        run = self._runs.get(run_id)
        if run is None:
            raise StoreError(f"no workflow run {run_id!r}")
        return run

    @staticmethod
    def _record(run: _MemRun) -> WorkflowRunRecord:
        where = f"workflow run {run.run_id!r}"
        return WorkflowRunRecord(
            run_id=run.run_id,
            workflow_id=run.workflow_id,
            status=_check_status(run.status, where),
            input=_decode(run.input, f"{where}.input"),
            output=None if run.output is None else _decode(run.output, f"{where}.output"),
            error=_decode_error(run.error, where),
            parent_run_id=run.parent_run_id,
            root_run_id=run.root_run_id,
            parent_step_id=run.parent_step_id,
            attempts=run.attempts,
            created_at=run.created_at,
            updated_at=run.updated_at,
        )

    async def create_run(
        self,
        *,
        run_id: str,
        workflow_id: str,
        input: Any,
        parent_run_id: str | None = None,
        root_run_id: str | None = None,
        parent_step_id: str | None = None,
    ) -> WorkflowRunRecord:
        self._live()
        encoded = _encode(input, "input")
        if run_id in self._runs:
            raise StoreError(f"workflow run {run_id!r} already exists")
        now = time.time()
        run = _MemRun(
            run_id=run_id,
            workflow_id=workflow_id,
            status="running",
            input=encoded,
            output=None,
            error=None,
            parent_run_id=parent_run_id,
            root_run_id=root_run_id or run_id,
            parent_step_id=parent_step_id,
            attempts=1,
            created_at=now,
            updated_at=now,
            steps={},
        )
        self._runs[run_id] = run
        return self._record(run)

    async def get_run(self, run_id: str) -> WorkflowRunRecord | None:
        self._live()
        run = self._runs.get(run_id)
        return None if run is None else self._record(run)

    async def start_attempt(self, run_id: str) -> WorkflowRunRecord:
        run = self._get(run_id)
        run.status = "running"
        run.attempts += 1
        run.updated_at = time.time()
        return self._record(run)

    async def finish_run(
        self,
        run_id: str,
        *,
        status: Literal["completed", "failed", "cancelled"],
        output: Any = None,
        error: dict[str, Any] | None = None,
    ) -> WorkflowRunRecord:
        run = self._get(run_id)
        out, err = _check_finish(status, error, output)
        run.status = status
        run.output = out
        run.error = err
        run.updated_at = time.time()
        return self._record(run)

    async def list_runs(
        self,
        *,
        workflow_id: str | None = None,
        root_run_id: str | None = None,
        limit: int | None = None,
    ) -> list[WorkflowRunRecord]:
        self._live()
        out: list[WorkflowRunRecord] = []
        for run in reversed(self._runs.values()):
            if workflow_id is not None and run.workflow_id != workflow_id:
                continue
            if root_run_id is not None and run.root_run_id != root_run_id:
                continue
            if limit is not None and len(out) >= limit:
                break
            out.append(self._record(run))
        return out

    async def append_step(self, run_id: str, *, step_id: str, name: str, output: Any) -> StepRecord:
        run = self._get(run_id)
        encoded = _encode(output, "output")
        existing = run.steps.get(step_id)
        if existing is None:
            existing = (name, len(run.steps) + 1, encoded, time.time())
            run.steps[step_id] = existing
        return self._step(run_id, step_id, existing)

    @staticmethod
    def _step(run_id: str, step_id: str, row: tuple[str, int, str, float]) -> StepRecord:
        name, seq, output, created_at = row
        where = f"workflow step {run_id!r}/{step_id!r}"
        return StepRecord(
            run_id=run_id,
            step_id=step_id,
            name=name,
            seq=seq,
            output=_decode(output, f"{where}.output"),
            created_at=created_at,
        )

    async def get_step(self, run_id: str, step_id: str) -> StepRecord | None:
        self._live()
        run = self._runs.get(run_id)
        row = None if run is None else run.steps.get(step_id)
        return None if row is None else self._step(run_id, step_id, row)

    async def list_steps(self, run_id: str) -> list[StepRecord]:
        self._live()
        run = self._runs.get(run_id)
        if run is None:
            return []
        return [self._step(run_id, step_id, row) for step_id, row in run.steps.items()]

    async def aclose(self) -> None:
        self._closed = True

    async def __aenter__(self) -> InMemoryWorkflowStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # Test support: lets the contract suite damage a record the way a bad disk or a bad
    # hand edit would, without reaching into the layout from outside.
    def _corrupt_step(self, run_id: str, step_id: str, text: str) -> None:
        name, seq, _, created_at = self._runs[run_id].steps[step_id]
        self._runs[run_id].steps[step_id] = (name, seq, text, created_at)

    def _corrupt_run(self, run_id: str, column: str, text: str) -> None:
        setattr(self._runs[run_id], column, text)
