"""Tracing: structured records of what the harness did, to a sink and onto the event stream."""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Callable
from typing import Any, TypeAlias

from .events import TraceEvent, TracePhase, TraceRecord

__all__ = ["TraceSink", "Tracer", "logging_sink"]

TraceSink: TypeAlias = Callable[[TraceRecord], Any]

logger = logging.getLogger("tether.trace")


def logging_sink(record: TraceRecord) -> None:
    """The sink `trace=True` uses: one INFO line per record on the ``tether.trace`` logger."""
    logger.info("%s %s %s", record["phase"], record["name"], record.get("data", {}))


class Tracer:
    """Builds records, hands them to the sink, and keeps the ones raised inside a call (a tool,
    a guardrail, a step) until the loop can put them on the stream."""

    __slots__ = ("_warned", "buffer", "session_id", "sink")

    def __init__(self, sink: TraceSink, session_id: str | None = None) -> None:
        self.sink = sink
        self.session_id = session_id
        self.buffer: list[TraceEvent] = []
        self._warned = False

    def record(
        self,
        phase: TracePhase,
        name: str,
        data: dict[str, Any] | None = None,
        *,
        buffer: bool = False,
    ) -> TraceEvent:
        rec: TraceRecord = {"phase": phase, "name": name, "at": time.time()}
        if self.session_id is not None:
            rec["session_id"] = self.session_id
        if data is not None:
            rec["data"] = data
        try:
            self.sink(rec)
        except Exception as exc:  # a broken sink must not break the turn
            if not self._warned:
                self._warned = True
                warnings.warn(
                    f"trace sink raised {exc!r}; the turn goes on", RuntimeWarning, stacklevel=2
                )
        event: TraceEvent = {"type": "trace", "record": rec}
        if buffer:
            self.buffer.append(event)
        return event

    def drain(self) -> list[TraceEvent]:
        out, self.buffer = self.buffer, []
        return out

    @classmethod
    def from_option(cls, option: bool | TraceSink | None, session_id: str | None) -> Tracer | None:
        if option is None or option is False:
            return None
        sink = logging_sink if option is True else option
        return cls(sink, session_id)
