"""Anthropic Messages API (``POST /v1/messages``, streamed).

Wire mapping:

- `system` goes out as the block array the prompt layers built (``cache_control`` already on the
  last cached layer); tools go out as they are declared (`ToolSpec` is Anthropic's own shape).
- Messages: a ``tool`` message becomes a ``user`` message of ``tool_result`` blocks (consecutive
  messages of one role are merged, tool results first, as the API expects). Thinking parts go back
  unchanged as ``thinking`` blocks with their signature, or as ``redacted_thinking`` blocks;
  thinking without a signature (from another provider) is left out, since the API rejects it.
- Stream: ``text_delta`` → text, ``thinking_delta`` → thinking, ``signature_delta`` kept for the
  part, ``input_json_delta`` → ``tool_input_delta``; ``ping`` ignored; ``event: error`` raises
  `LLMStreamError` (retryable for overloaded / api / rate-limit errors); ``message_stop`` ends it.
- Usage: ``message_start.usage`` overlaid by each ``message_delta.usage`` (those are cumulative).
  `input_tokens` counts every prompt token, cached or not (Anthropic's own ``input_tokens`` leaves
  out cache reads and writes), so totals compare across providers.
- `response_format` becomes ``output_config.format`` (JSON-schema structured output).

Finish reasons (`FINISH_REASONS`):

| ``stop_reason``                                   | `finish_reason`  |
|---------------------------------------------------|------------------|
| ``end_turn``, ``stop_sequence``, ``pause_turn``   | ``stop``         |
| ``max_tokens``, ``model_context_window_exceeded`` | ``length``       |
| ``tool_use``                                      | ``tool_calls``   |
| ``refusal``                                       | ``refusal``      |
| anything else                                     | ``error``        |
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from .._sse import ServerSentEvent
from ..errors import ModelSettingError
from ..events import FinishReason, Part, Usage
from ._adapter import HTTPAdapter
from ._blocks import Block, called_tools
from ._errors import stream_error
from ._finish import ANTHROPIC_FINISH_REASONS, identify, normalize_finish
from ._media import MEDIA, inline_text, refuse, source_of
from ._settings import check_settings, copy_settings, forced_tool, unsupported
from ._wire import append_turn, cached_usage, loads, parse_json_or_raw
from .base import ChatRequest, FinishChunk, ModelSettings, StreamChunk, SystemBlock
from .credentials import AnthropicCredentials, Credentials

__all__ = ["AnthropicClient", "AnthropicStream", "to_anthropic_messages"]

DEFAULT_MAX_TOKENS = 4096
ANTHROPIC_VERSION = "2023-06-01"
CODE_EXECUTION_BETA = "code-execution-2025-08-25"
"""The beta the ``code_execution_20250825`` server tool needs."""
MIN_THINKING_BUDGET = 1024
"""The smallest ``thinking.budget_tokens`` the API accepts."""

_NO_SETTINGS: ModelSettings = {}
_CHOICE_TYPES = {"auto": "auto", "none": "none", "required": "any"}

_NONE: tuple[StreamChunk, ...] = ()

_FIELDS = {"temperature": "temperature", "top_p": "top_p", "stop": "stop_sequences"}
"""The settings the Messages API takes as they are, and its name for each (max_tokens is
always sent, see `_max_tokens`)."""

FINISH_REASONS: dict[str, FinishReason] = ANTHROPIC_FINISH_REASONS
"""`stop_reason` → the normalized `FinishReason`; any other value is ``error``."""


def to_anthropic_messages(messages: Sequence[Any]) -> list[dict[str, Any]]:
    """Neutral transcript → Anthropic ``messages``."""
    out: list[dict[str, Any]] = []
    for message in messages:
        role = message["role"]
        blocks: list[dict[str, Any]] = []
        for part in message["content"]:
            kind = part["type"]
            if kind == "text":
                if part["text"]:  # the API rejects empty text blocks
                    blocks.append({"type": "text", "text": part["text"]})
            elif kind == "thinking":
                if "redacted" in part:
                    blocks.append({"type": "redacted_thinking", "data": part["redacted"]})
                elif part.get("signature"):
                    blocks.append(
                        {
                            "type": "thinking",
                            "thinking": part["text"],
                            "signature": part["signature"],
                        }
                    )
            elif kind == "tool_call":
                value = part["input"]
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": part["id"],
                        "name": part["name"],
                        # Arguments that never parsed were answered with an error result; the
                        # API only takes an object here.
                        "input": value if isinstance(value, dict) else {},
                    }
                )
            elif kind in MEDIA and role != "assistant":  # a model's own images stay here
                blocks.append(_media_block(part))
            elif kind == "provider":
                if part["wire"] == "anthropic":  # a server tool's block, as it came
                    blocks.append(part["block"])
            elif kind == "tool_result":
                blocks.append(_tool_result_block(part))
        append_turn(out, "assistant" if role == "assistant" else "user", blocks)
    return out


def _tool_result_block(part: Any) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": part["id"]}
    media = part.get("parts")
    if media:  # images and documents inside the tool_result's content
        content = [{"type": "text", "text": part["output"]}] if part["output"] else []
        block["content"] = content + [_media_block(p) for p in media]
    elif part["output"]:
        block["content"] = part["output"]
    if part.get("is_error"):
        block["is_error"] = True
    return block


def _media_block(part: Any) -> dict[str, Any]:
    """An image or document part → an ``image`` / ``document`` block (base64, URL or, for a
    text/plain document, text); audio is refused."""
    kind = part["type"]
    if kind == "audio":
        refuse("anthropic", part, "the Messages API takes no audio")
    where, value = source_of("anthropic", part)
    if kind == "document" and part["media_type"] == "text/plain":
        source = {
            "type": "text",
            "media_type": "text/plain",
            "data": inline_text("anthropic", part),
        }
    elif where == "url":
        source = {"type": "url", "url": value}
    else:
        source = {"type": "base64", "media_type": part["media_type"], "data": value}
    block: dict[str, Any] = {"type": kind, "source": source}
    if kind == "document" and "name" in part:
        block["title"] = part["name"]
    return block


_USAGE_KEYS = (
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
)


class AnthropicStream:
    """Parser for one Messages stream."""

    __slots__ = ("_blocks", "_usage", "done", "response_id", "response_model", "stop_reason")

    def __init__(self) -> None:
        self._blocks: dict[int, Block] = {}
        self._usage: dict[str, Any] = {}
        self.stop_reason: str | None = None
        self.done = False
        self.response_id: str | None = None
        self.response_model: str | None = None

    # C901 allowed: the SSE event state machine, run per event; no dispatch call per event.
    def handle(self, event: ServerSentEvent) -> Sequence[StreamChunk]:  # noqa: C901
        if event.event == "ping":
            return _NONE
        payload = loads(event.data)
        kind = payload.get("type") or event.event
        if kind == "content_block_delta":
            block = self._blocks.get(payload["index"])
            if block is None:
                return _NONE
            delta = payload["delta"]
            dtype = delta.get("type")
            if dtype == "text_delta":
                text = delta["text"]
                if not text:
                    return _NONE
                block.chunks.append(text)
                return ({"type": "text", "text": text},)
            if dtype == "input_json_delta":
                partial = delta["partial_json"]
                if not partial:
                    return _NONE
                block.chunks.append(partial)
                if block.kind != "tool_use":
                    return _NONE  # a server tool's input: the provider runs it
                return (
                    {
                        "type": "tool_input_delta",
                        "id": block.id,
                        "name": block.name,
                        "partial": partial,
                    },
                )
            if dtype == "thinking_delta":
                text = delta["thinking"]
                if not text:
                    return _NONE
                block.chunks.append(text)
                return ({"type": "thinking", "text": text},)
            if dtype == "signature_delta":
                block.signature += delta["signature"]
            return _NONE
        if kind == "content_block_start":
            start = payload["content_block"]
            btype = start.get("type")
            index = payload["index"]
            if btype == "text":
                block = Block("text")
                if start.get("text"):
                    block.chunks.append(start["text"])
            elif btype == "tool_use":
                block = Block("tool_use")
                block.id = start["id"]
                block.name = start["name"]
                block.input = start.get("input") or {}
            elif btype == "thinking":
                block = Block("thinking")
                if start.get("thinking"):
                    block.chunks.append(start["thinking"])
                block.signature = start.get("signature") or ""
            elif btype == "redacted_thinking":
                block = Block("redacted_thinking")
                block.redacted = start.get("data") or ""
            elif btype == "server_tool_use":
                block = Block("server_tool_use")
                block.id = start["id"]
                block.name = start["name"]
                block.input = start.get("input") or {}
            elif isinstance(btype, str) and btype.endswith("_tool_result"):
                block = Block("server_result")
                block.input = start  # complete in its start event
            else:
                return _NONE  # server tools, citations…: not part of the neutral transcript
            self._blocks[index] = block
            if block.chunks:
                if btype == "text":
                    return ({"type": "text", "text": block.chunks[0]},)
                return ({"type": "thinking", "text": block.chunks[0]},)
            return _NONE
        if kind == "message_delta":
            delta = payload.get("delta") or {}
            if delta.get("stop_reason") is not None:
                self.stop_reason = delta["stop_reason"]
            self._overlay(payload.get("usage"))
            return _NONE
        if kind == "message_start":
            message = payload.get("message") or {}
            self.response_id, self.response_model = message.get("id"), message.get("model")
            self._overlay(message.get("usage"))
            return _NONE
        if kind == "message_stop":
            self.done = True
            return _NONE
        if kind == "error":
            raise stream_error("anthropic", payload)
        return _NONE  # content_block_stop, ping, and event types added later

    def _overlay(self, usage: Any) -> None:
        if isinstance(usage, dict):
            for key, value in usage.items():
                if value is not None:
                    self._usage[key] = value

    def usage(self) -> Usage:
        return cached_usage(self._usage, _USAGE_KEYS)

    def finish(self) -> FinishChunk:
        content: list[Part] = []
        for block in self._blocks.values():
            kind = block.kind
            if kind == "text":
                text = "".join(block.chunks)
                if text:
                    content.append({"type": "text", "text": text})
            elif kind == "tool_use":
                content.append(block.tool_call(block.input))
            elif kind == "thinking":
                content.append(block.thinking())
            elif kind == "server_tool_use":
                server = {"type": "server_tool_use", "id": block.id, "name": block.name}
                server["input"] = parse_json_or_raw("".join(block.chunks), block.input)
                content.append({"type": "provider", "wire": "anthropic", "block": server})
            elif kind == "server_result":
                content.append({"type": "provider", "wire": "anthropic", "block": block.input})
            else:
                content.append(block.redacted_thinking())
        finish: FinishChunk = {
            "type": "finish",
            "content": content,
            "stop_reason": self.stop_reason,
            "finish_reason": normalize_finish(self.stop_reason, FINISH_REASONS),
            "usage": self.usage(),
        }
        return identify(finish, self.response_id, self.response_model)


class AnthropicClient(HTTPAdapter):
    """`anthropic:<model>`: the Messages API. Key from ANTHROPIC_API_KEY (or a bearer token
    from ANTHROPIC_AUTH_TOKEN), as the Anthropic SDK reads them.

    `base_url` is the API root without ``/v1`` (default ANTHROPIC_BASE_URL, else
    ``https://api.anthropic.com``); `max_tokens` is sent when the settings give none (the API
    requires it).
    """

    provider: ClassVar[str] = "anthropic"
    wire: ClassVar[str | None] = "anthropic"
    credentials_class: ClassVar[type[Credentials]] = AnthropicCredentials

    def __init__(
        self,
        model: str,
        *,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        anthropic_version: str = ANTHROPIC_VERSION,
        **options: Any,
    ) -> None:
        self.max_tokens = max_tokens
        self.anthropic_version = anthropic_version
        super().__init__(model, **options)

    def wire_headers(self) -> dict[str, str]:
        headers = {"anthropic-version": self.anthropic_version}
        if any(t["type"].startswith("code_execution") for t in self.builtin):
            headers["anthropic-beta"] = CODE_EXECUTION_BETA
        return headers

    def url(self, request: ChatRequest) -> str:
        return f"{self.base_url}/v1/messages"

    def build_body(self, request: ChatRequest) -> dict[str, Any]:
        settings = request.get("settings") or _NO_SETTINGS
        if settings:
            check_settings(settings)
        body: dict[str, Any] = {
            "model": request["model"],
            "max_tokens": self._max_tokens(settings),
        }
        system = _system(request["system"])
        if system:
            body["system"] = system
        body["messages"] = to_anthropic_messages(request["messages"])
        if "tools" in request:
            body["tools"] = [*request["tools"], *self.builtin] if self.builtin else request["tools"]
            choice = _tool_choice(request, settings)
            if choice is not None:
                body["tool_choice"] = choice
        else:
            # The API refuses a history holding tool_use / tool_result blocks unless tools are
            # defined. A request with no tools (the structured-output follow-up) declares the
            # names the history used and forbids calling any of them.
            used = called_tools(request["messages"])
            if used:
                body["tools"] = [
                    {"name": n, "description": "", "input_schema": {"type": "object"}} for n in used
                ]
                body["tool_choice"] = {"type": "none"}
            elif self.builtin:
                body["tools"] = list(self.builtin)
        if settings:
            self._settings(body, settings)
        output: dict[str, Any] = {}
        reasoning = settings.get("reasoning")
        if reasoning is not None and "effort" in reasoning:
            output["effort"] = reasoning["effort"]
        if "response_format" in request:
            output["format"] = {
                "type": "json_schema",
                "schema": request["response_format"]["schema"],
            }
        if output:
            body["output_config"] = output
        body["stream"] = True
        return body

    def _max_tokens(self, settings: ModelSettings) -> int:
        """The API requires max_tokens, and a thinking budget must fit below it."""
        budget = (settings.get("reasoning") or {}).get("budget_tokens")
        if "max_tokens" in settings:
            limit = settings["max_tokens"]
            if budget is not None and budget >= limit:
                raise ModelSettingError(
                    f"anthropic: settings['reasoning']['budget_tokens'] ({budget}) must be "
                    f"below settings['max_tokens'] ({limit}): thinking counts toward the limit",
                    key="reasoning.budget_tokens",
                    provider="anthropic",
                )
            return limit
        if budget is not None and budget >= self.max_tokens:
            return budget + self.max_tokens  # room for the answer after the thinking
        return self.max_tokens

    def _settings(self, body: dict[str, Any], settings: ModelSettings) -> None:
        if "seed" in settings:
            raise unsupported(
                "anthropic", "seed", "the Messages API has no seed; leave it out for this model"
            )
        copy_settings(body, settings, _FIELDS)
        budget = (settings.get("reasoning") or {}).get("budget_tokens")
        if budget is not None:
            if budget < MIN_THINKING_BUDGET:
                raise ModelSettingError(
                    f"anthropic: settings['reasoning']['budget_tokens'] must be at least "
                    f"{MIN_THINKING_BUDGET}, got {budget}",
                    key="reasoning.budget_tokens",
                    provider="anthropic",
                )
            _check_thinking_combination(settings)
            body["thinking"] = {"type": "enabled", "budget_tokens": budget}

    def new_parser(self) -> AnthropicStream:
        return AnthropicStream()


def _check_thinking_combination(settings: ModelSettings) -> None:
    """What the Messages API refuses beside extended thinking, refused here first."""
    temperature = settings.get("temperature")
    if temperature is not None and temperature != 1:
        raise unsupported(
            "anthropic",
            "temperature",
            "with reasoning={'budget_tokens': ...} (extended thinking) the temperature must be 1 "
            "or left out",
        )
    top_p = settings.get("top_p")
    if top_p is not None and not 0.95 <= top_p <= 1:
        raise unsupported(
            "anthropic", "top_p", "with extended thinking top_p must be between 0.95 and 1"
        )
    if settings.get("tool_choice") not in (None, "auto", "none"):
        raise unsupported(
            "anthropic",
            "tool_choice",
            "extended thinking cannot be combined with forcing tool use ('required' or a tool's "
            "name); use 'auto'",
        )


def _system(blocks: list[SystemBlock]) -> list[SystemBlock]:
    """The system blocks without empty ones (the API rejects an empty text block). A cache
    breakpoint on an empty block moves to the block before it: the cached prefix is the same."""
    if all(b["text"] for b in blocks):
        return blocks
    out: list[SystemBlock] = []
    for block in blocks:
        if block["text"]:
            out.append(block)
        elif "cache_control" in block and out:
            out[-1] = {**out[-1], "cache_control": block["cache_control"]}
    return out


def _tool_choice(request: ChatRequest, settings: ModelSettings) -> dict[str, Any] | None:
    """``tool_choice`` from the settings: auto / none / required (``any``) / a tool's name, with
    ``disable_parallel_tool_use`` for `parallel_tool_calls` (a call that may not use tools has
    nothing to parallelize)."""
    choice = settings.get("tool_choice")
    parallel = settings.get("parallel_tool_calls")
    if choice is None and parallel is None:
        return None
    out: dict[str, Any]
    forced = forced_tool("anthropic", choice, request) if choice is not None else None
    if forced is not None:
        out = {"type": "tool", "name": forced}
    else:
        out = {"type": _CHOICE_TYPES[choice or "auto"]}
    if parallel is not None and out["type"] != "none":
        out["disable_parallel_tool_use"] = not parallel
    return out
