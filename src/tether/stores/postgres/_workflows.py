"""`PostgresWorkflowStore`: durable workflow runs, their leases and their journaled steps."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Final

from ...errors import LeaseLostError, StoreError, WorkflowRunBusyError
from ...workflows._store import check_signal
from .._codecs import RUN_COLUMNS, STEP_COLUMNS, busy_error, run_from_row, run_select
from .._sql_workflows import SqlWorkflowStore
from ..workflow_store import RunLease, SignalDelivery
from ._backed import PostgresBacked
from ._connection import NOW, Connection, execute, fetch_one
from ._notices import RUNS, notify_sql

__all__ = ["PostgresWorkflowStore"]

_WORKFLOW_RUN_SELECT: Final = run_select(NOW)

# The takeover is one conditional update: it matches only a run that is free (not running,
# held by nobody, held by this owner already, or held past its lease), and a concurrent
# takeover waits on the row lock, then finds the run taken. The runs nested in it that are still
# marked running pass to the same owner in the same statement.
_TAKE_OVER = f"""
WITH taken AS (
    UPDATE tether_workflow_runs SET status = 'running', attempts = attempts + 1,
        updated_at = %(now)s, lease_owner = %(owner)s,
        lease_expires_at = {NOW} + %(ttl)s::float8
    WHERE run_id = %(run_id)s AND (%(owner)s::text IS NULL OR status <> 'running'
        OR lease_owner IS NULL OR lease_owner = %(owner)s OR lease_owner = %(replace)s::text
        OR lease_expires_at < {NOW})
    RETURNING {_WORKFLOW_RUN_SELECT}
), tree AS (
    UPDATE tether_workflow_runs AS c SET lease_owner = %(owner)s,
        lease_expires_at = {NOW} + %(ttl)s::float8
    FROM taken
    WHERE %(owner)s::text IS NOT NULL AND c.root_run_id = taken.root_run_id
        AND c.status = 'running' AND c.run_id <> %(run_id)s
)
SELECT * FROM taken
"""


_FENCE: Final = "(%s::text IS NULL OR (status = 'running' AND lease_owner = %s))"
"""A write under a lease (its owner bound twice) matches the run only while that owner holds
it running."""


_NOTIFIED: Final = f"SELECT done.* FROM done, {notify_sql(RUNS, 'done.run_id')}"
"""After a `done` CTE that let runs go: each one's row, and a notice of it to the attaches
waiting for it (sent when the write commits)."""


async def _refused(conn: Connection, run_id: str) -> StoreError:
    """Why a fenced write of `run_id` matched no row: no such run, or another holder."""
    row = await fetch_one(
        conn, "SELECT lease_owner FROM tether_workflow_runs WHERE run_id = %s", (run_id,)
    )
    if row is None:
        return StoreError(f"no workflow run {run_id!r}")
    return LeaseLostError("workflow run", run_id, row[0])


class PostgresWorkflowStore(SqlWorkflowStore, PostgresBacked):
    """A WorkflowStore in PostgreSQL: one row per run, one row per completed step.

    `append_step` row-locks the run (`FOR NO KEY UPDATE`) before it looks for the step and
    numbers it after the run's last one (read through the `(run_id, seq)` index): writers on
    other connections queue, the first output of a step wins, and the cost does not grow with
    the journal. Leases are set and judged by the server's clock.
    """

    _kind = "workflow store"

    async def _insert_run(self, values: Sequence[Any]) -> tuple[Any, ...] | None:
        async with self._session() as conn:
            return await fetch_one(
                conn,
                f"INSERT INTO tether_workflow_runs ({RUN_COLUMNS})"
                " VALUES (%s, %s, 'running', %s, NULL, NULL, %s, %s, %s, 1, %s, %s, %s,"
                f" {NOW} + %s::float8, NULL)"
                f" ON CONFLICT (run_id) DO NOTHING RETURNING {_WORKFLOW_RUN_SELECT}",
                values,
            )

    async def _holder(self, conn: Connection, run_id: str) -> WorkflowRunBusyError:
        held = await fetch_one(
            conn,
            "SELECT lease_owner, lease_expires_at FROM tether_workflow_runs WHERE run_id = %s",
            (run_id,),
        )
        if held is None:
            raise StoreError(f"no workflow run {run_id!r}")
        return busy_error(run_id, held[0], held[1])

    async def _take(
        self, run_id: str, lease: RunLease | None, replace: str | None
    ) -> tuple[Any, ...]:
        params = {
            "replace": replace,
            "run_id": run_id,
            "now": time.time(),
            "owner": None if lease is None else lease.owner,
            "ttl": None if lease is None else lease.ttl,
        }
        async with self._session() as conn:
            row = await fetch_one(conn, _TAKE_OVER, params)
            if row is None:
                raise await self._holder(conn, run_id)
        return row

    async def renew_lease(self, run_id: str, lease: RunLease) -> bool:
        async with self._session() as conn:
            row = await fetch_one(
                conn,
                f"""
                WITH held AS (
                    SELECT root_run_id FROM tether_workflow_runs
                    WHERE run_id = %(run_id)s AND status = 'running' AND lease_owner = %(owner)s
                ), renewed AS (
                    UPDATE tether_workflow_runs AS t
                    SET lease_expires_at = {NOW} + %(ttl)s::float8
                    FROM held
                    WHERE t.root_run_id = held.root_run_id AND t.lease_owner = %(owner)s
                        AND t.status = 'running'
                )
                SELECT count(*) FROM held
                """,
                {"run_id": run_id, "owner": lease.owner, "ttl": lease.ttl},
            )
        return row is not None and int(row[0]) > 0

    async def _let_go(
        self, run_id: str, sets: str, args: Sequence[Any], lease: RunLease | None
    ) -> tuple[Any, ...]:
        owner = None if lease is None else lease.owner
        async with self._session() as conn:
            row = await fetch_one(
                conn,
                f"WITH done AS (UPDATE tether_workflow_runs SET {sets}, updated_at = %s,"
                " lease_owner = NULL, lease_expires_at = NULL"
                f" WHERE run_id = %s AND {_FENCE} RETURNING {_WORKFLOW_RUN_SELECT}) {_NOTIFIED}",
                (*args, time.time(), run_id, owner, owner),
            )
            if row is None:
                raise await _refused(conn, run_id)
        return row

    def watch_run(self, run_id: str) -> AbstractAsyncContextManager[asyncio.Event | None]:
        """While entered, an event set by each `NOTIFY` of the run being let go (see
        `WatchesRuns`)."""
        return self._watch(RUNS, run_id)

    async def _answer(self, run_id: str, signal: SignalDelivery, encoded: str) -> tuple[Any, ...]:
        name, step_id, waiter_run_id = signal["name"], signal["step_id"], signal["waiter_run_id"]
        lease = signal["lease"]
        async with self._session(atomic=True) as conn:
            # The root row is locked until commit: of two signals, one answers the wait.
            row = await fetch_one(
                conn,
                f"SELECT {_WORKFLOW_RUN_SELECT} FROM tether_workflow_runs WHERE run_id = %s"
                " FOR NO KEY UPDATE",
                (run_id,),
            )
            if row is None:
                raise StoreError(f"no workflow run {run_id!r}")
            run = run_from_row(row)
            check_signal(run_id, run.status, run.waiting_for, signal)
            await execute(
                conn,
                f"INSERT INTO tether_workflow_steps ({STEP_COLUMNS})"
                " SELECT %s, %s, %s, COALESCE(MAX(seq), 0) + 1, %s, %s"
                " FROM tether_workflow_steps WHERE run_id = %s"
                " ON CONFLICT (run_id, step_id) DO NOTHING",
                (waiter_run_id, step_id, f"wait:{name}", encoded, time.time(), waiter_run_id),
            )
            await execute(
                conn,
                "UPDATE tether_workflow_runs SET status = 'running',"
                " wait = NULL, wait_deadline = NULL, updated_at = %s, lease_owner = %s,"
                f" lease_expires_at = {NOW} + %s::float8"
                " WHERE root_run_id = %s AND status = 'waiting'",
                (time.time(), lease.owner, lease.ttl, run.root_run_id),
            )
            row = await fetch_one(
                conn,
                f"SELECT {_WORKFLOW_RUN_SELECT} FROM tether_workflow_runs WHERE run_id = %s",
                (run_id,),
            )
        assert row is not None  # locked above, in this transaction
        return row

    async def _journal(
        self, run_id: str, step_id: str, name: str, encoded: str, owner: str | None
    ) -> tuple[Any, ...]:
        async with self._session(atomic=True) as conn:
            # The run row is locked until commit: a takeover waits for this step, and a step
            # of a holder that was taken over finds another owner here.
            locked = await fetch_one(
                conn,
                f"SELECT 1 FROM tether_workflow_runs WHERE run_id = %s AND {_FENCE}"
                " FOR NO KEY UPDATE",
                (run_id, owner, owner),
            )
            if locked is None:
                raise await _refused(conn, run_id)
            row = await fetch_one(
                conn,
                f"SELECT {STEP_COLUMNS} FROM tether_workflow_steps"
                " WHERE run_id = %s AND step_id = %s",
                (run_id, step_id),
            )
            if row is None:
                row = await fetch_one(
                    conn,
                    f"INSERT INTO tether_workflow_steps ({STEP_COLUMNS})"
                    " SELECT %s, %s, %s, COALESCE(MAX(seq), 0) + 1, %s, %s"
                    " FROM tether_workflow_steps WHERE run_id = %s"
                    f" RETURNING {STEP_COLUMNS}",
                    (run_id, step_id, name, encoded, time.time(), run_id),
                )
        assert row is not None  # INSERT … SELECT of an aggregate inserts exactly one row
        return row
