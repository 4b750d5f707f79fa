"""Where a run spent its time: the waterfall drawn at the top of every run page.

Bars come from the run's event timestamps (`at`, Unix seconds):

- a model call, from `model_call_started` to `model_call_finished` / `model_call_failed`,
  with its time to first token marked inside the bar;
- a tool call, from when it began to run (`agent_tool_result.started_at`; for runs recorded
  before that field, the call event) to its result;
- a workflow step, from `workflow_step_started` to `workflow_step_finished` / `_failed`;
- a nested run (an episode or workflow run inside a workflow run, or one an episode's tool
  started: an agent or workflow used as a tool), from its summary's start to its end. A run a
  tool call started is drawn right under that tool call's bar, its own nested runs under it.

Something still running ends at `now`, drawn as running. The total is the latest end minus the
earliest start, never a sum of the bars (parallel work would be counted twice). Each bar links to
the event it started with (`#ev-<seq>`), or to the nested run's page.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ..run_events import (
    AGENT_TOOL_CALL,
    AGENT_TOOL_RESULT,
    MODEL_CALL_FAILED,
    MODEL_CALL_FINISHED,
    MODEL_CALL_STARTED,
    WORKFLOW_STEP_FAILED,
    WORKFLOW_STEP_FINISHED,
    WORKFLOW_STEP_STARTED,
)
from ..stores.run_store import RunEvent, RunInfo

__all__ = ["Bar", "Timeline", "build_timeline"]


@dataclass(slots=True)
class Bar:
    """One bar of the waterfall."""

    kind: str
    """"model", "tool", "step" or "run"."""
    label: str
    start: float
    end: float
    status: str = "ok"
    """"ok", "error" or "running"."""
    first_token: float | None = None
    """Unix time of a model call's first token."""
    seq: int | None = None
    """The event the bar starts with (its anchor on the page)."""
    run_id: str | None = None
    """A nested run's id (the bar links to its page)."""
    detail: str = ""
    depth: int = 0
    call_id: str | None = None
    """A tool bar's tool call id; for a nested run, the tool call that started it (if any)."""
    parent: str | None = None
    """A nested run's parent: the episode that started it, else its workflow run."""

    @property
    def duration(self) -> float:
        return max(self.end - self.start, 0.0)


@dataclass(slots=True)
class Timeline:
    """The bars of one run, and the span they cover."""

    start: float
    end: float
    bars: list[Bar] = field(default_factory=list)

    @property
    def total(self) -> float:
        """max(end) - min(start) over the run and its bars."""
        return max(self.end - self.start, 0.0)

    def x(self, at: float) -> float:
        """Where `at` falls on a 0..1000 scale."""
        total = self.total
        if total <= 0:
            return 0.0
        return round(min(max((at - self.start) / total, 0.0), 1.0) * 1000, 2)

    def width(self, bar: Bar) -> float:
        """A bar's width on the 0..1000 scale (at least a hairline, so a 0 ms bar shows)."""
        return max(round(self.x(bar.end) - self.x(bar.start), 2), 2.0)

    def to_json(self) -> dict[str, Any]:
        return {
            "start": self.start,
            "end": self.end,
            "total_s": self.total,
            "bars": [
                {
                    "kind": b.kind,
                    "label": b.label,
                    "start": b.start,
                    "end": b.end,
                    "duration_s": b.duration,
                    "first_token_s": (
                        b.first_token - b.start if b.first_token is not None else None
                    ),
                    "status": b.status,
                    "seq": b.seq,
                    "run_id": b.run_id,
                    "depth": b.depth,
                    "tool_call_id": b.call_id,
                }
                for b in self.bars
            ],
        }


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


class _Spans(NamedTuple):
    """One kind of bar drawn from a pair of events: the event that opens a bar, the ones that
    close it, and the data field that pairs them."""

    key: str
    starts: str
    ends: tuple[str, ...]
    opened: Callable[[RunEvent, float], Bar]
    """The bar an opening event starts (running until `now`)."""
    closed: Callable[[Bar, RunEvent], None]
    """Ends the bar with its closing event."""
    unopened: Callable[[RunEvent], Bar | None] = lambda event: None
    """The bar of a closing event nothing opened, if any."""


def _span_bars(events: Sequence[RunEvent], now: float, spans: _Spans) -> list[Bar]:
    open_bars: dict[Any, Bar] = {}
    bars: list[Bar] = []
    for event in events:
        kind = event["type"]
        if kind == spans.starts:
            bar = spans.opened(event, now)
            open_bars[event["data"].get(spans.key)] = bar
            bars.append(bar)
        elif kind in spans.ends:
            ended = open_bars.pop(event["data"].get(spans.key), None)
            if ended is not None:
                spans.closed(ended, event)
            elif (orphan := spans.unopened(event)) is not None:
                bars.append(orphan)
    return bars


def _model_opened(event: RunEvent, now: float) -> Bar:
    data = event["data"]
    label = f"model call {data.get('call')} · {data.get('model') or '?'}"
    return Bar("model", label, event["at"], now, status="running", seq=event["seq"])


def _model_closed(ended: Bar, event: RunEvent) -> None:
    data = event["data"]
    duration = _num(data.get("duration_s"))
    ended.end = ended.start + duration if duration is not None else event["at"]
    first = _num(data.get("first_token_s"))
    ended.first_token = ended.start + first if first is not None else None
    ended.status = "ok" if event["type"] == MODEL_CALL_FINISHED else "error"
    usage = data.get("usage") or {}
    if isinstance(usage, dict) and usage:
        ended.detail = f"{usage.get('input_tokens', 0)} → {usage.get('output_tokens', 0)} tokens"


def _tool_opened(event: RunEvent, now: float) -> Bar:
    data = event["data"]
    call_id = data.get("id")
    return Bar(
        "tool",
        f"tool {data.get('name')}",
        event["at"],
        now,
        "running",
        seq=event["seq"],
        call_id=call_id if isinstance(call_id, str) else None,
    )


def _tool_closed(ended: Bar, event: RunEvent) -> None:
    data = event["data"]
    began = _num(data.get("started_at"))
    if began is not None:
        ended.start = began
    ended.end = max(event["at"], ended.start)
    ended.status = "error" if data.get("is_error") else "ok"


def _step_opened(event: RunEvent, now: float) -> Bar:
    label = f"step {event['data'].get('step_id')}"
    return Bar("step", label, event["at"], now, "running", seq=event["seq"])


def _step_closed(ended: Bar, event: RunEvent) -> None:
    ended.end = event["at"]
    ended.status = "ok" if event["type"] == WORKFLOW_STEP_FINISHED else "error"


def _step_replayed(event: RunEvent) -> Bar | None:
    """A step a resumed workflow run replayed from its journal: finished, never started."""
    if event["type"] != WORKFLOW_STEP_FINISHED or not event["data"].get("replayed"):
        return None
    label = f"step {event['data'].get('step_id')} (replayed)"
    return Bar("step", label, event["at"], event["at"], seq=event["seq"])


_SPANS = (
    _Spans(
        "call",
        MODEL_CALL_STARTED,
        (MODEL_CALL_FINISHED, MODEL_CALL_FAILED),
        _model_opened,
        _model_closed,
    ),
    _Spans("id", AGENT_TOOL_CALL, (AGENT_TOOL_RESULT,), _tool_opened, _tool_closed),
    _Spans(
        "step_id",
        WORKFLOW_STEP_STARTED,
        (WORKFLOW_STEP_FINISHED, WORKFLOW_STEP_FAILED),
        _step_opened,
        _step_closed,
        _step_replayed,
    ),
)
"""Model calls, tool calls and workflow steps, in the order their bars are listed."""


def _under_tool_calls(bars: list[Bar], run_id: str) -> list[Bar]:
    """`bars` (in start order) with each run a tool call of `run_id` started moved right under
    that tool call's bar, followed by the runs nested in it."""
    tools = {b.call_id: b for b in bars if b.kind == "tool" and b.call_id is not None}
    if not tools:
        return bars
    under: dict[str, list[Bar]] = {}
    owner: dict[str, str] = {}
    """Nested run id -> the tool call id its block hangs under."""
    rest: list[Bar] = []
    for bar in bars:
        call = None
        if bar.kind == "run" and bar.run_id is not None:
            if bar.parent == run_id and bar.call_id in tools:
                call = bar.call_id
            elif bar.parent is not None:
                call = owner.get(bar.parent)
        if call is None:
            rest.append(bar)
            continue
        assert bar.run_id is not None
        owner[bar.run_id] = call
        under.setdefault(call, []).append(bar)
    if not under:
        return bars
    out: list[Bar] = []
    for bar in rest:
        out.append(bar)
        if bar.kind == "tool" and bar.call_id in under:
            out.extend(under.pop(bar.call_id))
    return out


def build_timeline(
    info: RunInfo,
    events: Sequence[RunEvent],
    nested: Sequence[tuple[RunInfo, int]],
    now: float,
) -> Timeline:
    """The waterfall of `info`: its events' bars, then the runs nested in it (with their
    depth in the tree), in start order within each kind."""
    bars = [bar for spans in _SPANS for bar in _span_bars(events, now, spans)]
    for child, depth in nested:
        if child.started_at <= 0:
            continue
        end = child.ended_at if child.ended_at is not None else now
        bars.append(
            Bar(
                "run",
                f"{child.kind} {child.name}",
                child.started_at,
                max(end, child.started_at),
                "running"
                if child.status == "running"
                else "ok"
                if child.status == "completed"
                else "error",
                run_id=child.run_id,
                depth=depth,
                call_id=child.parent_tool_call_id,
                parent=child.parent_run_id or child.workflow_run_id,
            )
        )
    bars.sort(key=lambda b: (b.start, b.depth))
    bars = _under_tool_calls(bars, info.run_id)
    run_end = info.ended_at if info.ended_at is not None else now
    starts = [info.started_at, *(b.start for b in bars)] if info.started_at > 0 else []
    starts = starts or [b.start for b in bars] or [run_end]
    ends = [run_end, *(b.end for b in bars)]
    return Timeline(min(starts), max(ends), bars)
