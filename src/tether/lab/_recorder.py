"""RunRecorder: an episode's run events, to live listeners at once and to the RunStore in order.

`emit()` is synchronous and O(1): it queues the event. A writer task drains the queue into the
store, one `append_events` per batch: what was emitted within `FLUSH_EVERY` (2 ms) of the first
event of a batch goes in one write (the recorders of one store share that clock, so the runs of
a server meet in one write), and `close()` writes what is left together with the run's end
(`RunStore.finish_run(events=...)`: one transaction). A short turn's events go
in one write at its end, a streamed answer is not one write per token, and a slow store never
holds up the model stream. Listeners are told of each
event once the store has committed it, numbered with the store's sequence: what a listener saw
is exactly what a reader of the store finds, so a client that followed a run live and resumes it
from the store (another worker, a reconnect) neither misses nor repeats an event. A write that
fails fails the run (`on_failure` is told, and `write_error` keeps the error) rather than leave
a gap in its record. `close()` flushes, then records the final status, the run's token totals
and its cost.

**Model calls.** While `recording(harness)` is active, every request the harness agent's client
streams is a model call of this run (`RecordingClient`, one per client, finds the recorder of
the episode it runs in through a context variable, so concurrent episodes on one client stay
apart):

| event                 | data                                                                 |
|-----------------------|----------------------------------------------------------------------|
| `model_call_started`  | call, model, request (by the recording level)                        |
| `model_call_finished` | call, model, first_token_s, duration_s, usage, stop_reason,           |
|                       | finish_reason, tool_calls, cost_usd (None: no known price),          |
|                       | unpriced (why there is no price, when there is none)                 |
| `model_call_failed`   | call, model, first_token_s, duration_s, error {type, message}        |

Every event's `at` is its Unix time, so a page draws each call from start to end with its time
to first token. **Recording levels** (an agent's `recording=`): ``"off"`` records no request,
``"metadata"`` (the default) its shape (system block sizes and cache marks, tool names, message
count by role, settings), ``"full"`` the request as sent (system blocks, tool definitions,
messages, settings) cut to `REQUEST_CAP` characters by leaving out the oldest messages. API keys
never appear: the request holds none, keys named like secrets are masked, and the client's own
key is masked wherever it turns up.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import logging
import operator
import re
import threading
import time
import weakref
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias, cast

from .._eager import step
from ..errors import ConfigError, StoreError
from ..events import Usage
from ..llm.base import ChatRequest, LLMClient, StreamChunk
from ..run_events import (
    MODEL_CALL_FAILED,
    MODEL_CALL_FINISHED,
    MODEL_CALL_STARTED,
    ModelCallFinishedData,
    ModelCallStartedData,
    RunEventBody,
)
from ..stores.run_store import (
    ManyAppends,
    NewRunEvent,
    RunEvent,
    RunInfo,
    RunStore,
    ScopeAppend,
    TurnEnds,
)
from ..stores.workflow_store import RunStatus

if TYPE_CHECKING:
    from ..agent import Agent

__all__ = [
    "RECORDING_LEVELS",
    "REQUEST_CAP",
    "RecordingClient",
    "RecordingLevel",
    "RunListener",
    "RunRecorder",
    "check_recording",
    "unwrapped",
]

RecordingLevel: TypeAlias = Literal["off", "metadata", "full"]
RECORDING_LEVELS: Final[tuple[RecordingLevel, ...]] = ("off", "metadata", "full")
REQUEST_CAP = 200_000
"""The most characters of JSON one recorded request (``"full"``) takes."""
_STRING_CAP = 20_000
"""A string longer than this in a recorded request is cut (when the request is over the cap)."""
_SECRET_KEY = re.compile(
    r"(^|[_-])(api[_-]?key|authorization|secret|password|passwd|token|access[_-]?token|"
    r"credentials?)$",
    re.IGNORECASE,
)
_MASK = "[redacted]"
_ROLE = operator.itemgetter("role")
_ROLE_OR_NONE = operator.methodcaller("get", "role")

logger = logging.getLogger("tether.lab")

FLUSH_EVERY = 0.002
"""Seconds a run's events wait to be written with the events that follow them."""

RunListener: TypeAlias = Callable[[RunEvent], Any]
"""Called with every run event once it is stored (sync; exceptions are logged and ignored)."""


def notify(listeners: Sequence[RunListener], event: RunEvent) -> None:
    for listener in listeners:
        try:
            listener(event)
        except Exception:
            logger.exception("a run listener raised; recording goes on")


def check_recording(value: Any, where: str = "recording") -> RecordingLevel:
    """`value` as a recording level.

    Raises:
        ConfigError: not one of `RECORDING_LEVELS`.
    """
    if value not in RECORDING_LEVELS:
        raise ConfigError(f"{where} must be one of {list(RECORDING_LEVELS)}, got {value!r:.80}")
    return cast(RecordingLevel, value)  # one of RECORDING_LEVELS, checked just above


_ACTIVE: ContextVar[RunRecorder | None] = ContextVar("tether_lab_recorder", default=None)
"""The recorder of the episode running in this context (set by `RunRecorder.recording`)."""


def current_memory_scope() -> str | None:
    """The memory scope of the episode running in this context (None outside one): what a
    model client that keeps its own conversation (a remote A2A agent) continues."""
    recorder = _ACTIVE.get()
    return recorder.info.memory_scope if recorder is not None else None


class RunRecorder:
    """Records one run.

    Args:
        store: Where the events and the summary go.
        listeners: Called with every event as it happens.
        info: The run's summary (written by `start()`).
        level: How much of each model request to record (see the module docstring).
        prices: Price overrides for private models (`tether.pricing.PriceOverride` by model).
        on_failure: Called (once) with the error when a write of the run's events fails: the
            run must stop, since what it does next could no longer be recorded in order.
        lease_ttl: Start the run with a heartbeat lease of that many seconds (the caller
            renews it while the run goes on; a run whose process died reads as interrupted).
        flush_every: Seconds an event waits to be written together with those that follow
            it (0: written as soon as the writer runs); default `FLUSH_EVERY`.
    """

    def __init__(
        self,
        store: RunStore,
        listeners: Sequence[RunListener],
        info: RunInfo,
        *,
        level: RecordingLevel = "metadata",
        prices: Mapping[str, Any] | None = None,
        on_failure: Callable[[BaseException], None] | None = None,
        lease_ttl: float | None = None,
        flush_every: float | None = None,
    ) -> None:
        self.store = store
        self.flush_every = FLUSH_EVERY if flush_every is None else flush_every
        self.on_failure = on_failure
        self.write_error: BaseException | None = None
        """Why recording failed (the start, or a write of events), or None."""
        self.info = info
        self.lease_ttl = lease_ttl
        """The run's heartbeat lease (seconds), taken by `start()`; the caller renews it."""
        self.run_id = info.run_id
        self.level = level
        self.prices = prices
        self._listeners = listeners
        self._queue: list[NewRunEvent] = []
        self._wake = asyncio.Event()
        self._writer: asyncio.Task[None] | None = None
        self._clock: FlushClock | None = None
        self._scheduled = False
        self._started = False
        self._failed = False
        self._closed = False
        self._calls = 0
        self.usage: dict[str, int] = {}
        """Token totals of the run's model calls so far."""
        self._cost: Decimal | None = Decimal(0)
        """The run's cost so far; None once a call had usage but no known price."""

    @property
    def closed(self) -> bool:
        """Whether the run's end was written (or is being written)."""
        return self._closed

    @property
    def cost_usd(self) -> float | None:
        """What the run's model calls cost so far (None: some call has no known price, or no
        call reported usage)."""
        if self._cost is None or not self.usage:
            return None
        return float(self._cost)

    @contextlib.contextmanager
    def recording(self, harness: Agent) -> Iterator[None]:
        """Record the model calls `harness` makes in this context as calls of this run."""
        client = harness.client
        if not isinstance(client, RecordingClient):
            harness.client = RecordingClient(client)
        token = _ACTIVE.set(self)
        try:
            yield
        finally:
            _ACTIVE.reset(token)

    def _call_started(self, client: RecordingClient, request: ChatRequest) -> tuple[int, str]:
        self._calls += 1
        model = client.model_ref
        data: ModelCallStartedData = {"call": self._calls, "model": model}
        if self.level != "off":
            try:
                data["request"] = _request_record(request, self.level, client.secrets())
            except Exception:  # recording never fails a call
                logger.exception("could not record the request of run %s", self.run_id)
        self.emit({"type": MODEL_CALL_STARTED, "data": data})
        return self._calls, model

    def _call_finished(
        self,
        client: RecordingClient,
        call: int,
        model: str,
        finish: Mapping[str, Any],
        first_token: float | None,
        duration: float,
    ) -> None:
        usage: dict[str, int] = {
            k: int(v) for k, v in (finish.get("usage") or {}).items() if isinstance(v, int)
        }
        for key, n in usage.items():
            self.usage[key] = self.usage.get(key, 0) + n
        answered = finish.get("model")
        if isinstance(answered, str) and answered:
            model = answered  # a fallback chain: the model that answered is the one priced
        cost, unpriced = _price(usage, model, client, self.prices) if usage else (None, None)
        if usage:
            self._cost = None if cost is None or self._cost is None else self._cost + cost
        content = finish.get("content") or []
        data: ModelCallFinishedData = {
            "call": call,
            "model": model,
            "first_token_s": first_token,
            "duration_s": duration,
            "usage": usage,
            "stop_reason": finish.get("stop_reason"),
            "finish_reason": finish.get("finish_reason"),
            "tool_calls": sum(
                1 for p in content if isinstance(p, dict) and p.get("type") == "tool_call"
            ),
            "cost_usd": float(cost) if cost is not None else None,
        }
        if unpriced is not None:
            data["unpriced"] = unpriced
        self.emit({"type": MODEL_CALL_FINISHED, "data": data})

    def _call_failed(
        self,
        call: int,
        model: str,
        exc: BaseException,
        first_token: float | None,
        duration: float,
    ) -> None:
        self.emit(
            {
                "type": MODEL_CALL_FAILED,
                "data": {
                    "call": call,
                    "model": model,
                    "first_token_s": first_token,
                    "duration_s": duration,
                    "error": {"type": type(exc).__name__, "message": str(exc)},
                },
            }
        )

    async def start(self) -> None:
        """Create the run's summary and start the writer.

        Cancelled meanwhile, it lets the summary's write finish before the cancellation goes
        on, so that `close()` can still record that the run was cancelled.
        """
        # Stepped, not a task: a write that never waits (SQLite, memory) is done at once.
        write = step(self.store.start_run(self.info, lease_ttl=self.lease_ttl))
        if not write.done():
            try:
                await asyncio.wait([write])  # wait() never cancels the write itself
            except asyncio.CancelledError:
                await asyncio.wait([write])
                self._begin(write)
                raise
        self._begin(write)
        if self.write_error is not None:
            raise StoreError(
                f"could not record the start of run {self.run_id}: {self.write_error}"
            ) from self.write_error

    def resumed(self, usage: Mapping[str, int], cost_usd: float | None) -> None:
        """Start the writer of a run taken back from "paused" (`RunStore.resume_run` set it
        running again): nothing is created; its token totals and cost go on from the run's."""
        self.usage = dict(usage)
        if cost_usd is not None:
            self._cost = Decimal(str(cost_usd))
        elif usage:
            self._cost = None  # some earlier call had no known price
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        done.set_result(None)
        self._begin(done)

    def _begin(self, write: asyncio.Future[None]) -> None:
        error = None if write.cancelled() else write.exception()
        if write.cancelled() or error is not None:
            self._failed = True
            self.write_error = error or asyncio.CancelledError("the start was cancelled")
            logger.error("could not record the start of run %s", self.run_id, exc_info=error)
            return
        self._started = True
        if self._queue or self._wake.is_set():
            self._writer_task()

    def _writer_task(self) -> None:
        """Start the writer the first time something is due (a run whose events all go with
        its end, in `close()`, never needs one)."""
        if self._writer is None and self._started and not self._closed:
            self._writer = asyncio.get_running_loop().create_task(
                self._drain(), name="tether-lab:run-recorder"
            )

    def emit(self, event: RunEventBody) -> None:
        """Record one event (``{"type": KIND, "data": {...}}``, `tether.run_events`): listeners
        now, the store soon. The dict given becomes the stored event (its `at` is set here)."""
        if self._closed:
            raise RuntimeError(f"run {self.run_id} is already closed")
        record = cast(NewRunEvent, event)  # the body plus its time: no copy per streamed token
        record["at"] = time.time()
        self._queue.append(record)
        if not self._scheduled and not self._wake.is_set():
            if self.flush_every > 0:
                self._scheduled = True
                clock = self._clock
                if clock is None:
                    clock = self._clock = _batcher(self.store).clock(self.flush_every)
                clock.schedule(self)
            else:
                self._wake.set()
                self._writer_task()

    def _due(self) -> None:
        if self._scheduled:
            self._scheduled = False
            self._wake.set()
            self._writer_task()

    async def _write(self) -> None:
        while self._queue and not self._closed:  # once closed, the rest goes with the end
            batch, self._queue = self._queue, []
            if not self._started or self._failed:
                continue
            try:
                last = await _batcher(self.store).append(self.run_id, batch)
            except Exception as exc:
                self._fail(exc)
                continue
            except asyncio.CancelledError:
                # The writer itself was cancelled (asyncio.run cancels every task on Ctrl-C):
                # the batch may not be stored, so the run cannot count as recorded whole.
                self._fail(StoreError("the writer of run events stopped (CancelledError)"))
                raise
            if self._listeners:
                self._told(batch, last)

    def _fail(self, exc: BaseException) -> None:
        self._failed = True
        self.write_error = exc
        logger.error("could not record events of run %s; the run fails", self.run_id, exc_info=exc)
        if self.on_failure is not None:
            try:
                self.on_failure(exc)
            except Exception:
                logger.exception("on_failure of run %s raised", self.run_id)

    async def _drain(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            if self._closed:
                return  # what is left goes with the run's end (`close()`), in one write
            await self._write()

    async def close(
        self,
        status: RunStatus,
        *,
        error: str | None = None,
        output_text: str | None = None,
        traceback: str | None = None,
        pause: Mapping[str, Any] | None = None,
    ) -> None:
        """Flush and record how the run ended (with its output as text, its token totals and
        cost; a failure's error and traceback; a pause's `pending`, `paused` and
        `pending_deadline`, the `finish_run` keywords). Idempotent.

        Cancelled meanwhile, it still writes the final events and status (the run ended as
        `status` says), then lets the cancellation through.
        """
        if self._closed:
            return
        cancelled = await self._stop_writer()
        last, self._queue = self._queue, []
        if not self._started or self._failed:
            last = []
        if self._started:
            # Shielded like the writer: a cancellation meanwhile still lets the end be written.
            # Stepped like the start: a finish that never waits needs no task.
            finish = step(self._finish(last, status, error, output_text, traceback, pause or {}))
            if finish.done():
                finish.result()
            else:
                try:
                    await asyncio.shield(finish)
                except asyncio.CancelledError as exc:
                    cancelled = exc
                    await asyncio.wait([finish])
        if cancelled is not None:
            raise cancelled

    async def _stop_writer(self) -> asyncio.CancelledError | None:
        """Mark the recorder closed and wait for the write under way (what waits is written
        with the end); the cancellation of this task that came meanwhile, if any."""
        self._closed = True
        self._scheduled = False  # what waits is written now, not at the next tick
        self._wake.set()
        writer = self._writer
        cancelled: asyncio.CancelledError | None = None
        if writer is not None:
            try:
                await asyncio.shield(writer)
            except asyncio.CancelledError as exc:
                task = asyncio.current_task()
                if task is not None and task.cancelling():
                    cancelled = exc  # this task is cancelled, not (only) the writer
                await asyncio.wait([writer])
        return cancelled

    async def close_turn(
        self, append: ScopeAppend, events: Sequence[RunEventBody], *, output_text: str
    ) -> bool:
        """Record that the run completed in the write that appends the turn's last records to
        its memory scope (`TurnEnds.finish_turn`): the events still waiting, then `events`,
        the records, the scope's lease given back and the run's end, one transaction. False
        when the store cannot make it one write: nothing is written, `events` are not
        recorded and the recorder stays open (append, emit and `close()` as usual). Raises
        what the write raised, with nothing written and the recorder open as well, so that
        the caller can record the failure."""
        store = _batcher(self.store).turn_ends
        if store is None or not self._started or self._failed or self._closed:
            return False
        cancelled = await self._stop_writer()
        now = time.time()
        added = [cast(NewRunEvent, {**event, "at": now}) for event in events]
        last = [*self._queue, *added]
        usage = dict(self.usage) if self.usage else None
        seq: int | None = None
        try:
            if not self._failed:  # the write under way may have failed meanwhile
                # Stepped and shielded like close()'s: a cancellation meanwhile lets it finish.
                write = step(
                    store.finish_turn(
                        self.run_id,
                        "completed",
                        append,
                        output_text=output_text,
                        usage=usage,
                        cost_usd=self.cost_usd,
                        events=last,
                    )
                )
                if not write.done():
                    try:
                        await asyncio.shield(write)
                    except asyncio.CancelledError as exc:
                        cancelled = exc
                        await asyncio.wait([write])
                seq = write.result()
        finally:
            if seq is None:  # not written: the recorder goes on as it was
                self._closed = False
                self._writer = None
                if self._queue:
                    self._wake.set()
                    self._writer_task()
        if seq is not None:
            self._queue = []
            if self._listeners:
                self._told(last, seq)
        if cancelled is not None:
            raise cancelled
        return seq is not None

    async def _finish(
        self,
        last: list[NewRunEvent],
        status: RunStatus,
        error: str | None,
        output_text: str | None,
        traceback: str | None,
        pause: Mapping[str, Any],
    ) -> None:
        """The run's last events and its end, in one write (one transaction); if those events
        cannot be written, the end alone, as a failure saying why."""
        usage = dict(self.usage) if self.usage else None
        for events in (last, []) if last else ([],):
            if self.write_error is not None and status != "cancelled":
                # Events are missing from the record: the run cannot count as completed.
                status = "failed"
                error = f"StoreError: could not record the run's events: {self.write_error}"
            try:
                seq = await self.store.finish_run(
                    self.run_id,
                    status,
                    error=error,
                    output_text=output_text,
                    usage=usage,
                    cost_usd=self.cost_usd,
                    traceback=traceback,
                    events=events,
                    **(pause if status == "paused" else {}),
                )
            except Exception as exc:
                if not events:
                    logger.exception("could not record the end of run %s", self.run_id)
                    return
                self._fail(exc)  # the end goes on its own, as a failure
                continue
            if events and self._listeners:
                self._told(events, seq)
            return

    def _told(self, batch: Sequence[NewRunEvent], last: int) -> None:
        # Told after the commit, numbered as stored: exactly what readers will find.
        run_id = self.run_id
        seq = last - len(batch)
        for event in batch:
            seq += 1
            notify(
                self._listeners,
                {
                    "run_id": run_id,
                    "seq": seq,
                    "type": event["type"],
                    "at": event["at"],
                    "data": event["data"],
                },
            )


class FlushClock:
    """One timer for the recorders of one store in one event loop: the runs whose events wait
    are woken at the same tick, so their writes meet in the batcher and go as one
    `append_events_many` (a timer per run would spread a server's runs over as many writes)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, every: float) -> None:
        self.loop = loop
        self.every = every
        self._due: list[RunRecorder] = []
        self._timer: asyncio.TimerHandle | None = None

    def schedule(self, recorder: RunRecorder) -> None:
        self._due.append(recorder)
        if self._timer is None:
            self._timer = self.loop.call_later(self.every, self._fire)

    def _fire(self) -> None:
        self._timer = None
        due, self._due = self._due, []
        for recorder in due:
            recorder._due()


class EventBatcher:
    """The appends of all the runs recording to one store, written together.

    Each run's recorder sends one batch at a time and waits for it (so a run's events stay in
    order); the batches of different runs that wait at the same moment (the flush clock wakes
    their recorders together) go to the store in one `append_events_many` (one transaction, one
    commit) when the store offers it (a lone batch is an ordinary `append_events`). A server with
    hundreds of runs streaming at once then makes a few writes per moment, not one per run. A
    write that fails is retried run by run, so one run's bad batch fails that run alone.
    """

    def __init__(self, store: RunStore) -> None:
        self.store = store
        self._many = store if isinstance(store, ManyAppends) else None
        self.turn_ends = store if isinstance(store, TurnEnds) else None
        """The store, when it ends a turn in one write (worked out once: a Protocol check
        that fails looks up every method each time)."""
        self._pending: list[tuple[str, Sequence[NewRunEvent], asyncio.Future[int]]] = []
        self._task: asyncio.Task[None] | None = None
        self.loop = asyncio.get_running_loop()
        self._clocks: dict[float, FlushClock] = {}

    def clock(self, every: float) -> FlushClock:
        """The flush clock of this store's recorders that wait `every` seconds."""
        clock = self._clocks.get(every)
        if clock is None:
            clock = self._clocks[every] = FlushClock(self.loop, every)
        return clock

    async def append(self, run_id: str, events: Sequence[NewRunEvent]) -> int:
        """Append `events` to `run_id` with whatever else is pending; the last one's seq."""
        if self._many is None:
            return await self.store.append_events(run_id, events)
        future: asyncio.Future[int] = self.loop.create_future()
        self._pending.append((run_id, events, future))
        if self._task is None or self._task.done():
            self._task = self.loop.create_task(self._write(), name="tether-lab:run-events")
        return await future

    async def _write(self) -> None:
        batch: list[tuple[str, Sequence[NewRunEvent], asyncio.Future[int]]] = []
        try:
            await self._write_pending(batch)
        except BaseException as exc:
            # Cancelled, or interrupted (Ctrl-C lands in whatever task runs): no recorder may
            # wait for an answer that will never come.
            stopped = StoreError(f"the writer of run events stopped ({type(exc).__name__})")
            for _, _, future in [*batch, *self._pending]:
                _settle(future, stopped)
            self._pending = []
            raise

    async def _write_pending(
        self, batch: list[tuple[str, Sequence[NewRunEvent], asyncio.Future[int]]]
    ) -> None:
        many = self._many
        assert many is not None
        while self._pending:
            batch[:] = self._pending
            self._pending = []
            await self._write_batch(many, batch)

    async def _write_batch(
        self, many: ManyAppends, batch: list[tuple[str, Sequence[NewRunEvent], asyncio.Future[int]]]
    ) -> None:
        if len(batch) == 1:
            run_id, events, future = batch[0]
            try:
                _settle(future, await self.store.append_events(run_id, events))
            except Exception as exc:
                _settle(future, exc)
            return
        try:
            lasts = await many.append_events_many([(r, e, None) for r, e, _ in batch])
        except Exception:
            # One run's batch may be the bad one: each run gets its own answer.
            for run_id, events, future in batch:
                try:
                    last = await self.store.append_events(run_id, events)
                except Exception as error:
                    _settle(future, error)
                else:
                    _settle(future, last)
            return
        for (_, _, future), last in zip(batch, lasts, strict=True):
            _settle(future, last)


def _settle(future: asyncio.Future[int], outcome: int | BaseException) -> None:
    if future.done():
        return
    if isinstance(outcome, BaseException):
        future.set_exception(outcome)
    else:
        future.set_result(outcome)


_BATCHERS: weakref.WeakKeyDictionary[Any, EventBatcher] = weakref.WeakKeyDictionary()


def _batcher(store: RunStore) -> EventBatcher:
    """The batcher of `store` in the running event loop."""
    try:
        batcher = _BATCHERS.get(store)
    except TypeError:  # an unhashable store, or one without weak references
        return EventBatcher(store)
    if batcher is None or batcher.loop is not asyncio.get_running_loop():
        batcher = EventBatcher(store)
        with contextlib.suppress(TypeError):
            _BATCHERS[store] = batcher
    return batcher


# -- model calls -----------------------------------------------------------------------------


class RecordingClient:
    """An LLMClient that reports each call to the recorder active in the caller's context
    (and is a plain pass-through where none is). Attributes it does not have (`max_retries`,
    `stream_retries`, ...) are the wrapped client's."""

    def __init__(self, inner: LLMClient) -> None:
        self.inner = inner
        self.model = inner.model
        provider = getattr(inner, "provider", None)
        self.model_ref = f"{provider}:{inner.model}" if isinstance(provider, str) else inner.model
        """``"provider:model"`` when the client names its provider, else its model id."""
        base = getattr(inner, "base_url", None)
        self.base_url: str | None = base if isinstance(base, str) else None
        self.pricing = getattr(inner, "pricing", True) is not False
        """False when the model config says ``pricing=False``: its calls are never priced."""
        self.asks_prices = _asks_prices(self.model_ref, self.pricing)
        """Whether pricing its calls may look them up in genai-prices (whose data is then
        loaded, in a thread, while the first call streams); a scripted model's never do."""

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def secrets(self) -> list[str]:
        """Values to mask wherever they turn up in a recorded request."""
        key = getattr(self.inner, "api_key", None)
        return [key] if isinstance(key, str) and len(key) >= 8 else []

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def chat(self, request: ChatRequest) -> AsyncIterator[StreamChunk]:
        recorder = _ACTIVE.get()
        if recorder is None or recorder._closed:
            async for chunk in self.inner.chat(request):
                yield chunk
            return
        call, model = recorder._call_started(self, request)
        pricing = pricing_loaded() if self.asks_prices else None  # loads while it answers
        started = time.perf_counter()
        first: float | None = None
        ended = False
        stream = self.inner.chat(request)
        try:
            async for chunk in stream:
                kind = chunk["type"]
                if first is None and kind in ("text", "thinking", "tool_input_delta", "finish"):
                    first = round(time.perf_counter() - started, 6)
                if kind == "finish":
                    ended = True
                    if pricing is not None and not pricing.done():
                        await asyncio.wrap_future(pricing)
                    recorder._call_finished(
                        self,
                        call,
                        model,
                        chunk,
                        first,
                        round(time.perf_counter() - started, 6),
                    )
                yield chunk
        except BaseException as exc:
            if not ended and not recorder._closed:
                ended = True
                recorder._call_failed(
                    call, model, exc, first, round(time.perf_counter() - started, 6)
                )
            raise
        finally:
            if not ended and not recorder._closed:
                # The caller stopped reading (a retried stream, a cancelled turn).
                recorder._call_failed(
                    call,
                    model,
                    asyncio.CancelledError("the stream was closed before it finished"),
                    first,
                    round(time.perf_counter() - started, 6),
                )
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()


def unwrapped(client: LLMClient) -> LLMClient:
    """The client a `RecordingClient` stands in front of (itself for any other client)."""
    return client.inner if isinstance(client, RecordingClient) else client


def _asks_prices(model: str, pricing: bool) -> bool:
    try:
        from ..pricing import asks_genai_prices
    except ImportError:  # no lab extra: `_price` says so per call
        return False
    return asks_genai_prices(model, pricing=pricing)


_PRICING: concurrent.futures.Future[None] | None = None
_PRICING_LOCK = threading.Lock()


def pricing_loaded() -> concurrent.futures.Future[None]:
    """Done once `tether.pricing` and the price data are loaded: the first call starts loading
    them in a thread of their own. Importing genai-prices and reading its data takes most of a
    second; done on the event loop at the first model call, it would stall every concurrent
    run (and fail their latency budgets)."""
    global _PRICING
    with _PRICING_LOCK:
        if _PRICING is None:
            future: concurrent.futures.Future[None] = concurrent.futures.Future()

            def load() -> None:
                try:
                    from ..pricing import quote

                    quote({"input_tokens": 1, "output_tokens": 1}, "openai:gpt-4o-mini")
                except Exception:  # no extra, or no data: `_price` says why per call
                    pass
                future.set_result(None)

            threading.Thread(target=load, name="tether-pricing", daemon=True).start()
            _PRICING = future
        return _PRICING


def _price(
    usage: dict[str, int], model: str, client: RecordingClient, prices: Mapping[str, Any] | None
) -> tuple[Decimal | None, str | None]:
    """The call's cost, or None and why it has none."""
    try:
        from ..pricing import quote
    except ImportError:
        # Without the lab extra's genai-prices nothing is priced.
        return None, "genai-prices is not installed (pip install 'tether[lab]')"
    try:
        # The recorder sums plain int counts; they are the keys of a Usage.
        q = quote(
            cast(Usage, usage),
            model,
            base_url=client.base_url,
            overrides=prices,
            pricing=client.pricing,
        )
    except Exception as exc:
        logger.exception("could not price a call to %s", model)
        return None, f"pricing failed: {type(exc).__name__}: {exc}"
    return q.usd, q.unpriced


def _mask(value: Any, secrets: list[str]) -> Any:
    """A copy of `value` with secret-named keys and the given secret strings masked."""
    if isinstance(value, dict):
        return {
            k: (_MASK if isinstance(k, str) and _SECRET_KEY.search(k) else _mask(v, secrets))
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [_mask(v, secrets) for v in value]
    if isinstance(value, str):
        for secret in secrets:
            if secret in value:
                value = value.replace(secret, _MASK)
        return value
    if value is None or isinstance(value, bool | int | float):
        return value
    return repr(value)


def _request_record(
    request: ChatRequest, level: RecordingLevel, secrets: list[str]
) -> dict[str, Any]:
    system = request.get("system", [])
    tools = request.get("tools", [])
    messages = request.get("messages", [])
    settings = _mask(dict(request.get("settings", {})), secrets)
    response_format = request.get("response_format")
    if level == "metadata":
        # Counted in C: a long transcript is counted on every call (an item lookup per message
        # costs less than a method call; a message without a role counts under None).
        try:
            counts = Counter(map(_ROLE, messages))
        except KeyError:
            counts = Counter(map(_ROLE_OR_NONE, messages))
        roles = {str(role): n for role, n in counts.items()}
        record: dict[str, Any] = {
            "level": "metadata",
            "system": [
                {"chars": len(b.get("text", "")), "cache": "cache_control" in b} for b in system
            ],
            "tools": [t.get("name") for t in tools],
            "messages": {"count": len(messages), "roles": roles},
            "settings": settings,
        }
        if response_format is not None:
            record["response_format"] = response_format.get("name")
        return record
    full: dict[str, Any] = {
        "level": "full",
        "system": _mask([dict(b) for b in system], secrets),
        "tools": _mask([dict(t) for t in tools], secrets),
        "messages": _mask(list(messages), secrets),
        "settings": settings,
    }
    if response_format is not None:
        full["response_format"] = _mask(dict(response_format), secrets)
    return _capped(full)


def _size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, default=repr))


def _cut_strings(value: Any) -> Any:
    if isinstance(value, str) and len(value) > _STRING_CAP:
        return value[:_STRING_CAP] + f"… [{len(value) - _STRING_CAP} more characters]"
    if isinstance(value, dict):
        return {k: _cut_strings(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_cut_strings(v) for v in value]
    return value


def _capped(record: dict[str, Any]) -> dict[str, Any]:
    """`record` within `REQUEST_CAP`: the oldest messages left out first, then long strings
    cut. What was left out is counted in `omitted_messages` / `truncated`."""
    total = _size(record)
    if total <= REQUEST_CAP:
        return record
    messages: list[Any] = record["messages"]
    sizes = [_size(m) + 1 for m in messages]
    rest = total - sum(sizes)
    keep = len(messages)
    budget = REQUEST_CAP - rest
    used = 0
    while keep > 0 and used + sizes[keep - 1] <= budget:
        used += sizes[keep - 1]
        keep -= 1
    omitted = keep
    record = {**record, "messages": messages[omitted:], "omitted_messages": omitted}
    if _size(record) > REQUEST_CAP:
        record = _cut_strings(record)
        record["truncated"] = True
    return record
