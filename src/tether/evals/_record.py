"""An experiment's record: one run of kind ``"experiment"`` in the RunStore, its events the
experiment's history.

The record lives where the CLI and the UI already look, in every store (memory, SQLite,
PostgreSQL), and it is append-only: nothing stored is ever rewritten.

- `experiment_started` (generation, target, dataset and its hash, versions, evaluators, repeat,
  the case ids in order) opens a generation; `--restart` opens the next one;
- `experiment_resumed` says a rerun picked the generation up again;
- `case_finished` is one run of one case (its repeat, run id, status, evaluator results,
  latency, tokens, cost);
- `experiment_finished` closes a pass over the cases.

The experiment's state is these events folded: the last generation's header and, for each
(case, repeat), the first `case_finished` of that generation (a case recorded twice, by a
driver that died between writing and noting it, counts once).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import ExperimentMismatchError, StoreError
from ..stores.run_store import NewRunEvent, RunInfo, RunStore
from ..stores.workflow_store import RunStatus

__all__ = [
    "EXPERIMENT_KIND",
    "ExperimentLog",
    "ExperimentState",
    "experiment_run_id",
    "list_experiments",
    "read_experiment",
]

EXPERIMENT_KIND = "experiment"
"""The RunInfo kind of an experiment's record."""

_log = logging.getLogger("tether.evals")


def experiment_run_id(name: str) -> str:
    """The run id of experiment `name`'s record."""
    return f"experiment:{name}"


@dataclass(slots=True)
class ExperimentState:
    """An experiment as its record says, for its latest generation."""

    name: str
    info: RunInfo
    header: dict[str, Any]
    """The latest `experiment_started` data."""
    repeat: int
    """Runs per case (the latest start or resume)."""
    finished: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)
    """(case id, repeat) -> its `case_finished` data."""

    @property
    def generation(self) -> int:
        return int(self.header.get("generation", 1))

    @property
    def case_ids(self) -> list[str]:
        return [str(c) for c in self.header.get("cases", [])]


def fold(name: str, info: RunInfo, events: list[Any]) -> ExperimentState | None:
    """The state the events of an experiment's record describe (None before its first start)."""
    state: ExperimentState | None = None
    for event in events:
        kind, data = event["type"], event["data"]
        if kind == "experiment_started":
            state = ExperimentState(name, info, dict(data), int(data.get("repeat", 1)))
        elif state is None:
            continue
        elif data.get("generation") != state.generation:
            continue  # an older generation's
        elif kind == "experiment_resumed":
            state.repeat = int(data.get("repeat", state.repeat))
        elif kind == "case_finished":
            key = (str(data.get("case")), int(data.get("repeat", 0)))
            state.finished.setdefault(key, data)
    return state


async def read_experiment(store: RunStore, name: str) -> ExperimentState | None:
    """Experiment `name` as stored, or None when there is no such experiment."""
    return (await _read(store, name))[0]


async def _read(store: RunStore, name: str) -> tuple[ExperimentState | None, int]:
    """`read_experiment`, and how many events its record holds."""
    info = await store.get_run(experiment_run_id(name))
    if info is None or info.kind != EXPERIMENT_KIND:
        return None, 0
    events = await store.events(info.run_id)
    return fold(name, info, events), len(events)


async def list_experiments(store: RunStore, *, limit: int = 1000) -> list[RunInfo]:
    """The experiments' records, newest first."""
    return await store.list_runs(kind=EXPERIMENT_KIND, limit=limit)


_IDENTITY = ("target", "dataset_hash", "versions")
"""What must be the same for a rerun to resume an experiment."""


class ExperimentLog:
    """Writes one experiment's record: opens (or resumes) it, then appends case results in
    batches from a writer task, so recording never holds up the cases."""

    def __init__(self, store: RunStore, name: str) -> None:
        self.store = store
        self.name = name
        self.run_id = experiment_run_id(name)
        self.generation = 1
        self._queue: list[NewRunEvent] = []
        self._wake = asyncio.Event()
        self._writer: asyncio.Task[None] | None = None
        self._closed = False
        self._error: BaseException | None = None
        self._state: ExperimentState | None = None
        """The record's state as this log knows it: what it read, then what it appended."""
        self._known = 0
        """How many events the record holds as far as this log knows."""
        self._last = 0
        """The seq of the record's last event, as the store last said."""

    async def open(
        self, header: dict[str, Any], *, restart: bool
    ) -> tuple[ExperimentState | None, bool]:
        """Start the experiment, or pick it up again: returns its stored state (None for a new
        one or a restart) and whether it was resumed.

        Raises:
            ExperimentMismatchError: a stored experiment of this name has another target,
                dataset or version, and `restart` is False.
        """
        state, self._known = await _read(self.store, self.name)
        info = await self.store.get_run(self.run_id)
        if info is not None and info.kind != EXPERIMENT_KIND:
            raise StoreError(f"run {self.run_id!r} exists and is not an experiment")
        now = time.time()
        if state is not None and not restart:
            differences = {
                key: {"stored": state.header.get(key), "now": header.get(key)}
                for key in _IDENTITY
                if state.header.get(key) != header.get(key)
            }
            if differences:
                what = ", ".join(_IDENTITY_NAMES[k] for k in differences)
                raise ExperimentMismatchError(
                    f"experiment {self.name!r} was run with another {what}; its results would "
                    "not be comparable. Name a new experiment, or pass --restart "
                    "(restart=True) to run it again from the start",
                    experiment=self.name,
                    differences=differences,
                )
            self.generation = state.generation
            await self.store.finish_run(self.run_id, "running")
            self._append(
                "experiment_resumed",
                {
                    "generation": self.generation,
                    "repeat": header["repeat"],
                    "engine": header.get("engine"),
                    "done": len(state.finished),
                },
            )
            state.repeat = int(header["repeat"])
            self._state = ExperimentState(
                self.name, state.info, state.header, state.repeat, dict(state.finished)
            )
            self._start_writer()
            return state, True
        if info is None:
            await self.store.start_run(
                RunInfo(
                    run_id=self.run_id,
                    kind=EXPERIMENT_KIND,
                    name=self.name,
                    started_at=now,
                    tags=[f"experiment:{self.name}", *header.get("versions", [])],
                    meta={"target": header.get("target")},
                )
            )
        else:
            await self.store.finish_run(self.run_id, "running")
        self.generation = (state.generation + 1) if state is not None else 1
        started = {**header, "generation": self.generation}
        self._append("experiment_started", started)
        self._state = ExperimentState(
            self.name,
            info or RunInfo(self.run_id, EXPERIMENT_KIND, self.name),
            dict(started),
            int(header["repeat"]),
        )
        self._start_writer()
        return None, False

    def _start_writer(self) -> None:
        self._writer = asyncio.get_running_loop().create_task(self._drain())
        self._wake.set()

    def _append(self, kind: str, data: dict[str, Any]) -> None:
        self._queue.append({"type": kind, "at": time.time(), "data": data})
        self._known += 1
        self._wake.set()

    def record(self, case: Mapping[str, Any]) -> None:
        """Queue one `case_finished` (O(1)); the writer stores it soon."""
        if self._error is not None:
            raise self._error
        data = {**case, "generation": self.generation}
        self._append("case_finished", data)
        if self._state is not None:  # as `fold` reads it back: the first of a case counts
            self._state.finished.setdefault(
                (str(data.get("case")), int(data.get("repeat", 0))), data
            )

    async def _flush(self) -> None:
        while self._queue:
            batch, self._queue = self._queue, []
            self._last = await self.store.append_events(self.run_id, batch)

    async def _drain(self) -> None:
        try:
            while True:
                await self._wake.wait()
                self._wake.clear()
                await self._flush()
                if self._closed and not self._queue:
                    return
        except Exception as exc:
            _log.exception("could not record the results of experiment %s", self.name)
            self._error = exc

    async def close(self, status: RunStatus, summary: dict[str, Any] | None = None) -> None:
        """Write what is queued, then the end of this pass and the record's status."""
        if self._closed:
            return
        if summary is not None:
            self._append("experiment_finished", {**summary, "generation": self.generation})
        self._closed = True
        self._wake.set()
        if self._writer is not None:
            await asyncio.shield(self._writer)
        if self._error is not None:
            raise self._error
        await self._flush()
        self._last = await self.store.finish_run(self.run_id, status)

    async def final_state(self) -> ExperimentState | None:
        """The experiment as stored once `close()` wrote its end: what this log knows when the
        record holds nothing it did not read or write itself (its events are not read back
        again), else the record read anew (another driver wrote to it meanwhile)."""
        state = self._state
        if state is not None and self._closed and self._last == self._known:
            info = await self.store.get_run(self.run_id)
            if info is not None:
                state.info = info
                return state
        return await read_experiment(self.store, self.name)


_IDENTITY_NAMES = {
    "target": "target",
    "dataset_hash": "dataset (its content hash differs)",
    "versions": "target version",
}
