"""The one interface between the harness and a model: `LLMClient.chat(request)`.

A request is a plain dict, so what reaches an adapter can be pinned byte for byte (the baseline
test). Optional keys are absent, never empty. The stream a client yields is normalized:

    {"type": "text", "text"}                      a visible text delta
    {"type": "thinking", "text"}                  a reasoning delta
    {"type": "tool_input_delta", "id", "name", "partial"}   a fragment of a call's JSON arguments
    {"type": "retry", "attempt", "delay", "reason"}        the client waits `delay` s before
                                                  HTTP attempt `attempt` (a trace record)
    {"type": "fallback", "model", "after", "reason"}      a fallback client's model failed before
                                                  answering; `model` is tried next
    {"type": "finish", "content", "stop_reason", "finish_reason", "usage"}   exactly once, last

`finish.content` is the assembled assistant message in order: thinking parts (with signatures or
redacted data), text parts and tool_call parts (input parsed once; the raw string if it did not
parse). The loop never re-assembles what the adapter already assembled.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import (
    TYPE_CHECKING,
    Any,
    Literal,
    NotRequired,
    Protocol,
    TypeAlias,
    TypedDict,
    runtime_checkable,
)

from ..events import FinishReason, Part, Usage

if TYPE_CHECKING:
    from ..blobs import BlobResolver
    from ..session import Message
    from ..signals import AbortSignal

__all__ = [
    "ChatRequest",
    "FallbackChunk",
    "FinishChunk",
    "LLMClient",
    "ModelSettings",
    "ReasoningSetting",
    "RetryChunk",
    "StreamChunk",
    "SystemBlock",
    "TextChunk",
    "ThinkingChunk",
    "ToolInputDeltaChunk",
    "ToolSpec",
    "joined",
]


class SystemBlock(TypedDict):
    type: Literal["text"]
    text: str
    cache_control: NotRequired[dict[str, str]]
    """``{"type": "ephemeral"}`` on the last cached layer only."""


class ToolSpec(TypedDict):
    name: str
    description: str
    input_schema: dict[str, Any]


class ReasoningSetting(TypedDict, total=False):
    """How much the model may think: one of the two keys."""

    effort: Literal["low", "medium", "high"]
    budget_tokens: int


class ModelSettings(TypedDict, total=False):
    """Portable model settings, on an agent or a run (run wins, key by key).

    Each adapter maps every key to its provider's wire; a key the provider cannot honour is a
    `ConfigError` naming the provider, never silently dropped. `extra_body` (in the model config)
    stays the escape hatch for anything provider-specific.
    """

    temperature: float
    max_tokens: int
    """The output-token limit of one model call."""
    top_p: float
    stop: list[str]
    seed: int
    tool_choice: Literal["auto", "none", "required"] | str
    """``"auto"``, ``"none"``, ``"required"``, or a tool's name to force that tool."""
    parallel_tool_calls: bool
    reasoning: ReasoningSetting


class ChatRequest(TypedDict):
    model: str
    system: list[SystemBlock]
    messages: list[Message]
    tools: NotRequired[list[ToolSpec]]
    response_format: NotRequired[dict[str, Any]]
    """``{"name": str, "schema": {...}}``: ask the provider for JSON matching the schema."""
    settings: NotRequired[ModelSettings]
    """Absent when no setting is set (the byte-identity baseline)."""
    signal: NotRequired[AbortSignal]
    blobs: NotRequired[BlobResolver]
    """Reads the media `messages` refer to by blob reference; the adapter swaps them for data
    just before it encodes the body (`tether.blobs`)."""


class TextChunk(TypedDict):
    type: Literal["text"]
    text: str


class ThinkingChunk(TypedDict):
    type: Literal["thinking"]
    text: str


class ToolInputDeltaChunk(TypedDict):
    type: Literal["tool_input_delta"]
    id: str
    name: str
    partial: str


class RetryChunk(TypedDict):
    """Render-only: the client is about to wait before retrying an HTTP request."""

    type: Literal["retry"]
    attempt: int
    """The attempt about to be made (2 = the first retry)."""
    delay: float
    """Seconds the client waits first."""
    reason: str


class FinishChunk(TypedDict):
    type: Literal["finish"]
    content: list[Part]
    stop_reason: str | None
    """The provider's own value, raw."""
    finish_reason: NotRequired[FinishReason]
    """The adapter's normalized reading of `stop_reason` (see `FinishReason`)."""
    usage: Usage
    response_id: NotRequired[str]
    """The provider's id of this response (OpenTelemetry's ``gen_ai.response.id``)."""
    response_model: NotRequired[str]
    """The model that answered, as the provider names it (``gen_ai.response.model``; may be
    a dated snapshot of the requested one)."""
    model: NotRequired[str]
    """Set by a `FallbackClient`: which of its models answered, as ``provider:model``."""


class FallbackChunk(TypedDict):
    """Render-only: a `FallbackClient`'s model failed before answering; the request goes to
    the next one (a trace record)."""

    type: Literal["fallback"]
    model: str
    """The model tried next, as ``provider:model``."""
    after: str
    """The model that failed."""
    reason: str
    """Its error, as ``ErrorClass: message``."""


StreamChunk: TypeAlias = (
    TextChunk | ThinkingChunk | ToolInputDeltaChunk | RetryChunk | FallbackChunk | FinishChunk
)


@runtime_checkable
class LLMClient(Protocol):
    """Anything that can stream one model response for a request."""

    model: str

    def chat(self, request: ChatRequest) -> AsyncIterator[StreamChunk]:
        """Stream one response. Raise an LLMError subclass on failure."""
        ...

    async def aclose(self) -> None:
        """Release connections this client opened."""
        ...


def joined(system: list[SystemBlock]) -> str:
    """The system prompt as one string, for providers without a block array (empty blocks
    add no blank lines)."""
    return "\n\n".join(b["text"] for b in system if b["text"])
