"""The AgentEvent union: what `Agent.send()` yields and `reduce()` folds.

Every event is a plain dict with a literal `type`. Render-only events (`text`, `thinking`,
`tool_input_delta`, `step`, `progress`, `surface`, `guardrail`, `trace`, `error`) never change a
Session; `message`, `tool_use`, `tool_result`, `done` and `memory` do.

A round's non-tool content (its text and its thinking blocks with their signatures) reaches the
transcript through the event that closes the round: the first `tool_use` of a tool round carries it
as `preamble`, and `done` carries the final round's thinking as `preamble` beside its `text`. That
keeps text deltas render-only and still lets `reduce()` rebuild exactly what the provider was sent.
"""

from __future__ import annotations

from typing import Any, Final, Literal, NotRequired, TypeAlias, TypedDict, TypeGuard

__all__ = [
    "PROGRESS_STAGES",
    "RENDER_ONLY",
    "TRACE_PHASES",
    "AgentEvent",
    "DoneEvent",
    "ErrorEvent",
    "FinishReason",
    "GuardrailEvent",
    "MemoryEvent",
    "MessageEvent",
    "Part",
    "ProgressEvent",
    "ProgressStage",
    "StepEvent",
    "SurfaceEvent",
    "TextEvent",
    "TextPart",
    "ThinkingEvent",
    "ThinkingPart",
    "ToolCallPart",
    "ToolInputDeltaEvent",
    "ToolResultEvent",
    "ToolResultPart",
    "ToolUseEvent",
    "TraceEvent",
    "TracePhase",
    "TraceRecord",
    "Usage",
    "is_progress_stage",
    "is_trace_phase",
]

# -- message parts ---------------------------------------------------------------------------


class TextPart(TypedDict):
    type: Literal["text"]
    text: str


class ThinkingPart(TypedDict):
    type: Literal["thinking"]
    text: str
    signature: NotRequired[str]
    redacted: NotRequired[str]
    """Opaque data of a redacted thinking block; sent back unchanged."""


class ToolCallPart(TypedDict):
    type: Literal["tool_call"]
    id: str
    name: str
    input: Any
    """The parsed arguments; the raw string when the model's JSON did not parse."""


class ToolResultPart(TypedDict):
    type: Literal["tool_result"]
    id: str
    name: str
    output: str
    is_error: bool


Part: TypeAlias = TextPart | ThinkingPart | ToolCallPart | ToolResultPart


class Usage(TypedDict, total=False):
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_creation_tokens: int
    reasoning_tokens: int


# -- closed vocabularies ---------------------------------------------------------------------

ProgressStage: TypeAlias = Literal[
    "sent", "started", "reasoning", "content", "validating", "retry", "tool", "done"
]
PROGRESS_STAGES: Final[tuple[ProgressStage, ...]] = (
    "sent",
    "started",
    "reasoning",
    "content",
    "validating",
    "retry",
    "tool",
    "done",
)
_PROGRESS = frozenset(PROGRESS_STAGES)

TracePhase: TypeAlias = Literal[
    "prompt", "request", "response", "tool", "workflow", "guardrail", "usage", "mcp"
]
TRACE_PHASES: Final[tuple[TracePhase, ...]] = (
    "prompt",
    "request",
    "response",
    "tool",
    "workflow",
    "guardrail",
    "usage",
    "mcp",
)
_PHASES = frozenset(TRACE_PHASES)


def is_progress_stage(value: object) -> TypeGuard[ProgressStage]:
    """True only for a member of PROGRESS_STAGES; drop anything else instead of rendering it."""
    return isinstance(value, str) and value in _PROGRESS


def is_trace_phase(value: object) -> TypeGuard[TracePhase]:
    """True only for a member of TRACE_PHASES."""
    return isinstance(value, str) and value in _PHASES


class TraceRecord(TypedDict):
    phase: TracePhase
    name: str
    at: float
    """Unix time in seconds."""
    session_id: NotRequired[str]
    data: NotRequired[dict[str, Any]]


# -- events ----------------------------------------------------------------------------------


class MessageEvent(TypedDict):
    type: Literal["message"]
    role: Literal["user"]
    text: str


class TextEvent(TypedDict):
    type: Literal["text"]
    text: str
    """The delta. An empty delta means: replace what you show with `snapshot`."""
    snapshot: str


class ThinkingEvent(TypedDict):
    type: Literal["thinking"]
    text: str


class ToolInputDeltaEvent(TypedDict):
    type: Literal["tool_input_delta"]
    id: str
    name: str
    partial: str
    snapshot: str
    """The raw JSON so far: incomplete and unparseable until the matching tool_use."""


class ToolUseEvent(TypedDict):
    type: Literal["tool_use"]
    id: str
    name: str
    input: Any
    preamble: NotRequired[list[TextPart | ThinkingPart]]
    """On the first call of a round: the text and thinking the model produced before its calls."""


class ToolResultEvent(TypedDict):
    type: Literal["tool_result"]
    id: str
    name: str
    output: str
    is_error: NotRequired[bool]


class StepEvent(TypedDict):
    type: Literal["step"]
    workflow: str
    step: str
    data: NotRequired[Any]


class ProgressEvent(TypedDict):
    type: Literal["progress"]
    stage: ProgressStage


class SurfaceEvent(TypedDict):
    type: Literal["surface"]
    surface_id: str
    line: str


class GuardrailEvent(TypedDict):
    type: Literal["guardrail"]
    name: str
    target: Literal["tool_call", "output"]
    action: Literal["rewrite", "deny"]
    reason: NotRequired[str]
    tool_name: NotRequired[str]
    tool_use_id: NotRequired[str]


class TraceEvent(TypedDict):
    type: Literal["trace"]
    record: TraceRecord


class MemoryEvent(TypedDict):
    type: Literal["memory"]
    patch: dict[str, Any]


FinishReason: TypeAlias = Literal[
    "stop",
    "length",
    "tool_calls",
    "content_filter",
    "refusal",
    "max_tool_rounds",
    "guardrail_denied",
    "error",
]
"""Why a turn ended, the same on every provider (`done.stop_reason` stays the provider's raw
value): `stop` a natural end, `length` the output-token limit, `tool_calls` the model asked for
tools (a stop condition ended the loop there), `content_filter` the provider's safety filter,
`refusal` the model refused, `max_tool_rounds` / `guardrail_denied` the loop's own bounds,
`error` anything else."""


class DoneEvent(TypedDict):
    type: Literal["done"]
    text: str
    usage: Usage
    stop_reason: str | None
    finish_reason: NotRequired[FinishReason]
    preamble: NotRequired[list[ThinkingPart]]
    """The final round's thinking blocks, kept in the transcript with their signatures."""


class ErrorEvent(TypedDict):
    type: Literal["error"]
    error: BaseException


AgentEvent: TypeAlias = (
    MessageEvent
    | TextEvent
    | ThinkingEvent
    | ToolInputDeltaEvent
    | ToolUseEvent
    | ToolResultEvent
    | StepEvent
    | ProgressEvent
    | SurfaceEvent
    | GuardrailEvent
    | TraceEvent
    | MemoryEvent
    | DoneEvent
    | ErrorEvent
)

RENDER_ONLY: Final = frozenset(
    {
        "text",
        "thinking",
        "tool_input_delta",
        "step",
        "progress",
        "surface",
        "guardrail",
        "trace",
        "error",
    }
)
