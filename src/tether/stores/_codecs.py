"""The record codecs every backend shares: how a message record, a run summary, a run event and
a workflow row are checked on the way in and parsed on the way out.

Every store keeps JSON values as their text (compact, non-ASCII as is, key order kept), so what
is read back is exactly what was written, a value that would not survive JSON is refused before
anything is written, and a damaged value is a `StoreCorruptError` naming where it is — the same
in memory, in SQLite and in PostgreSQL. The SQL backends also share their row shapes (the column
lists below) and `where_equal`.
"""

from __future__ import annotations

import json
import math
import operator
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import Any, Final, TypeAlias, TypeGuard, TypeVar

from pydantic_core import from_json, to_json

from .._json import CheckedJSON, check_json_safe
from ..errors import (
    ConfigError,
    ResumeError,
    RunNotFoundError,
    RunNotPausedError,
    StoreCorruptError,
    StoreError,
)
from ..workflows._store import (
    RUN_STATUSES,
    NewWorkflowRun,
    StepRecord,
    WaitRecord,
    WorkflowRunRecord,
    busy_error,
    check_finish,
    check_status,
    decode_error,
    decode_json,
    encode_json,
    encode_wait,
    not_waiting_error,
)
from ._blobs import NewBlobs, externalize_events, externalize_records
from .message_store import StoredRecord
from .run_store import (
    PIECE,
    RESUMED_BY,
    TEXT_LIMIT,
    TRACEBACK_LIMIT,
    EventBatch,
    NewRunEvent,
    RunEnd,
    RunEvent,
    RunInfo,
    RunListing,
    RunPage,
    RunQuery,
    RunTotals,
)

__all__ = [
    "LAST_INDEX",
    "NOW_SQL",
    "RUN_COLUMNS",
    "RUN_INFO_COLUMNS",
    "SCOPE_COLUMNS",
    "STEP_COLUMNS",
    "EncodedBatch",
    "RunFinish",
    "busy_error",
    "check_finish",
    "check_run_info",
    "check_run_status",
    "check_scope",
    "check_title",
    "cut_text",
    "cut_traceback",
    "decode_cursor",
    "decode_event",
    "decode_record",
    "decode_records",
    "decode_turn",
    "encode_batches",
    "encode_cursor",
    "encode_events",
    "encode_json",
    "encode_new_events",
    "encode_new_records",
    "encode_records",
    "encode_run_info",
    "encode_wait",
    "encoded_first",
    "end_time",
    "finish_sets",
    "finish_values",
    "has_words",
    "in_pieces",
    "listing_filters",
    "new_run_values",
    "not_paused",
    "not_waiting_error",
    "pause_values",
    "plan_finish",
    "query_where",
    "run_from_row",
    "run_info_from_row",
    "run_info_select",
    "run_matches",
    "run_page",
    "run_select",
    "run_tags",
    "step_from_row",
    "title_like",
    "totals_from_row",
    "totals_of",
    "totals_sql",
    "where_equal",
    "words",
]

T = TypeVar("T")


# -- messages --------------------------------------------------------------------------------

SCOPE_COLUMNS: Final = "scope, length, title, created_at, updated_at"
"""The columns of a scope row, in `ScopeInfo` order."""

LAST_INDEX: Final = 2**63 - 1
"""The `end` of a load to the last record in SQL (whose integers are 64-bit)."""


def check_scope(scope: Any) -> None:
    if not isinstance(scope, str) or not scope:
        raise StoreError(f"memory scope must be a non-empty string, got {scope!r}")


def encode_records(scope: str, records: Sequence[StoredRecord]) -> list[str]:
    """The stored text of each record; every record is checked first, so a bad one leaves the
    store untouched."""
    check_scope(scope)
    if isinstance(records, (str, bytes, dict)):
        raise StoreError("records must be a sequence of message records")
    out: list[str] = []
    for i, record in enumerate(records):
        if not isinstance(record, dict) or not isinstance(record.get("role"), str):
            raise StoreError(
                f"records[{i}] for scope {scope!r} is not a message record "
                f"(a dict with a string 'role'): {record!r:.120}"
            )
        check_json_safe(record, f"records[{i}]")
        out.append(_dumps(record))
    return out


def encode_new_records(
    scope: str, records: Sequence[StoredRecord], blob_threshold: int
) -> tuple[list[str], NewBlobs]:
    """`encode_records` of records to write, their media over `blob_threshold` bytes moved
    out to the blobs returned (`encoded_first`: a turn's records are encoded once)."""
    texts = encoded_first(lambda: encode_records(scope, records), str, blob_threshold)
    if texts is not None:
        return texts, {}
    records, blobs = externalize_records(records, blob_threshold)
    return encode_records(scope, records), blobs


def encoded_first(
    encode: Callable[[], list[T]], text: Callable[[T], str], blob_threshold: int
) -> list[T] | None:
    """What `encode()` gives (texts, or rows holding their `text`) when none of the texts is
    long enough to hold a media part's data over `blob_threshold` bytes, which JSON spells in
    full as base64 (4 characters per 3 bytes): then there is nothing to move out, and what was
    encoded is what is stored. None when some text is that long, or `encode()` refused (the
    caller then moves media out and encodes again, which says what is wrong the way it always
    did): most records and events are short, and are encoded once instead of measured in one
    encoding and stored in another."""
    try:
        out = encode()
    except Exception:
        return None
    longest = max(map(len, map(text, out)), default=0)  # measured in C
    return None if longest * 3 // 4 > blob_threshold else out


def decode_record(scope: str, index: int, raw: str) -> StoredRecord:
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise StoreCorruptError(f"scope {scope!r}, record {index}: not JSON: {exc}") from exc
    if not _is_record(value):
        raise StoreCorruptError(f"scope {scope!r}, record {index}: not a message record")
    return value


def _is_record(value: object) -> TypeGuard[StoredRecord]:
    """What every stored record is at least: an object with a string role."""
    return isinstance(value, dict) and isinstance(value.get("role"), str)


def _are_records(values: list[Any]) -> TypeGuard[list[StoredRecord]]:
    """`_is_record` for every one of `values`, the checks run in C (map over methods)."""
    return set(map(type, values)) == {dict} and set(map(type, map(_ROLE, values))) == {str}


def decode_records(scope: str, start: int, raws: Sequence[str]) -> list[StoredRecord]:
    """The records stored at `start`, `start + 1`, ... of `scope`, parsed in one `json.loads`
    (half the cost of one call per record, which is what a long transcript's load is made of).

    Every stored record is one JSON object, so each text must start with `{` and end with `}`
    and the joined list must hold exactly as many objects; anything else is parsed record by
    record, which names the one that is damaged.
    """
    if not raws:
        return []
    # The checks run in C (map over methods): a transcript is loaded whole on every turn.
    if _objects(raws):
        try:
            values = from_json("[" + ",".join(raws) + "]")
        except ValueError:
            values = None
        if values is not None and len(values) == len(raws) and _are_records(values):
            return values
    return [decode_record(scope, start + i, raw) for i, raw in enumerate(raws)]


def _objects(raws: Sequence[str]) -> bool:
    """Every text looks like one JSON object (starts with `{`, ends with `}`)."""
    try:
        return all(map(str.startswith, raws, repeat("{"))) and all(
            map(str.endswith, raws, repeat("}"))
        )
    except TypeError:  # not text at all (a BLOB): parsed one by one, which says where
        return False


_ROLE = operator.methodcaller("get", "role")


def _dumps(value: Any) -> str:
    """A checked value's stored text: the same JSON as `tether._json.dumps` (floats may be
    spelled `1e-7` for `1e-07`), written in Rust by pydantic-core, several times faster for
    the transcripts and run events a turn stores."""
    return to_json(value).decode()


def _column(value: Any, path: str) -> str:
    """A run summary's JSON column (tags, meta, usage, pending, a paused turn) as stored:
    checked, then `_dumps` (the text `encode_json` makes, but for how a float is spelled)."""
    check_json_safe(value, path)
    return _dumps(value)


def check_title(scope: str, title: str) -> None:
    check_scope(scope)
    if not isinstance(title, str):
        raise StoreError(f"a title must be a string, got {type(title).__name__}")


# -- runs and their events -------------------------------------------------------------------

RUN_INFO_COLUMNS: Final = (
    "run_id, kind, name, status, started_at, ended_at, tags, memory_scope, workflow_run_id,"
    " step_id, error, meta, usage, cost_usd, parent_run_id, parent_tool_call_id, traceback,"
    " input_text, output_text, pending"
)
"""The columns of a run summary row, in the order `encode_run_info` writes them and
`run_info_from_row` reads them."""

NOW_SQL: Final = {
    "sqlite": "((julianday('now') - 2440587.5) * 86400.0)",
    "postgres": "extract(epoch from clock_timestamp())::float8",
}
"""The database's clock in Unix seconds, per dialect: leases are taken, renewed and judged
expired by it (for PostgreSQL the server's, the one clock every worker shares)."""


def run_info_select(dialect: str, alias: str = "") -> str:
    """The SELECT list of a run summary: RUN_INFO_COLUMNS, with a running run whose lease
    expired read as "interrupted", then `lease_expires_at` (what `run_info_from_row` reads)."""
    prefix = f"{alias}." if alias else ""
    columns = [f"{prefix}{c.strip()}" for c in RUN_INFO_COLUMNS.split(",")]
    columns[3] = (
        f"CASE WHEN {prefix}status = 'running' AND {prefix}lease_expires_at < {NOW_SQL[dialect]}"
        f" THEN 'interrupted' ELSE {prefix}status END"
    )
    return ", ".join([*columns, f"{prefix}lease_expires_at"])


def cut_text(text: str | None) -> str:
    """A run's input or output text as it is kept: at most `TEXT_LIMIT` characters."""
    return (text or "")[:TEXT_LIMIT]


def cut_traceback(text: str | None) -> str | None:
    """A failed run's traceback as it is kept: its last `TRACEBACK_LIMIT` characters."""
    if text is None or len(text) <= TRACEBACK_LIMIT:
        return text
    return text[-TRACEBACK_LIMIT:]


def check_run_status(status: str) -> None:
    if status not in RUN_STATUSES:
        raise StoreError(f"run status must be one of {RUN_STATUSES}, got {status!r}")


def check_run_info(info: RunInfo) -> None:
    if not isinstance(info.run_id, str) or not info.run_id:
        raise StoreError(f"run_id must be a non-empty string, got {info.run_id!r}")
    check_run_status(info.status)


def encode_run_info(info: RunInfo) -> tuple[Any, ...]:
    """The row of a new run summary (RUN_INFO_COLUMNS): tags as a JSON array, meta and usage as
    JSON objects, all as text, on every backend."""
    check_run_info(info)
    return (
        info.run_id,
        info.kind,
        info.name,
        info.status,
        info.started_at,
        info.ended_at,
        _column(list(info.tags), "tags"),
        info.memory_scope,
        info.workflow_run_id,
        info.step_id,
        info.error,
        _column(info.meta, "meta"),
        _column(info.usage, "usage"),
        info.cost_usd,
        info.parent_run_id,
        info.parent_tool_call_id,
        cut_traceback(info.traceback),
        cut_text(info.input_text),
        cut_text(info.output_text),
        _column(list(info.pending), "pending") if info.pending else None,
    )


def run_tags(info: RunInfo) -> list[str]:
    """The tags a run is found by (`RunQuery.tag`): its string tags, each once."""
    return [t for t in dict.fromkeys(info.tags) if isinstance(t, str)]


def run_info_from_row(row: Sequence[Any]) -> RunInfo:
    """A run summary from a row of `run_info_select` (the lease's end last)."""
    run_id, kind, name, status, started, ended, tags, scope, wf, step, error, meta = row[:12]
    usage, cost, parent, parent_call, traceback, input_text, output_text = row[12:19]
    pending, lease_expires_at = row[19], row[20]
    try:
        tag_list = json.loads(tags)
        meta_dict = json.loads(meta)
        usage_dict = json.loads(usage)
        pending_list = json.loads(pending) if pending else []
    except (TypeError, ValueError) as exc:
        raise StoreCorruptError(
            f"run {run_id!r}: tags, meta, usage or pending are not JSON: {exc}"
        ) from exc
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
        parent_run_id=parent,
        parent_tool_call_id=parent_call,
        error=error,
        traceback=traceback,
        meta=meta_dict,
        usage=usage_dict,
        cost_usd=cost,
        input_text=input_text,
        output_text=output_text,
        lease_expires_at=lease_expires_at,
        pending=pending_list,
    )


def finish_values(
    output_text: str | None,
    usage: dict[str, int] | None,
    cost_usd: float | None,
    traceback: str | None = None,
) -> dict[str, Any]:
    """The columns `finish_run` sets beside the status, end time and error, and their stored
    values: the traceback always (it goes with the error: None clears it), the rest when
    given."""
    values: dict[str, Any] = {"traceback": cut_traceback(traceback)}
    if output_text is not None:
        values["output_text"] = cut_text(output_text)
    if usage is not None:
        values["usage"] = _column(usage, "usage")
    if cost_usd is not None:
        values["cost_usd"] = cost_usd
    return values


def pause_values(
    status: str,
    pending: Sequence[Mapping[str, Any]] | None,
    paused: Mapping[str, Any] | None,
    deadline: float | None,
) -> dict[str, Any]:
    """The pause columns a `finish_run` writes: a paused run's pending calls, the turn it
    resumes from and when its calls expire; any other status clears them.

    Raises:
        StoreError: a paused run without pending calls or without its turn.
    """
    if status != "paused":
        return {"pending": None, "paused_turn": None, "pending_deadline": None}
    if not pending or paused is None:
        raise StoreError("a paused run needs its pending calls and its paused turn")
    return {
        "pending": _column(list(pending), "pending"),
        "paused_turn": _column(dict(paused), "paused_turn"),
        "pending_deadline": deadline,
    }


def not_paused(run_id: str, status: str | None, meta: Any) -> ResumeError:
    """Why `resume_run` matched no paused row: no such run, or its status now (and who
    resumed it, from its meta)."""
    if status is None:
        return RunNotFoundError(
            f"no run {run_id!r} in the run store (tether runs list --status paused lists the "
            "paused ones)",
            run_id=run_id,
        )
    winner = None
    try:
        winner = (json.loads(meta) if isinstance(meta, str) else meta or {}).get(RESUMED_BY)
    except (TypeError, ValueError, AttributeError):
        pass
    if winner is not None:
        message = f"run {run_id!r} is not paused: {winner} resumed it first (status {status})"
    else:
        message = f"run {run_id!r} is not paused (status {status}): there is nothing to decide"
    return RunNotPausedError(message, run_id=run_id, status=status, winner=winner)


def decode_turn(run_id: str, text: Any) -> dict[str, Any]:
    """A paused run's stored turn."""
    try:
        turn = json.loads(text)
    except (TypeError, ValueError) as exc:
        raise StoreCorruptError(f"run {run_id!r}: its paused turn is not JSON: {exc}") from exc
    if not isinstance(turn, dict):
        raise StoreCorruptError(f"run {run_id!r}: its paused turn is not a JSON object")
    return turn


def finish_sets(ph: str, values: dict[str, Any]) -> str:
    """`", output_text = ?, usage = ?"` for the columns of `finish_values`."""
    return "".join(f", {column} = {ph}" for column in values)


@dataclass(slots=True, frozen=True)
class RunFinish:
    """What a store's `finish_run` writes, worked out once for every backend."""

    events: list[tuple[str, float, str]]
    """The run's last events, encoded (`encode_events`)."""
    blobs: NewBlobs
    """The media those events moved out, to keep in the same write."""
    ended_at: float | None
    error: str | None
    columns: dict[str, Any]
    """`finish_values`, `pause_values`, and `lease_owner` when the run is taken over."""
    ttl: float | None
    """The lease's new length: only a run running again keeps one."""
    fence: str | None
    """The token the run's lease must still be under (None: not checked)."""


def plan_finish(run_id: str, status: str, end: RunEnd, blob_threshold: int) -> RunFinish:
    """Check and encode a `finish_run` call (its events' media over `blob_threshold` bytes
    moved out to blobs); nothing is written."""
    check_run_status(status)
    columns = finish_values(
        end.get("output_text"), end.get("usage"), end.get("cost_usd"), end.get("traceback")
    )
    columns.update(
        pause_values(status, end.get("pending"), end.get("paused"), end.get("pending_deadline"))
    )
    # Running again under a token is a takeover (the workflow store decided who won it): the
    # token is set, not checked; any other finish under a token is fenced by it.
    fence = lease = end.get("lease")
    if status == "running" and lease is not None:
        columns["lease_owner"] = lease
        fence = None
    events, blobs = encode_new_events(run_id, end.get("events", ()), blob_threshold)
    return RunFinish(
        events=events,
        blobs=blobs,
        ended_at=end_time(status, end.get("ended_at")),
        error=end.get("error"),
        columns=columns,
        ttl=end.get("lease_ttl") if status == "running" else None,
        fence=fence,
    )


def end_time(status: str, ended_at: float | None) -> float | None:
    """A resumed run ("running" again) has no end yet, nor a waiting one; a finished one ends
    now by default."""
    if status in ("running", "waiting", "paused"):
        return None
    return ended_at if ended_at is not None else time.time()


def encode_events(run_id: str, events: Sequence[NewRunEvent]) -> list[tuple[str, float, str]]:
    """`(type, at, data text)` of each event; all are checked before any is written."""
    out: list[tuple[str, float, str]] = []
    for i, ev in enumerate(events):
        if not isinstance(ev, dict) or not isinstance(ev.get("type"), str):
            raise StoreError(f"events[{i}] of run {run_id!r} needs a string 'type'")
        data = ev.get("data", {})
        if not isinstance(data, dict):
            raise StoreError(f"events[{i}] of run {run_id!r}: data must be a dict")
        if type(data) is not CheckedJSON:  # committed messages, checked when they were stored
            check_json_safe(data, f"events[{i}].data")
        at = ev.get("at")
        out.append((ev["type"], float(at) if at is not None else time.time(), _dumps(data)))
    return out


def encode_new_events(
    run_id: str, events: Sequence[NewRunEvent], blob_threshold: int
) -> tuple[list[tuple[str, float, str]], NewBlobs]:
    """`encode_events` of events to write, their media over `blob_threshold` bytes moved out
    to the blobs returned (`encoded_first`: a turn's events are encoded once)."""
    rows = encoded_first(lambda: encode_events(run_id, events), _event_text, blob_threshold)
    if rows is not None:
        return rows, {}
    events, blobs = externalize_events(events, blob_threshold)
    return encode_events(run_id, events), blobs


_event_text: Callable[[tuple[str, float, str]], str] = operator.itemgetter(2)
"""The data text of an `encode_events` row."""


EncodedBatch: TypeAlias = tuple[str, list[tuple[str, float, str]], str | None]
"""One run's events of `append_events_many`, encoded: (run id, `encode_events` rows, lease)."""


def encode_batches(
    batches: Sequence[EventBatch], blob_threshold: int
) -> tuple[list[EncodedBatch], NewBlobs]:
    """Each batch's events encoded, their media over `blob_threshold` bytes moved out to the
    blobs returned (all checked before anything is written)."""
    blobs: NewBlobs = {}
    encoded: list[EncodedBatch] = []
    for run_id, events, lease in batches:
        rows, new = encode_new_events(run_id, events, blob_threshold)
        blobs.update(new)
        encoded.append((run_id, rows, lease))
    return encoded, blobs


def in_pieces(
    rows: Sequence[tuple[str, float, str]],
) -> tuple[list[tuple[str, float, str]], list[tuple[int, int, str]]]:
    """Encoded events (`encode_events`) as the SQL stores write them: each row whose text is
    longer than `PIECE` with an empty text (never JSON: it marks one stored in pieces), and
    `(index of the row, piece number, text)` of every piece."""
    if all(len(raw) <= PIECE for _, _, raw in rows):
        return list(rows), []
    out: list[tuple[str, float, str]] = []
    pieces: list[tuple[int, int, str]] = []
    for i, (kind, at, raw) in enumerate(rows):
        if len(raw) <= PIECE:
            out.append((kind, at, raw))
            continue
        out.append((kind, at, ""))
        pieces.extend(
            (i, n, raw[start : start + PIECE]) for n, start in enumerate(range(0, len(raw), PIECE))
        )
    return out, pieces


def decode_event(run_id: str, seq: int, kind: str, at: float, raw: str) -> RunEvent:
    try:
        data = from_json(raw)
    except ValueError as exc:
        raise StoreCorruptError(f"run {run_id!r}, event {seq}: data is not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise StoreCorruptError(f"run {run_id!r}, event {seq}: data is not an object")
    return {"run_id": run_id, "seq": seq, "type": kind, "at": at, "data": data}


# -- run queries ----------------------------------------------------------------------------


def words(q: str | None) -> list[str]:
    """The words of a free-text query (letters, digits, `_`), lower-cased."""
    return re.findall(r"\w+", q.lower()) if q else []


def has_words(text: str | None, wanted: str) -> bool:
    """Whether `text` has every one of the space-separated `wanted` words (`words`), each as
    a word prefix: how `RunQuery.q` matches (SQLite's `tether_has_words`, for a live run)."""
    have = words(text)
    return all(any(h.startswith(w) for h in have) for w in wanted.split())


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


_EQUAL_FIELDS: Final = (
    "kind",
    "name",
    "status",
    "memory_scope",
    "workflow_run_id",
    "parent_run_id",
)
"""The fields of a RunQuery a run matches by equality."""


def run_matches(info: RunInfo, query: RunQuery) -> bool:
    for name in _EQUAL_FIELDS:
        wanted = getattr(query, name)
        if wanted is not None and getattr(info, name) != wanted:
            return False
    if query.tag is not None and query.tag not in info.tags:
        return False
    if query.since is not None and info.started_at < query.since:
        return False
    if query.until is not None and info.started_at >= query.until:
        return False
    if query.roots_only and (info.workflow_run_id is not None or info.parent_run_id is not None):
        return False
    if query.agents is not None or query.workflows is not None:
        if info.kind == "agent" and info.name not in (query.agents or ()):
            return False
        if info.kind == "workflow" and info.name not in (query.workflows or ()):
            return False
    wanted = words(query.q)
    return not wanted or has_words(f"{info.input_text} {info.output_text}", " ".join(wanted))


def query_where(query: RunQuery, ph: str, dialect: str) -> tuple[list[str], list[Any]]:
    """The SQL conditions (and their values) of `query` for a runs table aliased `r`, in the
    SQLite or PostgreSQL dialect. Column names are ours, never a caller's."""
    conds: list[str] = []
    args: list[Any] = []
    for column in ("kind", "name", "memory_scope", "workflow_run_id", "parent_run_id"):
        value = getattr(query, column)
        if value is not None:
            conds.append(f"r.{column} = {ph}")
            args.append(value)
    if query.status is not None:
        # "interrupted" is never stored: it is a running run whose lease expired.
        now = NOW_SQL[dialect]
        stored = "running" if query.status == "interrupted" else query.status
        conds.append(f"r.status = {ph}")
        args.append(stored)
        if query.status == "interrupted":
            conds.append(f"r.lease_expires_at < {now}")
        elif query.status == "running":
            conds.append(f"(r.lease_expires_at IS NULL OR r.lease_expires_at >= {now})")
    if query.since is not None:
        conds.append(f"r.started_at >= {ph}")
        args.append(query.since)
    if query.until is not None:
        conds.append(f"r.started_at < {ph}")
        args.append(query.until)
    if query.roots_only:
        conds.append("r.workflow_run_id IS NULL AND r.parent_run_id IS NULL")
    if query.agents is not None or query.workflows is not None:
        parts = ["r.kind NOT IN ('agent', 'workflow')"]
        for kind, names in (("agent", query.agents or ()), ("workflow", query.workflows or ())):
            if names:
                marks = ", ".join([ph] * len(names))
                parts.append(f"(r.kind = '{kind}' AND r.name IN ({marks}))")
                args.extend(names)
        conds.append("(" + " OR ".join(parts) + ")")
    if query.tag is not None:
        conds.append(f"r.run_id IN (SELECT run_id FROM tether_run_tags WHERE tag = {ph})")
        args.append(query.tag)
    wanted = words(query.q)
    if wanted:
        if dialect == "sqlite":
            # A live run is not indexed yet, nor an ended one until its batch goes in
            # (`INDEX_BATCH`): their words are read.
            conds.append(
                f"(r.rowid IN (SELECT rowid FROM tether_runs_fts WHERE tether_runs_fts MATCH {ph})"
                f" OR (r.unindexed AND tether_has_words(r.input_text || ' ' || r.output_text,"
                f" {ph})))"
            )
            args.extend((" ".join(f'"{w}"*' for w in wanted), " ".join(wanted)))
        else:
            conds.append(f"r.search @@ to_tsquery('simple', {ph})")
            args.append(" & ".join(f"{w}:*" for w in wanted))
    return conds, args


def run_page(rows: Sequence[Sequence[Any]], limit: int) -> RunPage:
    """A page of `query_runs` from up to `limit + 1` rows of `run_info_select` and each row's
    order key last (the one extra row only says there is a next page)."""
    more = len(rows) > limit
    rows = rows[:limit]
    last = rows[-1] if rows and more else None
    return RunPage(
        [run_info_from_row(row) for row in rows],
        encode_cursor(last[4], last[-1]) if last is not None else None,
    )


# -- SQL -------------------------------------------------------------------------------------


def where_equal(placeholder: str, **filters: Any) -> tuple[str, list[Any]]:
    """``" WHERE a = ? AND b = ?"`` for the filters that are not None, and their values.

    Column names come from our own keyword arguments, never from a caller's data.
    """
    columns = [name for name, value in filters.items() if value is not None]
    if not columns:
        return "", []
    clause = " WHERE " + " AND ".join(f"{c} = {placeholder}" for c in columns)
    return clause, [filters[c] for c in columns]


def listing_filters(listing: RunListing) -> dict[str, Any]:
    """The column filters of a `list_runs` call (None: any)."""
    return {
        "kind": listing.get("kind"),
        "workflow_run_id": listing.get("workflow_run_id"),
        "memory_scope": listing.get("memory_scope"),
    }


def title_like(title: str, ph: str) -> tuple[str, list[Any]]:
    """A case-insensitive (ASCII) substring match on the title, with LIKE's wildcards escaped."""
    escaped = title.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f" WHERE lower(title) LIKE lower({ph}) ESCAPE '\\'", [f"%{escaped}%"]


def totals_of(infos: Iterable[RunInfo]) -> RunTotals:
    """`RunTotals` of runs in memory."""
    runs = inp = out = unpriced = 0
    cost = 0.0
    for info in infos:
        runs += 1
        inp += int(info.usage.get("input_tokens", 0))
        out += int(info.usage.get("output_tokens", 0))
        if info.cost_usd is not None:
            cost += info.cost_usd
        elif info.usage:
            unpriced += 1
    return RunTotals(runs, inp, out, cost, unpriced)


def totals_sql(dialect: str) -> str:
    """The SELECT list of `run_totals` over the runs table aliased `r`."""
    if dialect == "sqlite":
        tokens = "coalesce(sum(json_extract(r.usage, '$.{key}')), 0)"
    else:
        tokens = "coalesce(sum((r.usage::jsonb ->> '{key}')::bigint), 0)"
    return (
        "count(*), "
        + tokens.format(key="input_tokens")
        + ", "
        + tokens.format(key="output_tokens")
        + ", coalesce(sum(r.cost_usd), 0),"
        " sum(CASE WHEN r.cost_usd IS NULL AND r.usage <> '{}' THEN 1 ELSE 0 END)"
    )


def totals_from_row(row: Sequence[Any]) -> RunTotals:
    runs, inp, out, cost, unpriced = row
    return RunTotals(int(runs), int(inp or 0), int(out or 0), float(cost or 0), int(unpriced or 0))


# -- workflows -------------------------------------------------------------------------------
#
# A run is stored as one row of RUN_COLUMNS and a step as one row of STEP_COLUMNS, with every
# JSON value (input, output, error) kept as its text: the SQL backends write and read exactly
# these rows, and a damaged value reads as StoreCorruptError naming the run and the field.

RUN_COLUMNS: Final = (
    "run_id, workflow_id, status, input, output, error, parent_run_id, root_run_id,"
    " parent_step_id, attempts, created_at, updated_at, lease_owner, lease_expires_at, wait"
)
"""The columns of a run row, in the order `run_from_row` reads them."""


def run_select(now: str) -> str:
    """RUN_COLUMNS for a SELECT that reads a running run whose lease expired as
    "interrupted"; `now` is the SQL for the database's clock in Unix seconds."""
    status = (
        f"CASE WHEN status = 'running' AND lease_expires_at < {now}"
        " THEN 'interrupted' ELSE status END"
    )
    return RUN_COLUMNS.replace("status", status, 1)


def new_run_values(run: NewWorkflowRun, now: float) -> tuple[Any, ...]:
    """The values of `RUN_COLUMNS` a `create_run` inserts, in order, but for status, output,
    error, attempts and the lease's end (each SQL store writes those in its statement), then
    the lease's length."""
    lease = run.get("lease")
    return (
        run["run_id"],
        run["workflow_id"],
        encode_json(run["input"], "input"),
        run.get("parent_run_id"),
        run.get("root_run_id") or run["run_id"],
        run.get("parent_step_id"),
        now,
        now,
        None if lease is None else lease.owner,
        None if lease is None else lease.ttl,
    )


STEP_COLUMNS: Final = "run_id, step_id, name, seq, output, created_at"
"""The columns of a step row, in the order `step_from_row` reads them."""


def decode_wait(text: Any, where: str) -> WaitRecord | None:
    """A run's stored wait; StoreCorruptError naming `where` when it does not parse."""
    if text is None:
        return None
    data = decode_json(text, f"{where}.wait")
    try:
        return WaitRecord(
            run_id=data["run_id"],
            name=data["name"],
            step_id=data["step_id"],
            schema=data.get("schema"),
            deadline=data.get("deadline"),
            since=data.get("since", 0.0),
            paused_run=data.get("paused_run"),
        )
    except (KeyError, TypeError) as exc:
        raise StoreCorruptError(f"{where}.wait: not a wait record: {exc!r}") from exc


def run_from_row(row: Sequence[Any]) -> WorkflowRunRecord:
    """A run read back from a `RUN_COLUMNS` row; StoreCorruptError names what does not parse."""
    run_id = row[0]
    where = f"workflow run {run_id!r}"
    return WorkflowRunRecord(
        run_id=run_id,
        workflow_id=row[1],
        status=check_status(row[2], where),
        input=decode_json(row[3], f"{where}.input"),
        output=None if row[4] is None else decode_json(row[4], f"{where}.output"),
        error=decode_error(row[5], where),
        parent_run_id=row[6],
        root_run_id=row[7],
        parent_step_id=row[8],
        attempts=row[9],
        created_at=row[10],
        updated_at=row[11],
        lease_owner=row[12],
        lease_expires_at=row[13],
        waiting_for=decode_wait(row[14], where),
    )


def step_from_row(row: Sequence[Any]) -> StepRecord:
    """A step read back from a `STEP_COLUMNS` row."""
    where = f"workflow step {row[0]!r}/{row[1]!r}"
    return StepRecord(
        run_id=row[0],
        step_id=row[1],
        name=row[2],
        seq=row[3],
        output=decode_json(row[4], f"{where}.output"),
        created_at=row[5],
    )
