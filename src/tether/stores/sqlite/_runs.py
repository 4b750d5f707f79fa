"""`SqliteRunStore`: run summaries, their events, tags and full-text search."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from typing import Any, Final, Unpack

from ...errors import LeaseLostError, StoreError
from .._codecs import (
    RUN_INFO_COLUMNS,
    RunFinish,
    encode_batches,
    encode_new_records,
    finish_sets,
    in_pieces,
    plan_finish,
)
from .._sql import SQLITE
from .._sql_runs import NewRun, SqlRunStore
from ..run_store import (
    CANCEL_REQUESTED,
    RESUMED_BY,
    EventBatch,
    NewRunEvent,
    RunEnd,
    RunResume,
    ScopeAppend,
)
from ..workflow_store import RunStatus
from ._blobs import BlobWriting, insert_blobs
from ._connection import NOW, transaction
from ._leases import release_lease
from ._messages import SqliteMessageStore, append_rows

__all__ = ["SqliteRunStore"]

_FENCE = "(? IS NULL OR lease_owner IS NULL OR lease_owner = ?)"
"""A write under a lease token (bound twice) matches the run only while the token is its own."""


def _refused(conn: sqlite3.Connection, run_id: str) -> StoreError:
    """Why a fenced write of `run_id` matched no row: no such run, or another lease token."""
    row = conn.execute("SELECT lease_owner FROM tether_runs WHERE run_id = ?", (run_id,)).fetchone()
    if row is None:
        return StoreError(f"run {run_id!r} was never started")
    return LeaseLostError("run", run_id, row[0])


_RUN_SELECT = SQLITE.run_select
_RUN_MARKS = ", ".join("?" * len(RUN_INFO_COLUMNS.split(",")))


def _insert_events(
    conn: sqlite3.Connection, run_id: str, base: int, rows: Sequence[tuple[str, float, str]]
) -> None:
    """Write encoded events numbered from `base + 1`, a long one in pieces."""
    rows, pieces = in_pieces(rows)
    conn.executemany(
        "INSERT INTO tether_run_events (run_id, seq, type, at, data) VALUES (?, ?, ?, ?, ?)",
        [(run_id, base + i + 1, k, at, raw) for i, (k, at, raw) in enumerate(rows)],
    )
    if pieces:
        conn.executemany(
            "INSERT INTO tether_run_event_pieces (run_id, seq, piece, text) VALUES (?, ?, ?, ?)",
            [(run_id, base + i + 1, n, text) for i, n, text in pieces],
        )


_LIVE: Final = ("running", "waiting", "paused")
"""The statuses of a run that has not ended: its text is not in the search index yet (a query
finds it by its words all the same, `tether_has_words`)."""

INDEX_BATCH: Final = 16
"""Ended runs go into the search index together: when a run whose rowid is a multiple of this
ends, every ended run not in the index yet goes in, one FTS5 segment for them all (an insert
per run wrote a segment, its structure and its doc size each time: a fifth of a turn's pages).
Until then a search matches such a run by its words (`tether_has_words`), as it does a live
one."""

_ENDED_UNINDEXED: Final = f"unindexed AND status NOT IN {_LIVE!r}"
"""The runs `_index_ended` puts into the search index (read through `tether_runs_unindexed`)."""


class _Moved(Exception):
    """The scope of a turn's end was not as long as its writer knew: nothing was written."""


def _index_ended(conn: sqlite3.Connection) -> None:
    """Put every ended run not in the search index yet into it (inside the caller's
    transaction)."""
    conn.execute(
        "INSERT OR REPLACE INTO tether_runs_fts (rowid, body) SELECT rowid,"
        f" input_text || char(10) || output_text FROM tether_runs WHERE {_ENDED_UNINDEXED}"
    )
    conn.execute(f"UPDATE tether_runs SET unindexed = 0 WHERE {_ENDED_UNINDEXED}")


def _finish(conn: sqlite3.Connection, run_id: str, status: RunStatus, plan: RunFinish) -> int:
    """A planned `finish_run` inside the caller's transaction; the seq of the run's last event."""
    rows, extra = plan.events, plan.columns
    insert_blobs(conn, plan.blobs)
    row = conn.execute(
        f"UPDATE tether_runs SET status = ?, ended_at = ?, error = ?"
        f"{finish_sets('?', extra)}, lease_expires_at = {NOW} + ?,"
        " event_count = event_count + ?"
        f" WHERE run_id = ? AND {_FENCE}"
        " RETURNING rowid, input_text, output_text, event_count, unindexed",
        (
            status,
            plan.ended_at,
            plan.error,
            *extra.values(),
            plan.ttl,
            len(rows),
            run_id,
            plan.fence,
            plan.fence,
        ),
    ).fetchone()
    if row is None:
        raise _refused(conn, run_id)
    rowid, input_text, output_text, last, unindexed = row
    if rows:
        _insert_events(conn, run_id, last - len(rows), rows)
    ended = status not in _LIVE
    if not unindexed:
        # In the index already (recorded as it ended, or stored before runs were indexed as
        # they end): its new text replaces the old at once.
        if ended or "output_text" in extra:
            conn.execute(
                "INSERT OR REPLACE INTO tether_runs_fts (rowid, body) VALUES (?, ?)",
                (rowid, f"{input_text}\n{output_text}"),
            )
    elif ended and rowid % INDEX_BATCH == 0:
        _index_ended(conn)
    return int(last)


class SqliteRunStore(SqlRunStore, BlobWriting):
    """A RunStore in SQLite. Takes its connection from the caller and migrates on construction
    (`blob_threshold=`); `SqliteRunStore.open(path)` opens (and later closes) its own.

    Media data over `blob_threshold` bytes in an event (a request record, committed messages)
    is kept once in the file's blobs table, and the event holds a reference (`tether.blobs`)."""

    async def _start(self, run: NewRun) -> bool:
        info, row, tags = run.info, run.row, run.tags
        live = info.status in _LIVE

        def insert(conn: sqlite3.Connection) -> int | None:
            """The new run's rowid; None when its id is taken."""
            try:
                return conn.execute(
                    f"INSERT INTO tether_runs ({RUN_INFO_COLUMNS}, lease_expires_at,"
                    f" lease_owner, unindexed) VALUES ({_RUN_MARKS}, {NOW} + ?, ?, ?)",
                    (*row, run.lease_ttl, run.lease, live),
                ).lastrowid
            except sqlite3.IntegrityError:
                return None

        def op(conn: sqlite3.Connection) -> bool:
            if live and not tags:
                return insert(conn) is not None  # one statement: a transaction of its own
            with transaction(conn):
                rowid = insert(conn)
                if rowid is None:
                    return False
                if tags:
                    conn.executemany(
                        "INSERT OR IGNORE INTO tether_run_tags (tag, run_id) VALUES (?, ?)",
                        [(tag, info.run_id) for tag in tags],
                    )
                if not live:  # an ended run's text is indexed now; a live run's when it ends
                    conn.execute(
                        "INSERT INTO tether_runs_fts (rowid, body) VALUES (?, ?)",
                        (rowid, f"{row[17]}\n{row[18]}"),
                    )
            return True

        return await self._run(op)

    async def append_events(
        self, run_id: str, events: Sequence[NewRunEvent], *, lease: str | None = None
    ) -> int:
        (last,) = await self.append_events_many([(run_id, events, lease)])
        return last

    async def append_events_many(self, batches: Sequence[EventBatch]) -> list[int]:
        encoded, blobs = encode_batches(batches, self.blob_threshold)

        def op(conn: sqlite3.Connection) -> list[int]:
            lasts: list[int] = []
            with transaction(conn):
                insert_blobs(conn, blobs)
                for run_id, rows, lease in encoded:
                    # The run row's count is bumped first (as on PostgreSQL): one statement says
                    # where the events go, and whether this writer still holds the run, under
                    # the write lock this transaction holds.
                    row = conn.execute(
                        "UPDATE tether_runs SET event_count = event_count + ? WHERE run_id = ?"
                        f" AND {_FENCE} RETURNING event_count",
                        (len(rows), run_id, lease, lease),
                    ).fetchone()
                    if row is None:
                        raise _refused(conn, run_id)
                    total = int(row[0])
                    base = total - len(rows)
                    _insert_events(conn, run_id, base, rows)
                    lasts.append(total)
            return lasts

        return await self._run(op)

    async def _finish_planned(self, run_id: str, status: RunStatus, plan: RunFinish) -> int:
        def op(conn: sqlite3.Connection) -> int:
            with transaction(conn):
                return _finish(conn, run_id, status, plan)

        return await self._run(op)

    async def finish_turn(
        self, run_id: str, status: RunStatus, append: ScopeAppend, **end: Unpack[RunEnd]
    ) -> int | None:
        messages = append.store
        if not isinstance(messages, SqliteMessageStore) or messages._shared is not self._shared:
            return None  # another database: two writes
        scope, lease, start = append.scope, append.lease, append.start
        encoded, blobs = encode_new_records(scope, append.records, messages.blob_threshold)
        plan = plan_finish(run_id, status, end, self.blob_threshold)
        now = time.time()

        def op(conn: sqlite3.Connection) -> int:
            with transaction(conn):
                if append_rows(conn, scope, encoded, blobs, lease, now) != start + len(encoded):
                    raise _Moved  # rolled back: another writer appended meanwhile
                if lease is not None:
                    release_lease(conn, scope, lease)
                return _finish(conn, run_id, status, plan)

        try:
            return await self._run(op)
        except _Moved:
            return None

    async def _resume(
        self, run_id: str, rows: list[tuple[str, float, str]], resume: RunResume
    ) -> tuple[Any, ...] | None:
        args = (resume.get("lease_ttl"), f"$.{RESUMED_BY}", resume["resumed_by"], len(rows), run_id)

        def op(conn: sqlite3.Connection) -> tuple[Any, ...] | None:
            with transaction(conn):
                # One conditional write under the write lock: of two resumers, the second
                # matches no paused row.
                row: tuple[Any, ...] | None = conn.execute(
                    "UPDATE tether_runs SET status = 'running', pending = NULL,"
                    f" pending_deadline = NULL, lease_expires_at = {NOW} + ?,"
                    " meta = json_set(meta, ?, ?), event_count = event_count + ?"
                    " WHERE run_id = ? AND status = 'paused'"
                    f" RETURNING {_RUN_SELECT}, paused_turn, event_count",
                    args,
                ).fetchone()
                if row is not None and rows:
                    _insert_events(conn, run_id, int(row[-1]) - len(rows), rows)
            return row

        return await self._run(op)

    async def renew_leases(self, run_ids: Sequence[str], *, lease_ttl: float) -> None:
        if not run_ids:
            return
        marks = ", ".join("?" * len(run_ids))

        def op(conn: sqlite3.Connection) -> None:
            conn.execute(
                f"UPDATE tether_runs SET lease_expires_at = {NOW} + ?"
                f" WHERE status = 'running' AND run_id IN ({marks})",
                (lease_ttl, *run_ids),
            )

        await self._run(op)

    async def request_cancel(self, run_id: str) -> bool:
        def op(conn: sqlite3.Connection) -> bool:
            with transaction(conn):
                row = conn.execute(
                    "UPDATE tether_runs SET meta = json_set(meta, ?, ?)"
                    " WHERE run_id = ? AND status = 'running' RETURNING 1",
                    (f"$.{CANCEL_REQUESTED}", time.time(), run_id),
                ).fetchone()
            return row is not None

        return await self._run(op)

    async def cancel_requests(self, run_ids: Sequence[str]) -> list[str]:
        if not run_ids:
            return []
        ids = list(run_ids)

        def op(conn: sqlite3.Connection) -> list[str]:
            marks = ", ".join("?" * len(ids))
            rows = conn.execute(
                f"SELECT run_id FROM tether_runs WHERE run_id IN ({marks})"
                " AND json_extract(meta, ?) IS NOT NULL",
                (*ids, f"$.{CANCEL_REQUESTED}"),
            ).fetchall()
            return [str(r[0]) for r in rows]

        return await self._run(op)
