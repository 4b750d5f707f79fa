"""The conversations list and one conversation: turns, the pinned prompt, pages."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ...errors import StoreCorruptError, StoreError
from ...evals import CASE_SCOPE_PREFIX
from ...lab import Runtime
from ...run_events import AGENT_MESSAGES_COMMITTED
from ...stores.message_store import ScopeInfo, StoredRecord
from ...stores.run_store import RunInfo, RunQuery, RunTotals
from ._catalog import Catalog
from ._common import BATCH, PAGE_SIZE, Unreadable, guarded_read
from ._runs import run_batch, run_json

# -- conversations ---------------------------------------------------------------------------


@dataclass(slots=True)
class ScopeRow:
    info: ScopeInfo
    agent_id: str | None
    error: str | None = None


async def _scope_agent(runtime: Runtime, scope: str) -> tuple[str | None, str | None]:
    """The agent of the latest episode on `scope` (None when no episode was recorded)."""
    try:
        latest = await guarded_read(
            runtime.run_store.list_runs(memory_scope=scope, kind="agent", limit=1)
        )
    except Unreadable as exc:
        return None, str(exc)
    return (latest[0].name if latest else None), None


async def list_scopes(
    catalog: Catalog, *, page: int = 1, title: str | None = None
) -> tuple[list[ScopeRow], bool]:
    """One page of listed conversations (most recently written first) and whether there is
    a next page. A conversation is listed when its latest episode's agent is registered, or
    when no episode of it was recorded (a store written by other means), unless it is an
    experiment case's (`tether.evals.CASE_SCOPE_PREFIX`). With `title`, only
    conversations whose title contains it.

    Raises:
        Unreadable: the message store failed.
    """
    runtime = catalog.runtime
    skip = (page - 1) * PAGE_SIZE
    rows: list[ScopeRow] = []
    offset = 0
    while len(rows) <= PAGE_SIZE:
        batch = await guarded_read(
            runtime.message_store.scopes(limit=BATCH, offset=offset, title=title)
        )
        for info in batch:
            if info.scope.startswith(CASE_SCOPE_PREFIX):
                continue  # an experiment case's: the experiment's page shows it
            agent_id, error = await _scope_agent(runtime, info.scope)
            if agent_id is not None and agent_id not in catalog.agents:
                continue
            if skip:
                skip -= 1
                continue
            rows.append(ScopeRow(info, agent_id, error))
            if len(rows) > PAGE_SIZE:
                break
        if len(batch) < BATCH:
            break
        offset += len(batch)
    return rows[:PAGE_SIZE], len(rows) > PAGE_SIZE


async def search_scopes(
    catalog: Catalog, q: str, *, title: str | None = None, cursor: str | None = None
) -> tuple[list[ScopeRow], str | None]:
    """Conversations of registered agents with an episode whose input or output has every
    word of `q` (the run store's text search), by their newest such episode, newest first;
    with `title`, only those whose title contains it. Returns a page (about `PAGE_SIZE`
    rows) and the cursor of the next one.

    A conversation shows on the page of its newest matching episode only: an older match met
    on a later page is passed over.

    Raises:
        Unreadable: a store failed.
        ConfigError: a cursor no page returned.
    """
    runtime = catalog.runtime
    agents = tuple(sorted(catalog.agents))
    query = RunQuery(kind="agent", q=q, agents=agents, workflows=())
    rows: list[ScopeRow] = []
    wanted = title.lower() if title else None
    while len(rows) < PAGE_SIZE:
        try:
            page = await runtime.run_store.query_runs(query, limit=PAGE_SIZE, cursor=cursor)
        except (StoreCorruptError, StoreError) as exc:
            raise Unreadable(f"{type(exc).__name__}: {exc}") from exc
        for run in page.runs:
            scope = run.memory_scope
            if scope is None or scope.startswith(CASE_SCOPE_PREFIX):
                continue
            if any(r.info.scope == scope for r in rows):
                continue
            newest = await runtime.run_store.query_runs(
                RunQuery(kind="agent", q=q, memory_scope=scope), limit=1
            )
            if not newest.runs or newest.runs[0].run_id != run.run_id:
                continue  # an older match: the conversation is on an earlier page
            info = await guarded_read(runtime.message_store.info(scope))
            if info is None:
                continue
            if wanted is not None and (info.title is None or wanted not in info.title.lower()):
                continue
            rows.append(ScopeRow(info, run.name))
        cursor = page.next_cursor
        if cursor is None:
            break
    return rows, cursor


def totals_json(totals: RunTotals | None) -> dict[str, Any] | None:
    if totals is None:
        return None
    return {
        "runs": totals.runs,
        "input_tokens": totals.input_tokens,
        "output_tokens": totals.output_tokens,
        "cost_usd": totals.known_cost,
        "unpriced_runs": totals.unpriced,
    }


def scope_json(info: ScopeInfo) -> dict[str, Any]:
    """A scope's summary as the JSON API shows it: every `ScopeInfo` field."""
    return asdict(info)


@dataclass(slots=True)
class PromptView:
    """The system prompt a conversation page shows.

    `source` is "pinned" (the scope's stored first record), "live" (the agent's current
    definition rendered now, for a scope that has not pinned one), "error" (the live template
    cannot render), "none" (the agent has no system prompt) or "unknown" (no agent to ask).
    """

    source: str
    text: str | None = None
    error: str | None = None
    agent_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(slots=True)
class Turn:
    """A contiguous stretch of the stored list written by one episode (or by none we know)."""

    start: int
    end: int
    """Record indexes [start, end) of the stored list."""
    records: list[tuple[int, StoredRecord]]
    run: RunInfo | None
    continued: bool = False
    """This episode also wrote an earlier stretch (episodes on one scope interleaved)."""

    def to_json(self, now: float) -> dict[str, Any]:
        return {
            "start": self.start,
            "end": self.end,
            "run": run_json(self.run, now, traceback=False) if self.run is not None else None,
            "continued": self.continued,
            "records": [{"index": i, "record": r} for i, r in self.records],
        }


@dataclass(slots=True)
class ConversationView:
    """Everything the conversation page shows."""

    scope: str
    info: ScopeInfo | None
    prompt: PromptView
    turns: list[Turn]
    records_error: str | None
    errors: list[str]
    older: int | None = None
    """The `before` of the page of older episodes, or None when this page reaches the start."""
    totals: RunTotals | None = None
    """Tokens and cost of every episode of the conversation (not only this page's)."""
    end: int = 0
    """The record index this page ends before."""
    skip: int = 0
    """How many of the scope's runs (newest first) the older page need not read again."""


def _pin_text(record: Mapping[str, Any]) -> str:
    content = record.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(p.get("text", "")) for p in content if isinstance(p, dict) and "text" in p
        )
    return json.dumps(content)


def prompt_for(
    catalog: Catalog, records: Sequence[StoredRecord] | None, agent_id: str | None
) -> PromptView:
    """The pinned prompt when the scope has one; otherwise the live agent's, rendered now."""
    if records:
        first = records[0]
        if first.get("role") == "system":
            pinned_by = first.get("agent_id")
            return PromptView(
                "pinned",
                text=_pin_text(first),
                agent_id=pinned_by if isinstance(pinned_by, str) else None,
            )
    agent = catalog.agent(agent_id)
    if agent is None:
        return PromptView("unknown", agent_id=agent_id)
    inspection = agent.inspect_system_prompt()
    if inspection.is_err:
        return PromptView("error", error=inspection.error, agent_id=agent.id)
    if not inspection.text:
        return PromptView("none", agent_id=agent.id)
    return PromptView("live", text=inspection.text, agent_id=agent.id)


async def _commits(runtime: Runtime, run_id: str) -> list[tuple[int, int]]:
    """The (start, count) of every `agent_messages_committed` event of a run."""
    events = await runtime.run_store.events(run_id)
    out: list[tuple[int, int]] = []
    for event in events:
        if event["type"] != AGENT_MESSAGES_COMMITTED:
            continue
        start, count = event["data"].get("start"), event["data"].get("count")
        if isinstance(start, int) and isinstance(count, int) and start >= 0 and count >= 0:
            out.append((start, count))
    return out


def split_turns(
    records: Sequence[StoredRecord],
    episodes: Sequence[tuple[RunInfo, Sequence[tuple[int, int]]]],
    *,
    base: int = 0,
) -> list[Turn]:
    """Split a stretch of the stored list into turns by the list lengths each episode recorded.

    `records` are the stored records from index `base` on. Every episode records where its
    writes landed (`agent_messages_committed`: `start` is the list length before the write).
    Each record index belongs to the episode that wrote it; a turn is a maximal stretch of
    indexes with one owner. Records no given episode wrote form turns of their own; episodes
    that stored nothing (they failed before their first step) are placed by start time. A
    leading pinned system prompt (index 0) is not part of any turn.
    """
    n = len(records)
    owner: list[int | None] = [None] * n
    for k, (_, commits) in enumerate(episodes):
        for start, count in commits:
            for index in range(max(start - base, 0), min(start + count - base, n)):
                owner[index] = k
    first = 1 if base == 0 and n and records[0].get("role") == "system" else 0
    turns: list[Turn] = []
    wrote: set[int] = set()
    i = first
    while i < n:
        who = owner[i]
        j = i
        while j < n and owner[j] == who:
            j += 1
        run = episodes[who][0] if who is not None else None
        continued = who is not None and who in wrote
        turns.append(
            Turn(base + i, base + j, [(base + x, records[x]) for x in range(i, j)], run, continued)
        )
        if who is not None:
            wrote.add(who)
        i = j
    for k, (run, _) in enumerate(episodes):
        if k in wrote:
            continue
        empty = Turn(base + n, base + n, [], run)
        at = len(turns)
        for pos, turn in enumerate(turns):
            if turn.run is not None and turn.run.started_at > run.started_at:
                at = pos
                break
        turns.insert(at, empty)
    return turns


EPISODES_PER_PAGE = 20
"""How many episodes one page of a conversation shows."""
RECORDS_PER_PAGE = 200
"""How many records one page shows of a stretch no recorded episode wrote."""


async def _page_episodes(
    runtime: Runtime, scope: str, before: int, newest_page: bool, skip: int
) -> tuple[list[tuple[RunInfo, list[tuple[int, int]]]], list[str], int]:
    """The episodes of the conversation page that ends at record `before`, newest first: up
    to `EPISODES_PER_PAGE` that wrote records below `before`, and the episodes that stored
    nothing among them (on the newest page, also those newer than all of them). Also the
    number of the scope's runs (newest first) read up to the last one picked.

    `skip` is where the newer page stopped reading: a hint, not a promise. Episodes started
    since push the older ones further down, so reading from `skip` may meet runs of newer
    pages again; those wrote only at or above `before` and are passed over."""
    picked: list[tuple[RunInfo, list[tuple[int, int]]]] = []
    errors: list[str] = []
    writers = 0
    offset = skip
    read_to = skip
    while writers < EPISODES_PER_PAGE:
        batch = await guarded_read(
            run_batch(runtime, offset, {"memory_scope": scope, "kind": "agent"})
        )
        for position, row in enumerate(batch, start=offset + 1):
            read_to = position
            if row.info is None:
                if row.error is not None:
                    errors.append(row.error)
                continue
            try:
                commits = await guarded_read(_commits(runtime, row.info.run_id))
            except Unreadable as exc:
                errors.append(str(exc))
                commits = []
            if commits:
                if min(start for start, _ in commits) >= before:
                    continue  # it belongs to a newer page
                writers += 1
                picked.append((row.info, commits))
                if writers >= EPISODES_PER_PAGE:
                    break
            elif writers or newest_page:
                picked.append((row.info, commits))
        if len(batch) < BATCH:
            break
        offset += len(batch)
    return picked, errors, read_to


async def build_conversation(
    catalog: Catalog,
    scope: str,
    agent_id: str | None = None,
    *,
    before: int | None = None,
    skip: int = 0,
) -> ConversationView | None:
    """The conversation page's data, or None when neither the message store nor the run store
    knows `scope` and no agent was named to preview a new conversation with.

    A page shows the newest `EPISODES_PER_PAGE` episodes that wrote records below `before`
    (default: the whole list), in the order they ran, and `older` is the `before` of the page
    of the episodes ahead of them (None on the first page). Only the page's records are read.

    Raises:
        Unreadable: the message store failed.
    """
    runtime = catalog.runtime
    store = runtime.message_store
    info = await guarded_read(store.info(scope))
    length = info.length if info is not None else 0
    end = length if before is None else max(0, min(before, length))
    errors: list[str] = []
    read_to = skip
    try:
        episodes, errors, read_to = await _page_episodes(
            runtime, scope, end, end == length, skip if end < length else 0
        )
    except Unreadable as exc:
        episodes, errors = [], [str(exc)]
    if info is None and not episodes and catalog.agent(agent_id) is None:
        return None
    if agent_id is None and episodes:
        agent_id = episodes[0][0].name
    records: list[StoredRecord] = []
    records_error = None
    head: list[StoredRecord] = []
    start = end
    if length:
        starts = [s for _, commits in episodes for s, _ in commits if s < end]
        start = min(starts) if starts else max(end - RECORDS_PER_PAGE, 0)
        if errors:
            # Where an unreadable episode wrote is unknown: show a stretch before the page's
            # known records too, as records without a recorded episode.
            start = min(start, max(end - RECORDS_PER_PAGE, 0))
        try:
            head = await guarded_read(store.load(scope, end=1))
            if start <= 1 and head and head[0].get("role") == "system":
                start = 0  # the pin is shown above the transcript, not as the page's start
            records = await guarded_read(store.load(scope, start=start, end=end))
        except Unreadable as exc:
            records_error = str(exc)
    if records_error is not None:
        prompt = PromptView("unknown", agent_id=agent_id)
    else:
        prompt = prompt_for(catalog, head, agent_id)
    episodes.reverse()
    turns = split_turns(records, episodes, base=start) if records_error is None else []
    first = 1 if head and head[0].get("role") == "system" else 0
    older = start if start > first else None
    try:
        totals = await guarded_read(
            runtime.run_store.run_totals(RunQuery(kind="agent", memory_scope=scope))
        )
    except Unreadable as exc:
        errors.append(str(exc))
        totals = None
    return ConversationView(
        scope,
        info,
        prompt,
        turns,
        records_error,
        errors,
        older=older,
        end=end,
        skip=read_to,
        totals=totals,
    )
