"""`SqliteWorkflowStore`: durable workflow runs, their leases and their journaled steps."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from os import PathLike
from typing import Any, NoReturn

from ...errors import LeaseLostError, StoreError
from ...workflows._store import check_signal
from .._codecs import RUN_COLUMNS, STEP_COLUMNS, busy_error, run_from_row, run_select
from .._sql_workflows import SqlWorkflowStore
from ..workflow_store import RunLease, SignalDelivery
from ._connection import NOW, SqliteBacked, connect, transaction
from ._schema import schema

__all__ = ["SqliteWorkflowStore"]

_WORKFLOW_RUN_SELECT = run_select(NOW)


class SqliteWorkflowStore(SqlWorkflowStore, SqliteBacked):
    """A WorkflowStore in SQLite: one row per run, one row per completed step.

    Takes its connection from the caller (see `connect()`) and migrates on construction; use
    `SqliteWorkflowStore.open(path)` to have the store open — and later close — its own.
    Like the other SQLite stores it runs each operation whole under the connection's lock (see
    `SqliteBacked`), so a file locked by another process never blocks the event loop and a
    connection shared with the other stores never mixes their transactions.
    Each append is one `BEGIN IMMEDIATE` transaction, so several processes may journal into one
    file; a step's sequence number comes from the `(run_id, seq)` index, so an append costs the
    same at step 10 and step 10,000. A takeover (`start_attempt` with a lease) is a conditional
    update under the same write lock, so of two processes only one gets the run.
    """

    def __init__(self, conn: sqlite3.Connection, *, owns: bool = False) -> None:
        super().__init__(conn, owns=owns)
        self._sync(schema.apply)

    @classmethod
    def open(cls, path: str | PathLike[str]) -> SqliteWorkflowStore:
        """Open (creating if needed) the database at `path`; `aclose()` closes it."""
        return cls(connect(path), owns=True)

    @staticmethod
    def _row(conn: sqlite3.Connection, run_id: str) -> tuple[Any, ...] | None:
        row: tuple[Any, ...] | None = conn.execute(
            f"SELECT {_WORKFLOW_RUN_SELECT} FROM tether_workflow_runs WHERE run_id = ?",
            (run_id,),
        ).fetchone()
        return row

    async def _insert_run(self, values: Sequence[Any]) -> tuple[Any, ...] | None:
        def op(conn: sqlite3.Connection) -> tuple[Any, ...] | None:
            try:
                with transaction(conn):
                    conn.execute(
                        f"INSERT INTO tether_workflow_runs ({RUN_COLUMNS})"
                        " VALUES (?, ?, 'running', ?, NULL, NULL, ?, ?, ?, 1, ?, ?, ?,"
                        f" {NOW} + ?, NULL)",
                        values,
                    )
            except sqlite3.IntegrityError:
                return None  # the id is taken
            return self._row(conn, values[0])

        return await self._run(op)

    async def _take(
        self, run_id: str, lease: RunLease | None, replace: str | None
    ) -> tuple[Any, ...]:
        owner = None if lease is None else lease.owner
        ttl = None if lease is None else lease.ttl

        def op(conn: sqlite3.Connection) -> tuple[Any, ...] | None:
            with transaction(conn):
                # The conditional update is the takeover: it matches only a run that is free.
                taken = conn.execute(
                    "UPDATE tether_workflow_runs SET status = 'running', attempts = attempts + 1,"
                    f" updated_at = ?, lease_owner = ?, lease_expires_at = {NOW} + ?"
                    " WHERE run_id = ? AND (? IS NULL OR status <> 'running'"
                    f" OR lease_owner IS NULL OR lease_owner IN (?, ?) OR lease_expires_at < {NOW})"
                    " RETURNING root_run_id",
                    (time.time(), owner, ttl, run_id, owner, owner, replace),
                ).fetchone()
                if taken is None:
                    held = conn.execute(
                        "SELECT lease_owner, lease_expires_at FROM tether_workflow_runs"
                        " WHERE run_id = ?",
                        (run_id,),
                    ).fetchone()
                    if held is None:
                        return None
                    raise busy_error(run_id, held[0], held[1])
                if lease is not None:
                    conn.execute(
                        f"UPDATE tether_workflow_runs SET lease_owner = ?,"
                        f" lease_expires_at = {NOW} + ?"
                        " WHERE root_run_id = ? AND status = 'running' AND run_id <> ?",
                        (owner, ttl, taken[0], run_id),
                    )
                return self._row(conn, run_id)

        return _found(await self._run(op), run_id)

    async def renew_lease(self, run_id: str, lease: RunLease) -> bool:
        def op(conn: sqlite3.Connection) -> bool:
            with transaction(conn):
                held = conn.execute(
                    "SELECT root_run_id FROM tether_workflow_runs"
                    " WHERE run_id = ? AND status = 'running' AND lease_owner = ?",
                    (run_id, lease.owner),
                ).fetchone()
                if held is None:
                    return False
                conn.execute(
                    f"UPDATE tether_workflow_runs SET lease_expires_at = {NOW} + ?"
                    " WHERE root_run_id = ? AND lease_owner = ? AND status = 'running'",
                    (lease.ttl, held[0], lease.owner),
                )
                return True

        return await self._run(op)

    async def _let_go(
        self, run_id: str, sets: str, args: Sequence[Any], lease: RunLease | None
    ) -> tuple[Any, ...]:
        owner = None if lease is None else lease.owner

        def op(conn: sqlite3.Connection) -> tuple[Any, ...] | None:
            with transaction(conn):
                done = conn.execute(
                    f"UPDATE tether_workflow_runs SET {sets}, updated_at = ?, lease_owner = NULL,"
                    f" lease_expires_at = NULL WHERE run_id = ? AND {_FENCE} RETURNING 1",
                    (*args, time.time(), run_id, owner, owner),
                ).fetchone()
                if done is None:
                    _refuse(conn, run_id)
                return self._row(conn, run_id)

        return _found(await self._run(op), run_id)

    async def _answer(self, run_id: str, signal: SignalDelivery, encoded: str) -> tuple[Any, ...]:
        name, step_id, waiter_run_id = signal["name"], signal["step_id"], signal["waiter_run_id"]
        lease = signal["lease"]

        def op(conn: sqlite3.Connection) -> tuple[Any, ...] | None:
            # Checked and written under one write lock: of two signals, one answers the wait.
            with transaction(conn):
                row = self._row(conn, run_id)
                if row is None:
                    return None
                run = run_from_row(row)
                check_signal(run_id, run.status, run.waiting_for, signal)
                conn.execute(
                    f"INSERT OR IGNORE INTO tether_workflow_steps ({STEP_COLUMNS})"
                    " SELECT ?, ?, ?, COALESCE(MAX(seq), 0) + 1, ?, ?"
                    " FROM tether_workflow_steps WHERE run_id = ?",
                    (waiter_run_id, step_id, f"wait:{name}", encoded, time.time(), waiter_run_id),
                )
                conn.execute(
                    "UPDATE tether_workflow_runs SET status = 'running', wait = NULL,"
                    f" wait_deadline = NULL, updated_at = ?, lease_owner = ?,"
                    f" lease_expires_at = {NOW} + ?"
                    " WHERE root_run_id = ? AND status = 'waiting'",
                    (time.time(), lease.owner, lease.ttl, run.root_run_id),
                )
                return self._row(conn, run_id)

        return _found(await self._run(op), run_id)

    async def _journal(
        self, run_id: str, step_id: str, name: str, encoded: str, owner: str | None
    ) -> tuple[Any, ...]:
        def op(conn: sqlite3.Connection) -> tuple[Any, ...]:
            # Read-then-write inside BEGIN IMMEDIATE: no other writer can slip in between.
            with transaction(conn):
                held = conn.execute(
                    f"SELECT 1 FROM tether_workflow_runs WHERE run_id = ? AND {_FENCE}",
                    (run_id, owner, owner),
                ).fetchone()
                if held is None:
                    _refuse(conn, run_id)
                row: tuple[Any, ...] | None = conn.execute(
                    f"SELECT {STEP_COLUMNS} FROM tether_workflow_steps"
                    " WHERE run_id = ? AND step_id = ?",
                    (run_id, step_id),
                ).fetchone()
                if row is None:
                    (last,) = conn.execute(
                        "SELECT COALESCE(MAX(seq), 0) FROM tether_workflow_steps WHERE run_id = ?",
                        (run_id,),
                    ).fetchone()
                    row = (run_id, step_id, name, last + 1, encoded, time.time())
                    conn.execute(
                        f"INSERT INTO tether_workflow_steps ({STEP_COLUMNS})"
                        " VALUES (?, ?, ?, ?, ?, ?)",
                        row,
                    )
                return row

        return await self._run(op)


_FENCE = "(? IS NULL OR (status = 'running' AND lease_owner = ?))"
"""A write under a lease (its owner bound twice) matches the run only while that owner holds
it running."""


def _refuse(conn: sqlite3.Connection, run_id: str) -> NoReturn:
    """Why a fenced write of `run_id` matched no row: no such run, or another holder."""
    row = conn.execute(
        "SELECT lease_owner FROM tether_workflow_runs WHERE run_id = ?", (run_id,)
    ).fetchone()
    if row is None:
        raise StoreError(f"no workflow run {run_id!r}")
    raise LeaseLostError("workflow run", run_id, row[0])


def _found(row: tuple[Any, ...] | None, run_id: str) -> tuple[Any, ...]:
    if row is None:
        raise StoreError(f"no workflow run {run_id!r}")
    return row
