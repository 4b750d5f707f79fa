"""What the SQLite and PostgreSQL run stores share above their connections (see
`tether.stores._sql`): the reads (and `EventPieces`), and the encodings and decodings of
`start_run`, `finish_run` and `resume_run`, with a hook each for the backend's statement."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Unpack

from ..errors import StoreError
from ._codecs import (
    RunFinish,
    decode_cursor,
    decode_event,
    decode_turn,
    encode_events,
    encode_run_info,
    listing_filters,
    not_paused,
    plan_finish,
    query_where,
    run_info_from_row,
    run_page,
    run_tags,
    totals_from_row,
    totals_sql,
    where_equal,
)
from ._sql import Row, SqlBacked
from .run_store import (
    PausedRun,
    RunEnd,
    RunEvent,
    RunInfo,
    RunListing,
    RunPage,
    RunQuery,
    RunResume,
    RunTotals,
    StoredEvent,
)
from .workflow_store import RunStatus

__all__ = ["NewRun", "SqlRunReads", "SqlRunStore"]


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


@dataclass(frozen=True, slots=True)
class NewRun:
    """A `start_run`, encoded for `SqlRunStore._start`."""

    info: RunInfo
    row: tuple[Any, ...]
    """`encode_run_info(info)`: the values of `RUN_INFO_COLUMNS`."""
    tags: list[str]
    """`run_tags(info)`."""
    lease_ttl: float | None
    lease: str | None


class SqlRunStore(SqlRunReads):
    """A SQL `RunStore` but for most of its statements: the reads, and the encodings and
    decodings of `start_run`, `finish_run` and `resume_run`, written once. The backend runs each
    of those as one statement or transaction in its dialect (`_start`, `_finish_planned`,
    `_resume`), given the encoded values."""

    blob_threshold: int
    """Inline media over this many bytes is stored as a blob (the backend's `BlobWriting`)."""

    async def _start(self, run: NewRun) -> bool:
        """Insert the run, its tags and its lease; False (and nothing written) when its id is
        taken."""
        raise NotImplementedError

    async def _finish_planned(self, run_id: str, status: RunStatus, plan: RunFinish) -> int:
        """Write a `plan_finish` in one transaction; the seq of the run's last event.

        Raises:
            LeaseLostError: the plan's fence is another writer's now (nothing written).
            StoreError: the run was never started.
        """
        raise NotImplementedError

    async def _resume(
        self, run_id: str, rows: list[tuple[str, float, str]], resume: RunResume
    ) -> Row | None:
        """In one conditional write, set paused run `run_id` running (its pending calls gone,
        `resumed_by` in its meta under `RESUMED_BY`, its lease `lease_ttl`) and append the
        `encode_events` `rows`: the run's row (`run_select`), then its paused turn and the seq
        of its last event. None (and nothing written) when the run is not paused."""
        raise NotImplementedError

    async def start_run(
        self, info: RunInfo, *, lease_ttl: float | None = None, lease: str | None = None
    ) -> None:
        if not await self._start(
            NewRun(info, encode_run_info(info), run_tags(info), lease_ttl, lease)
        ):
            raise StoreError(f"run {info.run_id!r} already exists")

    async def finish_run(self, run_id: str, status: RunStatus, **end: Unpack[RunEnd]) -> int:
        plan = plan_finish(run_id, status, end, self.blob_threshold)
        return await self._finish_planned(run_id, status, plan)

    async def resume_run(self, run_id: str, **resume: Unpack[RunResume]) -> PausedRun:
        row = await self._resume(run_id, encode_events(run_id, resume.get("events", ())), resume)
        if row is None:
            # Of two resumers, the second matched no paused row: why (its status, who took it).
            now = await self._run_row(run_id)
            raise (
                not_paused(run_id, None, None)
                if now is None
                else not_paused(run_id, now[3], now[11])
            )
        return PausedRun(run_info_from_row(row[:-2]), decode_turn(run_id, row[-2]), int(row[-1]))
