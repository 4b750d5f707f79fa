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
import math
import re
import sqlite3
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from os import PathLike
from typing import Any, Protocol, TypedDict

from .._json import check_json_safe, dumps
from ..errors import ConfigError, StoreCorruptError, StoreError
from ._sql import where_equal
from .sqlite import Migrations, SqliteBacked, connect, transaction
from .workflow_store import RUN_STATUSES, RunStatus

__all__ = [
    "TEXT_LIMIT",
    "InMemoryRunStore",
    "NewRunEvent",
    "RunEvent",
    "RunInfo",
    "RunPage",
    "RunQuery",
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
    usage: dict[str, int] = field(default_factory=dict)
    """Token totals of the run's model calls (`Usage` keys), set when it ends."""
    cost_usd: float | None = None
    """What the run's model calls cost in US dollars; None when any of them has no known
    price (never a partial sum)."""
    input_text: str = ""
    """The run's input as plain text, cut at `TEXT_LIMIT` characters (searched by `q`)."""
    output_text: str = ""
    """Its output as plain text, cut the same way, set when it ends."""


TEXT_LIMIT = 2000
"""How many characters of a run's input and output are kept for listing and search."""


@dataclass(slots=True, frozen=True)
class RunQuery:
    """Which runs `RunStore.query_runs` returns. Every field that is set must match."""

    kind: str | None = None
    name: str | None = None
    """The agent id or workflow id."""
    status: str | None = None
    tag: str | None = None
    """Runs carrying this tag."""
    q: str | None = None
    """Free text: runs whose input or output has every word of it (each as a word prefix,
    case-insensitive)."""
    since: float | None = None
    """Started at or after this Unix time."""
    until: float | None = None
    """Started before this Unix time."""
    memory_scope: str | None = None
    workflow_run_id: str | None = None
    roots_only: bool = False
    """Only runs not nested in a workflow run."""
    agents: tuple[str, ...] | None = None
    """With `workflows`: only agent runs of these ids and workflow runs of those (runs of
    other kinds pass), as the UI's registry-listed runs."""
    workflows: tuple[str, ...] | None = None


@dataclass(slots=True, frozen=True)
class RunPage:
    """One page of `query_runs`: newest first, and the cursor of the next page (None: last)."""

    runs: list[RunInfo]
    next_cursor: str | None


def words(q: str | None) -> list[str]:
    """The words of a free-text query (letters, digits, `_`), lower-cased."""
    return re.findall(r"\w+", q.lower()) if q else []


def encode_cursor(started_at: float, seq: int) -> str:
    return f"{started_at!r}~{seq}"


def decode_cursor(cursor: str) -> tuple[float, int]:
    """The (started_at, order) a cursor from `RunPage.next_cursor` points after.

    Raises:
        ConfigError: not such a cursor.
    """
    started, sep, seq = cursor.partition("~")
    try:
        if not sep:
            raise ValueError(cursor)
        value = (float(started), int(seq))
    except ValueError:
        raise ConfigError(
            f"cursor {cursor!r:.80} is not one a run list returned; start again without it"
        ) from None
    if not math.isfinite(value[0]):
        raise ConfigError(f"cursor {cursor!r:.80} is not one a run list returned")
    return value


def _matches(info: RunInfo, query: RunQuery) -> bool:
    if query.kind is not None and info.kind != query.kind:
        return False
    if query.name is not None and info.name != query.name:
        return False
    if query.status is not None and info.status != query.status:
        return False
    if query.tag is not None and query.tag not in info.tags:
        return False
    if query.since is not None and info.started_at < query.since:
        return False
    if query.until is not None and info.started_at >= query.until:
        return False
    if query.memory_scope is not None and info.memory_scope != query.memory_scope:
        return False
    if query.workflow_run_id is not None and info.workflow_run_id != query.workflow_run_id:
        return False
    if query.roots_only and info.workflow_run_id is not None:
        return False
    if query.agents is not None or query.workflows is not None:
        if info.kind == "agent" and info.name not in (query.agents or ()):
            return False
        if info.kind == "workflow" and info.name not in (query.workflows or ()):
            return False
    wanted = words(query.q)
    if wanted:
        have = words(f"{info.input_text} {info.output_text}")
        if not all(any(h.startswith(w) for h in have) for w in wanted):
            return False
    return True


def query_where(query: RunQuery, ph: str, dialect: str) -> tuple[list[str], list[Any]]:
    """The SQL conditions (and their values) of `query` for a runs table aliased `r`, in the
    SQLite or PostgreSQL dialect. Column names are ours, never a caller's."""
    conds: list[str] = []
    args: list[Any] = []
    for column in ("kind", "name", "status", "memory_scope", "workflow_run_id"):
        value = getattr(query, column)
        if value is not None:
            conds.append(f"r.{column} = {ph}")
            args.append(value)
    if query.since is not None:
        conds.append(f"r.started_at >= {ph}")
        args.append(query.since)
    if query.until is not None:
        conds.append(f"r.started_at < {ph}")
        args.append(query.until)
    if query.roots_only:
        conds.append("r.workflow_run_id IS NULL")
    if query.agents is not None or query.workflows is not None:
        parts = ["r.kind NOT IN ('agent', 'workflow')"]
        for kind, names in (("agent", query.agents or ()), ("workflow", query.workflows or ())):
            if names:
                marks = ", ".join([ph] * len(names))
                parts.append(f"(r.kind = '{kind}' AND r.name IN ({marks}))")
                args.extend(names)
        conds.append("(" + " OR ".join(parts) + ")")
    tags_table = "run_tags" if dialect == "sqlite" else "tether_run_tags"
    if query.tag is not None:
        conds.append(f"r.run_id IN (SELECT run_id FROM {tags_table} WHERE tag = {ph})")
        args.append(query.tag)
    wanted = words(query.q)
    if wanted:
        if dialect == "sqlite":
            conds.append(f"r.rowid IN (SELECT rowid FROM runs_fts WHERE runs_fts MATCH {ph})")
            args.append(" ".join(f'"{w}"*' for w in wanted))
        else:
            conds.append(f"r.search @@ to_tsquery('simple', {ph})")
            args.append(" & ".join(f"{w}:*" for w in wanted))
    return conds, args


def _cut(text: str | None) -> str:
    return (text or "")[:TEXT_LIMIT]


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
        output_text: str | None = None,
        usage: dict[str, int] | None = None,
        cost_usd: float | None = None,
    ) -> None:
        """Set the final status of a run (and why, for a failure). Setting "running" again
        (a resumed workflow run) clears the end time. `output_text`, `usage` and `cost_usd`
        are set when given (an output is cut at `TEXT_LIMIT` characters)."""
        ...

    async def query_runs(
        self, query: RunQuery, *, limit: int = 50, cursor: str | None = None
    ) -> RunPage:
        """Runs matching `query`, newest first, `limit` at most, after `cursor` (a
        `next_cursor` of an earlier page: pages stay stable while new runs start).

        Raises:
            ConfigError: a cursor no page returned.
        """
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
    check_json_safe(info.usage, "usage")


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
        info = replace(
            _copy_info(info), input_text=_cut(info.input_text), output_text=_cut(info.output_text)
        )
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
        output_text: str | None = None,
        usage: dict[str, int] | None = None,
        cost_usd: float | None = None,
    ) -> None:
        _check_status(status)
        if usage is not None:
            check_json_safe(usage, "usage")
        with self._lock:
            info = self._runs.get(run_id)
            if info is None:
                raise StoreError(f"run {run_id!r} was never started")
            info = replace(
                info,
                status=status,
                ended_at=_end_time(status, ended_at),
                error=error,
            )
            if output_text is not None:
                info = replace(info, output_text=_cut(output_text))
            if usage is not None:
                info = replace(info, usage=dict(usage))
            if cost_usd is not None:
                info = replace(info, cost_usd=cost_usd)
            self._runs[run_id] = info

    async def query_runs(
        self, query: RunQuery, *, limit: int = 50, cursor: str | None = None
    ) -> RunPage:
        after = decode_cursor(cursor) if cursor is not None else None
        with self._lock:
            ordered = [(self._runs[r], i) for i, r in enumerate(self._order)]
        ordered.sort(key=lambda pair: (pair[0].started_at, pair[1]), reverse=True)
        picked: list[tuple[RunInfo, int]] = []
        for info, i in ordered:
            if after is not None and (info.started_at, i) >= after:
                continue
            if _matches(info, query):
                picked.append((info, i))
                if len(picked) > limit:
                    break
        more = len(picked) > limit
        picked = picked[:limit]
        last = picked[-1] if picked and more else None
        return RunPage(
            [_copy_info(i) for i, _ in picked],
            encode_cursor(last[0].started_at, last[1]) if last is not None else None,
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
    return replace(
        info, tags=list(info.tags), meta=json.loads(dumps(info.meta)), usage=dict(info.usage)
    )


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


@run_migrations
def m002_run_cost_text_and_filters(conn: sqlite3.Connection) -> None:
    # Cost and usage per run; input and output text for listing and search; a tag table and
    # indexes so that a filtered page of a large store is an index range, not a scan.
    conn.execute("ALTER TABLE runs ADD COLUMN usage TEXT NOT NULL DEFAULT '{}'")
    conn.execute("ALTER TABLE runs ADD COLUMN cost_usd REAL")
    conn.execute("ALTER TABLE runs ADD COLUMN input_text TEXT NOT NULL DEFAULT ''")
    conn.execute("ALTER TABLE runs ADD COLUMN output_text TEXT NOT NULL DEFAULT ''")
    conn.execute(
        "CREATE TABLE run_tags ("
        " tag TEXT NOT NULL,"
        " run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,"
        " PRIMARY KEY (tag, run_id)) WITHOUT ROWID"
    )
    conn.execute(
        "INSERT OR IGNORE INTO run_tags (tag, run_id)"
        " SELECT j.value, r.run_id FROM runs r, json_each(r.tags) j"
        " WHERE json_valid(r.tags) AND j.type = 'text'"
    )
    conn.execute("CREATE VIRTUAL TABLE runs_fts USING fts5(body, tokenize = 'unicode61')")
    conn.execute("CREATE INDEX runs_status_started ON runs (status, started_at)")
    conn.execute("CREATE INDEX runs_name_started ON runs (name, started_at)")


_INFO_COLUMNS = (
    "run_id, kind, name, status, started_at, ended_at, tags, memory_scope, workflow_run_id,"
    " step_id, error, meta, usage, cost_usd, input_text, output_text"
)


def info_row(info: RunInfo) -> tuple[Any, ...]:
    """The values of `_INFO_COLUMNS` for a new run."""
    return (
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
        dumps(info.usage),
        info.cost_usd,
        _cut(info.input_text),
        _cut(info.output_text),
    )


def _info_from_row(row: tuple[Any, ...]) -> RunInfo:
    run_id, kind, name, status, started, ended, tags, scope, wf, step, error, meta = row[:12]
    usage, cost, input_text, output_text = row[12:16]
    try:
        tag_list = json.loads(tags)
        meta_dict = json.loads(meta)
        usage_dict = json.loads(usage)
    except ValueError as exc:
        raise StoreCorruptError(f"run {run_id!r}: tags, meta or usage are not JSON: {exc}") from exc
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
        usage=usage_dict,
        cost_usd=cost,
        input_text=input_text,
        output_text=output_text,
    )


def _finish_sets(
    ph: str, output_text: str | None, usage: dict[str, int] | None, cost_usd: float | None
) -> tuple[str, list[Any]]:
    sets: list[str] = []
    args: list[Any] = []
    if output_text is not None:
        sets.append(f", output_text = {ph}")
        args.append(_cut(output_text))
    if usage is not None:
        sets.append(f", usage = {ph}")
        args.append(dumps(usage))
    if cost_usd is not None:
        sets.append(f", cost_usd = {ph}")
        args.append(cost_usd)
    return "".join(sets), args


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
                cur = conn.execute(
                    f"INSERT INTO runs ({_INFO_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                    info_row(info),
                )
                conn.executemany(
                    "INSERT OR IGNORE INTO run_tags (tag, run_id) VALUES (?, ?)",
                    [(t, info.run_id) for t in info.tags if isinstance(t, str)],
                )
                conn.execute(
                    "INSERT INTO runs_fts (rowid, body) VALUES (?, ?)",
                    (cur.lastrowid, _cut(info.input_text) + "\n" + _cut(info.output_text)),
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
        output_text: str | None = None,
        usage: dict[str, int] | None = None,
        cost_usd: float | None = None,
    ) -> None:
        _check_status(status)
        if usage is not None:
            check_json_safe(usage, "usage")
        end = _end_time(status, ended_at)
        sets, extra = _finish_sets("?", output_text, usage, cost_usd)

        def op(conn: sqlite3.Connection) -> None:
            with transaction(conn):
                row = conn.execute(
                    f"UPDATE runs SET status = ?, ended_at = ?, error = ?{sets}"
                    " WHERE run_id = ? RETURNING rowid, input_text, output_text",
                    (status, end, error, *extra, run_id),
                ).fetchone()
                if row is None:
                    raise StoreError(f"run {run_id!r} was never started")
                if output_text is not None:
                    rowid, input_text, new_output = row
                    conn.execute(
                        "UPDATE runs_fts SET body = ? WHERE rowid = ?",
                        (f"{input_text}\n{new_output}", rowid),
                    )

        await self._run(op)

    async def query_runs(
        self, query: RunQuery, *, limit: int = 50, cursor: str | None = None
    ) -> RunPage:
        conds, args = query_where(query, "?", "sqlite")
        if cursor is not None:
            started, seq = decode_cursor(cursor)
            conds.append("(r.started_at, r.rowid) < (?, ?)")
            args.extend((started, seq))
        where = (" WHERE " + " AND ".join(conds)) if conds else ""
        columns = ", ".join(f"r.{c.strip()}" for c in _INFO_COLUMNS.split(","))

        def op(conn: sqlite3.Connection) -> list[tuple[Any, ...]]:
            return conn.execute(
                f"SELECT {columns}, r.rowid FROM runs r{where}"
                " ORDER BY r.started_at DESC, r.rowid DESC LIMIT ?",
                (*args, limit + 1),
            ).fetchall()

        rows = await self._run(op)
        more = len(rows) > limit
        rows = rows[:limit]
        infos = [_info_from_row(row) for row in rows]
        last = rows[-1] if rows and more else None
        return RunPage(infos, encode_cursor(last[4], last[-1]) if last is not None else None)

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
