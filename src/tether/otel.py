"""OpenTelemetry bridge: a trace sink that turns tether's records into GenAI spans.

```python
from tether import create_agent
from tether.otel import OtelSink

agent = create_agent(llm=..., trace=OtelSink(agent_name="support", provider_name="anthropic"))
```

Needs the `otel` extra (``pip install 'tether[otel]'``); configure the tracer provider and
exporter as you would for anything else, or pass `tracer_provider=`.

Each turn becomes a span tree following the OpenTelemetry GenAI semantic conventions:

```
invoke_agent {agent_name}        INTERNAL  the turn: conversation id, model, token totals
├── chat {model}                 CLIENT    one per provider request: finish reasons, usage
├── execute_tool {tool}          INTERNAL  one per tool execution: tool name, call id
└── chat {model}                 CLIENT
```

The sink sees records, not the turn itself, so it builds a turn's spans when the turn's last
record (its `usage` record) arrives, with start and end times taken from the records' `at`
(a tool span starts `ms` before its record). Consequences worth knowing:

- The turn span starts at its first `prompt` record: connecting integrations happens before it,
  and `mcp` records made then go to whatever span is current, as span events.
- Spans your own code opens inside a tool are not children of that tool's span (the record
  arrives after the tool ran); they are children of the span current when the turn began.
- A turn whose events stop without a final record (an exception escaped `send()`, or the
  consumer stopped iterating) is ended with ``error.type="_OTHER"`` when the next turn of the
  same session starts, or by `end_open_turns()`.
- One session runs one turn at a time; records are grouped by their `session_id`.

Guardrail decisions, `workflow` records (``ctx.trace()``) and prompt assembly become span events
(``tether.<phase>``): on the tool span when made while that tool ran, on the turn span otherwise.
No message content is recorded: the records carry none.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

try:
    from opentelemetry import context as otel_context
    from opentelemetry import trace
    from opentelemetry.trace import Span, SpanKind, Status, StatusCode, TracerProvider
    from opentelemetry.util.types import AttributeValue
except ImportError as exc:  # pragma: no cover - exercised by a test that hides opentelemetry
    raise ImportError(
        "tether.otel needs OpenTelemetry, which is an optional extra: pip install 'tether[otel]'"
    ) from exc

from .events import TraceRecord

__all__ = ["OtelSink"]

# GenAI semantic convention attribute names (semantic-conventions-genai, development status).
OPERATION_NAME = "gen_ai.operation.name"
PROVIDER_NAME = "gen_ai.provider.name"
AGENT_NAME = "gen_ai.agent.name"
CONVERSATION_ID = "gen_ai.conversation.id"
REQUEST_MODEL = "gen_ai.request.model"
FINISH_REASONS = "gen_ai.response.finish_reasons"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_TYPE = "gen_ai.tool.type"
ERROR_TYPE = "error.type"

#: tether's Usage keys -> GenAI usage attributes.
USAGE_ATTRIBUTES: Mapping[str, str] = {
    "input_tokens": "gen_ai.usage.input_tokens",
    "output_tokens": "gen_ai.usage.output_tokens",
    "cache_read_tokens": "gen_ai.usage.cache_read.input_tokens",
    "cache_creation_tokens": "gen_ai.usage.cache_creation.input_tokens",
    "reasoning_tokens": "gen_ai.usage.reasoning.output_tokens",
}

#: error.type for what is not an exception: the semantic conventions' fallback, and ours.
OTHER_ERROR = "_OTHER"
TOOL_ERROR = "tool_error"
GUARDRAIL_DENIED = "guardrail_denied"


def _ns(seconds: float) -> int:
    return int(seconds * 1_000_000_000)


@dataclass(slots=True)
class _Event:
    name: str
    at: float
    attributes: dict[str, AttributeValue]


@dataclass(slots=True)
class _Round:
    number: int
    start: float
    model: str | None
    end: float | None = None
    stop_reason: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    error_type: str | None = None


@dataclass(slots=True)
class _ToolRun:
    name: str
    call_id: str | None
    start: float
    end: float
    is_error: bool
    events: list[_Event]
    denied: bool


@dataclass(slots=True)
class _Turn:
    parent: otel_context.Context
    session_id: str | None
    start: float
    last: float
    saw_prompt: bool = False
    model: str | None = None
    stop_reason: str | None = None
    children: list[_Round | _ToolRun] = field(default_factory=list)
    events: list[_Event] = field(default_factory=list)
    pending: list[_Event] = field(default_factory=list)
    """Events made while a tool runs, waiting for that tool's record."""
    in_tools: bool = False

    def open_round(self, number: int) -> _Round | None:
        for child in reversed(self.children):
            if isinstance(child, _Round):
                return child if child.end is None and child.number == number else None
        return None


class OtelSink:
    """A trace sink (``create_agent(trace=OtelSink(...))``) that exports each turn as GenAI spans.

    Args:
        tracer_provider: Where spans go; the global provider when None.
        agent_name: ``gen_ai.agent.name``, and the suffix of the ``invoke_agent`` span name.
        provider_name: ``gen_ai.provider.name`` (``anthropic``, ``openai``, ``gcp.gemini``, …).
            The conventions require it; the records do not carry it, so say it here.
    """

    def __init__(
        self,
        tracer_provider: TracerProvider | None = None,
        *,
        agent_name: str | None = None,
        provider_name: str | None = None,
    ) -> None:
        self._tracer = trace.get_tracer("tether.otel", tracer_provider=tracer_provider)
        self.agent_name = agent_name
        self.provider_name = provider_name
        self._turns: dict[str | None, _Turn] = {}
        self._lock = threading.Lock()

    # -- the sink --------------------------------------------------------------------------

    def __call__(self, record: TraceRecord) -> None:
        with self._lock:
            self._take(record)

    def end_open_turns(self) -> None:
        """End every turn still waiting for its final record, as incomplete (``_OTHER``)."""
        with self._lock:
            turns, self._turns = self._turns, {}
            for turn in turns.values():
                self._export(turn, turn.last, OTHER_ERROR)

    def _take(self, record: TraceRecord) -> None:
        phase, name, at = record["phase"], record["name"], record["at"]
        data = record.get("data") or {}
        key = record.get("session_id")
        turn = self._turns.get(key)
        if phase in ("mcp", "workflow") and turn is None:
            # Outside a turn (a connect before the first prompt, a ladder run): an event on
            # whatever span the caller has open, a no-op when there is none.
            trace.get_current_span().add_event(f"tether.{phase}", _event_attributes(record))
            return
        if phase == "prompt" and turn is not None and turn.saw_prompt:  # one per turn
            self._export(self._turns.pop(key), turn.last, OTHER_ERROR)
            turn = None
        if turn is None:
            turn = _Turn(otel_context.get_current(), key, at, at)
            self._turns[key] = turn
        turn.last = max(turn.last, at)
        if phase == "prompt":
            turn.saw_prompt = True
            turn.in_tools = False
            turn.events.extend(turn.pending)
            turn.pending.clear()
            turn.events.append(_Event("tether.prompt", at, _event_attributes(record)))
        elif phase == "request":
            number = int(data.get("round", 0))
            model = data.get("model")
            turn.model = turn.model or model
            turn.children.append(_Round(number, at, model))
            turn.in_tools = False
            turn.events.extend(turn.pending)
            turn.pending.clear()
        elif phase == "response":
            number = int(data.get("round", 0))
            rnd = turn.open_round(number)
            if rnd is None:  # the request record was not seen: start from the response's ms
                rnd = _Round(number, at - float(data.get("ms", 0)) / 1000, data.get("model"))
                turn.children.append(rnd)
                turn.model = turn.model or rnd.model
            rnd.end = at
            if name.endswith(":failed"):
                rnd.error_type = str(data.get("error_type") or OTHER_ERROR)
            else:
                rnd.stop_reason = data.get("stop_reason")
                rnd.usage = dict(data.get("usage") or {})
                turn.stop_reason = rnd.stop_reason
                turn.in_tools = bool(data.get("tool_calls"))
        elif phase == "tool":
            ms = float(data.get("ms", 0))
            events, turn.pending = turn.pending, []
            denied = any(
                e.name == "tether.guardrail" and e.attributes.get("tether.action") == "deny"
                for e in events
            )
            turn.children.append(
                _ToolRun(
                    name,
                    data.get("id"),
                    at - ms / 1000,
                    at,
                    bool(data.get("is_error")),
                    events,
                    denied,
                )
            )
        elif phase == "guardrail":
            event = _Event("tether.guardrail", at, _event_attributes(record))
            if data.get("target") == "tool_call":
                turn.pending.append(event)
            else:
                turn.events.append(event)
                if data.get("action") == "deny":
                    turn.stop_reason = GUARDRAIL_DENIED
        elif phase == "usage":
            turn.events.extend(turn.pending)
            turn.pending.clear()
            del self._turns[key]
            error: str | None = None
            if name.endswith(":aborted"):
                error = "AbortedError"
            elif name.endswith(":failed"):
                failed = [c for c in turn.children if isinstance(c, _Round) and c.error_type]
                error = failed[-1].error_type if failed else OTHER_ERROR
            self._export(turn, at, error, totals=data)
        else:  # workflow and mcp records inside a turn
            event = _Event(f"tether.{phase}", at, _event_attributes(record))
            (turn.pending if turn.in_tools else turn.events).append(event)

    # -- building the spans ------------------------------------------------------------------

    def _export(
        self,
        turn: _Turn,
        end: float,
        error: str | None,
        totals: Mapping[str, Any] | None = None,
    ) -> None:
        end = max(end, turn.last)
        common: dict[str, AttributeValue] = {}
        if self.provider_name is not None:
            common[PROVIDER_NAME] = self.provider_name
        if turn.session_id is not None:
            common[CONVERSATION_ID] = turn.session_id
        attrs: dict[str, AttributeValue] = {OPERATION_NAME: "invoke_agent", **common}
        if self.agent_name is not None:
            attrs[AGENT_NAME] = self.agent_name
        if turn.model is not None:
            attrs[REQUEST_MODEL] = turn.model
        name = f"invoke_agent {self.agent_name}" if self.agent_name else "invoke_agent"
        span = self._tracer.start_span(
            name,
            context=turn.parent,
            kind=SpanKind.INTERNAL,
            attributes=attrs,
            start_time=_ns(turn.start),
        )
        inside = trace.set_span_in_context(span, turn.parent)
        for child in turn.children:
            if isinstance(child, _Round):
                self._chat_span(child, inside, common, end)
            else:
                self._tool_span(child, inside)
        for event in turn.events:
            span.add_event(event.name, event.attributes, timestamp=_ns(event.at))
        if totals:
            _set_usage(span, totals)
        if turn.stop_reason is not None:
            span.set_attribute(FINISH_REASONS, [turn.stop_reason])
        if error is not None:
            _fail(span, error, "the turn ended without an answer")
        span.end(end_time=_ns(end))

    def _chat_span(
        self,
        rnd: _Round,
        parent: otel_context.Context,
        common: Mapping[str, AttributeValue],
        turn_end: float,
    ) -> None:
        attrs: dict[str, AttributeValue] = {OPERATION_NAME: "chat", **common}
        if rnd.model is not None:
            attrs[REQUEST_MODEL] = rnd.model
        attrs["tether.round"] = rnd.number
        name = f"chat {rnd.model}" if rnd.model else "chat"
        span = self._tracer.start_span(
            name, context=parent, kind=SpanKind.CLIENT, attributes=attrs, start_time=_ns(rnd.start)
        )
        if rnd.stop_reason is not None:
            span.set_attribute(FINISH_REASONS, [rnd.stop_reason])
        _set_usage(span, rnd.usage)
        if rnd.error_type is not None:
            _fail(span, rnd.error_type, "the provider call failed")
        elif rnd.end is None:
            _fail(span, OTHER_ERROR, "the provider call did not finish")
        span.end(end_time=_ns(rnd.end if rnd.end is not None else turn_end))

    def _tool_span(self, run: _ToolRun, parent: otel_context.Context) -> None:
        attrs: dict[str, AttributeValue] = {
            OPERATION_NAME: "execute_tool",
            TOOL_NAME: run.name,
            TOOL_TYPE: "function",
        }
        if run.call_id is not None:
            attrs[TOOL_CALL_ID] = run.call_id
        span = self._tracer.start_span(
            f"execute_tool {run.name}",
            context=parent,
            kind=SpanKind.INTERNAL,
            attributes=attrs,
            start_time=_ns(run.start),
        )
        for event in run.events:
            span.add_event(event.name, event.attributes, timestamp=_ns(event.at))
        if run.denied:
            _fail(span, GUARDRAIL_DENIED, "a guardrail denied the call")
        elif run.is_error:
            _fail(span, TOOL_ERROR, "the tool returned an error result")
        span.end(end_time=_ns(run.end))


def _fail(span: Span, error_type: str, description: str) -> None:
    span.set_attribute(ERROR_TYPE, error_type)
    span.set_status(Status(StatusCode.ERROR, description))


def _set_usage(span: Span, usage: Mapping[str, Any]) -> None:
    for key, attribute in USAGE_ATTRIBUTES.items():
        value = usage.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            span.set_attribute(attribute, value)


def _event_attributes(record: TraceRecord) -> dict[str, AttributeValue]:
    """A record as span-event attributes: ``tether.name`` and one ``tether.<key>`` per datum.
    Values OpenTelemetry cannot hold (None, mappings, mixed lists) are dropped or JSON-encoded."""
    attrs: dict[str, AttributeValue] = {"tether.name": record["name"]}
    for key, value in (record.get("data") or {}).items():
        if value is None:
            continue
        if isinstance(value, (str, bool, int, float)):
            attrs[f"tether.{key}"] = value
        elif _homogeneous(value):
            attrs[f"tether.{key}"] = list(value)
        else:
            attrs[f"tether.{key}"] = json.dumps(value, default=repr, sort_keys=True)
    return attrs


def _homogeneous(value: Any) -> bool:
    if not isinstance(value, Sequence) or isinstance(value, (str, bytes)) or not value:
        return False
    kinds = {type(v) for v in value}
    return len(kinds) == 1 and kinds <= {str, bool, int, float}
