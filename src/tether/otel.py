"""OpenTelemetry bridge: live GenAI spans for turns, model calls, tool calls and workflows.

```python
from tether import create_agent
from tether.otel import OtelSink

agent = create_agent(model="anthropic:claude-sonnet-4-5", trace=OtelSink(agent_name="support"))
```

Needs the `otel` extra (``pip install 'tether[otel]'``); configure the tracer provider and
exporter as you would for anything else, or pass `tracer_provider=`.

Spans open as the turn runs (the sink is a `tether.tracing.SpanSink`), following the
OpenTelemetry GenAI semantic conventions:

```
invoke_agent {agent_name}        INTERNAL  the turn: conversation id, model, token totals
├── chat {model}                 CLIENT    one per provider call (and stream retry): usage,
│                                          finish reasons, request settings
├── execute_tool {tool}          INTERNAL  one per tool call: tool name, call id; current while
│   └── (your spans)                       the tool and its guardrails run
└── chat {model}                 CLIENT
```

- The turn's span is a child of whatever span is current where the turn is iterated, and it is
  current itself while the prompt is assembled (attached resources read, MCP servers
  connected) and while the output guardrails run; a tool call's span is current inside the
  tool and its guardrails, so a span you open there is its child.
- ``gen_ai.provider.name`` comes from the adapter (``anthropic``, ``openai``, ``gcp.gemini``)
  or the ``provider:`` of a model string; ``provider_name=`` overrides it.
- Message content (the request's messages and system prompt, the answer, tool arguments and
  results) is recorded only when you opt in, as the conventions say:
  ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`` (or `capture_content=True`).
- A turn whose consumer stops iterating early ends its open spans with ``error.type=_OTHER``;
  a failed provider call, an abort and a turn that cannot start end theirs with the error's type.
- Guardrail decisions, ``ctx.trace()`` records, MCP connects and prompt assembly become span
  events (``tether.<phase>``) on the innermost open span of the turn.

Durable workflows: pass `workflow_events` as a recorder (``workflow.run(...,
on_event=sink.workflow_events)``; a lab `Runtime` whose ``defaults`` trace with an OtelSink does
it for every workflow): each run is a ``workflow {id}`` span, each executed step a ``step {name}``
span current while the step runs, so the episodes and tool calls a step starts are its children.
"""

from __future__ import annotations

import copy
import json
import os
import threading
from collections.abc import Mapping, Sequence
from contextvars import Token
from typing import Any

from . import _extras

try:
    from opentelemetry import context as otel_context
    from opentelemetry import trace
    from opentelemetry.context import Context
    from opentelemetry.trace import Span, SpanKind, Status, StatusCode, TracerProvider
    from opentelemetry.util.types import AttributeValue
except ImportError as exc:  # pragma: no cover - exercised by a test that hides opentelemetry
    raise _extras.missing_extra("tether.otel needs OpenTelemetry", "otel") from exc

from .events import TraceRecord
from .run_events import (
    WORKFLOW_FAILED,
    WORKFLOW_FINISHED,
    WORKFLOW_STARTED,
    WORKFLOW_STEP_FAILED,
    WORKFLOW_STEP_FINISHED,
    WORKFLOW_STEP_STARTED,
)
from .tracing import SpanKind as PhaseKind
from .tracing import SpanSink
from .workflows import WorkflowEvent

__all__ = ["CAPTURE_CONTENT_ENV", "OtelSink", "provider_name_of"]

# GenAI semantic convention attribute names (semantic-conventions-genai, development status).
OPERATION_NAME = "gen_ai.operation.name"
PROVIDER_NAME = "gen_ai.provider.name"
AGENT_NAME = "gen_ai.agent.name"
CONVERSATION_ID = "gen_ai.conversation.id"
REQUEST_MODEL = "gen_ai.request.model"
FINISH_REASONS = "gen_ai.response.finish_reasons"
RESPONSE_ID = "gen_ai.response.id"
RESPONSE_MODEL = "gen_ai.response.model"
TOOL_DEFINITIONS = "gen_ai.tool.definitions"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_TYPE = "gen_ai.tool.type"
TOOL_ARGUMENTS = "gen_ai.tool.call.arguments"
TOOL_RESULT = "gen_ai.tool.call.result"
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
SYSTEM_INSTRUCTIONS = "gen_ai.system_instructions"
ERROR_TYPE = "error.type"

CAPTURE_CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
"""The conventions' opt-in for message content: ``true`` (or ``span_only``,
``span_and_event``) records it on the spans; unset or anything else records none."""

#: tether's Usage keys -> GenAI usage attributes.
USAGE_ATTRIBUTES: Mapping[str, str] = {
    "input_tokens": "gen_ai.usage.input_tokens",
    "output_tokens": "gen_ai.usage.output_tokens",
    "cache_read_tokens": "gen_ai.usage.cache_read.input_tokens",
    "cache_creation_tokens": "gen_ai.usage.cache_creation.input_tokens",
    "reasoning_tokens": "gen_ai.usage.reasoning.output_tokens",
}

#: ModelSettings keys -> GenAI request attributes.
SETTING_ATTRIBUTES: Mapping[str, str] = {
    "temperature": "gen_ai.request.temperature",
    "max_tokens": "gen_ai.request.max_tokens",
    "top_p": "gen_ai.request.top_p",
    "seed": "gen_ai.request.seed",
    "stop": "gen_ai.request.stop_sequences",
}

_PROVIDERS = {
    "anthropic": "anthropic",
    "openai": "openai",
    "openai-responses": "openai",
    "openai-chat": "openai",
    "gemini": "gcp.gemini",
    "google": "gcp.gemini",
    "vertex": "gcp.vertex_ai",
    "bedrock": "aws.bedrock",
    "azure": "azure.ai.openai",
    "azure-responses": "azure.ai.openai",
}
"""tether's provider names -> the conventions' ``gen_ai.provider.name`` values."""

#: error.type for what is not an exception: the semantic conventions' fallback, and ours.
OTHER_ERROR = "_OTHER"
TOOL_ERROR = "tool_error"
GUARDRAIL_DENIED = "guardrail_denied"

_SPAN_RECORDS = frozenset({"request", "response", "usage"})
"""Record phases the spans themselves stand for (not repeated as events)."""


def provider_name_of(model: str | None, provider: str | None = None) -> str | None:
    """``gen_ai.provider.name`` for an adapter's `provider` or a ``"provider:model"`` string
    (``"anthropic:claude-…"`` -> ``anthropic``, ``"gemini:…"`` -> ``gcp.gemini``); None when
    neither says."""
    if provider is None and model is not None and ":" in model:
        provider = model.split(":", 1)[0]
    if provider is None:
        return None
    return _PROVIDERS.get(provider, provider)


def _capture_from_env() -> bool:
    value = os.environ.get(CAPTURE_CONTENT_ENV, "").strip().lower()
    return value in ("true", "1", "span_only", "span_and_event")


class _Live:
    """One open span: made current with ``with``, ended once."""

    __slots__ = ("denied", "ended", "kind", "sink", "span", "tokens", "turn_key")

    def __init__(self, sink: OtelSink, span: Span, kind: str, turn_key: str | None) -> None:
        self.sink = sink
        self.span = span
        self.kind = kind
        self.turn_key = turn_key
        self.tokens: list[Token[Context]] = []
        self.ended = False
        self.denied = False

    def __enter__(self) -> _Live:
        self.tokens.append(otel_context.attach(trace.set_span_in_context(self.span)))
        return self

    def __exit__(self, *exc_info: object) -> None:
        otel_context.detach(self.tokens.pop())

    def end(self, data: Mapping[str, Any]) -> None:
        if not self.ended:
            self.ended = True
            self.sink._end(self, data)


class OtelSink:
    """A trace sink (``create_agent(trace=OtelSink(...))``) that opens GenAI spans live.

    Args:
        tracer_provider: Where spans go; the global provider when None.
        agent_name: ``gen_ai.agent.name``, and the suffix of the ``invoke_agent`` span name.
        provider_name: ``gen_ai.provider.name`` for every span; None infers it per model call.
        capture_content: Record message content; None reads `CAPTURE_CONTENT_ENV`.
        tool_definitions: Record the tools offered on each model call
            (``gen_ai.tool.definitions``, opt-in in the conventions: they can be large).
    """

    def __init__(
        self,
        tracer_provider: TracerProvider | None = None,
        *,
        agent_name: str | None = None,
        provider_name: str | None = None,
        capture_content: bool | None = None,
        tool_definitions: bool = False,
    ) -> None:
        self._tracer = trace.get_tracer("tether.otel", tracer_provider=tracer_provider)
        self.agent_name = agent_name
        self.provider_name = provider_name
        self.capture_content = _capture_from_env() if capture_content is None else capture_content
        self.tool_definitions = tool_definitions
        self._open: dict[str | None, list[_Live]] = {}
        """Per session: the turn's spans still open, innermost last (where events go)."""
        self._workflow: dict[str, _Live] = {}
        """Open workflow runs and steps, by run id and run id/step id."""
        self._lock = threading.Lock()

    def for_agent(self, name: str) -> OtelSink:
        """This sink for one agent: the same tracer and open spans, with `name` as
        ``gen_ai.agent.name`` unless the sink already names an agent. A lab `Runtime` calls it
        for each agent, so one sink in its ``defaults`` names every agent's turns by its id."""
        if self.agent_name is not None:
            return self
        view = copy.copy(self)  # shares the open spans, the lock and the tracer
        view.agent_name = name
        return view

    # -- records ---------------------------------------------------------------------------

    def __call__(self, record: TraceRecord) -> None:
        phase = record["phase"]
        # A tool's own record is its span; the records named `what:how` (a truncated result, a
        # toolkit's file:read, shell:run, fetch:get) are events on it. Tool names have no ':'.
        if phase in _SPAN_RECORDS or (phase == "tool" and ":" not in record["name"]):
            return
        attributes = _event_attributes(record)
        with self._lock:
            stack = self._open.get(record.get("session_id"))
            target = stack[-1] if stack else None
        if target is None:  # outside a turn (a ladder's record, a connect): the current span
            trace.get_current_span().add_event(f"tether.{phase}", attributes)
            return
        target.span.add_event(f"tether.{phase}", attributes)
        data = record.get("data") or {}
        if phase == "guardrail" and data.get("action") == "deny" and target.kind == "tool":
            target.denied = True

    # -- live spans (tether.tracing.SpanSink) ------------------------------------------------

    def open_span(
        self,
        kind: PhaseKind,
        name: str,
        data: Mapping[str, Any],
        parent: Any,
        session_id: str | None,
    ) -> _Live:
        if isinstance(parent, _Live):
            context = trace.set_span_in_context(parent.span)
        else:
            context = otel_context.get_current()
        attrs: dict[str, AttributeValue] = {}
        if kind == "tool":
            attrs.update({OPERATION_NAME: "execute_tool", TOOL_NAME: name, TOOL_TYPE: "function"})
            if data.get("id") is not None:
                attrs[TOOL_CALL_ID] = str(data["id"])
            if self.capture_content and "input" in data:
                attrs[TOOL_ARGUMENTS] = _json(data["input"])
            span_name, span_kind = f"execute_tool {name}", SpanKind.INTERNAL
        else:
            model = data.get("model")
            provider = self.provider_name or provider_name_of(model, data.get("provider"))
            if provider is not None:
                attrs[PROVIDER_NAME] = provider
            if session_id is not None:
                attrs[CONVERSATION_ID] = session_id
            if model is not None:
                attrs[REQUEST_MODEL] = str(model)
            if kind == "turn":
                attrs[OPERATION_NAME] = "invoke_agent"
                if self.agent_name is not None:
                    attrs[AGENT_NAME] = self.agent_name
                span_name = f"invoke_agent {self.agent_name}" if self.agent_name else "invoke_agent"
                span_kind = SpanKind.INTERNAL
            else:
                attrs[OPERATION_NAME] = "chat"
                attrs["tether.round"] = int(data.get("round", 0))
                attrs["tether.attempt"] = int(data.get("attempt", 1))
                request = data.get("request") or {}
                for key, attribute in SETTING_ATTRIBUTES.items():
                    value = (request.get("settings") or {}).get(key)
                    if isinstance(value, int | float | str) and not isinstance(value, bool):
                        attrs[attribute] = value
                    elif isinstance(value, list) and all(isinstance(v, str) for v in value):
                        attrs[attribute] = list(value)
                if self.tool_definitions and request.get("tools"):
                    attrs[TOOL_DEFINITIONS] = _json(_tool_definitions(request["tools"]))
                if self.capture_content and request:
                    attrs[INPUT_MESSAGES] = _json(_messages(request.get("messages") or []))
                    system = [{"type": "text", "content": b["text"]} for b in request["system"]]
                    attrs[SYSTEM_INSTRUCTIONS] = _json(system)
                span_name = f"chat {model}" if model else "chat"
                span_kind = SpanKind.CLIENT
        span = self._tracer.start_span(span_name, context=context, kind=span_kind, attributes=attrs)
        live = _Live(self, span, kind, session_id)
        with self._lock:
            self._open.setdefault(session_id, []).append(live)
        return live

    def _end(self, live: _Live, data: Mapping[str, Any]) -> None:  # noqa: C901
        with self._lock:
            stack = self._open.get(live.turn_key)
            if stack is not None and live in stack:
                stack.remove(live)
                if not stack:
                    del self._open[live.turn_key]
        span = live.span
        usage = data.get("usage")
        if isinstance(usage, Mapping):
            _set_usage(span, usage)
        reason = data.get("finish_reason")
        if reason is not None:
            span.set_attribute(FINISH_REASONS, [str(reason)])
        if data.get("stop_reason") is not None:
            span.set_attribute("tether.stop_reason", str(data["stop_reason"]))
        if data.get("response_id") is not None:
            span.set_attribute(RESPONSE_ID, str(data["response_id"]))
        if data.get("response_model") is not None:
            span.set_attribute(RESPONSE_MODEL, str(data["response_model"]))
        if data.get("fallback_model") is not None:
            span.set_attribute("tether.fallback.model", str(data["fallback_model"]))
        if self.capture_content:
            if live.kind == "chat" and "content" in data:
                out = {"role": "assistant", "parts": _parts(data["content"])}
                if reason is not None:
                    out["finish_reason"] = str(reason)
                span.set_attribute(OUTPUT_MESSAGES, _json([out]))
            if live.kind == "tool" and "output" in data:
                span.set_attribute(TOOL_RESULT, str(data["output"]))
        error = data.get("error_type")
        if error is not None:
            what = (
                "the turn's consumer stopped before it ended"
                if data.get("dropped")
                else f"{live.kind} failed: {error}"
            )
            _fail(span, str(error), what)
        elif live.denied:
            _fail(span, GUARDRAIL_DENIED, "a guardrail denied the call")
        elif data.get("is_error"):
            _fail(span, TOOL_ERROR, "the tool returned an error result")
        span.end()

    def end_open_turns(self) -> None:
        """End every span still open, as incomplete (``_OTHER``)."""
        with self._lock:
            open_spans = [live for stack in self._open.values() for live in stack]
        for live in reversed(open_spans):
            live.end({"error_type": OTHER_ERROR, "dropped": True})

    # -- durable workflows ------------------------------------------------------------------

    def workflow_events(self, event: WorkflowEvent) -> None:
        """A workflow recorder (`on_event=`): a span per run and per executed step, current
        while it runs. Called in the run's own task, so what it makes current stays there."""
        run_id = event["workflow_run_id"]
        if event["type"] == WORKFLOW_STARTED:
            attrs: dict[str, AttributeValue] = {
                "tether.workflow.id": event["workflow_id"],
                "tether.workflow.run_id": run_id,
                "tether.workflow.attempt": event["attempt"],
            }
            span = self._tracer.start_span(f"workflow {event['workflow_id']}", attributes=attrs)
            self._workflow[run_id] = _entered(_Live(self, span, "workflow", None))
        elif event["type"] == WORKFLOW_STEP_STARTED:
            attrs = {"tether.workflow.run_id": run_id, "tether.step.id": event["step_id"]}
            span = self._tracer.start_span(f"step {event['step']}", attributes=attrs)
            self._workflow[f"{run_id}/{event['step_id']}"] = _entered(
                _Live(self, span, "step", None)
            )
        elif event["type"] == WORKFLOW_STEP_FINISHED:
            if event["replayed"]:
                attrs = {"tether.step.id": event["step_id"], "tether.step.replayed": True}
                self._tracer.start_span(f"step {event['step']}", attributes=attrs).end()
            else:
                self._close(f"{run_id}/{event['step_id']}", None)
        elif event["type"] == WORKFLOW_STEP_FAILED:
            self._close(f"{run_id}/{event['step_id']}", event["error"])
        elif event["type"] == WORKFLOW_FINISHED:
            self._close(run_id, None)
        elif event["type"] == WORKFLOW_FAILED:
            self._close(run_id, event["error"])

    def _close(self, key: str, error: Any) -> None:
        live = self._workflow.pop(key, None)
        if live is None:
            return
        if live.tokens:
            live.__exit__()
        live.end({"error_type": error.get("type", OTHER_ERROR)} if error else {})


def _entered(live: _Live) -> _Live:
    live.__enter__()
    return live


def _fail(span: Span, error_type: str, description: str) -> None:
    span.set_attribute(ERROR_TYPE, error_type)
    span.set_status(Status(StatusCode.ERROR, description))


def _set_usage(span: Span, usage: Mapping[str, Any]) -> None:
    for key, attribute in USAGE_ATTRIBUTES.items():
        value = usage.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            span.set_attribute(attribute, value)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=repr)


def _parts(content: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Message parts in the conventions' shape."""
    out: list[dict[str, Any]] = []
    for part in content:
        kind = part.get("type")
        if kind == "text":
            out.append({"type": "text", "content": part.get("text", "")})
        elif kind == "thinking":
            out.append({"type": "reasoning", "content": part.get("text", "")})
        elif kind == "tool_call":
            out.append(
                {
                    "type": "tool_call",
                    "id": part.get("id"),
                    "name": part.get("name"),
                    "arguments": part.get("input"),
                }
            )
        elif kind == "tool_result":
            out.append(
                {"type": "tool_call_response", "id": part.get("id"), "response": part.get("output")}
            )
    return out


def _tool_definitions(specs: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The offered tools in the conventions' shape (``parameters`` is the JSON Schema)."""
    return [
        {
            "type": "function",
            "name": spec["name"],
            "description": spec.get("description", ""),
            "parameters": spec.get("input_schema", {}),
        }
        for spec in specs
    ]


def _messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [{"role": m.get("role"), "parts": _parts(m.get("content") or [])} for m in messages]


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


_: type[SpanSink] = OtelSink  # OtelSink is a SpanSink (checked by mypy)
