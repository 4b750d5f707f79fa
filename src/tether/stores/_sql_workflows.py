"""What the SQLite and PostgreSQL workflow stores share above their connections (see
`tether.stores._sql`): the reads, and each write's checks, encodings and decodings, with a hook
per write for the backend's statement."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, Unpack

from ..errors import StoreError
from ._codecs import (
    STEP_COLUMNS,
    check_finish,
    encode_json,
    encode_wait,
    new_run_values,
    run_from_row,
    step_from_row,
    where_equal,
)
from ._sql import Row, SqlBacked
from .workflow_store import (
    NewWorkflowRun,
    RunLease,
    SignalDelivery,
    StepRecord,
    StepWrite,
    WaitRecord,
    WorkflowEnd,
    WorkflowListing,
    WorkflowRunRecord,
)

__all__ = ["SqlWorkflowReads", "SqlWorkflowStore"]


class SqlWorkflowReads(SqlBacked):
    """The reads of a SQL `WorkflowStore`."""

    async def get_run(self, run_id: str) -> WorkflowRunRecord | None:
        row = await self._one(
            f"SELECT {self._sql.workflow_select} FROM tether_workflow_runs"
            f" WHERE run_id = {self._sql.mark}",
            (run_id,),
        )
        return None if row is None else run_from_row(row)

    async def expired_waits(self, *, limit: int = 100) -> list[WorkflowRunRecord]:
        rows = await self._all(
            f"SELECT {self._sql.workflow_select} FROM tether_workflow_runs"
            f" WHERE wait_deadline < {self._sql.now} AND status = 'waiting'"
            f" AND parent_run_id IS NULL ORDER BY wait_deadline LIMIT {self._sql.mark}",
            (limit,),
        )
        return [run_from_row(row) for row in rows]

    async def list_runs(self, **listing: Unpack[WorkflowListing]) -> list[WorkflowRunRecord]:
        d = self._sql
        clause, args = where_equal(
            d.mark, workflow_id=listing.get("workflow_id"), root_run_id=listing.get("root_run_id")
        )
        limit = listing.get("limit")
        rows = await self._all(
            f"SELECT {d.workflow_select} FROM tether_workflow_runs{clause}"
            f" ORDER BY {d.rowid} DESC LIMIT {d.mark}",
            (*args, d.all_rows if limit is None else limit),
        )
        return [run_from_row(row) for row in rows]

    async def get_step(self, run_id: str, step_id: str) -> StepRecord | None:
        m = self._sql.mark
        row = await self._one(
            f"SELECT {STEP_COLUMNS} FROM tether_workflow_steps WHERE run_id = {m}"
            f" AND step_id = {m}",
            (run_id, step_id),
        )
        return None if row is None else step_from_row(row)

    async def list_steps(self, run_id: str) -> list[StepRecord]:
        rows = await self._all(
            f"SELECT {STEP_COLUMNS} FROM tether_workflow_steps WHERE run_id = {self._sql.mark}"
            " ORDER BY seq",
            (run_id,),
        )
        return [step_from_row(row) for row in rows]


class SqlWorkflowStore(SqlWorkflowReads):
    """A SQL `WorkflowStore` but for its statements: the reads, and each write's checks,
    encodings and decodings, written once. The backend runs each write as one statement or
    transaction in its dialect (`_insert_run`, `_take`, `_let_go`, `_answer`, `_journal`),
    given encoded values and returning the row written."""

    async def _insert_run(self, values: Sequence[Any]) -> Row | None:
        """Insert a new running run of `new_run_values`; its row, or None when its id is taken."""
        raise NotImplementedError

    async def _take(self, run_id: str, lease: RunLease | None, replace: str | None) -> Row:
        """`start_attempt` in one conditional write; the run's row after.

        Raises:
            WorkflowRunBusyError: another owner holds a live lease on the run.
            StoreError: there is no such run.
        """
        raise NotImplementedError

    async def _answer(self, run_id: str, signal: SignalDelivery, encoded: str) -> Row:
        """`deliver_signal` in one transaction, the value given as its JSON text; the root
        run's row after."""
        raise NotImplementedError

    async def _journal(
        self, run_id: str, step_id: str, name: str, encoded: str, owner: str | None
    ) -> Row:
        """`append_step` in one transaction, fenced by `owner` (None: not fenced), the output
        given as its JSON text; the step's row (the one journaled first, if any)."""
        raise NotImplementedError

    async def _let_go(
        self, run_id: str, sets: str, args: Sequence[Any], lease: RunLease | None
    ) -> Row:
        """In one write, set `sets` (bound to `args`) on run `run_id`, stamp `updated_at` and
        release the run's lease — only while `lease`, if given, holds it running; the run's
        row after.

        Raises:
            LeaseLostError: another owner holds the run (nothing written).
            StoreError: there is no such run.
        """
        raise NotImplementedError

    async def finish_run(self, run_id: str, **end: Unpack[WorkflowEnd]) -> WorkflowRunRecord:
        status = end["status"]
        out, err = check_finish(status, end.get("error"), end.get("output"))
        m = self._sql.mark
        sets = f"status = {m}, output = {m}, error = {m}, wait = NULL, wait_deadline = NULL"
        return run_from_row(await self._let_go(run_id, sets, (status, out, err), end.get("lease")))

    async def suspend_run(
        self, run_id: str, *, wait: WaitRecord, lease: RunLease | None = None
    ) -> WorkflowRunRecord:
        m = self._sql.mark
        sets = f"status = 'waiting', wait = {m}, wait_deadline = {m}"
        return run_from_row(
            await self._let_go(run_id, sets, (encode_wait(wait), wait.deadline), lease)
        )

    async def create_run(self, **run: Unpack[NewWorkflowRun]) -> WorkflowRunRecord:
        row = await self._insert_run(new_run_values(run, time.time()))
        if row is None:
            raise StoreError(f"workflow run {run['run_id']!r} already exists")
        return run_from_row(row)

    async def start_attempt(
        self, run_id: str, *, lease: RunLease | None = None, replace: str | None = None
    ) -> WorkflowRunRecord:
        return run_from_row(await self._take(run_id, lease, replace))

    async def deliver_signal(
        self, run_id: str, **signal: Unpack[SignalDelivery]
    ) -> WorkflowRunRecord:
        encoded = encode_json(signal["output"], "output")
        return run_from_row(await self._answer(run_id, signal, encoded))

    async def append_step(self, run_id: str, **step: Unpack[StepWrite]) -> StepRecord:
        encoded = encode_json(step["output"], "output")
        lease = step.get("lease")
        owner = None if lease is None else lease.owner
        return step_from_row(
            await self._journal(run_id, step["step_id"], step["name"], encoded, owner)
        )
