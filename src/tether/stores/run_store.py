"""RunStore: the record of what ran, for the CLI and the inspection UI.

A run is one agent episode or one workflow run. It has a summary row (`RunInfo`: kind, name,
status, tags, the memory scope and workflow it belongs to) and an ordered list of events
(`RunEvent`: `agent_started`, `agent_text_delta`, `agent_messages_committed`, `agent_finished`,
`agent_failed`, `agent_warning`, and the workflow engine's own). The store numbers each run's
events from 1, so a reader can tail a live run with `events(run_id, after=last_seq)`.

A writer that keeps a heartbeat starts a run with a lease (`start_run(info, lease_ttl=30)`) and
renews it (`renew_leases`) while the run goes on. A run still marked running whose lease expired
reads back as `"interrupted"` (its process was killed, or its machine lost power) — computed when
read, in `get_run`, `list_runs` and `query_runs` alike; a run stopped with Ctrl-C stays
`"cancelled"`.

**Fencing.** A writer may also give its lease a token (`start_run(info, lease=token)`: unique per
holder, such as the owner name of the workflow run it records). Every `append_events` and
`finish_run` that carries `lease=token` is then refused with `LeaseLostError`, in the same
statement that would write it, once the run's lease has another token: another process took
the run over (`finish_run(run_id, "running", lease=its_token)`), and the writer that stalled
past its lease may write nothing more.

Three implementations pass one contract suite (`tests/stores/test_run_store.py`):
`InMemoryRunStore` (`tether.stores.memory`), `SqliteRunStore` (`tether.stores.sqlite`) and
`PostgresRunStore` (`tether.stores.postgres`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import (
    Any,
    Final,
    NamedTuple,
    Protocol,
    Required,
    TypeAlias,
    TypedDict,
    Unpack,
    runtime_checkable,
)

from .message_store import MessageStore, StoredRecord
from .workflow_store import RunStatus

__all__ = [
    "CANCEL_REQUESTED",
    "PIECE",
    "RESUMED_BY",
    "TEXT_LIMIT",
    "TRACEBACK_LIMIT",
    "CancelRequests",
    "EventBatch",
    "EventPieces",
    "ManyAppends",
    "NewRunEvent",
    "PausedRun",
    "RunEnd",
    "RunEvent",
    "RunInfo",
    "RunListing",
    "RunPage",
    "RunQuery",
    "RunResume",
    "RunStore",
    "RunTotals",
    "ScopeAppend",
    "StoredEvent",
    "TurnEnds",
]


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
    lease_expires_at: float | None = None
    """While it runs: when its heartbeat lease ends unless renewed (Unix time, by the store's
    clock). A run still "running" past it reads back as "interrupted": its process died.
    None for a run started without a lease, which never reads as interrupted."""
    parent_run_id: str | None = None
    """The episode that started this run from one of its tool calls (an agent or a workflow
    used as a tool, or any episode or workflow run a tool starts), or None. A run nested in
    a workflow run names that run in `workflow_run_id` instead."""
    parent_tool_call_id: str | None = None
    """The id of the parent's tool call that started this run, when known."""
    traceback: str | None = None
    """Where it failed: the formatted traceback of the error (its last `TRACEBACK_LIMIT`
    characters), when the writer recorded one."""
    pending: list[dict[str, Any]] = field(default_factory=list)
    """A paused run's calls that wait for a decision (``[{id, name, input, kind, reason?}]``,
    `tether.events.PendingCall`); empty for any other status."""

    def to_json(self, *, traceback: bool = True) -> dict[str, Any]:
        """Every field as JSON data (lists and dicts copied): the one run summary the CLI's
        `--json` and the UI's API both print, each adding its own keys. `traceback=False`
        leaves the traceback out (up to `TRACEBACK_LIMIT` characters: a list leaves it out)."""
        out = asdict(self)
        if not traceback:
            del out["traceback"]
        return out


TEXT_LIMIT = 2000
"""How many characters of a run's input and output are kept for listing and search."""

TRACEBACK_LIMIT = 20_000
"""How many characters of a failed run's traceback are kept (the last ones: where it failed)."""


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
    """Only runs nested in nothing: no workflow run and no parent episode."""
    agents: tuple[str, ...] | None = None
    """With `workflows`: only agent runs of these ids and workflow runs of those (runs of
    other kinds pass), as the UI's registry-listed runs."""
    workflows: tuple[str, ...] | None = None
    parent_run_id: str | None = None
    """Runs an episode started from its tool calls (`RunInfo.parent_run_id`)."""


@dataclass(slots=True, frozen=True)
class RunPage:
    """One page of `query_runs`: newest first, and the cursor of the next page (None: last)."""

    runs: list[RunInfo]
    next_cursor: str | None


@dataclass(slots=True, frozen=True)
class RunTotals:
    """What the runs matching a query add up to (`RunStore.run_totals`)."""

    runs: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    """The sum over the runs with a known cost."""
    unpriced: int = 0
    """Runs that used tokens but have no known cost: `cost_usd` leaves them out."""

    @property
    def known_cost(self) -> float | None:
        """The total cost, or None when some run that used tokens has no known price."""
        return self.cost_usd if self.unpriced == 0 else None


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


@dataclass(slots=True, frozen=True)
class PausedRun:
    """What `RunStore.resume_run` hands the resumer that won the run."""

    info: RunInfo
    """The run as taken: running again, its pending calls cleared."""
    turn: dict[str, Any]
    """The turn it paused in, as `finish_run(paused=...)` stored it."""
    seq: int
    """The seq of the run's last event (the decisions appended)."""


RESUMED_BY: Final = "resumed_by"
"""The `RunInfo.meta` key `resume_run` sets: who resumed the run (a loser's error names it)."""


class RunEnd(TypedDict, total=False):
    """What `RunStore.finish_run` takes besides the run and its status (every key optional):
    one definition that the protocol and every store share."""

    ended_at: float | None
    """When it ended (Unix time); now by default, for an end status."""
    error: str | None
    """Why a failed run failed."""
    output_text: str | None
    """Its output as plain text (cut at `TEXT_LIMIT` characters); unchanged when None."""
    usage: dict[str, int] | None
    """Token totals of its model calls; unchanged when None."""
    cost_usd: float | None
    """What its model calls cost; unchanged when None."""
    lease_ttl: float | None
    """With status "running": the seconds of the new lease."""
    traceback: str | None
    """Where it failed (its last `TRACEBACK_LIMIT` characters are kept)."""
    lease: str | None
    """The writer's lease token: fences an end, takes the run over with "running"."""
    events: Sequence[NewRunEvent]
    """The run's last events, appended in the same transaction."""
    pending: Sequence[Mapping[str, Any]] | None
    """With "paused": the calls that wait for a decision."""
    paused: Mapping[str, Any] | None
    """With "paused": the JSON-safe turn `resume_run` hands back."""
    pending_deadline: float | None
    """With "paused": when the pending calls expire (Unix time)."""


class RunResume(TypedDict, total=False):
    """What `RunStore.resume_run` takes besides the run."""

    resumed_by: Required[str]
    """Who resumes it (kept in meta ``resumed_by``; a losing resumer's error names it)."""
    lease_ttl: float | None
    """The seconds of the lease the resumed run holds (None: no lease)."""
    events: Sequence[NewRunEvent]
    """Appended in the same write (the decisions)."""


class RunListing(TypedDict, total=False):
    """What `RunStore.list_runs` takes: the filters (each None or left out: any) and the page."""

    kind: str | None
    workflow_run_id: str | None
    memory_scope: str | None
    limit: int
    """At most this many runs; 50 when left out."""
    offset: int
    """Skip this many of the newest first; 0 when left out."""


EventBatch: TypeAlias = tuple[str, Sequence[NewRunEvent], str | None]
"""One run's events in `ManyAppends.append_events_many`: (run id, events, lease token or None)."""


class RunStore(Protocol):
    """Run summaries and their ordered events."""

    async def start_run(
        self, info: RunInfo, *, lease_ttl: float | None = None, lease: str | None = None
    ) -> None:
        """Create the summary of a new run. With `lease_ttl`, the run holds a heartbeat lease
        of that many seconds (by the store's clock; `info.lease_expires_at` is ignored) that the
        writer keeps renewing with `renew_leases` while the run goes on. `lease` is the token
        that fences the run's later writes (see the module docstring).

        Raises:
            StoreError: a run with that id already exists.
        """
        ...

    async def renew_leases(self, run_ids: Sequence[str], *, lease_ttl: float) -> None:
        """Extend the leases of those of `run_ids` that still run to `lease_ttl` seconds from
        now (one write for all of them; unknown or ended runs are skipped)."""
        ...

    async def append_events(
        self, run_id: str, events: Sequence[NewRunEvent], *, lease: str | None = None
    ) -> int:
        """Append events to a started run atomically; return the seq of the last one.

        Raises:
            LeaseLostError: `lease` is given and the run's lease has another token now.
            StoreError: the run does not exist; nothing is written.
            NotJSONSafeError: an event's data would not survive JSON; nothing is written.
        """
        ...

    async def finish_run(self, run_id: str, status: RunStatus, **end: Unpack[RunEnd]) -> int:
        """Set the final status of a run (and why, for a failure: `error`, and `traceback`
        cut to its last `TRACEBACK_LIMIT` characters), releasing its lease. Setting
        "running" again (a resumed workflow run) clears the end time and the error and, with
        `lease_ttl`, takes a new lease (with `lease`, under that token: a takeover). `output_text`,
        `usage` and `cost_usd` are set when given (an output is cut at `TEXT_LIMIT` characters).
        `events` are the run's last events, appended in the same transaction (a turn's final
        events and its end are one write). Returns the seq of the run's last event.

        Status "paused" (a turn waiting for decisions) takes `pending` (the calls, listed as
        `RunInfo.pending`), `paused` (the JSON-safe turn `resume_run` hands back) and
        `pending_deadline` (Unix time the calls expire, found by `expired_pauses`); it has no
        end time and releases the lease. Any other status clears all three.

        Raises:
            LeaseLostError: `lease` is given, the status is an end, and the run's lease has
                another token now; nothing is written.
            NotJSONSafeError: an event's data would not survive JSON; nothing is written.
            StoreError: "paused" without `pending` or `paused`.
        """
        ...

    async def resume_run(self, run_id: str, **resume: Unpack[RunResume]) -> PausedRun:
        """Take a paused run to resume it: one conditional write sets it "running" again (with
        a lease of `lease_ttl` seconds), clears its pending calls, records `resumed_by` (meta
        ``resumed_by``) and appends `events` (the decisions). Of two resumers exactly one
        gets the run; the turn it paused in comes back with it.

        Raises:
            RunNotFoundError: there is no such run.
            RunNotPausedError: the run is not paused (its status and, when another resumer
                won, `winner`); nothing is written.
        """
        ...

    async def expired_pauses(self, *, limit: int = 100) -> list[str]:
        """Paused runs whose `pending_deadline` has passed (by the store's clock), oldest
        deadline first, at most `limit`."""
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

    async def run_totals(self, query: RunQuery) -> RunTotals:
        """How many runs match `query`, and their tokens and cost added up."""
        ...

    async def get_run(self, run_id: str) -> RunInfo | None:
        """The summary of one run, or None."""
        ...

    async def list_runs(self, **listing: Unpack[RunListing]) -> list[RunInfo]:
        """Runs, newest first, optionally only one kind, workflow run or scope."""
        ...

    async def events(
        self, run_id: str, *, after: int = 0, limit: int | None = None
    ) -> list[RunEvent]:
        """The events of a run with seq greater than `after`, in order; at most `limit` of
        them (a reader that pages through a long run holds one page at a time)."""
        ...

    async def aclose(self) -> None:
        """Release what the store opened itself; idempotent."""
        ...


CANCEL_REQUESTED = "cancel_requested_at"
"""The `RunInfo.meta` key a cancel request sets (Unix time it was asked)."""


@runtime_checkable
class CancelRequests(Protocol):
    """Cancel requests for runs that execute in another process (a `tether serve` worker other
    than the one a client asked): the request is stored with the run (`RunInfo.meta`
    `cancel_requested_at`), and the process executing the run asks for its runs' requests and
    cancels them. The three built-in RunStores implement it."""

    async def request_cancel(self, run_id: str) -> bool:
        """Ask for the run to be cancelled. False when there is no such run still running."""
        ...

    async def cancel_requests(self, run_ids: Sequence[str]) -> list[str]:
        """Those of `run_ids` whose cancel was asked for (one read for all of them)."""
        ...


@runtime_checkable
class ManyAppends(Protocol):
    """Appends of many runs in one write: what a store offers so that the events of many runs
    running at once (a server's) cost one transaction, not one each. The three built-in
    RunStores implement it; the run recorder uses it when the store has it."""

    async def append_events_many(self, batches: Sequence[EventBatch]) -> list[int]:
        """`append_events` for each (run id, events, lease token), atomically together; the
        seq of each batch's last event, in order. At most one batch per run.

        Raises:
            LeaseLostError: a batch's token is not its run's any more; nothing is written.
            StoreError: a run does not exist; nothing is written.
            NotJSONSafeError: an event's data would not survive JSON; nothing is written.
        """
        ...


@dataclass(slots=True, frozen=True)
class ScopeAppend:
    """The records a turn's end appends to its memory scope in the write that finishes its run
    (`TurnEnds.finish_turn`)."""

    store: MessageStore
    """The message store of the scope: the write is one only when it shares the run store's
    database."""
    scope: str
    records: Sequence[StoredRecord]
    start: int
    """The scope's length as the writer knows it: the records go there, or nothing is written."""
    lease: str | None = None
    """The owner of the scope's lease the append is made under (`MessageStore.append(lease=)`):
    refused unless it still holds the lease, which the same write gives back."""


@runtime_checkable
class TurnEnds(Protocol):
    """Run stores that end a turn in one transaction: the run's finish and last events, the
    turn's last records appended to its memory scope, and the scope's lease given back (a
    persisted turn's end is one write, not three). The SQLite RunStore implements it for a
    message store on its own connection; the run recorder uses it when the store has it."""

    async def finish_turn(
        self, run_id: str, status: RunStatus, append: ScopeAppend, **end: Unpack[RunEnd]
    ) -> int | None:
        """`append.store.append(...)`, `release_scope(...)` (with `append.lease`) and
        `finish_run(run_id, status, **end)` atomically together; the seq of the run's last
        event. None, with nothing written, when they cannot be one write: the message store
        is not on this store's database, or the scope's length is not `append.start`.

        Raises:
            LeaseLostError: `append.lease` no longer holds the scope's lease (or `end`'s
                lease the run's); nothing is written.
            NotJSONSafeError: a record or an event would not survive JSON; nothing is written.
            StoreError: as `append` and `finish_run` raise it; nothing is written.
        """
        ...


PIECE: Final = 16_384
"""Characters of an event's JSON text the SQL stores keep in one row: a longer one (a long
answer, a big tool result) is stored in pieces of this size, which `EventPieces` reads one at
a time."""


class StoredEvent(NamedTuple):
    """A stored event as its JSON text, not parsed (`EventPieces.stored_events`)."""

    seq: int
    type: str
    at: float
    data: str | None
    """The JSON text of the event's `data`; None when it is longer than `PIECE` and stored
    in pieces (read them with `EventPieces.event_pieces`)."""


@runtime_checkable
class EventPieces(Protocol):
    """Events read as their stored JSON text, a long one in pieces: what a reader that only
    passes events on (`tether serve`'s streams) uses so that its memory does not grow with the
    largest event of a run. The SQLite and PostgreSQL RunStores implement it."""

    async def stored_events(
        self, run_id: str, *, after: int = 0, limit: int | None = None
    ) -> list[StoredEvent]:
        """`events(run_id, after=, limit=)`, each as its stored text (None for one stored in
        pieces)."""
        ...

    async def event_pieces(
        self, run_id: str, seq: int, *, start: int = 0, limit: int = 16
    ) -> list[str]:
        """Pieces `start` to `start + limit` of event `seq`'s data text, in order (joined, all
        of them are its JSON text); fewer at its end, none when it is not stored in pieces."""
        ...
