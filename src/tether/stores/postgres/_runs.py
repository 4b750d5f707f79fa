"""`PostgresRunStore`: run summaries, their events and tags; search on a generated column."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, Final

from ...errors import LeaseLostError, StoreError
from .._codecs import RUN_INFO_COLUMNS, RunFinish, encode_batches, encode_new_events, in_pieces
from .._sql import POSTGRES
from .._sql_runs import NewRun, SqlRunStore
from ..run_store import (
    CANCEL_REQUESTED,
    RESUMED_BY,
    EventBatch,
    NewRunEvent,
    RunResume,
)
from ..workflow_store import RunStatus
from ._blobs import BlobWriting, insert_blobs
from ._connection import NOW, Connection, execute, fetch_all, fetch_one

__all__ = ["PostgresRunStore"]

_FENCE: Final = "(%s::text IS NULL OR lease_owner IS NULL OR lease_owner = %s)"
"""A write under a lease token (bound twice) matches the run only while the token is its own."""


async def _refused(conn: Connection, run_id: str) -> StoreError:
    """Why a fenced write of `run_id` matched no row: no such run, or another lease token."""
    row = await fetch_one(conn, "SELECT lease_owner FROM tether_runs WHERE run_id = %s", (run_id,))
    if row is None:
        return StoreError(f"run {run_id!r} was never started")
    return LeaseLostError("run", run_id, row[0])


_RUN_SELECT: Final = POSTGRES.run_select

# One statement, like a message append: the run row's count is bumped (and row-locked) and the
# events are numbered after the old count. No row means the run was never started, or (under a
# lease token) that another writer took the run over.
_INSERT_EVENTS: Final = """
    INSERT INTO tether_run_events (run_id, seq, type, at, data)
    SELECT %(run_id)s, bumped.event_count - %(n)s + e.i, e.type, e.at, e.data
    FROM bumped,
        unnest(%(types)s::text[], %(ats)s::float8[], %(datas)s::text[])
        WITH ORDINALITY AS e (type, at, data, i)
"""
"""Inserts a run's new events numbered after the count the `bumped` CTE returns."""

_INSERTS: Final = f"""inserted AS ({_INSERT_EVENTS}), pieced AS (
    INSERT INTO tether_run_event_pieces (run_id, seq, piece, text)
    SELECT %(run_id)s, bumped.event_count - %(n)s + p.i, p.piece, p.text
    FROM bumped, unnest(%(p_rows)s::int[], %(p_nums)s::int[], %(p_texts)s::text[])
        AS p (i, piece, text)
)"""
"""The CTEs that insert the events and the pieces of the long ones (`in_pieces`)."""

_APPEND_EVENTS = f"""
WITH bumped AS (
    UPDATE tether_runs SET event_count = event_count + %(n)s
    WHERE run_id = %(run_id)s
        AND (%(lease)s::text IS NULL OR lease_owner IS NULL OR lease_owner = %(lease)s)
    RETURNING event_count
), {_INSERTS}
SELECT event_count FROM bumped
"""


def _append_params(
    run_id: str, encoded: Sequence[tuple[str, float, str]], lease: str | None
) -> dict[str, Any]:
    rows, pieces = in_pieces(encoded)
    return {
        "run_id": run_id,
        "lease": lease,
        "n": len(rows),
        "types": [kind for kind, _, _ in rows],
        "ats": [at for _, at, _ in rows],
        "datas": [raw for _, _, raw in rows],
        # Numbered from 1 in the batch, as WITH ORDINALITY numbers the events.
        "p_rows": [i + 1 for i, _, _ in pieces],
        "p_nums": [n for _, n, _ in pieces],
        "p_texts": [text for _, _, text in pieces],
    }


_START_RUN = f"""
WITH created AS (
    INSERT INTO tether_runs ({RUN_INFO_COLUMNS}, lease_expires_at, lease_owner)
    VALUES ({", ".join(f"%(v{i})s" for i in range(len(RUN_INFO_COLUMNS.split(","))))},
        {NOW} + %(ttl)s::float8, %(lease)s)
    ON CONFLICT (run_id) DO NOTHING
    RETURNING run_id
), tagged AS (
    INSERT INTO tether_run_tags (tag, run_id)
    SELECT t.tag, created.run_id FROM created, unnest(%(tags)s::text[]) AS t (tag)
)
SELECT 1 FROM created
"""


class PostgresRunStore(SqlRunStore, BlobWriting):
    """A RunStore in PostgreSQL: one row per run, one row per event, numbered per run."""

    _kind = "run store"

    async def _start(self, run: NewRun) -> bool:
        params = {f"v{i}": value for i, value in enumerate(run.row)}
        args = {**params, "tags": run.tags, "ttl": run.lease_ttl, "lease": run.lease}
        async with self._session() as conn:
            return await fetch_one(conn, _START_RUN, args) is not None

    async def append_events(
        self, run_id: str, events: Sequence[NewRunEvent], *, lease: str | None = None
    ) -> int:
        encoded, blobs = encode_new_events(run_id, events, self.blob_threshold)
        async with self._session(atomic=bool(blobs)) as conn:
            await insert_blobs(conn, blobs)
            row = await fetch_one(conn, _APPEND_EVENTS, _append_params(run_id, encoded, lease))
            if row is None:
                raise await _refused(conn, run_id)
        return int(row[0])

    async def append_events_many(self, batches: Sequence[EventBatch]) -> list[int]:
        encoded, blobs = encode_batches(batches, self.blob_threshold)
        params = [_append_params(*batch) for batch in encoded]
        # The run rows are locked in one order, by run id, as `renew_leases` locks them: two
        # transactions that lock some of the same runs then never wait for each other in a
        # circle (a deadlock PostgreSQL would break by failing one of them).
        order = sorted(range(len(params)), key=lambda i: params[i]["run_id"])
        lasts = [0] * len(params)
        # One connection, one transaction, the statements pipelined: one commit for them all.
        async with self._session(atomic=True) as conn:
            await insert_blobs(conn, blobs)
            async with conn.pipeline():
                cursors = [await execute(conn, _APPEND_EVENTS, params[i]) for i in order]
            for cur, i in zip(cursors, order, strict=True):
                row = await cur.fetchone()
                if row is None:
                    raise await _refused(conn, params[i]["run_id"])
                lasts[i] = int(row[0])
        return lasts

    async def _finish_planned(self, run_id: str, status: RunStatus, plan: RunFinish) -> int:
        sets = "".join(f", {column} = %(x_{column})s" for column in plan.columns)
        params = {
            **_append_params(run_id, plan.events, plan.fence),
            **{f"x_{column}": value for column, value in plan.columns.items()},
            "status": status,
            "ended_at": plan.ended_at,
            "error": plan.error,
            "ttl": plan.ttl,
        }
        async with self._session(atomic=bool(plan.blobs)) as conn:
            await insert_blobs(conn, plan.blobs)
            # One statement: the run's end, its count bumped, and its last events numbered
            # after the old count (none: the count stays).
            row = await fetch_one(
                conn,
                f"""
                WITH bumped AS (
                    UPDATE tether_runs SET status = %(status)s, ended_at = %(ended_at)s,
                        error = %(error)s{sets}, lease_expires_at = {NOW} + %(ttl)s::float8,
                        event_count = event_count + %(n)s
                    WHERE run_id = %(run_id)s AND (%(lease)s::text IS NULL
                        OR lease_owner IS NULL OR lease_owner = %(lease)s)
                    RETURNING event_count
                ), {_INSERTS}
                SELECT event_count FROM bumped
                """,
                params,
            )
            if row is None:
                raise await _refused(conn, run_id)
        return int(row[0])

    async def _resume(
        self, run_id: str, rows: list[tuple[str, float, str]], resume: RunResume
    ) -> tuple[Any, ...] | None:
        params = {
            **_append_params(run_id, rows, None),
            "ttl": resume.get("lease_ttl"),
            "by": resume["resumed_by"],
            "key": RESUMED_BY,
        }
        async with self._session() as conn:
            # One statement: of two resumers, the second matches no paused row (the first's
            # update holds it until its commit, then the row is running).
            row = await fetch_one(
                conn,
                f"""
                WITH bumped AS (
                    UPDATE tether_runs SET status = 'running', pending = NULL,
                        pending_deadline = NULL, lease_expires_at = {NOW} + %(ttl)s::float8,
                        meta = (meta::jsonb || jsonb_build_object(%(key)s::text,
                            %(by)s::text))::text,
                        event_count = event_count + %(n)s
                    WHERE run_id = %(run_id)s AND status = 'paused'
                    RETURNING {_RUN_SELECT}, paused_turn, event_count
                ), {_INSERTS}
                SELECT * FROM bumped
                """,
                params,
            )
        return row

    async def renew_leases(self, run_ids: Sequence[str], *, lease_ttl: float) -> None:
        if not run_ids:
            return
        async with self._session() as conn:
            # Locked in run id order, as `append_events_many` locks them (see there).
            await execute(
                conn,
                f"UPDATE tether_runs AS r SET lease_expires_at = {NOW} + %s"
                " FROM (SELECT run_id FROM tether_runs"
                " WHERE status = 'running' AND run_id = ANY(%s::text[])"
                " ORDER BY run_id FOR NO KEY UPDATE) AS l WHERE r.run_id = l.run_id",
                (lease_ttl, list(run_ids)),
            )

    async def request_cancel(self, run_id: str) -> bool:
        async with self._session() as conn:
            row = await fetch_one(
                conn,
                "UPDATE tether_runs SET meta ="
                " (meta::jsonb || jsonb_build_object(%s::text, %s::float8))::text"
                " WHERE run_id = %s AND status = 'running' RETURNING 1",
                (CANCEL_REQUESTED, time.time(), run_id),
            )
        return row is not None

    async def cancel_requests(self, run_ids: Sequence[str]) -> list[str]:
        if not run_ids:
            return []
        async with self._session() as conn:
            rows = await fetch_all(
                conn,
                "SELECT run_id FROM tether_runs WHERE run_id = ANY(%s) AND meta::jsonb ? %s",
                (list(run_ids), CANCEL_REQUESTED),
            )
        return [str(r[0]) for r in rows]
