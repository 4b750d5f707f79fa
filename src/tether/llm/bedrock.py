"""AWS Bedrock, the Converse API streamed (``POST {endpoint}/model/{modelId}/converse-stream``).

Requests are signed with SigV4 by botocore (`tether.llm.credentials.AWSCredentials`: its
credential chain, region from AWS_REGION / AWS_DEFAULT_REGION / the profile); the body streams
back in the binary AWS event stream framing (`tether.llm._eventstream`, both CRCs checked).

Wire mapping:

- `system` becomes ``system`` text blocks; a prompt layer marked for caching is followed by a
  ``{"cachePoint": {"type": "default"}}`` block. Tools become ``toolConfig.tools[].toolSpec``
  with ``inputSchema.json``.
- Messages: text → ``{"text"}``; an image or document part → ``{"image"|"document": {format,
  source: {bytes} | {s3Location}}}`` (audio, http URLs and other media types are refused);
  a tool call → ``{"toolUse": {toolUseId, name, input}}``; a tool result →
  ``{"toolResult": {toolUseId, content: [{"text"}], status}}`` in a ``user`` message;
  thinking with a signature → ``{"reasoningContent": {"reasoningText": {text, signature}}}``,
  redacted thinking → ``{"reasoningContent": {"redactedContent"}}``; thinking without a
  signature (another provider's) is left out. Consecutive messages of one role are merged.
- Stream events (``:event-type``): ``messageStart``, ``contentBlockStart`` (a ``toolUse`` start
  carries its id and name), ``contentBlockDelta`` (``text`` → text, ``toolUse.input`` →
  ``tool_input_delta``, ``reasoningContent.text`` → thinking, ``.signature`` and
  ``.redactedContent`` kept for the part), ``contentBlockStop``, ``messageStop`` (the stop
  reason; the response is complete) and ``metadata`` (usage, after the stop). An exception
  message (``throttlingException``, ``modelStreamErrorException``, ``internalServerException``,
  ``serviceUnavailableException``, ``validationException``) raises `LLMStreamError`, retryable
  for all but the validation one.
- Usage: `input_tokens` = ``inputTokens`` + ``cacheReadInputTokens`` + ``cacheWriteInputTokens``
  (every prompt token, as the other adapters count it); `output_tokens` = ``outputTokens``.
- Settings: ``max_tokens``, ``temperature``, ``top_p``, ``stop`` go in ``inferenceConfig``;
  ``tool_choice`` auto / required (``any``) / a tool's name; ``reasoning.budget_tokens`` becomes
  ``additionalModelRequestFields.thinking`` (Anthropic models on Bedrock). ``seed``,
  ``tool_choice="none"``, ``parallel_tool_calls=False`` and ``reasoning.effort`` have no Converse
  field: each is a `ModelSettingError`.
- `response_format`: Converse has no JSON-schema output mode, so the schema is declared as one
  more tool named after the format, and the model is made to call a tool (that one, when it is the
  only one). Its arguments stream as text and come back as the text part: the JSON answer.

Finish reasons (`FINISH_REASONS`):

| ``stopReason``                                     | `finish_reason`    |
|----------------------------------------------------|--------------------|
| ``end_turn``, ``stop_sequence``                    | ``stop``           |
| ``tool_use``                                       | ``tool_calls``     |
| ``max_tokens``, ``model_context_window_exceeded``  | ``length``         |
| ``guardrail_intervened``, ``content_filtered``     | ``content_filter`` |
| anything else                                      | ``error``          |
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, ClassVar
from urllib.parse import quote

from .._sse import ServerSentEvent
from ..errors import ConfigError, ContextLengthError, LLMError, LLMStreamError
from ..events import FinishReason, Part, Usage
from ._adapter import CloudAdapter, FrameDecoder
from ._blocks import Block, called_tools
from ._errors import response_error
from ._eventstream import EventStreamDecoder
from ._finish import normalize_finish
from ._media import MEDIA, refuse, source_of
from ._settings import check_settings, copy_settings, forced_tool, unsupported
from ._wire import append_turn, cached_usage, loads
from .base import ChatRequest, FinishChunk, ModelSettings, StreamChunk, SystemBlock
from .credentials import AWSCredentials, Credentials

__all__ = ["BedrockClient", "BedrockStream", "to_converse_messages"]

_NONE: tuple[StreamChunk, ...] = ()
_NO_SETTINGS: ModelSettings = {}

FINISH_REASONS: dict[str, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "guardrail_intervened": "content_filter",
    "content_filtered": "content_filter",
}
"""``stopReason`` → the normalized `FinishReason`; any other value is ``error``."""

_FIELDS = {
    "max_tokens": "maxTokens",
    "temperature": "temperature",
    "top_p": "topP",
    "stop": "stopSequences",
}
"""The settings ``inferenceConfig`` takes as they are, and its name for each."""

_RETRYABLE = frozenset(
    {
        "throttlingException",
        "modelStreamErrorException",
        "internalServerException",
        "serviceUnavailableException",
    }
)


_IMAGE_FORMATS = {
    "image/png": "png",
    "image/jpeg": "jpeg",
    "image/gif": "gif",
    "image/webp": "webp",
}
_DOCUMENT_FORMATS = {
    "application/pdf": "pdf",
    "text/csv": "csv",
    "application/msword": "doc",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
    "application/vnd.ms-excel": "xls",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": "xlsx",
    "text/html": "html",
    "text/plain": "txt",
    "text/markdown": "md",
}
"""The media types Converse takes, and its ``format`` name for each."""
_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9\s\-()\[\]]+")


def _media(part: Any) -> dict[str, Any]:
    """An image or document part → a Converse ``image`` / ``document`` block: the bytes inline
    (base64 on the JSON wire) or an ``s3://`` location; other URLs and audio are refused."""
    kind = part["type"]
    if kind == "audio":
        refuse("bedrock", part, "the Converse API takes no audio")
    formats = _IMAGE_FORMATS if kind == "image" else _DOCUMENT_FORMATS
    fmt = formats.get(part["media_type"])
    if fmt is None:
        refuse("bedrock", part, f"Converse takes {', '.join(formats)}")
    where, value = source_of("bedrock", part)
    if where == "url":
        if not value.startswith("s3://"):
            refuse("bedrock", part, "Converse reads media inline or from s3:// URIs, not http(s)")
        source: dict[str, Any] = {"s3Location": {"uri": value}}
    else:
        source = {"bytes": value}
    block: dict[str, Any] = {"format": fmt, "source": source}
    if kind == "document":
        # Converse allows letters, digits, spaces, hyphens, parentheses and brackets only.
        name = _NAME_UNSAFE.sub(" ", part.get("name") or "document").strip() or "document"
        block["name"] = name[:200]
    return {kind: block}


def _content(part: Any) -> dict[str, Any] | None:
    kind = part["type"]
    if kind in MEDIA:
        return _media(part)
    if kind == "text":
        return {"text": part["text"]} if part["text"] else None
    if kind == "thinking":
        if "redacted" in part:
            return {"reasoningContent": {"redactedContent": part["redacted"]}}
        if part.get("signature"):
            return {
                "reasoningContent": {
                    "reasoningText": {"text": part["text"], "signature": part["signature"]}
                }
            }
        return None
    if kind == "tool_call":
        value = part["input"]
        return {
            "toolUse": {
                "toolUseId": part["id"],
                "name": part["name"],
                "input": value if isinstance(value, dict) else {},
            }
        }
    if kind == "tool_result":
        result: dict[str, Any] = {
            "toolUseId": part["id"],
            "content": [{"text": part["output"]}] if part["output"] else [],
        }
        if part.get("is_error"):
            result["status"] = "error"
        return {"toolResult": result}
    return None


def to_converse_messages(messages: Sequence[Any]) -> list[dict[str, Any]]:
    """Neutral transcript → Converse ``messages``."""
    out: list[dict[str, Any]] = []
    for message in messages:
        blocks = [b for b in map(_content, message["content"]) if b is not None]
        append_turn(out, "assistant" if message["role"] == "assistant" else "user", blocks)
    return out


def _system(blocks: list[SystemBlock]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for block in blocks:
        if block["text"]:
            out.append({"text": block["text"]})
        if "cache_control" in block and out:
            out.append({"cachePoint": {"type": "default"}})
    return out


class BedrockStream:
    """Parser for one ConverseStream response (event stream messages as events)."""

    __slots__ = ("_blocks", "_output", "_usage", "done", "stop_reason")

    def __init__(self, output_tool: str | None = None) -> None:
        self._blocks: dict[int, Block] = {}
        self._output = output_tool
        """The tool standing for `response_format`: its arguments are the answer's text."""
        self._usage: dict[str, Any] = {}
        self.stop_reason: str | None = None
        self.done = False

    def _block(self, index: int, kind: str) -> Block:
        block = self._blocks.get(index)
        if block is None:
            block = self._blocks[index] = Block(kind)
        return block

    # C901 allowed: the event state machine, run per event; no dispatch call per event.
    def handle(self, event: ServerSentEvent) -> Sequence[StreamChunk]:  # noqa: C901
        kind = event.event
        if kind == "contentBlockDelta":
            payload = loads(event.data)
            delta = payload["delta"]
            index = payload["contentBlockIndex"]
            text = delta.get("text")
            if text is not None:
                if not text:
                    return _NONE
                self._block(index, "text").chunks.append(text)
                return ({"type": "text", "text": text},)
            tool = delta.get("toolUse")
            if tool is not None:
                block = self._block(index, "tool")
                partial = tool["input"]
                if not partial:
                    return _NONE
                block.chunks.append(partial)
                if block.kind == "output":
                    return ({"type": "text", "text": partial},)
                return (
                    {
                        "type": "tool_input_delta",
                        "id": block.id,
                        "name": block.name,
                        "partial": partial,
                    },
                )
            reasoning = delta.get("reasoningContent")
            if reasoning is not None:
                block = self._block(index, "thinking")
                if "text" in reasoning:
                    thought = reasoning["text"]
                    if thought:
                        block.chunks.append(thought)
                        return ({"type": "thinking", "text": thought},)
                if reasoning.get("signature"):
                    block.signature += reasoning["signature"]
                if reasoning.get("redactedContent"):
                    block.kind = "redacted"
                    block.redacted += reasoning["redactedContent"]
            return _NONE
        if kind == "contentBlockStart":
            payload = loads(event.data)
            start = payload.get("start") or {}
            tool = start.get("toolUse")
            if tool is not None:
                name = tool["name"]
                block = self._block(
                    payload["contentBlockIndex"], "output" if name == self._output else "tool"
                )
                block.id, block.name = tool["toolUseId"], name
            return _NONE
        if kind == "messageStop":
            self.stop_reason = loads(event.data).get("stopReason")
            self.done = True
            return _NONE
        if kind == "metadata":
            usage = loads(event.data).get("usage")
            if isinstance(usage, dict):
                self._usage = usage
            return _NONE
        if kind.startswith(("exception:", "error:")):
            raise _stream_exception(event)
        return _NONE  # messageStart, contentBlockStop, and event types added later

    def usage(self) -> Usage:
        return cached_usage(
            self._usage,
            ("inputTokens", "outputTokens", "cacheReadInputTokens", "cacheWriteInputTokens"),
        )

    def finish(self) -> FinishChunk:
        content: list[Part] = []
        answered = False
        for index in sorted(self._blocks):
            block = self._blocks[index]
            kind = block.kind
            if kind == "text" or kind == "output":
                text = "".join(block.chunks)
                answered = answered or kind == "output"
                if text:
                    content.append({"type": "text", "text": text})
            elif kind == "tool":
                content.append(block.tool_call({}))
            elif kind == "thinking":
                content.append(block.thinking())
            else:
                content.append(block.redacted_thinking())
        calls = any(p["type"] == "tool_call" for p in content)
        reason = normalize_finish(self.stop_reason, FINISH_REASONS)
        if reason == "tool_calls" and answered and not calls:
            reason = "stop"  # the only call was the answer itself (response_format)
        return {
            "type": "finish",
            "content": content,
            "stop_reason": self.stop_reason,
            "finish_reason": reason,
            "usage": self.usage(),
        }


def _stream_exception(event: ServerSentEvent) -> LLMError:
    kind = event.event.split(":", 1)[1]
    try:
        message = loads(event.data).get("message")
    except ValueError:
        message = event.data
    if kind == "validationException" and isinstance(message, str):
        # Bedrock may refuse an over-long input inside the stream ("Input is too long for
        # requested model."): the same error, and the same history policies, as a 400.
        error = response_error("bedrock", 400, event.data.encode(), env_var=None)
        if isinstance(error, ContextLengthError):
            return error
    return LLMStreamError(
        f"bedrock stream {kind or 'error'}: {message or '(no message)'}"[:600],
        provider="bedrock",
        retryable=kind in _RETRYABLE,
    )


_CHOICES: dict[str, dict[str, Any]] = {"auto": {"auto": {}}, "required": {"any": {}}}


class BedrockClient(CloudAdapter):
    """`bedrock:<model id>`: the Converse API of Amazon Bedrock (a model id, an inference
    profile such as ``us.anthropic.claude-sonnet-4-5-20250929-v1:0``, or an ARN).

    Credentials come from botocore's chain and requests are signed with SigV4 (see
    `AWSCredentials`); `region` and `profile` choose where and as whom (default: the
    environment's). `base_url` replaces the regional endpoint (a VPC endpoint). Needs the
    ``[bedrock]`` extra (botocore).
    """

    provider: ClassVar[str] = "bedrock"
    credentials_class: ClassVar[type[Credentials]] = AWSCredentials

    def wire_headers(self) -> dict[str, str]:
        return {"accept": "application/vnd.amazon.eventstream"}

    def url(self, request: ChatRequest) -> str:
        return f"{self.base_url}/model/{quote(request['model'], safe='')}/converse-stream"

    def new_decoder(self) -> FrameDecoder:
        return EventStreamDecoder(self.provider)

    def build_body(self, request: ChatRequest) -> dict[str, Any]:
        settings = request.get("settings") or _NO_SETTINGS
        if settings:
            check_settings(settings)
        body: dict[str, Any] = {"messages": to_converse_messages(request["messages"])}
        system = _system(request["system"])
        if system:
            body["system"] = system
        tools = [
            {
                "toolSpec": {
                    "name": t["name"],
                    "description": t["description"],
                    "inputSchema": {"json": t["input_schema"]},
                }
            }
            for t in request.get("tools") or ()
        ]
        choice: dict[str, Any] | None = None
        output = request.get("response_format")
        if output is not None:
            name = output["name"]
            if any(t["toolSpec"]["name"] == name for t in tools):
                raise ConfigError(
                    f"bedrock: the structured output {name!r} is declared as a tool of that "
                    "name, and a tool already has it; rename one of them"
                )
            spec = {
                "name": name,
                "description": "The final answer.",
                "inputSchema": {"json": output["schema"]},
            }
            choice = {"tool": {"name": name}} if not tools else {"any": {}}
            tools.append({"toolSpec": spec})
        elif not tools:
            used = called_tools(request["messages"])
            if used:
                # Converse refuses toolUse / toolResult blocks in a request that declares no
                # tools; the names the history used are declared (with no calls expected).
                schema = {"json": {"type": "object"}}
                tools = [
                    {"toolSpec": {"name": n, "description": "", "inputSchema": schema}}
                    for n in used
                ]
        if settings:
            choice = self._settings(body, settings, request) or choice
        if tools:
            body["toolConfig"] = {"tools": tools}
            if choice is not None:
                body["toolConfig"]["toolChoice"] = choice
        return body

    def _settings(
        self, body: dict[str, Any], settings: ModelSettings, request: ChatRequest
    ) -> dict[str, Any] | None:
        if "seed" in settings:
            raise unsupported("bedrock", "seed", "the Converse API has no seed; leave it out")
        if settings.get("parallel_tool_calls") is False:
            raise unsupported(
                "bedrock",
                "parallel_tool_calls",
                "the Converse API has no switch for parallel tool calls; leave the setting out",
            )
        config: dict[str, Any] = {}
        copy_settings(config, settings, _FIELDS)
        if config:
            body["inferenceConfig"] = config
        reasoning = settings.get("reasoning")
        if reasoning is not None:
            if "effort" in reasoning:
                raise unsupported(
                    "bedrock",
                    "reasoning",
                    "the Converse API takes a thinking budget, not an effort: use "
                    "reasoning={'budget_tokens': N}",
                )
            body["additionalModelRequestFields"] = {
                "thinking": {"type": "enabled", "budget_tokens": reasoning["budget_tokens"]}
            }
        choice = settings.get("tool_choice")
        if choice is None:
            return None
        if choice == "none":
            raise unsupported(
                "bedrock",
                "tool_choice",
                "the Converse API has no 'none' tool choice (auto, required or a tool's name); "
                "leave the tools out of this run instead",
            )
        forced = forced_tool("bedrock", choice, request)
        return {"tool": {"name": forced}} if forced is not None else _CHOICES[choice]

    def new_parser(self) -> BedrockStream:
        return BedrockStream()

    def parser_for(self, request: ChatRequest) -> BedrockStream:
        output = request.get("response_format")
        return BedrockStream(output["name"] if output is not None else None)
