"""Output: what goes to stdout (the answer, the listing, the JSON) and to stderr (progress,
summaries, errors), and how stored data is shown.

Everything a model, a tool or a store wrote is data: in listings, event summaries and on
stderr it is shown with control characters escaped, so it cannot move the cursor, retitle or
recolour the terminal. Tables, `key  value` lines and stderr escape every value themselves, so
no command can forget to. The answer of `tether agent run` (and a workflow's output) is the
command's output: written as it is into a pipe or a file, and with control characters escaped
(newlines and tabs kept) only on a terminal, which would act on them.
"""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import typer

from .. import run_events as ev
from ..events import AgentEvent

if TYPE_CHECKING:
    from ..stores.run_store import RunEvent, RunInfo

__all__ = [
    "EpisodeRenderer",
    "clean",
    "clean_lines",
    "compact",
    "emit",
    "emit_answer",
    "emit_err",
    "emit_json",
    "event_lines",
    "format_duration",
    "format_time",
    "format_usage",
    "json_error_excerpt",
    "key_values",
    "resume_command",
    "run_to_json",
    "stdout_is_terminal",
    "table",
    "to_jsonable",
]

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_LINE_BREAKS = re.compile(r"[\r\n\t]")
_JSON_RAW_CONTROLS = re.compile(r"[\x7f-\x9f]")
"""What `json.dumps(..., ensure_ascii=False)` leaves raw that a terminal may act on (DEL, C1)."""
SUMMARY_WIDTH = 160
"""Event summaries in `tether runs show` are cut to this many characters."""


def emit(text: str = "", *, nl: bool = True) -> None:
    """Write to stdout."""
    typer.echo(text, nl=nl)


def stdout_is_terminal() -> bool:
    """Whether stdout is a terminal (which acts on the control characters it is sent)."""
    return sys.stdout.isatty()


def emit_answer(text: str, *, nl: bool = True) -> None:
    """Write what a model (or a workflow) answered to stdout: as it is, except on a terminal,
    where an escape sequence in it would be obeyed (recolour, retitle, write the clipboard)."""
    emit(clean_lines(text) if stdout_is_terminal() else text, nl=nl)


def emit_err(text: str = "") -> None:
    """Write a line (or lines) to stderr, control characters escaped."""
    typer.echo(clean_lines(text), err=True)


def to_jsonable(value: Any) -> Any:
    """`value` as plain JSON data (pydantic models, dataclasses and the like dumped; anything
    unknown as its string)."""
    import pydantic_core

    return pydantic_core.to_jsonable_python(value, serialize_unknown=True)


def emit_json(value: Any) -> None:
    """Write `value` to stdout as indented JSON."""
    text = json.dumps(to_jsonable(value), indent=2, ensure_ascii=False)
    # They can only be inside strings, where a \u escape is the same JSON value.
    emit(_JSON_RAW_CONTROLS.sub(lambda m: f"\\u{ord(m.group()):04x}", text))


def clean(text: str) -> str:
    """`text` with control characters escaped (newlines and tabs too: one value, one line)."""

    def escape(match: re.Match[str]) -> str:
        return match.group().encode("unicode_escape").decode("ascii")

    return _CONTROL.sub(escape, _LINE_BREAKS.sub(escape, text))


def clean_lines(text: str) -> str:
    """`text` with control characters escaped except its newlines and tabs (a server's error
    text often indents with one). Escaping is idempotent: `clean` leaves no control character."""
    return "\n".join(
        "\t".join(clean(part) for part in line.split("\t")) for line in text.split("\n")
    )


def compact(value: Any, width: int = SUMMARY_WIDTH) -> str:
    """One line of JSON (control characters escaped by JSON itself), cut to `width`."""
    text = value if isinstance(value, str) else json.dumps(to_jsonable(value), ensure_ascii=False)
    text = clean(text)
    return text if len(text) <= width else text[: width - 1] + "…"


def json_error_excerpt(text: str, exc: json.JSONDecodeError) -> str:
    """The line of `text` the JSON error is on, with a caret under the column."""
    lines = text.splitlines() or [""]
    line = lines[min(exc.lineno, len(lines)) - 1]
    return f"  {line}\n  {' ' * (exc.colno - 1)}^"


def table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """Columns two spaces apart and aligned by display width (a wide character takes two cells,
    as rich measures it), control characters escaped, never wrapped; trailing spaces dropped.
    Drawn here rather than by rich's Table: a listing then loads none of rich's console."""
    from rich.cells import cell_len

    lines = [list(headers), *([clean(cell) for cell in row] for row in rows)]
    count = max(len(line) for line in lines)
    for line in lines:
        line.extend([""] * (count - len(line)))
    widths = [max(cell_len(line[i]) for line in lines) for i in range(count)]
    return "\n".join(
        "".join(
            cell + " " * (width + 2 - cell_len(cell))
            for cell, width in zip(line, widths, strict=True)
        ).rstrip()
        for line in lines
    )


def key_values(pairs: Iterable[tuple[str, str]]) -> str:
    """`key  value` lines with the values aligned, control characters escaped."""
    items = [(clean(k), clean(v)) for k, v in pairs]
    width = max((len(k) for k, _ in items), default=0)
    return "\n".join(f"{k.ljust(width)}  {v}".rstrip() for k, v in items)


def format_time(at: float | None) -> str:
    """Local time, to the second; "-" for none."""
    if at is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at))


def format_duration(started: float, ended: float | None) -> str:
    if ended is None:
        return "-"
    seconds = max(ended - started, 0.0)
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes}m{rest:02d}s"


def format_usage(usage: Mapping[str, Any]) -> str:
    """``input_tokens=12 output_tokens=30``, or "-" when the provider reported none."""
    return " ".join(f"{k}={v}" for k, v in usage.items()) or "-"


def run_to_json(info: RunInfo) -> dict[str, Any]:
    """A run summary as JSON data: `RunInfo.to_json`, and the command that resumes it."""
    return {**info.to_json(), "resume": resume_command(info)}


def resume_command(info: RunInfo) -> str | None:
    """The command that resumes an interrupted root workflow run (its process died); None for
    anything else: a nested run resumes with its root, and an episode is not resumed (what it
    completed is stored; run the turn again)."""
    if info.status != "interrupted" or info.kind != "workflow" or info.workflow_run_id:
        return None
    return f"tether workflow run {info.name} --run-id {info.run_id}"


def format_cost(cost: float | None) -> str:
    """``$0.0123``; "-" when the cost is not known (an unpriced model: never a guess)."""
    if cost is None:
        return "-"
    return f"${cost:.4f}" if cost >= 0.0001 or cost == 0 else f"${cost:.2e}"


def format_tokens(usage: Mapping[str, Any]) -> str:
    """Input and output tokens as ``1200→80``, "-" when none were reported."""
    if not usage:
        return "-"
    return f"{usage.get('input_tokens', 0)}→{usage.get('output_tokens', 0)}"


# -- run events ------------------------------------------------------------------------------


def _error_text(error: Any) -> str:
    if isinstance(error, Mapping):
        return f"{error.get('type')}: {error.get('message')}"
    return str(error)


_Get = Callable[[str], Any]
"""An event's `data.get`."""


def _agent_finished(get: _Get) -> str:
    usage = get("usage")
    shown = format_usage(usage) if isinstance(usage, Mapping) else "-"
    cost = get("cost_usd")
    priced = f" cost={format_cost(cost)}" if isinstance(cost, int | float) else ""
    return f"turns={get('turns')} usage: {shown}{priced} stop={get('stop_reason')}"


def _model_call_finished(get: _Get) -> str:
    usage = get("usage")
    shown = format_usage(usage) if isinstance(usage, Mapping) else "-"
    cost = get("cost_usd")
    if not (isinstance(cost, int | float) or cost is None):
        return f"call {get('call')}"
    return (
        f"call {get('call')} in {_ms(get('duration_s'))} (first token "
        f"{_ms(get('first_token_s'))}) usage: {shown} cost={format_cost(cost)}"
    )


_SUMMARIES: dict[str, Callable[[_Get], str]] = {
    ev.AGENT_STARTED: lambda get: (
        f"agent={get('agent_id')} scope={get('memory_scope')} model={get('model')}"
    ),
    ev.AGENT_TOOL_CALL: lambda get: f"{get('name')} {compact(get('input'))}",
    ev.AGENT_TOOL_RESULT: lambda get: (
        f"{get('name')}{' (error)' if get('is_error') else ''} -> {compact(get('output'))}"
    ),
    ev.AGENT_MESSAGES_COMMITTED: lambda get: (
        f"{get('count')} record(s) stored from index {get('start')}"
    ),
    ev.AGENT_FINISHED: _agent_finished,
    ev.AGENT_FAILED: lambda get: (
        f"{_error_text(get('error'))}{' (cancelled)' if get('cancelled') else ''}"
    ),
    ev.AGENT_WARNING: lambda get: f"{get('code')}: {get('message')}",
    ev.MODEL_CALL_STARTED: lambda get: f"call {get('call')} to {get('model')}",
    ev.MODEL_CALL_FINISHED: _model_call_finished,
    ev.MODEL_CALL_FAILED: lambda get: (
        f"call {get('call')} after {_ms(get('duration_s'))}: {_error_text(get('error'))}"
    ),
    ev.WORKFLOW_STARTED: lambda get: f"attempt {get('attempt')} input={compact(get('input'))}",
    ev.WORKFLOW_STEP_STARTED: lambda get: f"{get('step_id')}",
    ev.WORKFLOW_STEP_FINISHED: lambda get: (
        f"{get('step_id')}{' (replayed)' if get('replayed') else ''} -> {compact(get('output'))}"
    ),
    ev.WORKFLOW_STEP_FAILED: lambda get: f"{get('step_id')}: {_error_text(get('error'))}",
    ev.WORKFLOW_FINISHED: lambda get: f"output={compact(get('output'))}",
    ev.WORKFLOW_FAILED: lambda get: f"{get('status')}: {_error_text(get('error'))}",
}
"""What one line says of each kind of event, from its data's `get`."""


def _summary(kind: str, data: Mapping[str, Any]) -> str:
    """One line saying what an event says; unknown kinds show their data."""
    line = _SUMMARIES.get(kind)
    return compact(dict(data)) if line is None else line(data.get)


def _ms(seconds: Any) -> str:
    return f"{seconds * 1000:.0f} ms" if isinstance(seconds, int | float) else "-"


def event_lines(events: Sequence[RunEvent]) -> list[str]:
    """One line per event: seq, type, summary. Consecutive `agent_text_delta` events become one
    line holding their joined text (in full: it is the answer)."""
    lines: list[str] = []
    rows: list[tuple[str, str, str]] = []
    i = 0
    while i < len(events):
        event = events[i]
        if event["type"] == ev.AGENT_TEXT_DELTA:
            j = i
            parts: list[str] = []
            while j < len(events) and events[j]["type"] == ev.AGENT_TEXT_DELTA:
                parts.append(str(events[j]["data"].get("text", "")))
                j += 1
            seq = f"{events[i]['seq']}-{events[j - 1]['seq']}" if j - i > 1 else str(event["seq"])
            rows.append((seq, "agent_text", compact("".join(parts), width=1 << 30)))
            i = j
            continue
        rows.append(
            (str(event["seq"]), clean(event["type"]), _summary(event["type"], event["data"]))
        )
        i += 1
    seq_width = max((len(r[0]) for r in rows), default=0)
    kind_width = max((len(r[1]) for r in rows), default=0)
    for seq, kind, text in rows:
        lines.append(f"{seq.rjust(seq_width)}  {kind.ljust(kind_width)}  {clean(text)}".rstrip())
    return lines


# -- a live episode --------------------------------------------------------------------------


class EpisodeRenderer:
    """Shows an episode as it runs: answer text on stdout as it arrives, tool calls (and
    failed tool results) as lines on stderr, each step's text on its own line."""

    def __init__(self, *, stream_text: bool, show_tools: bool) -> None:
        self.stream_text = stream_text
        self.show_tools = show_tools
        self._mid_line = False

    def __call__(self, event: AgentEvent) -> None:
        if event["type"] == "text":
            if self.stream_text and event["text"]:
                emit_answer(event["text"], nl=False)
                self._mid_line = not event["text"].endswith("\n")
        elif not self.show_tools:
            return
        elif event["type"] == "tool_use":
            self.end_line()
            emit_err(f"[tool] {clean(event['name'])} {compact(event['input'])}")
        elif event["type"] == "tool_result" and event.get("is_error"):
            self.end_line()
            emit_err(f"[tool] {clean(event['name'])} failed: {compact(event['output'])}")
        elif event["type"] == "guardrail":
            self.end_line()
            what = f" {clean(event['tool_name'])}" if "tool_name" in event else " the answer"
            why = f": {compact(event['reason'])}" if "reason" in event else ""
            emit_err(f"[guardrail] {clean(event['name'])} {event['action']}{what}{why}")

    def end_line(self) -> None:
        """End the streamed text's line, if it is open."""
        if self._mid_line:
            emit()
            self._mid_line = False
