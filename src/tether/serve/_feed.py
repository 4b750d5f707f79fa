"""Following a run: its stored events from a point on, then the new ones as they are committed.

A stream is read from the RunStore, never from a worker's memory: a client that reconnects with
`Last-Event-ID` — to this worker or another — gets every event after that number, none twice.
What this process adds is speed: `RunFeed` is one runtime listener that hands each committed
event (the recorder tells listeners only after the store took it, numbered with the store's
sequence) to the streams of this process that follow its run, O(1) per event and stream. A run
that runs in another process is followed by reading the store every `poll` seconds.

Memory per stream does not grow with the run: the store is read a page (`PAGE` events) at a
time, and the next page only once the last one went out (a client that reads slowly holds the
reader at its pace); the live events a stream holds for it are at most `INBOX`, past which they
are dropped and read from the store again when the stream catches up. Nor with the run's
largest event: from a store with `EventPieces` a page holds each event as its stored text, and
one stored in pieces (longer than `run_store.PIECE`) is left there for the writer
(`_frames.event_messages`) to read a few pieces at a time.

A stream ends after the run's terminal event (`agent_finished`, `agent_failed`,
`workflow_finished`, `workflow_failed`, `workflow_waiting`, `agent_paused`) when nothing follows
it in the store,
or when the run's status is final without one (cancelled before it started, or `interrupted`:
its process died and its lease expired).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from ..lab import Runtime
from ..run_events import (
    AGENT_FAILED,
    AGENT_FINISHED,
    AGENT_PAUSED,
    WORKFLOW_FAILED,
    WORKFLOW_FINISHED,
    WORKFLOW_WAITING,
)
from ..stores.run_store import EventPieces, RunEvent, RunInfo, RunStore, StoredEvent

__all__ = ["INBOX", "PAGE", "TERMINAL_EVENTS", "Event", "RunEnd", "RunFeed"]

TERMINAL_EVENTS: Final = frozenset(
    {
        AGENT_FINISHED,
        AGENT_FAILED,
        AGENT_PAUSED,
        WORKFLOW_FINISHED,
        WORKFLOW_FAILED,
        WORKFLOW_WAITING,
    }
)
"""The events after which a run has nothing more to say (unless it is resumed: a waiting
workflow run by its signal, a paused agent run by its decisions; its stream, reconnected with
`Last-Event-ID`, goes on)."""
PAGE = 256
"""Events a stream reads from the store at once (and sends in one write)."""
INBOX = 1024
"""Live events a stream holds for a client that has not taken them yet."""

Event = RunEvent | StoredEvent
"""An event a stream passes on: live (a value), or read from a store as its stored text."""


@dataclass(slots=True, frozen=True)
class RunEnd:
    """How a followed run ended: the last item `RunFeed.follow` yields."""

    status: str
    """``completed``, ``failed``, ``cancelled``, ``interrupted`` (its process died),
    ``waiting`` (a workflow run that waits for a signal: its stream goes on once one resumes
    it), ``paused`` (an agent run whose calls wait for decisions: the same, once they come),
    or ``missing`` (the run was deleted while followed)."""
    error: str | None = None

    def to_json(self, run_id: str) -> dict[str, Any]:
        return {"run_id": run_id, "status": self.status, "error": self.error}


def _seq(event: Event) -> int:
    return event.seq if isinstance(event, StoredEvent) else event["seq"]


def _kind(event: Event) -> str:
    return event.type if isinstance(event, StoredEvent) else event["type"]


async def _end_of(store: RunStore, run_id: str, event: Event) -> RunEnd:
    """The end a terminal event says (the status row is written just after it)."""
    kind = _kind(event)
    if kind in (AGENT_FINISHED, WORKFLOW_FINISHED):
        return RunEnd("completed")
    if isinstance(event, StoredEvent):
        if event.data is not None:
            data = json.loads(event.data)
        else:
            # A failure stored in pieces (it holds a long answer): read whole, once.
            (whole,) = await store.events(run_id, after=event.seq - 1, limit=1)
            data = whole["data"]
    else:
        data = event["data"]
    if kind == WORKFLOW_WAITING:
        paused = data.get("paused_run_id")
        if paused is not None:
            return RunEnd("waiting", f"waits for paused agent run {paused!r}")
        return RunEnd("waiting", f"waits for signal {data.get('name')!r}")
    if kind == AGENT_PAUSED:
        ids = ", ".join(str(p.get("id")) for p in data.get("pending", ()))
        return RunEnd("paused", f"waits for decisions on {ids}")
    error = data.get("error")
    message = f"{error.get('type')}: {error.get('message')}" if isinstance(error, dict) else None
    if kind == AGENT_FAILED:
        return RunEnd("cancelled" if data.get("cancelled") else "failed", message)
    status = data.get("status")
    return RunEnd(status if status in ("failed", "cancelled") else "failed", message)


class _Follower:
    """One stream's inbox: live events of its run, in commit order."""

    __slots__ = ("events", "wake")

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.wake = asyncio.Event()

    def push(self, event: RunEvent) -> None:
        if len(self.events) >= INBOX:
            # Far behind: let go of them at once; the gap they leave is read from the store.
            self.events = []
        self.events.append(event)
        self.wake.set()

    def take(self) -> list[Event]:
        events, self.events = self.events, []
        self.wake.clear()
        return events


class RunFeed:
    """Committed run events of this process, handed to the streams that follow their runs.

    Args:
        runtime: Whose runs are followed (its listeners tell the feed of each committed event;
            its run store is where streams read what they missed).
        poll: Seconds between two reads of the store for a run that runs elsewhere.
        local_check: Seconds between two status reads for a run of this process (a run whose
            process keeps it alive ends with an event; this catches one that ended without).
        takeover_wait: Seconds a stream of a durable root workflow run that reads back as
            interrupted (its worker died) waits for another worker to take the run over before
            it ends `interrupted`; 0 ends it at once (no worker takes runs over).
    """

    def __init__(
        self,
        runtime: Runtime,
        *,
        poll: float = 0.25,
        local_check: float = 5.0,
        takeover_wait: float = 0.0,
    ) -> None:
        self.runtime = runtime
        self.poll = poll
        self.local_check = local_check
        self.takeover_wait = takeover_wait
        self._followers: dict[str, set[_Follower]] = {}
        self._local: set[str] = set()
        """Runs executing in this process (started here, or seen emitting events here)."""
        self._first: dict[str, asyncio.Future[RunEvent | None]] = {}
        self._failed: dict[str, RunEnd] = {}
        """Runs of this process that failed where the store could not record it (a full
        disk): how their streams end here."""
        self._unsubscribe: Callable[[], None] | None = None

    @property
    def store(self) -> RunStore:
        return self.runtime.run_store

    def open(self) -> None:
        """Start listening to the runtime (idempotent)."""
        if self._unsubscribe is None:
            self._unsubscribe = self.runtime.subscribe(self._on_event)

    def close(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        for followers in self._followers.values():
            for follower in followers:
                follower.wake.set()

    # -- the runtime's side ------------------------------------------------------------------

    def _on_event(self, event: RunEvent) -> None:
        run_id = event["run_id"]
        if event["type"] in TERMINAL_EVENTS:
            self._local.discard(run_id)
        else:
            self._local.add(run_id)
        first = self._first.pop(run_id, None)
        if first is not None and not first.done():
            first.set_result(event)
        followers = self._followers.get(run_id)
        if followers:
            for follower in followers:
                follower.push(event)

    def running_here(self, run_id: str) -> None:
        """Mark a run this process is about to execute (its first event may come later)."""
        self._local.add(run_id)

    def ended_here(self, run_id: str, failure: RunEnd | None = None) -> None:
        """The run's task in this process is over, however it ended: wake its streams.

        `failure`: how it ended when the store may not hold it (the task failed with a
        `StoreError`: a full disk cannot take the run's end either); a stream here that finds
        the run still running in the store ends with it at once.
        """
        self._local.discard(run_id)
        if failure is not None:
            self._failed[run_id] = failure
            while len(self._failed) > 1000:
                del self._failed[next(iter(self._failed))]
        first = self._first.pop(run_id, None)
        if first is not None and not first.done():
            first.set_result(None)
        for follower in self._followers.get(run_id, ()):
            follower.wake.set()

    def first_event(self, run_id: str) -> asyncio.Future[RunEvent | None]:
        """Resolves with the run's first committed event (None: its task ended without one).
        Ask before the run starts."""
        future = self._first.get(run_id)
        if future is None:
            future = asyncio.get_running_loop().create_future()
            self._first[run_id] = future
        return future

    def forget_first(self, run_id: str) -> None:
        future = self._first.pop(run_id, None)
        if future is not None and not future.done():
            future.cancel()

    # -- the streams' side -------------------------------------------------------------------

    async def follow(self, run_id: str, *, after: int = 0) -> AsyncIterator[list[Event] | RunEnd]:
        """The run's events with a sequence number above `after`, in order, in batches as they
        are committed (what is there at once goes out in one write); last, how the run ended
        (a `RunEnd`). Events read from a store that has `EventPieces` come as their stored
        text (`StoredEvent`), a long one in pieces to read from the store.

        The run must exist (check with `store.get_run` first).
        """
        follower = _Follower()
        followers = self._followers.setdefault(run_id, set())
        followers.add(follower)
        store = self.store
        read = _reader(store)
        last = after
        checked = time.monotonic()
        ended: Event | None = None
        """The terminal event the last batch ended on (the end, unless more follows)."""
        orphaned: float | None = None
        """When the run was first read back interrupted but could still be taken over."""
        try:
            # Subscribed first, read second: an event committed in between is in both, and
            # the sequence number drops the copy.
            pending: Sequence[Event] = await read(run_id, after=last, limit=PAGE)
            paged = True
            while True:
                if pending:
                    full = paged and len(pending) >= PAGE
                    batch, last, batch_end, gap = _next_in_order(pending, last)
                    pending = []
                    if batch:
                        ended = batch_end
                        # What is there now goes out together (one write to the client); the
                        # next page is read once this one is sent.
                        yield batch
                    if gap or full:
                        pending, paged = await read(run_id, after=last, limit=PAGE), True
                        continue
                if ended is not None:
                    pending, paged = await read(run_id, after=last, limit=PAGE), True
                    if not pending:
                        yield await _end_of(store, run_id, ended)
                        return
                    continue
                pending, paged = follower.take(), False
                if pending:
                    continue
                wait = self.local_check if run_id in self._local else self.poll
                # asyncio.timeout, not wait_for: wait_for may swallow the stream's cancellation
                # when it meets a wake-up.
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(wait):
                        await follower.wake.wait()
                pending, paged = follower.take(), False
                if pending:
                    continue
                now = time.monotonic()
                if run_id in self._local and now - checked < self.local_check:
                    continue
                checked = now
                # Nothing came live: read the store (the run may run elsewhere, or have ended
                # without a terminal event). Status first: a final status means every event
                # was written before it.
                info = await store.get_run(run_id)
                pending, paged = await read(run_id, after=last, limit=PAGE), True
                if pending:
                    continue
                end, orphaned = self._end(run_id, info, now, orphaned)
                if end is not None:
                    yield end
                    return
        finally:
            followers.discard(follower)
            if not followers:
                self._followers.pop(run_id, None)

    def _end(
        self, run_id: str, info: RunInfo | None, now: float, orphaned: float | None
    ) -> tuple[RunEnd | None, float | None]:
        """How a followed run with nothing new ended, if it did (and since when it has been
        waiting for a takeover)."""
        if info is None:
            return RunEnd("missing", f"run {run_id!r} is no longer stored"), None
        if info.status == "running" and run_id in self._failed:
            return self._failed[run_id], None
        if info.status == "running" or run_id in self._local:
            return None, None
        if info.status == "interrupted" and _can_be_taken_over(info):
            # Another worker may resume it within takeover_every: wait (bounded).
            orphaned = now if orphaned is None else orphaned
            if now - orphaned < self.takeover_wait:
                return None, orphaned
        return RunEnd(info.status, info.error), None

    @property
    def streams(self) -> int:
        """How many streams follow runs now."""
        return sum(len(f) for f in self._followers.values())


def _can_be_taken_over(info: RunInfo) -> bool:
    """A durable root workflow run: what a worker's sweeper resumes when its worker died."""
    return info.kind == "workflow" and not info.workflow_run_id and not info.parent_run_id


def _reader(store: RunStore) -> Callable[..., Awaitable[Sequence[Event]]]:
    """How a stream reads a page of `store`: as stored text where the store offers it."""
    if isinstance(store, EventPieces):
        return store.stored_events
    return store.events


def _next_in_order(
    pending: Sequence[Event], last: int
) -> tuple[list[Event], int, Event | None, bool]:
    """The events of `pending` that follow `last` without a gap: (them, the new last sequence
    number, the terminal event if the batch ends on one, whether a gap stopped it)."""
    ended: Event | None = None
    batch: list[Event] = []
    for event in pending:
        seq = _seq(event)
        if seq <= last:
            continue
        if seq != last + 1:
            # A live event beyond a gap (this stream fell behind the store): the gap is read
            # from the store, in order.
            return batch, last, ended, True
        last = seq
        ended = event if _kind(event) in TERMINAL_EVENTS else None
        batch.append(event)
    return batch, last, ended, False
