"""RunStore: the record of what ran, for the CLI and the inspection UI.

A run is one agent episode or one workflow run. It has a summary row (`RunInfo`: kind, name,
status, tags, the memory scope and workflow it belongs to) and an ordered list of events
(`RunEvent`: `agent_started`, `agent_text_delta`, `agent_messages_committed`, `agent_finished`,
`agent_failed`, `agent_warning`, and the workflow engine's own). The store numbers each run's
events from 1, so a reader can tail a live run with `events(run_id, after=last_seq)`.

Three implementations pass one contract suite (`tests/stores/test_run_store.py`):
`InMemoryRunStore`, `SqliteRunStore` and `PostgresRunStore` (in `tether.stores.postgres`).
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from os import PathLike
from typing import Any, Protocol, TypedDict

from .._json import check_json_safe, dumps
from ..errors import StoreCorruptError, StoreError
from ._sql import where_equal
from .sqlite import Migrations, SqliteBacked, connect, transaction
from .workflow_store import RUN_STATUSES, RunStatus

__all__ = [
    "InMemoryRunStore",
    "NewRunEvent",
    "RunEvent",
    "RunInfo",
    "RunStore",
    "SqliteRunStore",
]

_STATUSES = RUN_STATUSES


@dataclass(slots=True, frozen=True)
class RunInfo:
    """The summary of one run."""

    run_id: str
    kind: str
    """``"agent"`` for an episode, ``"workflow"`` for a workflow run."""
    name: str
    """The agent id or workflow id."""
    status: RunStatus = "running"
    started_at: float = 0.0
    """Unix time the run started."""
    ended_at: float | None = None
    """Unix time it completed, failed or was cancelled."""
    tags: list[str] = field(default_factory=list)
    memory_scope: str | None = None
    """The conversation an episode ran on."""
    workflow_run_id: str | None = None
    """The workflow run an episode (or a nested workflow run) belongs to."""
    step_id: str | None = None
    """The workflow step it ran inside, if any."""
    error: str | None = None
    """Why a failed run failed."""
    meta: dict[str, Any] = field(default_factory=dict)
    """Anything else the writer wants listed (JSON-safe)."""


class NewRunEvent(TypedDict):
    """An event as a writer hands it in; the store adds `run_id` and `seq`."""

    type: str
    at: float
    data: dict[str, Any]


class RunEvent(TypedDict):
    """A stored event of one run."""

    run_id: str
    seq: int
    """1, 2, 3 ... per run, in the order the events were appended."""
    type: str
    at: float
    """Unix time."""
    data: dict[str, Any]


class RunStore(Protocol):
    """Run summaries and their ordered events."""

    async def start_run(self, info: RunInfo) -> None:
        """Create the summary of a new run.

        Raises:
            StoreError: a run with that id already exists.
        """
        ...

    async def append_events(self, run_id: str, events: Sequence[NewRunEvent]) -> int:
        """Append events to a started run atomically; return the seq of the last one.

        Raises:
            StoreError: the run does not exist; nothing is written.
            NotJSONSafeError: an event's data would not survive JSON; nothing is written.
        """
        ...

    async def finish_run(
        self,
        run_id: str,
        status: RunStatus,
        *,
        ended_at: float | None = None,
        error: str | None = None,
    ) -> None:
        """Set the final status of a run (and why, for a failure). Setting "running" again
        (a resumed workflow run) clears the end time."""
        ...

    async def get_run(self, run_id: str) -> RunInfo | None:
        """The summary of one run, or None."""
        ...

    async def list_runs(
        self,
        *,
        kind: str | None = None,
        workflow_run_id: str | None = None,
        memory_scope: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> list[RunInfo]:
        """Runs, newest first, optionally only one kind, workflow run or scope."""
        ...

    async def events(self, run_id: str, *, after: int = 0) -> list[RunEvent]:
        """The events of a run with seq greater than `after`, in order."""
        ...

    async def aclose(self) -> None:
        """Release what the store opened itself; idempotent."""
        ...


def _check_info(info: RunInfo) -> None:
    if not isinstance(info.run_id, str) or not info.run_id:
        raise StoreError(f"run_id must be a non-empty string, got {info.run_id!r}")
    if info.status not in _STATUSES:
        raise StoreError(f"run status must be one of {_STATUSES}, got {info.status!r}")
    check_json_safe(list(info.tags), "tags")
    check_json_safe(info.meta, "meta")


def _encode_events(run_id: str, events: Sequence[NewRunEvent]) -> list[tuple[str, float, str]]:
    out: list[tuple[str, float, str]] = []
    for i, ev in enumerate(events):
        if not isinstance(ev, dict) or not isinstance(ev.get("type"), str):
            raise StoreError(f"events[{i}] of run {run_id!r} needs a string 'type'")
        data = ev.get("data", {})
        if not isinstance(data, dict):
            raise StoreError(f"events[{i}] of run {run_id!r}: data must be a dict")
        check_json_safe(data, f"events[{i}].data")
        at = ev.get("at")
        out.append((ev["type"], float(at) if at is not None else time.time(), dumps(data)))
    return out


def _end_time(status: str, ended_at: float | None) -> float | None:
    """A resumed run ("running" again) has no end yet; a finished one ends now by default."""
    if status == "running":
        return None
    return ended_at if ended_at is not None else time.time()


def _check_status(status: str) -> None:
    if status not in _STATUSES:
        raise StoreError(f"run status must be one of {_STATUSES}, got {status!r}")


# -- in memory -------------------------------------------------------------------------------


class InMemoryRunStore:
    """A RunStore in dicts. Data is kept as JSON text, so readers get copies. Thread-safe."""

    def __init__(self) -> None:
        self._runs: dict[str, RunInfo] = {}
        self._order: list[str] = []
        self._events: dict[str, list[tuple[str, float, str]]] = {}
        self._lock = threading.Lock()

    async def start_run(self, info: RunInfo) -> None:
        _check_info(info)
        info = replace(info, tags=list(info.tags), meta=json.loads(dumps(info.meta)))
        with self._lock:
            if info.run_id in self._runs:
                raise StoreError(f"run {info.run_id!r} already exists")
            self._runs[info.run_id] = info
            self._order.append(info.run_id)
            self._events[info.run_id] = []

    async def append_events(self, run_id: str, events: Sequence[NewRunEvent]) -> int:
        encoded = _encode_events(run_id, events)
        with self._lock:
            log = self._events.get(run_id)
            if log is None:
                raise StoreError(f"run {run_id!r} was never started")
            log.extend(encoded)
            return len(log)

    async def finish_run(
        self,
        run_id: str,
        status: RunStatus,
        *,
        ended_at: float | None = None,
        error: str | None = None,
    ) -> None:
        _check_status(status)
        with self._lock:
            info = self._runs.get(run_id)
            if info is None:
                raise StoreError(f"run {run_id!r} was never started")
            self._runs[run_id] = replace(
                info,
                status=status,
                ended_at=_end_time(status, ended_at),
                error=error,
            )

    async def get_run(self, run_id: str) -> RunInfo | None:
        with self._lock:
            info = self._runs.get(run_id)
        return _copy_info(info) if info is not None else None

    async def list_runs(
        self,
        *,
        kind: str | None = None,
        workflow_run_id: str | None = None,
        memory_scope: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> list[RunInfo]:
        with self._lock:
            infos = [self._runs[r] for r in reversed(self._order)]
        picked = [
            i
            for i in infos
            if (kind is None or i.kind == kind)
            and (workflow_run_id is None or i.workflow_run_id == workflow_run_id)
            and (memory_scope is None or i.memory_scope == memory_scope)
        ]
        # Newest first; among equal start times, the later start_run() first.
        picked.sort(key=lambda i: i.started_at, reverse=True)
        return [_copy_info(i) for i in picked[offset : offset + limit]]

    async def events(self, run_id: str, *, after: int = 0) -> list[RunEvent]:
        with self._lock:
            log = list(self._events.get(run_id, ())[max(after, 0) :])
        start = max(after, 0)
        return [
            _event(run_id, start + i + 1, kind, at, raw) for i, (kind, at, raw) in enumerate(log)
        ]

    async def aclose(self) -> None:
        return None


def _copy_info(info: RunInfo) -> RunInfo:
    return replace(info, tags=list(info.tags), meta=json.loads(dumps(info.meta)))


def _event(run_id: str, seq: int, kind: str, at: float, raw: str) -> RunEvent:
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise StoreCorruptError(f"run {run_id!r}, event {seq}: data is not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise StoreCorruptError(f"run {run_id!r}, event {seq}: data is not an object")
    return {"run_id": run_id, "seq": seq, "type": kind, "at": at, "data": data}


# -- SQLite ----------------------------------------------------------------------------------

run_migrations = Migrations("runs")


@run_migrations
def m001_create_run_tables(conn: sqlite3.Connection) -> None:
    conn.execute(
        "CREATE TABLE runs ("
        " run_id TEXT PRIMARY KEY,"
        " kind TEXT NOT NULL,"
        " name TEXT NOT NULL,"
        " status TEXT NOT NULL,"
        " started_at REAL NOT NULL,"
        " ended_at REAL,"
        " tags TEXT NOT NULL,"
        " memory_scope TEXT,"
        " workflow_run_id TEXT,"
        " step_id TEXT,"
        " error TEXT,"
        " meta TEXT NOT NULL,"
        " event_count INTEGER NOT NULL DEFAULT 0)"
    )
    conn.execute(
        "CREATE TABLE run_events ("
        " run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,"
        " seq INTEGER NOT NULL,"
        " type TEXT NOT NULL,"
        " at REAL NOT NULL,"
        " data TEXT NOT NULL,"
        " PRIMARY KEY (run_id, seq)) WITHOUT ROWID"
    )
    conn.execute("CREATE INDEX runs_started ON runs (started_at)")
    conn.execute("CREATE INDEX runs_workflow ON runs (workflow_run_id)")
    conn.execute("CREATE INDEX runs_scope ON runs (memory_scope)")


_INFO_COLUMNS = (
    "run_id, kind, name, status, started_at, ended_at, tags, memory_scope, workflow_run_id,"
    " step_id, error, meta"
)


def _info_from_row(row: tuple[Any, ...]) -> RunInfo:
    run_id, kind, name, status, started, ended, tags, scope, wf, step, error, meta = row
    try:
        tag_list = json.loads(tags)
        meta_dict = json.loads(meta)
    except ValueError as exc:
        raise StoreCorruptError(f"run {run_id!r}: tags or meta are not JSON: {exc}") from exc
    return RunInfo(
        run_id=run_id,
        kind=kind,
        name=name,
        status=status,
        started_at=started,
        ended_at=ended,
        tags=tag_list,
        memory_scope=scope,
        workflow_run_id=wf,
        step_id=step,
        error=error,
        meta=meta_dict,
    )


class SqliteRunStore(SqliteBacked):
    """A RunStore in SQLite. Takes its connection from the caller and migrates on construction;
    `SqliteRunStore.open(path)` opens (and later closes) its own."""

    def __init__(self, conn: sqlite3.Connection, *, owns: bool = False) -> None:
        super().__init__(conn, owns=owns)
        self._sync(run_migrations.apply)

    @classmethod
    def open(cls, path: str | PathLike[str]) -> SqliteRunStore:
        """Open (creating if needed) the database at `path` with a connection of its own."""
        return cls(connect(path), owns=True)

    async def start_run(self, info: RunInfo) -> None:
        _check_info(info)

        def op(conn: sqlite3.Connection) -> None:
            with transaction(conn):
                exists = conn.execute(
                    "SELECT 1 FROM runs WHERE run_id = ?", (info.run_id,)
                ).fetchone()
                if exists:
                    raise StoreError(f"run {info.run_id!r} already exists")
                conn.execute(
                    f"INSERT INTO runs ({_INFO_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                    (
                        info.run_id,
                        info.kind,
                        info.name,
                        info.status,
                        info.started_at,
                        info.ended_at,
                        dumps(list(info.tags)),
                        info.memory_scope,
                        info.workflow_run_id,
                        info.step_id,
                        info.error,
                        dumps(info.meta),
                    ),
                )

        await self._run(op)

    async def append_events(self, run_id: str, events: Sequence[NewRunEvent]) -> int:
        encoded = _encode_events(run_id, events)

        def op(conn: sqlite3.Connection) -> int:
            with transaction(conn):
                row = conn.execute(
                    "SELECT event_count FROM runs WHERE run_id = ?", (run_id,)
                ).fetchone()
                if row is None:
                    raise StoreError(f"run {run_id!r} was never started")
                base = int(row[0])
                conn.executemany(
                    "INSERT INTO run_events (run_id, seq, type, at, data) VALUES (?, ?, ?, ?, ?)",
                    [(run_id, base + i + 1, k, at, raw) for i, (k, at, raw) in enumerate(encoded)],
                )
                total = base + len(encoded)
                conn.execute("UPDATE runs SET event_count = ? WHERE run_id = ?", (total, run_id))
                return total

        return await self._run(op)

    async def finish_run(
        self,
        run_id: str,
        status: RunStatus,
        *,
        ended_at: float | None = None,
        error: str | None = None,
    ) -> None:
        _check_status(status)
        end = _end_time(status, ended_at)

        def op(conn: sqlite3.Connection) -> None:
            cur = conn.execute(
                "UPDATE runs SET status = ?, ended_at = ?, error = ? WHERE run_id = ?",
                (status, end, error, run_id),
            )
            if cur.rowcount == 0:
                raise StoreError(f"run {run_id!r} was never started")

        await self._run(op)

    async def get_run(self, run_id: str) -> RunInfo | None:
        def op(conn: sqlite3.Connection) -> tuple[Any, ...] | None:
            row: tuple[Any, ...] | None = conn.execute(
                f"SELECT {_INFO_COLUMNS} FROM runs WHERE run_id = ?", (run_id,)
            ).fetchone()
            return row

        row = await self._run(op)
        return _info_from_row(row) if row is not None else None

    async def list_runs(
        self,
        *,
        kind: str | None = None,
        workflow_run_id: str | None = None,
        memory_scope: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> list[RunInfo]:
        clause, args = where_equal(
            "?", kind=kind, workflow_run_id=workflow_run_id, memory_scope=memory_scope
        )

        def op(conn: sqlite3.Connection) -> list[tuple[Any, ...]]:
            return conn.execute(
                f"SELECT {_INFO_COLUMNS} FROM runs{clause}"
                " ORDER BY started_at DESC, rowid DESC LIMIT ? OFFSET ?",
                (*args, limit, offset),
            ).fetchall()

        return [_info_from_row(row) for row in await self._run(op)]

    async def events(self, run_id: str, *, after: int = 0) -> list[RunEvent]:
        def op(conn: sqlite3.Connection) -> list[tuple[int, str, float, str]]:
            return conn.execute(
                "SELECT seq, type, at, data FROM run_events WHERE run_id = ? AND seq > ?"
                " ORDER BY seq",
                (run_id, after),
            ).fetchall()

        return [_event(run_id, seq, k, at, raw) for seq, k, at, raw in await self._run(op)]
