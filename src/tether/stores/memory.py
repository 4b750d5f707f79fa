"""The in-memory stores: for tests and for processes that need no persistence.

They keep every JSON value as the same text a database would hold and read it back through the
shared codecs (`tether.stores._codecs`), so a reader always gets a fresh copy and a value that
would not survive a real store is refused here too. Each is safe to share between threads.

`InMemoryWorkflowStore` lives with the workflow engine (the harness runs durable workflows
without the storage layer) and is re-exported here.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Unpack

from ..blobs import DEFAULT_BLOB_THRESHOLD, BlobInfo, blob_key, checked_blob
from ..errors import BlobNotFoundError, LeaseLostError, StoreError
from ..workflows._store import InMemoryWorkflowStore
from ._blobs import NewBlobs, check_threshold
from ._codecs import (
    RUN_INFO_COLUMNS,
    RunFinish,
    check_scope,
    check_title,
    decode_cursor,
    decode_event,
    decode_records,
    decode_turn,
    encode_batches,
    encode_cursor,
    encode_events,
    encode_new_events,
    encode_new_records,
    encode_run_info,
    listing_filters,
    not_paused,
    plan_finish,
    run_info_from_row,
    run_matches,
    totals_of,
)
from .message_store import ScopeInfo, StoredRecord
from .run_store import (
    CANCEL_REQUESTED,
    RESUMED_BY,
    EventBatch,
    NewRunEvent,
    PausedRun,
    RunEnd,
    RunEvent,
    RunInfo,
    RunListing,
    RunPage,
    RunQuery,
    RunResume,
    RunTotals,
    ScopeAppend,
)
from .workflow_store import RunStatus

__all__ = [
    "InMemoryBlobStore",
    "InMemoryMessageStore",
    "InMemoryRunStore",
    "InMemoryWorkflowStore",
]


# -- BlobStore -------------------------------------------------------------------------------


class InMemoryBlobStore:
    """A `BlobStore` in a dict (`tether.blobs`); `reads` counts the blobs read."""

    def __init__(self) -> None:
        self._blobs: dict[str, tuple[bytes, str]] = {}
        self._lock = threading.Lock()
        self.reads = 0
        """How many times bytes were read (`get`)."""

    def keep(self, blobs: NewBlobs) -> None:
        """Keep `blobs` (what a record write moved out); bytes already kept stay as they are."""
        with self._lock:
            for sha, value in blobs.items():
                self._blobs.setdefault(sha, value)

    async def put(self, data: bytes, media_type: str) -> str:
        sha = blob_key(data)
        self.keep({sha: (bytes(data), media_type)})
        return sha

    async def get(self, sha: str) -> bytes:
        with self._lock:
            self.reads += 1
            found = self._blobs.get(sha)
        if found is None:
            raise BlobNotFoundError(sha)
        return checked_blob(sha, found[0])

    async def info(self, sha: str) -> BlobInfo | None:
        with self._lock:
            found = self._blobs.get(sha)
        return None if found is None else BlobInfo(sha, len(found[0]), found[1])

    def __len__(self) -> int:
        """How many blobs are kept."""
        return len(self._blobs)


# -- MessageStore ----------------------------------------------------------------------------


@dataclass(slots=True)
class _Scope:
    records: list[str]
    title: str | None
    created_at: float
    updated_at: float
    version: int = field(default_factory=lambda: random.getrandbits(61))
    """One up per append or replace; a new scope starts at random (`ScopeVersions`)."""

    def info(self, scope: str) -> ScopeInfo:
        return ScopeInfo(scope, len(self.records), self.title, self.created_at, self.updated_at)


class _KeepsBlobs:
    """What the in-memory message and run stores share: `blobs`, where media data over
    `blob_threshold` bytes goes (give both the same `InMemoryBlobStore` to keep each blob once),
    and the lock their tables are read and written under."""

    def __init__(
        self,
        *,
        blobs: InMemoryBlobStore | None = None,
        blob_threshold: int = DEFAULT_BLOB_THRESHOLD,
    ) -> None:
        self.blobs = blobs if blobs is not None else InMemoryBlobStore()
        """The blobs this store's records or events refer to."""
        self.blob_threshold = check_threshold(blob_threshold)
        """Inline media over this many bytes is stored as a blob."""
        self._lock = threading.Lock()
        self._empty()

    def _empty(self) -> None:
        """Set up the store's own (empty) tables."""
        raise NotImplementedError


class InMemoryMessageStore(_KeepsBlobs):
    """A MessageStore in a dict. Media data over `blob_threshold` bytes goes to `blobs` (give
    the run store the same `InMemoryBlobStore` to keep each blob once for both)."""

    def _empty(self) -> None:
        self._scopes: dict[str, _Scope] = {}
        self._leases: dict[str, tuple[str, float]] = {}
        """scope -> (owner, expiry): `ScopeLeases` (which episode may write the scope now)."""

    def _entry(self, scope: str, now: float) -> _Scope:
        entry = self._scopes.get(scope)
        if entry is None:
            entry = self._scopes[scope] = _Scope([], None, now, now)
        return entry

    async def load(
        self, scope: str, *, start: int = 0, end: int | None = None, after: int | None = None
    ) -> list[StoredRecord]:
        if after is not None:
            start = max(start, after + 1)
        start = max(start, 0)
        with self._lock:
            entry = self._scopes.get(scope)
            raw = entry.records[start:end] if entry is not None else []
        return decode_records(scope, start, raw)

    async def tail(self, scope: str, n: int) -> tuple[int, list[StoredRecord]]:
        with self._lock:
            entry = self._scopes.get(scope)
            total = len(entry.records) if entry is not None else 0
            start = max(total - max(n, 0), 0)
            raw = entry.records[start:] if entry is not None else []
        return (start if raw else 0), decode_records(scope, start, raw)

    async def append(
        self, scope: str, records: Sequence[StoredRecord], *, lease: str | None = None
    ) -> int:
        encoded, blobs = encode_new_records(scope, records, self.blob_threshold)
        now = time.time()
        with self._lock:
            self._check_lease(scope, lease)
            return self._write(scope, encoded, blobs, now)

    def _check_lease(self, scope: str, lease: str | None) -> None:
        """Refuse a write under `lease` once it does not hold the scope (under the lock)."""
        if lease is not None:
            held = self._leases.get(scope)
            if held is None or held[0] != lease:
                raise LeaseLostError("memory scope", scope, held[0] if held else None)

    def _write(self, scope: str, encoded: list[str], blobs: NewBlobs, now: float) -> int:
        """Append encoded records (under the lock); the scope's new length."""
        self.blobs.keep(blobs)
        entry = self._entry(scope, now)
        entry.records.extend(encoded)
        entry.updated_at = now
        entry.version += 1
        return len(entry.records)

    async def replace(self, scope: str, records: Sequence[StoredRecord]) -> None:
        encoded, blobs = encode_new_records(scope, records, self.blob_threshold)
        now = time.time()
        with self._lock:
            self.blobs.keep(blobs)
            entry = self._entry(scope, now)
            entry.records = encoded
            entry.updated_at = now
            entry.version += 1

    async def length(self, scope: str) -> int:
        with self._lock:
            entry = self._scopes.get(scope)
            return len(entry.records) if entry is not None else 0

    async def version(self, scope: str) -> int:
        with self._lock:
            entry = self._scopes.get(scope)
            return entry.version if entry is not None else 0

    async def load_versioned(self, scope: str) -> tuple[int, list[StoredRecord]]:
        with self._lock:
            entry = self._scopes.get(scope)
            if entry is None:
                return 0, []
            version, raw = entry.version, list(entry.records)
        return version, decode_records(scope, 0, raw)

    async def set_title(self, scope: str, title: str) -> None:
        check_title(scope, title)
        with self._lock:
            self._entry(scope, time.time()).title = title

    async def get_title(self, scope: str) -> str | None:
        with self._lock:
            entry = self._scopes.get(scope)
            return entry.title if entry is not None else None

    async def info(self, scope: str) -> ScopeInfo | None:
        with self._lock:
            entry = self._scopes.get(scope)
            return entry.info(scope) if entry is not None else None

    async def scopes(
        self, *, limit: int = 100, offset: int = 0, title: str | None = None
    ) -> list[ScopeInfo]:
        with self._lock:
            items = [entry.info(scope) for scope, entry in self._scopes.items()]
        if title is not None:
            wanted = _ascii_lower(title)
            items = [i for i in items if i.title is not None and wanted in _ascii_lower(i.title)]
        # Insertion order breaks ties, newest first, like the SQL backends' row order.
        order = {info.scope: i for i, info in enumerate(items)}
        items.sort(key=lambda s: (s.updated_at, order[s.scope]), reverse=True)
        return items[offset : offset + limit]

    async def delete(self, scope: str) -> None:
        with self._lock:
            self._scopes.pop(scope, None)

    async def acquire_scope(
        self, scope: str, owner: str, *, ttl: float, replace: str | None = None
    ) -> str | None:
        check_scope(scope)
        now = time.time()
        with self._lock:
            held = self._leases.get(scope)
            if held is not None and held[0] not in (owner, replace) and held[1] >= now:
                return held[0]
            self._leases[scope] = (owner, now + ttl)
            return None

    async def renew_scope(self, scope: str, owner: str, *, ttl: float) -> bool:
        with self._lock:
            held = self._leases.get(scope)
            if held is None or held[0] != owner:
                return False
            self._leases[scope] = (owner, time.time() + ttl)
            return True

    async def release_scope(self, scope: str, owner: str) -> None:
        with self._lock:
            held = self._leases.get(scope)
            if held is not None and held[0] == owner:
                del self._leases[scope]

    async def aclose(self) -> None:
        return None


# -- RunStore --------------------------------------------------------------------------------

# Indexes into a run summary row: RUN_INFO_COLUMNS, then the lease's end.
_COLUMN = {
    name.strip(): i for i, name in enumerate([*RUN_INFO_COLUMNS.split(","), "lease_expires_at"])
}
_STATUS, _LEASE = _COLUMN["status"], _COLUMN["lease_expires_at"]


@dataclass(slots=True)
class _Finish:
    """A `finish_run` checked and encoded (`plan_finish`), as the row's new values."""

    plan: RunFinish
    values: dict[str, Any]
    """Column -> its new value."""
    turn: str | None
    """A paused run's turn (JSON text)."""
    deadline: float | None
    owner: str | None
    """The token of a writer that takes the run over (then not fenced)."""

    @classmethod
    def of(cls, run_id: str, status: RunStatus, end: RunEnd, blob_threshold: int) -> _Finish:
        plan = plan_finish(run_id, status, end, blob_threshold)
        columns = dict(plan.columns)
        turn, deadline = columns.pop("paused_turn"), columns.pop("pending_deadline")
        owner = columns.pop("lease_owner", None)
        values = {
            "status": status,
            "ended_at": plan.ended_at,
            "error": plan.error,
            **columns,
            "lease_expires_at": None if plan.ttl is None else time.time() + plan.ttl,
        }
        return cls(plan, values, turn, deadline, owner)


def _plain_ends(messages: InMemoryMessageStore, runs: InMemoryRunStore) -> bool:
    """Whether `append`, `release_scope` and `finish_run` are the in-memory stores' own (what
    `finish_turn` does in their stead)."""
    kinds = (type(messages), type(runs))
    known = _PLAIN_ENDS.get(kinds)
    if known is None:
        known = _PLAIN_ENDS[kinds] = (
            kinds[0].append is InMemoryMessageStore.append
            and kinds[0].release_scope is InMemoryMessageStore.release_scope
            and kinds[1].finish_run is InMemoryRunStore.finish_run
        )
    own = vars(messages)  # nor replaced on the instances
    return (
        known
        and "finish_run" not in vars(runs)
        and "append" not in own
        and "release_scope" not in own
    )


_PLAIN_ENDS: dict[tuple[type, type], bool] = {}


def _read(row: list[Any], now: float) -> list[Any]:
    """A copy of a run summary row as read: running past its lease is "interrupted"."""
    row = list(row)
    if row[_STATUS] == "running" and row[_LEASE] is not None and row[_LEASE] < now:
        row[_STATUS] = "interrupted"
    return row


class InMemoryRunStore(_KeepsBlobs):
    """A RunStore in dicts, each run kept as the row a database holds. Media data over
    `blob_threshold` bytes in an event goes to `blobs`."""

    def _empty(self) -> None:
        self._runs: dict[str, list[Any]] = {}
        """run_id -> summary row; insertion order is start order."""
        self._order: dict[str, int] = {}
        """run_id -> its position in start order (what breaks ties of equal start times)."""
        self._events: dict[str, list[tuple[str, float, str]]] = {}
        self._owners: dict[str, str | None] = {}
        """run_id -> the token of the lease its writer holds (None: not fenced)."""
        self._paused: dict[str, tuple[str, float | None]] = {}
        """run_id -> a paused run's turn (JSON text) and when its calls expire."""

    async def start_run(
        self, info: RunInfo, *, lease_ttl: float | None = None, lease: str | None = None
    ) -> None:
        row = [*encode_run_info(info), None if lease_ttl is None else time.time() + lease_ttl]
        with self._lock:
            if info.run_id in self._runs:
                raise StoreError(f"run {info.run_id!r} already exists")
            self._order[info.run_id] = len(self._runs)
            self._runs[info.run_id] = row
            self._events[info.run_id] = []
            self._owners[info.run_id] = lease

    def _fence(self, run_id: str, lease: str | None) -> None:
        if run_id not in self._events:
            raise StoreError(f"run {run_id!r} was never started")
        owner = self._owners.get(run_id)
        if lease is not None and owner is not None and owner != lease:
            raise LeaseLostError("run", run_id, owner)

    async def append_events(
        self, run_id: str, events: Sequence[NewRunEvent], *, lease: str | None = None
    ) -> int:
        encoded, blobs = encode_new_events(run_id, events, self.blob_threshold)
        with self._lock:
            self._fence(run_id, lease)
            self.blobs.keep(blobs)
            log = self._events[run_id]
            log.extend(encoded)
            return len(log)

    async def append_events_many(self, batches: Sequence[EventBatch]) -> list[int]:
        encoded, blobs = encode_batches(batches, self.blob_threshold)
        with self._lock:
            for run_id, _, lease in batches:
                self._fence(run_id, lease)
            self.blobs.keep(blobs)
            lasts = []
            for run_id, rows, _ in encoded:
                log = self._events[run_id]
                log.extend(rows)
                lasts.append(len(log))
            return lasts

    async def finish_run(self, run_id: str, status: RunStatus, **end: Unpack[RunEnd]) -> int:
        finish = _Finish.of(run_id, status, end, self.blob_threshold)
        with self._lock:
            self._check_finish(run_id, finish)
            return self._write_finish(run_id, finish)

    async def finish_turn(
        self, run_id: str, status: RunStatus, append: ScopeAppend, **end: Unpack[RunEnd]
    ) -> int | None:
        """`TurnEnds`: with an in-memory message store, its append, the scope's lease given
        back and the run's end under both stores' locks (the message store's first, the only
        place that holds two), everything checked before anything is written. None (two
        writes) for another message store, or for stores whose class changes one of the three
        (a subclass's own `append` is called as it is)."""
        messages = append.store
        if not isinstance(messages, InMemoryMessageStore) or not _plain_ends(messages, self):
            return None
        scope, lease = append.scope, append.lease
        encoded, blobs = encode_new_records(scope, append.records, messages.blob_threshold)
        finish = _Finish.of(run_id, status, end, self.blob_threshold)
        now = time.time()
        with messages._lock, self._lock:
            messages._check_lease(scope, lease)
            entry = messages._scopes.get(scope)
            if (len(entry.records) if entry is not None else 0) != append.start:
                return None  # another writer appended meanwhile: nothing written
            self._check_finish(run_id, finish)
            messages._write(scope, encoded, blobs, now)
            if lease is not None:
                del messages._leases[scope]  # held by `lease`: checked above
            return self._write_finish(run_id, finish)

    def _check_finish(self, run_id: str, finish: _Finish) -> None:
        """Raise what `finish_run` refuses (under the lock), before anything is written."""
        if run_id not in self._runs:
            raise StoreError(f"run {run_id!r} was never started")
        if finish.owner is None:
            self._fence(run_id, finish.plan.fence)

    def _write_finish(self, run_id: str, finish: _Finish) -> int:
        """Write a checked finish (under the lock); the seq of the run's last event."""
        plan = finish.plan
        if finish.owner is not None:
            self._owners[run_id] = finish.owner  # a writer that took the run over
        row = self._runs[run_id]
        for column, value in finish.values.items():
            row[_COLUMN[column]] = value
        if finish.turn is None:
            self._paused.pop(run_id, None)
        else:
            self._paused[run_id] = (finish.turn, finish.deadline)
        self.blobs.keep(plan.blobs)
        log = self._events[run_id]
        log.extend(plan.events)
        return len(log)

    async def resume_run(self, run_id: str, **resume: Unpack[RunResume]) -> PausedRun:
        encoded = encode_events(run_id, resume.get("events", ()))
        lease_ttl = resume.get("lease_ttl")
        with self._lock:
            row = self._runs.get(run_id)
            if row is None or row[_STATUS] != "paused":
                status = None if row is None else _read(row, time.time())[_STATUS]
                raise not_paused(run_id, status, None if row is None else row[_COLUMN["meta"]])
            meta = json.loads(row[_COLUMN["meta"]])
            meta[RESUMED_BY] = resume["resumed_by"]
            row[_COLUMN["meta"]] = json.dumps(meta)
            row[_STATUS] = "running"
            row[_COLUMN["pending"]] = None
            row[_LEASE] = None if lease_ttl is None else time.time() + lease_ttl
            turn, _ = self._paused[run_id]
            log = self._events[run_id]
            log.extend(encoded)
            return PausedRun(run_info_from_row(list(row)), decode_turn(run_id, turn), len(log))

    async def expired_pauses(self, *, limit: int = 100) -> list[str]:
        now = time.time()
        with self._lock:
            due = [
                (deadline, run_id)
                for run_id, (_, deadline) in self._paused.items()
                if deadline is not None
                and deadline <= now
                and self._runs[run_id][_STATUS] == "paused"
            ]
        return [run_id for _, run_id in sorted(due)[:limit]]

    async def request_cancel(self, run_id: str) -> bool:
        with self._lock:
            row = self._runs.get(run_id)
            if row is None or row[_COLUMN["status"]] != "running":
                return False
            meta = json.loads(row[_COLUMN["meta"]])
            meta[CANCEL_REQUESTED] = time.time()
            row[_COLUMN["meta"]] = json.dumps(meta)
            return True

    async def cancel_requests(self, run_ids: Sequence[str]) -> list[str]:
        with self._lock:
            return [
                run_id
                for run_id in run_ids
                if (row := self._runs.get(run_id)) is not None
                and CANCEL_REQUESTED in json.loads(row[_COLUMN["meta"]])
            ]

    async def renew_leases(self, run_ids: Sequence[str], *, lease_ttl: float) -> None:
        expires = time.time() + lease_ttl
        with self._lock:
            for run_id in run_ids:
                row = self._runs.get(run_id)
                if row is not None and row[_STATUS] == "running":
                    row[_LEASE] = expires

    async def query_runs(
        self, query: RunQuery, *, limit: int = 50, cursor: str | None = None
    ) -> RunPage:
        after = decode_cursor(cursor) if cursor is not None else None
        now = time.time()
        with self._lock:
            ordered = [(_read(row, now), self._order[run_id]) for run_id, row in self._runs.items()]
        started = _COLUMN["started_at"]
        ordered.sort(key=lambda pair: (pair[0][started], pair[1]), reverse=True)
        picked: list[tuple[RunInfo, int]] = []
        for row, i in ordered:
            if after is not None and (row[started], i) >= after:
                continue
            info = run_info_from_row(row)
            if run_matches(info, query):
                picked.append((info, i))
                if len(picked) > limit:
                    break
        more = len(picked) > limit
        picked = picked[:limit]
        last = picked[-1] if picked and more else None
        return RunPage(
            [info for info, _ in picked],
            encode_cursor(last[0].started_at, last[1]) if last is not None else None,
        )

    async def run_totals(self, query: RunQuery) -> RunTotals:
        with self._lock:
            rows = [list(row) for row in self._runs.values()]
        infos = (run_info_from_row(row) for row in rows)
        return totals_of(i for i in infos if run_matches(i, query))

    async def get_run(self, run_id: str) -> RunInfo | None:
        with self._lock:
            row = self._runs.get(run_id)
            row = None if row is None else _read(row, time.time())
        return run_info_from_row(row) if row is not None else None

    async def list_runs(self, **listing: Unpack[RunListing]) -> list[RunInfo]:
        filters = listing_filters(listing)
        wanted = [(_COLUMN[c], v) for c, v in filters.items() if v is not None]
        offset = listing.get("offset", 0)
        limit = listing.get("limit", 50)
        now = time.time()
        with self._lock:
            picked = [
                _read(row, now)
                for row in reversed(self._runs.values())
                if all(row[i] == v for i, v in wanted)
            ]
        # Newest first; among equal start times, the later start_run() first.
        started = _COLUMN["started_at"]
        picked.sort(key=lambda row: row[started], reverse=True)
        return [run_info_from_row(row) for row in picked[offset : offset + limit]]

    async def events(
        self, run_id: str, *, after: int = 0, limit: int | None = None
    ) -> list[RunEvent]:
        start = max(after, 0)
        end = start + max(limit, 0) if limit is not None else None
        with self._lock:
            log = self._events.get(run_id, [])[start:end]
        return [
            decode_event(run_id, start + i + 1, kind, at, raw)
            for i, (kind, at, raw) in enumerate(log)
        ]

    async def aclose(self) -> None:
        return None


def _ascii_lower(text: str) -> str:
    """Lower-case ASCII letters only, as SQL's LIKE and lower() compare in every backend."""
    return text.translate(_ASCII_LOWER)


_ASCII_LOWER = {c: c + 32 for c in range(ord("A"), ord("Z") + 1)}
