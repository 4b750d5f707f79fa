"""Tracing: structured records of what the harness did, to a sink and onto the event stream.

Off by default. ``trace=True`` prints each record to the console (stderr), one line each
(`console_sink`); a callable is the sink instead (``trace=logging_sink`` sends them to the
``tether.trace`` logger, ``trace=OtelSink(...)`` to OpenTelemetry). Every record is also yielded
as a ``{"type": "trace", "record": ...}`` event, so a UI can render the same thing the sink
received. A record is ``{"phase", "name", "at", "session_id"?, "data"?}`` with `phase` from the
closed `TRACE_PHASES`:

| phase       | name                             | data                                          |
|-------------|----------------------------------|-----------------------------------------------|
| `prompt`    | `assembled` (once per turn)      | layers, cached_blocks, chars                  |
| `request`   | `chat` (before every call)       | round, model, tools (offered), attempt (a     |
|             |                                  | stream retry's, from 2)                       |
| `request`   | `retry` (the client waits first) | round, attempt, delay (s), reason             |
| `response`  | `chat` / `chat:failed`           | round, model, stop_reason, finish_reason,     |
|             |                                  | tool_calls, usage, ms / round, model, error,  |
|             |                                  | error_type                                    |
| `tool`      | the tool's name                  | id, ms, is_error                              |
| `tool`      | `result:truncated`               | id, name, chars (whole), limit                |
| `tool`      | `result:media_dropped`           | id, name, dropped (name, type, size), limit   |
| `tool`      | `result:media_follows`           | id, name, parts: the provider's tool message  |
|             |                                  | takes text, so the media follows as a user msg|
| `tool`      | `file:read` / `list` / `glob` /  | what `tether.toolkits` did: path, bytes ...;  |
|             | `grep` / `write` / `edit` /      | `…:refused`: the arguments and the reason     |
|             | `delete`, `shell:run`,           | (shell: command, isolation, exit_code,        |
|             | `fetch:get`, `…:refused`         | timed_out, stdout/stderr bytes; fetch: url,   |
|             |                                  | address, status, bytes)                       |
| `workflow`  | what the step named              | whatever it passed to ``ctx.trace()``         |
| `guardrail` | the guardrail's name             | target, action, reason, tool?, tool_use_id?   |
| `usage`     | `turn` / `turn:failed` /         | the turn's token totals                       |
|             | `turn:aborted`                   |                                               |
| `mcp`       | `connect` / `connect:failed`     | per source                                    |
| `mcp`       | `reconnect` / `reconnect:failed` | a lost session re-established by a call       |

A sink may also open **live spans** (`SpanSink`: `tether.otel.OtelSink` is one): besides the
records, the loop tells it when a turn, each model call and each tool call start and end, and makes
the tool's span current while the tool (and its guardrails) run, the turn's while the prompt is
assembled (attached resources read) and the output guardrails run. A span is ended exactly once,
also when the consumer stops iterating the turn early.

A sink that raises warns (once per turn) and the turn goes on. A sink is a plain function, called
as each record is made: an async one is refused (its coroutine would never run), and one that
returns an awaitable anyway counts as a sink that failed. There is no exporter protocol:
`tether.otel` is one sink, and any function is another.
"""

from __future__ import annotations

import inspect
import json
import logging
import sys
import time
import warnings
from collections.abc import Callable, Mapping
from typing import Any, Literal, Protocol, TypeAlias, runtime_checkable

from .errors import ConfigError
from .events import TraceEvent, TracePhase, TraceRecord

__all__ = ["Span", "SpanKind", "SpanSink", "TraceSink", "Tracer", "console_sink", "logging_sink"]

TraceSink: TypeAlias = Callable[[TraceRecord], Any]
"""Receives every record as it is made, synchronously; its return value is ignored. To hand records
to async code, queue them (``trace=queue.put_nowait``)."""

logger = logging.getLogger("tether.trace")

SpanKind: TypeAlias = Literal["turn", "chat", "tool"]
"""What a live span covers: a whole turn, one model call (one attempt), one tool call."""


class Span(Protocol):
    """A span a `SpanSink` opened. ``with span:`` makes it current around work that yields no
    events (the loop never holds it across a ``yield``); `end` closes it, once."""

    def __enter__(self) -> object: ...

    def __exit__(self, *exc_info: object) -> None: ...

    def end(self, data: Mapping[str, Any]) -> None:
        """End the span. `data` says how: ``error_type`` (a failure), ``usage``,
        ``stop_reason``, ``finish_reason``, ``is_error``, ``output`` / ``content``."""
        ...


@runtime_checkable
class SpanSink(Protocol):
    """A trace sink that is also told, live, when phases start (see the module docstring)."""

    def __call__(self, record: TraceRecord) -> Any: ...

    def open_span(
        self,
        kind: SpanKind,
        name: str,
        data: Mapping[str, Any],
        parent: Span | None,
        session_id: str | None,
    ) -> Span:
        """Start a span. `parent` None: a child of whatever is current (a turn); `data`:
        ``model``/``provider`` (turn, chat), ``round``, ``attempt``, ``request`` (chat), ``id``
        and ``input`` (tool). Values are the loop's own: read them now, keep no reference."""
        ...


def console_sink(record: TraceRecord) -> None:
    """The sink ``trace=True`` uses: one line per record on stderr,
    ``[tether] <phase> <name> <data as JSON>``."""
    data = record.get("data")
    tail = "" if data is None else " " + json.dumps(data, ensure_ascii=False, default=repr)
    print(f"[tether] {record['phase']} {record['name']}{tail}", file=sys.stderr, flush=True)


def logging_sink(record: TraceRecord) -> None:
    """A sink for ``trace=logging_sink``: one INFO line per record on the ``tether.trace``
    logger.

    The record itself rides the log record as ``tether_trace`` for handlers that want the
    structure rather than the line.
    """
    logger.info(
        "%s %s %s",
        record["phase"],
        record["name"],
        record.get("data", {}),
        extra={"tether_trace": record},
    )


class Tracer:
    """One turn's (or one workflow run's) tracer.

    Builds records, hands each to the sink at once, and keeps the ones raised inside a call (a
    tool, a guardrail, a prompt layer, a step) in `buffer` until the loop can put them on the
    stream.
    """

    __slots__ = ("_warned", "buffer", "session_id", "sink", "spans")

    def __init__(self, sink: TraceSink, session_id: str | None = None) -> None:
        self.sink = sink
        self.session_id = session_id
        self.buffer: list[TraceEvent] = []
        self._warned = False
        self.spans: SpanSink | None = sink if isinstance(sink, SpanSink) else None
        """The sink, when it opens live spans; else None."""

    def open_span(
        self, kind: SpanKind, name: str, data: Mapping[str, Any], parent: Span | None = None
    ) -> Span | None:
        """A live span from the sink (None when it opens none, or failed to)."""
        spans = self.spans
        if spans is None:
            return None
        try:
            return spans.open_span(kind, name, data, parent, self.session_id)
        except Exception as exc:
            self._warn(exc)
            return None

    def end_span(self, span: Span | None, data: Mapping[str, Any]) -> None:
        if span is not None:
            try:
                span.end(data)
            except Exception as exc:
                self._warn(exc)

    def _warn(self, exc: Exception) -> None:
        if not self._warned:
            self._warned = True
            warnings.warn(
                f"the trace sink {self.sink!r} raised {exc!r}; the turn goes on "
                "(further failures of this turn are not reported)",
                RuntimeWarning,
                stacklevel=3,
            )

    def record(
        self,
        phase: TracePhase,
        name: str,
        data: dict[str, Any] | None = None,
        *,
        buffer: bool = False,
    ) -> TraceEvent:
        """Make a record, give it to the sink, and return its `trace` event (kept in `buffer`
        instead when `buffer` is true)."""
        rec: TraceRecord = {"phase": phase, "name": name, "at": time.time()}
        if self.session_id is not None:
            rec["session_id"] = self.session_id
        if data is not None:
            rec["data"] = data
        try:
            result = self.sink(rec)
            if result is not None and inspect.isawaitable(result):
                if inspect.iscoroutine(result):
                    result.close()  # never awaited: close it rather than leak the warning
                raise TypeError("it returned an awaitable, which is never awaited")
        except Exception as exc:  # a broken sink must not break the turn
            self._warn(exc)
        event: TraceEvent = {"type": "trace", "record": rec}
        if buffer:
            self.buffer.append(event)
        return event

    def drain(self) -> list[TraceEvent]:
        """The buffered events, oldest first; the buffer is left empty."""
        out, self.buffer = self.buffer, []
        return out

    @classmethod
    def from_option(cls, option: bool | TraceSink | None, session_id: str | None) -> Tracer | None:
        """The tracer for an agent's ``trace=`` option: None (off), True (the console) or a
        sink."""
        if option is None or option is False:
            return None
        if option is True:
            return cls(console_sink, session_id)
        if not callable(option):
            raise ConfigError(
                f"trace= must be True, False or a callable sink, got {type(option).__name__}"
            )
        if inspect.iscoroutinefunction(option) or inspect.iscoroutinefunction(
            type(option).__call__
        ):
            raise ConfigError(
                f"trace= takes a plain function, not the async {option!r}: a sink is called as "
                "each record is made and a coroutine would never run; queue the records instead "
                "(trace=queue.put_nowait)"
            )
        return cls(option, session_id)
