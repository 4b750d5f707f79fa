"""What the SQLite and PostgreSQL stores share above their connections: the reads whose SQL
is the same in both dialects, written once.

A backend gives two hooks, `SqlBacked._one` and `SqlBacked._all` (run one statement, return
its first row or all of them), and a `Dialect` (the placeholder, the column that orders rows
inserted at the same time, the database's clock). What differs in more than those — the
writes, with their upserts, `RETURNING` and fencing — stays in each backend's module; where
only the statement differs, the checks and encodings around it are here, and the backend gives
a hook for the statement (`SqlWorkflowStore._let_go`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, TypeAlias, Unpack

from ..errors import StoreError
from ._codecs import (
    LAST_INDEX,
    NOW_SQL,
    SCOPE_COLUMNS,
    STEP_COLUMNS,
    check_finish,
    decode_cursor,
    decode_event,
    decode_records,
    encode_json,
    encode_wait,
    listing_filters,
    new_run_values,
    query_where,
    run_from_row,
    run_info_from_row,
    run_info_select,
    run_page,
    run_select,
    step_from_row,
    title_like,
    totals_from_row,
    totals_sql,
    where_equal,
)
from .message_store import ScopeInfo, StoredRecord
from .run_store import (
    RunEvent,
    RunInfo,
    RunListing,
    RunPage,
    RunQuery,
    RunTotals,
    StoredEvent,
)
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

__all__ = [
    "POSTGRES",
    "SQLITE",
    "Dialect",
    "Row",
    "SqlBacked",
    "SqlMessageReads",
    "SqlRunReads",
    "SqlWorkflowReads",
    "SqlWorkflowStore",
]

Row: TypeAlias = tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class Dialect:
    """The few words of SQL the two backends spell differently."""

    name: Literal["sqlite", "postgres"]
    mark: str
    """The parameter placeholder."""
    rowid: str
    """The column that orders a table's rows by insertion (ties of equal times)."""
    all_rows: int | None
    """The LIMIT that means no limit."""
    now: str = field(init=False)
    """The database's clock in Unix seconds (`NOW_SQL`)."""
    run_select: str = field(init=False)
    """`run_info_select` of `tether_runs`, and of it aliased `r`."""
    run_select_r: str = field(init=False)
    workflow_select: str = field(init=False)
    """`run_select` of `tether_workflow_runs` (`RUN_COLUMNS`)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "now", NOW_SQL[self.name])
        object.__setattr__(self, "run_select", run_info_select(self.name))
        object.__setattr__(self, "run_select_r", run_info_select(self.name, "r"))
        object.__setattr__(self, "workflow_select", run_select(NOW_SQL[self.name]))


SQLITE = Dialect("sqlite", "?", "rowid", -1)
POSTGRES = Dialect("postgres", "%s", "id", None)


class SqlBacked:
    """The two hooks a SQL backend gives the shared reads."""

    _sql: ClassVar[Dialect]

    async def _one(self, sql: str, args: Sequence[Any] = ()) -> Row | None:
        """The first row of one statement, or None."""
        raise NotImplementedError

    async def _all(self, sql: str, args: Sequence[Any] = ()) -> list[Row]:
        """Every row of one statement."""
        raise NotImplementedError


class SqlMessageReads(SqlBacked):
    """The reads of a SQL `MessageStore`."""

    async def load(
        self, scope: str, *, start: int = 0, end: int | None = None, after: int | None = None
    ) -> list[StoredRecord]:
        if after is not None:
            start = max(start, after + 1)
        m = self._sql.mark
        rows = await self._all(
            f"SELECT seq, record FROM tether_messages WHERE scope = {m} AND seq >= {m}"
            f" AND seq < {m} ORDER BY seq",
            (scope, max(start, 0), LAST_INDEX if end is None else end),
        )
        return decode_records(scope, int(rows[0][0]) if rows else 0, [raw for _, raw in rows])

    async def tail(self, scope: str, n: int) -> tuple[int, list[StoredRecord]]:
        m = self._sql.mark
        rows = await self._all(
            f"SELECT seq, record FROM tether_messages WHERE scope = {m} ORDER BY seq DESC"
            f" LIMIT {m}",
            (scope, max(n, 0)),
        )
        rows.reverse()
        start = int(rows[0][0]) if rows else 0
        return start, decode_records(scope, start, [raw for _, raw in rows])

    async def length(self, scope: str) -> int:
        row = await self._one(
            f"SELECT length FROM tether_message_scopes WHERE scope = {self._sql.mark}", (scope,)
        )
        return int(row[0]) if row is not None else 0

    async def get_title(self, scope: str) -> str | None:
        info = await self.info(scope)
        return info.title if info is not None else None

    async def info(self, scope: str) -> ScopeInfo | None:
        row = await self._one(
            f"SELECT {SCOPE_COLUMNS} FROM tether_message_scopes WHERE scope = {self._sql.mark}",
            (scope,),
        )
        return ScopeInfo(*row) if row is not None else None

    async def scopes(
        self, *, limit: int = 100, offset: int = 0, title: str | None = None
    ) -> list[ScopeInfo]:
        m = self._sql.mark
        where, args = ("", []) if title is None else title_like(title, m)
        rows = await self._all(
            f"SELECT {SCOPE_COLUMNS} FROM tether_message_scopes{where}"
            f" ORDER BY updated_at DESC, {self._sql.rowid} DESC LIMIT {m} OFFSET {m}",
            (*args, limit, offset),
        )
        return [ScopeInfo(*row) for row in rows]


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


class SqlRunReads(SqlBacked):
    """The reads of a SQL `RunStore` (and its `EventPieces`)."""

    async def get_run(self, run_id: str) -> RunInfo | None:
        row = await self._run_row(run_id)
        return run_info_from_row(row) if row is not None else None

    async def _run_row(self, run_id: str) -> Row | None:
        return await self._one(
            f"SELECT {self._sql.run_select} FROM tether_runs WHERE run_id = {self._sql.mark}",
            (run_id,),
        )

    async def list_runs(self, **listing: Unpack[RunListing]) -> list[RunInfo]:
        d = self._sql
        clause, args = where_equal(d.mark, **listing_filters(listing))
        rows = await self._all(
            f"SELECT {d.run_select} FROM tether_runs{clause}"
            f" ORDER BY started_at DESC, {d.rowid} DESC LIMIT {d.mark} OFFSET {d.mark}",
            (*args, listing.get("limit", 50), listing.get("offset", 0)),
        )
        return [run_info_from_row(row) for row in rows]

    async def query_runs(
        self, query: RunQuery, *, limit: int = 50, cursor: str | None = None
    ) -> RunPage:
        d = self._sql
        conds, args = query_where(query, d.mark, d.name)
        if cursor is not None:
            started, seq = decode_cursor(cursor)
            conds.append(f"(r.started_at, r.{d.rowid}) < ({d.mark}, {d.mark})")
            args.extend((started, seq))
        where = (" WHERE " + " AND ".join(conds)) if conds else ""
        rows = await self._all(
            f"SELECT {d.run_select_r}, r.{d.rowid} FROM tether_runs r{where}"
            f" ORDER BY r.started_at DESC, r.{d.rowid} DESC LIMIT {d.mark}",
            (*args, limit + 1),
        )
        return run_page(rows, limit)

    async def run_totals(self, query: RunQuery) -> RunTotals:
        conds, args = query_where(query, self._sql.mark, self._sql.name)
        where = (" WHERE " + " AND ".join(conds)) if conds else ""
        row = await self._one(
            f"SELECT {totals_sql(self._sql.name)} FROM tether_runs r{where}", args
        )
        assert row is not None  # an aggregate has one row
        return totals_from_row(row)

    async def expired_pauses(self, *, limit: int = 100) -> list[str]:
        rows = await self._all(
            "SELECT run_id FROM tether_runs WHERE pending_deadline IS NOT NULL"
            f" AND pending_deadline <= {self._sql.now} AND status = 'paused'"
            f" ORDER BY pending_deadline LIMIT {self._sql.mark}",
            (limit,),
        )
        return [str(r[0]) for r in rows]

    async def _event_rows(
        self, run_id: str, after: int, limit: int | None
    ) -> list[tuple[int, str, float, str]]:
        m = self._sql.mark
        rows = await self._all(
            "SELECT seq, type, at, data FROM tether_run_events"
            f" WHERE run_id = {m} AND seq > {m} ORDER BY seq LIMIT {m}",
            (run_id, after, self._sql.all_rows if limit is None else max(limit, 0)),
        )
        return [(int(seq), kind, at, raw) for seq, kind, at, raw in rows]

    async def events(
        self, run_id: str, *, after: int = 0, limit: int | None = None
    ) -> list[RunEvent]:
        out = []
        for seq, kind, at, raw in await self._event_rows(run_id, after, limit):
            if not raw:  # stored in pieces (written with its row, in one transaction): read whole
                raw = "".join(await self.event_pieces(run_id, seq, limit=self._sql.all_rows))
            out.append(decode_event(run_id, seq, kind, at, raw))
        return out

    async def stored_events(
        self, run_id: str, *, after: int = 0, limit: int | None = None
    ) -> list[StoredEvent]:
        rows = await self._event_rows(run_id, after, limit)
        return [StoredEvent(seq, kind, at, raw or None) for seq, kind, at, raw in rows]

    async def event_pieces(
        self, run_id: str, seq: int, *, start: int = 0, limit: int | None = 16
    ) -> list[str]:
        m = self._sql.mark
        rows = await self._all(
            f"SELECT text FROM tether_run_event_pieces WHERE run_id = {m} AND seq = {m}"
            f" AND piece >= {m} ORDER BY piece LIMIT {m}",
            (run_id, seq, start, limit),
        )
        return [text for (text,) in rows]
