"""The runs list: rows, filters, pages."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ...errors import StoreCorruptError, StoreError
from ...lab import Runtime
from ...stores.run_store import RunInfo, RunQuery
from ._catalog import Catalog
from ._common import BATCH, PAGE_SIZE, Unreadable, guarded_read

# -- runs ------------------------------------------------------------------------------------


def duration(info: RunInfo, now: float) -> float | None:
    if info.started_at <= 0:
        return None
    end = info.ended_at if info.ended_at is not None else now
    return max(end - info.started_at, 0.0)


def run_json(info: RunInfo, now: float, *, traceback: bool = True) -> dict[str, Any]:
    """A run summary as the JSON API shows it (`RunInfo.to_json` and how long it ran); a list
    leaves out the tracebacks (`traceback=False`: up to 20,000 characters each), a run's own
    record has it."""
    return {**info.to_json(traceback=traceback), "duration": duration(info, now)}


@dataclass(slots=True)
class RunRow:
    """One row of the runs list: a run, or why the row could not be read."""

    info: RunInfo | None
    error: str | None = None


async def run_batch(runtime: Runtime, offset: int, filters: dict[str, Any]) -> list[RunRow]:
    """Up to `BATCH` runs matching `filters` from `offset`, newest first. A batch with a
    corrupt row is read again one run at a time, so only the bad rows become error rows."""
    store = runtime.run_store
    try:
        return [RunRow(i) for i in await store.list_runs(limit=BATCH, offset=offset, **filters)]
    except StoreCorruptError:
        pass
    rows: list[RunRow] = []
    for i in range(offset, offset + BATCH):
        try:
            one = await store.list_runs(limit=1, offset=i, **filters)
        except StoreCorruptError as exc:
            rows.append(RunRow(None, f"StoreCorruptError: {exc}"))
            continue
        if not one:
            break
        rows.append(RunRow(one[0]))
    return rows


async def list_runs(
    catalog: Catalog, *, page: int = 1, show_all: bool = False
) -> tuple[list[RunRow], bool]:
    """One page of listed runs (newest first), and whether there is a next page.

    Raises:
        Unreadable: the run store failed.
    """
    skip = (page - 1) * PAGE_SIZE
    rows: list[RunRow] = []
    offset = 0
    while len(rows) <= PAGE_SIZE:
        batch = await guarded_read(run_batch(catalog.runtime, offset, {}))
        for row in batch:
            if row.info is not None and not show_all and not catalog.lists_run(row.info):
                continue
            if skip:
                skip -= 1
                continue
            rows.append(row)
        if len(batch) < BATCH:
            break
        offset += len(batch)
    return rows[:PAGE_SIZE], len(rows) > PAGE_SIZE


@dataclass(slots=True, frozen=True)
class RunFilters:
    """What the run list is filtered by (`/runs?...` and `/api/runs?...`): the query's own
    fields (status, `name` for an agent or workflow id, tag, q, since, until), and whether
    the list shows every run."""

    where: RunQuery
    show_all: bool = False
    """Nested runs and runs of unregistered agents and workflows too."""

    @property
    def active(self) -> bool:
        return self.where != RunQuery()

    def query(self, catalog: Catalog) -> RunQuery:
        if self.show_all:
            return self.where
        # A paused run waits for a decision wherever it sits (in a workflow step too, the
        # workflow waiting with it): the "Waiting for you" list shows it.
        return replace(
            self.where,
            roots_only=self.where.status != "paused",
            agents=tuple(sorted(catalog.agents)),
            workflows=tuple(sorted(catalog.workflows)),
        )


async def page_runs(
    catalog: Catalog, filters: RunFilters, *, cursor: str | None = None, limit: int = PAGE_SIZE
) -> tuple[list[RunRow], str | None]:
    """One page of the run list, newest first, and the cursor of the next page.

    A store with an unreadable row cannot serve a filtered page: the rows are then read one
    at a time (unfiltered pages only), so that the bad row becomes an error row of its own.

    Raises:
        Unreadable: the run store failed.
        ConfigError: a cursor no page returned.
    """
    query = filters.query(catalog)
    try:
        page = await catalog.runtime.run_store.query_runs(query, limit=limit, cursor=cursor)
    except StoreCorruptError as exc:
        if filters.active:
            raise Unreadable(
                f"StoreCorruptError: {exc} (filters need every row of the page to read)"
            ) from exc
        return await _rows_one_by_one(catalog, filters, cursor, limit)
    except StoreError as exc:
        raise Unreadable(f"{type(exc).__name__}: {exc}") from exc
    return [RunRow(i) for i in page.runs], page.next_cursor


async def _rows_one_by_one(
    catalog: Catalog, filters: RunFilters, cursor: str | None, limit: int
) -> tuple[list[RunRow], str | None]:
    offset = 0
    if cursor is not None and cursor.startswith("offset:"):
        try:
            offset = max(int(cursor[len("offset:") :]), 0)
        except ValueError:
            offset = 0
    rows: list[RunRow] = []
    position = offset
    while len(rows) <= limit:
        batch = await guarded_read(run_batch(catalog.runtime, position, {}))
        for row in batch:
            position += 1
            if row.info is not None and not filters.show_all and not catalog.lists_run(row.info):
                continue
            rows.append(row)
            if len(rows) > limit:
                break
        if len(batch) < BATCH:
            break
    more = len(rows) > limit
    return rows[:limit], (f"offset:{position - 1}" if more else None)


async def runs_where(runtime: Runtime, **filters: Any) -> tuple[list[RunInfo], list[str]]:
    """All runs matching `filters`, oldest first, and the errors of unreadable rows."""
    infos: list[RunInfo] = []
    errors: list[str] = []
    offset = 0
    while True:
        try:
            batch = await guarded_read(run_batch(runtime, offset, filters))
        except Unreadable as exc:
            errors.append(str(exc))
            break
        for row in batch:
            if row.info is not None:
                infos.append(row.info)
            elif row.error is not None:
                errors.append(row.error)
        if len(batch) < BATCH:
            break
        offset += len(batch)
    infos.reverse()
    return infos, errors
