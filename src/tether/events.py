"""The AgentEvent union: what `Agent.send()` yields and `reduce()` folds.

Every event is a plain dict with a literal `type`; narrow on ``event["type"]`` (or `match`) and
the type checker knows its keys. Render-only events (`text`, `thinking`, `tool_input_delta`,
`partial_output`, `step`, `progress`, `surface`, `guardrail`, `trace`, `error`) never change a
Session; `message`, `tool_use`, `tool_result`, `done`, `memory`, `paused` and `resumed` do.

A round's non-tool content (its text and its thinking blocks with their signatures) reaches the
transcript through the event that closes the round: the first `tool_use` of a tool round carries
it as `preamble` (the text and thinking before the calls), and `done` carries the final round's
`thinking` beside its `text`. That keeps text deltas render-only and still lets `reduce()` rebuild
exactly what the provider was sent.
"""

from __future__ import annotations

from typing import Any, Final, Literal, NotRequired, TypeAlias, TypedDict, TypeGuard, get_args

__all__ = [
    "PROGRESS_STAGES",
    "RENDER_ONLY",
    "TRACE_PHASES",
    "AgentEvent",
    "DoneEvent",
    "ErrorEvent",
    "FinishReason",
    "GuardrailEvent",
    "HandoffEvent",
    "MediaPart",
    "MemoryEvent",
    "MessageEvent",
    "Part",
    "PartialOutputEvent",
    "PausedEvent",
    "PendingCall",
    "PendingKind",
    "ProgressEvent",
    "ProgressStage",
    "ProviderPart",
    "ResumedEvent",
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


class MediaPart(TypedDict):
    """An image, document or audio part (see `tether.media`): exactly one of `data` (base64),
    `url` (http(s)) or `blob` (the sha256 of bytes in a store's blobs)."""

    type: Literal["image", "document", "audio"]
    media_type: str
    data: NotRequired[str]
    url: NotRequired[str]
    blob: NotRequired[str]
    size: NotRequired[int]
    """The bytes' length (on a blob reference)."""
    name: NotRequired[str]
    detail: NotRequired[str]
    """Images: ``low`` / ``high`` / ``auto`` for the providers that take it."""


class ToolResultPart(TypedDict):
    type: Literal["tool_result"]
    id: str
    name: str
    output: str
    is_error: bool
    parts: NotRequired[list[MediaPart]]
    """Images, documents or audio the tool returned beside its text (`output`)."""


class ProviderPart(TypedDict):
    """A provider-hosted tool's call or result block (`tether.llm.builtin`), kept exactly as
    the provider sent it so it goes back unchanged on the next request to the same wire."""

    type: Literal["provider"]
    wire: str
    """The wire format it belongs to: ``anthropic``, ``openai-responses`` or ``gemini``."""
    block: dict[str, Any]


Part: TypeAlias = TextPart | ThinkingPart | ToolCallPart | ToolResultPart | MediaPart | ProviderPart


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
PROGRESS_STAGES: Final[tuple[ProgressStage, ...]] = get_args(ProgressStage)
_PROGRESS = frozenset(PROGRESS_STAGES)

TracePhase: TypeAlias = Literal[
    "prompt", "request", "response", "tool", "workflow", "guardrail", "usage", "mcp"
]
TRACE_PHASES: Final[tuple[TracePhase, ...]] = get_args(TracePhase)
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
    """The user's message of this turn (first, once the turn could start). Folded."""

    type: Literal["message"]
    role: Literal["user"]
    text: str
    """The message text, as sent to the model (its text parts joined, when it has media)."""
    parts: NotRequired[list[Part]]
    """The message's parts in order, when it is more than text (images, documents, audio)."""


class TextEvent(TypedDict):
    """A piece of the model's visible answer. Render-only (the text reaches the transcript
    through the `tool_use` or `done` that closes the round)."""

    type: Literal["text"]
    text: str
    """The delta. An empty delta means: replace what you show with `snapshot`."""
    snapshot: str
    """The round's whole text so far (built when read: keeping events costs no copies)."""


class ThinkingEvent(TypedDict):
    """A piece of the model's reasoning, as the provider streams it. Render-only."""

    type: Literal["thinking"]
    text: str
    """The delta."""


class ToolInputDeltaEvent(TypedDict):
    """A fragment of a tool call's JSON arguments while they stream. Render-only; execute only
    on the matching `tool_use`."""

    type: Literal["tool_input_delta"]
    id: str
    """The call's id (the same as its `tool_use`)."""
    name: str
    """The tool's name."""
    partial: str
    """This fragment."""
    snapshot: str
    """The raw JSON so far: incomplete and unparseable until the matching tool_use."""


class PartialOutputEvent(TypedDict):
    """Structured output parsed so far, while an answer asked for a response format streams
    (emitted only when the parsed value changed). Render-only: the final answer is on `done`."""

    type: Literal["partial_output"]
    output: Any
    """The JSON value parsed from the incomplete text (unfinished strings included)."""


class ToolUseEvent(TypedDict):
    """A tool call the model made, before it runs. Folded: opens (or extends) the round's
    assistant message."""

    type: Literal["tool_use"]
    id: str
    """The call's id; its `tool_result` carries the same."""
    name: str
    """The tool's name."""
    input: Any
    """The parsed arguments; the raw string when the model's JSON did not parse."""
    preamble: NotRequired[list[TextPart | ThinkingPart]]
    """On the first call of a round: the text and thinking the model produced before its calls
    (thinking with its signature), in order."""
    agent: NotRequired[str]
    """The name of the agent that made the call (an agent with a `name`): the assistant
    message it opens says so."""


class ToolResultEvent(TypedDict):
    """What a tool call returned (every failure included). Folded into the tool message."""

    type: Literal["tool_result"]
    id: str
    """The call's id."""
    name: str
    """The tool's name."""
    output: str
    """The result as the model reads it (truncated past `max_tool_result_chars`, with a
    marker)."""
    is_error: NotRequired[bool]
    """True when the call failed (bad input, an exception, a denial, a timeout)."""
    parts: NotRequired[list[MediaPart]]
    """Images, documents or audio the tool returned (bounded by `max_tool_result_bytes`)."""


class StepEvent(TypedDict):
    """A workflow step's progress (ladders: running / skipped / accepted / rejected).
    Render-only."""

    type: Literal["step"]
    workflow: str
    """The workflow's name."""
    step: str
    """The step's name."""
    data: NotRequired[Any]
    """What happened: ``{"round", "status", "reason"?, "gate_rejected"?}`` for a ladder."""


class ProgressEvent(TypedDict):
    """Where the loop is, from the closed `PROGRESS_STAGES` vocabulary. Render-only."""

    type: Literal["progress"]
    stage: ProgressStage
    """`sent` before every provider call, `retry` before a call that repeats a round after tool
    feedback, `tool` before each tool runs (and while one reports progress), `done` right
    before `done`."""
    tool_call_id: NotRequired[str]
    """While a tool call runs: the call that reported `progress` (an MCP server's progress
    notification, or `ctx.progress()`)."""
    progress: NotRequired[float]
    total: NotRequired[float]
    message: NotRequired[str]


class SurfaceEvent(TypedDict):
    """One generative-UI wire line for a surface. Render-only; the harness only carries it."""

    type: Literal["surface"]
    surface_id: str
    """The surface the line belongs to."""
    line: str
    """The wire line."""


class GuardrailEvent(TypedDict):
    """A guardrail's non-allow decision. Render-only."""

    type: Literal["guardrail"]
    name: str
    """The guardrail's name (`on_tool_call` for the agent's hook)."""
    target: Literal["tool_call", "output"]
    """What it decided on."""
    action: Literal["rewrite", "deny", "ask"]
    """What it decided (`ask`: a human decides; the turn pauses on the call)."""
    reason: NotRequired[str]
    """Why, when it said."""
    tool_name: NotRequired[str]
    """The tool of a `tool_call` decision."""
    tool_use_id: NotRequired[str]
    """The call of a `tool_call` decision."""


class TraceEvent(TypedDict):
    """A trace record, also given to the trace sink. Render-only."""

    type: Literal["trace"]
    record: TraceRecord
    """The record (see `tether.tracing` for every phase and name)."""


class MemoryEvent(TypedDict):
    """A memory write (`ctx.remember()` or `remember()`). Folded into the session's memory."""

    type: Literal["memory"]
    patch: dict[str, Any]
    """Keys to set; a None value deletes the key."""


FinishReason: TypeAlias = Literal[
    "stop",
    "length",
    "tool_calls",
    "content_filter",
    "refusal",
    "max_tool_rounds",
    "guardrail_denied",
    "paused",
    "error",
]
"""Why a turn ended, the same on every provider (`done.stop_reason` stays the provider's raw
value): `stop` a natural end, `length` the output-token limit, `tool_calls` the model asked for
tools (a stop condition ended the loop there), `content_filter` the provider's safety filter,
`refusal` the model refused, `max_tool_rounds` / `guardrail_denied` the loop's own bounds,
`paused` the turn waits for decisions on tool calls (see `PausedEvent`), `error` anything
else."""


class DoneEvent(TypedDict):
    """The turn's end. Folded: the final round's thinking and text become the assistant
    message."""

    type: Literal["done"]
    text: str
    """The final answer (after output guardrails; empty when denied or cut by a bound)."""
    usage: Usage
    """The turn's token totals."""
    stop_reason: str | None
    """The provider's raw stop reason, or the loop's own `max_tool_rounds` /
    `guardrail_denied`."""
    finish_reason: NotRequired[FinishReason]
    """The normalized reason, the same on every provider (see `FinishReason`)."""
    thinking: NotRequired[list[ThinkingPart]]
    """The final round's thinking blocks, kept in the transcript with their signatures."""
    model: NotRequired[str]
    """Which model answered (``provider:model``), when the agent's model is a fallback list."""
    blocks: NotRequired[list[ProviderPart]]
    """The final round's provider-hosted tool blocks (`tether.llm.builtin`), kept in the
    transcript between the thinking and the text."""
    media: NotRequired[list[MediaPart]]
    """Images the model made in its final round (Gemini inline images, Responses image
    generation), kept in the transcript after the text."""
    agent: NotRequired[str]
    """The name of the agent that answered (an agent with a `name`; after a handoff, the
    target): the assistant message says so."""


class HandoffEvent(TypedDict):
    """The turn goes on with another agent (`tether.handoffs`). Render-only: the transfer
    call and its result are already in the transcript."""

    type: Literal["handoff"]
    from_agent: str
    """The agent that handed the conversation over."""
    to_agent: str
    """The agent that answers from here on."""
    reason: str | None
    """Why, as the model said in the transfer call (None when it gave none)."""
    tool_call_id: str
    """The transfer call."""


PendingKind: TypeAlias = Literal["approval", "external", "input"]
"""What a paused call waits for: `approval` a human's yes / no (or edited arguments),
`external` the caller (or the front end) runs the tool and gives its result, `input` a value
the tool asked for (an MCP elicitation)."""


class PendingCall(TypedDict):
    """A tool call the turn paused on. JSON-safe: a stored session knows what it waits for."""

    id: str
    """The call's id (its `tool_use` carries the same); decisions are keyed by it."""
    name: str
    """The tool's name."""
    input: Any
    """The arguments the call runs with once approved (after guardrail rewrites)."""
    kind: PendingKind
    """What it waits for."""
    reason: NotRequired[str]
    """Why it waits, when a guardrail or the approval check said."""
    schema: NotRequired[dict[str, Any]]
    """For `input`: the JSON Schema of the value asked for."""
    message: NotRequired[str]
    """For `input`: why the tool asks, in its words (show it to the person)."""
    source: NotRequired[str]
    """For `input`: who asks (the MCP server's URL or command line)."""
    state: NotRequired[dict[str, Any]]
    """For `input`: what the tool needs to go on with the answer, in any process (for MCP: the
    request and the server's `requestState`). Opaque: kept and given back unchanged."""


class PausedEvent(TypedDict):
    """The turn stopped to wait for decisions on some of its round's calls (the others ran);
    `done` follows with ``finish_reason == "paused"``. Folded: the session keeps `pending`
    until `Agent.resume()` (or a new user message, which denies them) decides them."""

    type: Literal["paused"]
    pending: list[PendingCall]
    """The calls waiting, in the order the model made them."""


class ResumedEvent(TypedDict):
    """The first event of a resumed turn (or of a turn whose new message superseded the pending
    calls): the decisions taken. Folded: the session waits for nothing any more; each call's
    `tool_result` follows."""

    type: Literal["resumed"]
    decisions: dict[str, dict[str, Any]]
    """The decision on each pending call, by call id (`approve()`, `deny()`, `result()`)."""


class ErrorEvent(TypedDict):
    """The turn failed (a provider error, an abort, a client that raised); nothing after it.
    Render-only: the session stays a valid transcript for the next turn."""

    type: Literal["error"]
    error: BaseException
    """The error (an `LLMError`, `AbortedError`, …)."""


AgentEvent: TypeAlias = (
    MessageEvent
    | TextEvent
    | ThinkingEvent
    | ToolInputDeltaEvent
    | PartialOutputEvent
    | ToolUseEvent
    | ToolResultEvent
    | StepEvent
    | ProgressEvent
    | SurfaceEvent
    | GuardrailEvent
    | TraceEvent
    | MemoryEvent
    | PausedEvent
    | ResumedEvent
    | DoneEvent
    | ErrorEvent
    | HandoffEvent
)

RENDER_ONLY: Final = frozenset(
    {
        "text",
        "thinking",
        "tool_input_delta",
        "partial_output",
        "step",
        "progress",
        "surface",
        "guardrail",
        "trace",
        "error",
        "handoff",
    }
)
