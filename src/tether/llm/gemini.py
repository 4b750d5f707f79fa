"""Gemini API (``POST {base_url}/models/{model}:streamGenerateContent?alt=sse``).

Wire mapping:

- The system blocks are joined into ``systemInstruction``; tools become ``functionDeclarations``
  with ``parametersJsonSchema`` (full JSON Schema, no OpenAPI subset conversion).
- Messages: ``assistant`` → role ``model``; a tool result → a ``functionResponse`` part
  ``{"name", "response": {"result" | "error": output}, "id"?}`` in a ``user`` turn (consecutive
  turns of one role are merged).
- Stream: every SSE event is a whole ``GenerateContentResponse``. Text parts → text, parts with
  ``"thought": true`` → thinking, ``functionCall`` parts are complete calls (Gemini sends no
  argument deltas, so no ``tool_input_delta`` is emitted). ``usageMetadata`` comes on every chunk
  and the last one wins; the last ``finishReason`` is the `stop_reason`; a blocked prompt ends
  with ``promptFeedback.blockReason`` as the `stop_reason`. An error object inside the stream,
  ``data:``-framed or a bare JSON body after the events, raises `LLMStreamError`.
- Call ids: gemini-3 sends ``functionCall.id`` and it is used as is. gemini-2.5 sends none, so one
  is generated, ``gemini_call_<responseId>_<n>``: stable for the whole response and never sent
  back (a ``functionResponse`` only carries an id the API gave).
- Thought signatures: a ``thoughtSignature`` travels in the transcript as a thinking part with
  empty text whose ``signature`` is the signature, placed immediately before the part it came
  on (a function call, usually). On the next request, such a part is dropped and its signature
  re-attached to the part that follows it in the same message (to the one before it when it is
  last). A signature that came on a thought part stays on that thinking part. Thought summaries
  without a signature are not sent back; the API does not need them.
- Usage: `input_tokens` = ``promptTokenCount``; `output_tokens` = ``candidatesTokenCount`` +
  ``thoughtsTokenCount`` (what is billed as output, as the other APIs count it);
  `reasoning_tokens` = ``thoughtsTokenCount``; `cache_read_tokens` = ``cachedContentTokenCount``.
- `response_format` becomes ``generationConfig.responseMimeType`` ``application/json`` with
  ``responseJsonSchema``.

Finish reasons (`FINISH_REASONS`):

| ``finishReason`` / ``promptFeedback.blockReason``              | `finish_reason`    |
|----------------------------------------------------------------|--------------------|
| ``STOP``                                                       | ``stop``           |
| ``STOP`` with function calls                                   | ``tool_calls``     |
| ``MAX_TOKENS``                                                 | ``length``         |
| ``SAFETY``, ``RECITATION``, ``BLOCKLIST``, ``SPII``, ``IMAGE_*`` | ``content_filter`` |
| ``PROHIBITED_CONTENT``                                         | ``content_filter`` |
| any ``blockReason`` (the prompt was blocked)                   | ``content_filter`` |
| ``MALFORMED_FUNCTION_CALL``, ``LANGUAGE``, ``OTHER``, the rest | ``error``          |
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, cast
from urllib.parse import quote

from .._sse import ServerSentEvent
from ..events import FinishReason, MediaPart, Part, ThinkingPart, Usage
from ._adapter import HTTPAdapter
from ._errors import stream_error
from ._finish import identify, normalize_finish
from ._media import MEDIA, source_of
from ._settings import check_settings, copy_settings, forced_tool, unsupported
from ._wire import append_turn, loads, usage_int
from .base import ChatRequest, FinishChunk, ModelSettings, StreamChunk, joined
from .credentials import Credentials, GeminiCredentials

__all__ = ["GENERATED_ID_PREFIX", "GeminiClient", "GeminiStream", "to_gemini_contents"]

_NONE: tuple[StreamChunk, ...] = ()

FINISH_REASONS: dict[str, FinishReason] = {
    "STOP": "stop",
    "MAX_TOKENS": "length",
    "SAFETY": "content_filter",
    "RECITATION": "content_filter",
    "BLOCKLIST": "content_filter",
    "PROHIBITED_CONTENT": "content_filter",
    "SPII": "content_filter",
    "IMAGE_SAFETY": "content_filter",
    "IMAGE_PROHIBITED_CONTENT": "content_filter",
    "IMAGE_RECITATION": "content_filter",
}
"""``finishReason`` (or a blocked prompt's ``blockReason``) → `FinishReason`. ``STOP`` with
function calls is ``tool_calls``; a blocked prompt is ``content_filter`` whatever its reason;
anything else (``MALFORMED_FUNCTION_CALL``, ``LANGUAGE``, ``OTHER``…) is ``error``."""
GENERATED_ID_PREFIX = "gemini_call_"


def _signature_only(part: Any) -> bool:
    return part["type"] == "thinking" and not part["text"] and bool(part.get("signature"))


def to_gemini_contents(messages: Sequence[Any]) -> list[dict[str, Any]]:
    """Neutral transcript → Gemini ``contents``."""
    contents: list[dict[str, Any]] = []
    for message in messages:
        role = "model" if message["role"] == "assistant" else "user"
        parts: list[dict[str, Any]] = []
        pending: str | None = None  # a signature waiting for the part it belongs to
        for part in message["content"]:
            kind = part["type"]
            wire: dict[str, Any] | None = None
            if kind == "thinking":
                if _signature_only(part):
                    pending = part["signature"]
                elif part.get("signature"):
                    wire = {"text": part["text"], "thought": True}
                    wire["thoughtSignature"] = part["signature"]
            elif kind == "text":
                if part["text"]:
                    wire = {"text": part["text"]}
            elif (make := _PART_WIRE.get(kind)) is not None:
                wire = make(part)
            elif kind == "provider" and part["wire"] == "gemini":
                wire = dict(part["block"])  # executableCode / codeExecutionResult, as it came
            if wire is None:
                continue
            if pending is not None and "thoughtSignature" not in wire:
                wire["thoughtSignature"] = pending
                pending = None
            parts.append(wire)
        if pending is not None:
            _keep_signature(parts, pending)
        append_turn(contents, role, parts, "parts")
    return contents


def _media(part: Any) -> dict[str, Any]:
    """A media part → ``inlineData`` (base64) or ``fileData`` (a URL)."""
    where, value = source_of("gemini", part)
    if where == "url":
        return {"fileData": {"mimeType": part["media_type"], "fileUri": value}}
    return {"inlineData": {"mimeType": part["media_type"], "data": value}}


_PART_WIRE: dict[str, Callable[[Any], dict[str, Any]]] = {
    "tool_call": lambda part: _function_call(part),
    "tool_result": lambda part: _function_response(part),
    **dict.fromkeys(MEDIA, lambda part: _media(part)),
}
"""The parts whose wire form is one function of the part."""


def _keep_signature(parts: list[dict[str, Any]], pending: str) -> None:
    """A signature left over at a message's end goes on its last part (or an empty one)."""
    if parts and "thoughtSignature" not in parts[-1]:
        parts[-1]["thoughtSignature"] = pending
    elif not parts:
        parts.append({"text": "", "thoughtSignature": pending})


def _function_call(part: Any) -> dict[str, Any]:
    call: dict[str, Any] = {"name": part["name"]}
    value = part["input"]
    call["args"] = value if isinstance(value, dict) else {}
    if not part["id"].startswith(GENERATED_ID_PREFIX):
        call["id"] = part["id"]
    return {"functionCall": call}


def _function_response(part: Any) -> dict[str, Any]:
    key = "error" if part.get("is_error") else "result"
    response: dict[str, Any] = {"name": part["name"], "response": {key: part["output"]}}
    if not part["id"].startswith(GENERATED_ID_PREFIX):
        response["id"] = part["id"]
    if part.get("parts"):  # media the function returned, as parts of its response
        response["parts"] = [_media(p) for p in part["parts"]]
    return {"functionResponse": response}


class _Run:
    """A run of text or thought text being assembled into one part."""

    __slots__ = ("chunks", "kind", "signature")

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.chunks: list[str] = []
        self.signature = ""


_RETURNED_KINDS = {
    **dict.fromkeys(("image/png", "image/jpeg", "image/gif", "image/webp"), "image"),
    **dict.fromkeys(("audio/wav", "audio/mpeg", "audio/ogg", "audio/flac"), "audio"),
    "application/pdf": "document",
}
"""The media types of inline data a model returns that become parts (`tether.media`'s)."""


def _returned_media(inline: Any) -> MediaPart | None:
    """A model's ``inlineData`` (an image it generated) as a media part; None for anything
    else."""
    if not isinstance(inline, dict) or not isinstance(inline.get("data"), str):
        return None
    mime = str(inline.get("mimeType") or "").lower()
    kind = _RETURNED_KINDS.get(mime)
    if kind is None:
        return None
    part: Any = {"type": kind, "media_type": mime, "data": inline["data"]}
    return cast(MediaPart, part)


class GeminiStream:
    """Parser for one streamGenerateContent SSE stream (candidate 0)."""

    __slots__ = (
        "_blocked",
        "_calls",
        "_parts",
        "_response_id",
        "_usage",
        "done",
        "response_id",
        "response_model",
        "stop_reason",
    )

    def __init__(self) -> None:
        self._parts: list[_Run | Part] = []
        self._calls = 0
        self._blocked = False
        self._response_id: str | None = None
        self._usage: dict[str, Any] | None = None
        self.stop_reason: str | None = None
        self.done = False
        self.response_id: str | None = None
        self.response_model: str | None = None

    def handle(self, event: ServerSentEvent) -> Sequence[StreamChunk]:
        payload = loads(event.data)
        if isinstance(payload, list):  # a JSON-array framed chunk
            out: list[StreamChunk] = []
            for item in payload:
                out.extend(self._chunk(item))
            return out
        return self._chunk(payload)

    def _chunk(self, payload: dict[str, Any]) -> Sequence[StreamChunk]:
        if "error" in payload:
            raise stream_error("gemini", payload)
        if self._response_id is None and payload.get("responseId"):
            self._response_id = self.response_id = payload["responseId"]
        if self.response_model is None and payload.get("modelVersion"):
            self.response_model = payload["modelVersion"]
        usage = payload.get("usageMetadata")
        if usage:
            self._usage = usage
        feedback = payload.get("promptFeedback")
        if feedback and feedback.get("blockReason"):
            self.stop_reason = feedback["blockReason"]
            self._blocked = True
            self.done = True
        candidates = payload.get("candidates")
        if not candidates:
            return _NONE
        candidate = candidates[0]
        out: list[StreamChunk] = []
        for part in (candidate.get("content") or {}).get("parts") or ():
            self._part(part, out)
        reason = candidate.get("finishReason")
        if reason:
            self.stop_reason = reason
            self.done = True
        return out

    def _run(self, kind: str) -> _Run:
        parts = self._parts
        last = parts[-1] if parts else None
        if isinstance(last, _Run) and last.kind == kind:
            return last
        run = _Run(kind)
        parts.append(run)
        return run

    def _signature(self, signature: str) -> None:
        self._parts.append({"type": "thinking", "text": "", "signature": signature})

    def _part(self, part: dict[str, Any], out: list[StreamChunk]) -> None:
        signature = part.get("thoughtSignature")
        call = part.get("functionCall")
        if call is not None:
            if signature:
                self._signature(signature)
            cid = call.get("id")
            if not cid:
                cid = f"{GENERATED_ID_PREFIX}{self._prefix()}_{self._calls}"
            self._calls += 1
            self._parts.append(
                {
                    "type": "tool_call",
                    "id": cid,
                    "name": call.get("name") or "",
                    "input": call.get("args") or {},
                }
            )
            return
        text = part.get("text")
        if text is None:
            if "executableCode" in part or "codeExecutionResult" in part:
                self._parts.append({"type": "provider", "wire": "gemini", "block": part})
                return  # the signature, if any, stays on the part itself
            if signature:
                self._signature(signature)
            media = _returned_media(part.get("inlineData"))
            if media is not None:  # an image the model made: an image part of its message
                self._parts.append(media)
            return
        if part.get("thought"):
            run = self._run("thinking")
            if signature:
                if run.signature:
                    run = _Run("thinking")
                    self._parts.append(run)
                run.signature = signature
            if text:
                run.chunks.append(text)
                out.append({"type": "thinking", "text": text})
            return
        if signature:
            self._signature(signature)
        if text:
            self._run("text").chunks.append(text)
            out.append({"type": "text", "text": text})

    def _prefix(self) -> str:
        if self._response_id is None:
            self._response_id = uuid.uuid4().hex[:16]
        return self._response_id

    def usage(self) -> Usage:
        raw = self._usage
        out: Usage = {}
        if not raw:
            return out
        thoughts = usage_int(raw.get("thoughtsTokenCount"))
        out["input_tokens"] = usage_int(raw.get("promptTokenCount")) or 0
        out["output_tokens"] = (usage_int(raw.get("candidatesTokenCount")) or 0) + (thoughts or 0)
        cached = usage_int(raw.get("cachedContentTokenCount"))
        if cached is not None:
            out["cache_read_tokens"] = cached
        if thoughts is not None:
            out["reasoning_tokens"] = thoughts
        return out

    def finish(self) -> FinishChunk:
        content: list[Part] = []
        for item in self._parts:
            if isinstance(item, _Run):
                text = "".join(item.chunks)
                if item.kind == "text":
                    if text:
                        content.append({"type": "text", "text": text})
                elif text or item.signature:
                    thinking: ThinkingPart = {"type": "thinking", "text": text}
                    if item.signature:
                        thinking["signature"] = item.signature
                    content.append(thinking)
            else:
                content.append(item)
        reason: FinishReason = (
            "content_filter"
            if self._blocked
            else normalize_finish(self.stop_reason, FINISH_REASONS, tool_calls=self._calls > 0)
        )
        finish: FinishChunk = {
            "type": "finish",
            "content": content,
            "stop_reason": self.stop_reason,
            "finish_reason": reason,
            "usage": self.usage(),
        }
        return identify(finish, self.response_id, self.response_model)


_MODES = {"auto": "AUTO", "none": "NONE", "required": "ANY"}


def _tool_config(settings: ModelSettings, request: ChatRequest) -> dict[str, Any] | None:
    if settings.get("parallel_tool_calls") is False:
        raise unsupported(
            "gemini",
            "parallel_tool_calls",
            "Gemini has no switch for parallel function calls (it may always make several); "
            "leave the setting out, or ask for one call at a time in the prompt",
        )
    # parallel_tool_calls=True is what Gemini always does: honoured with nothing to send.
    choice = settings.get("tool_choice")
    if choice is None:
        return None
    forced = forced_tool("gemini", choice, request)
    if forced is None:
        return {"functionCallingConfig": {"mode": _MODES[choice]}}
    return {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": [forced]}}


_FIELDS = {
    "temperature": "temperature",
    "top_p": "topP",
    "max_tokens": "maxOutputTokens",
    "stop": "stopSequences",
    "seed": "seed",
}
"""The settings `generationConfig` takes as they are, and its name for each."""


def _generation_config(config: dict[str, Any], settings: ModelSettings) -> None:
    copy_settings(config, settings, _FIELDS)
    reasoning = settings.get("reasoning")
    if reasoning is not None:
        if "budget_tokens" in reasoning:
            config["thinkingConfig"] = {"thinkingBudget": reasoning["budget_tokens"]}
        else:
            config["thinkingConfig"] = {"thinkingLevel": reasoning["effort"]}


class GeminiClient(HTTPAdapter):
    """`gemini:<model>`: the Gemini API. Key from GOOGLE_API_KEY, else GEMINI_API_KEY (the
    google-genai SDK's order: GOOGLE_API_KEY wins when both are set).

    `base_url` includes the version path (default
    ``https://generativelanguage.googleapis.com/v1beta``). Without one, GOOGLE_GEMINI_BASE_URL
    (the SDK's, a root without the version) is used with GOOGLE_GENAI_API_VERSION (default
    ``v1beta``) appended.
    """

    provider: ClassVar[str] = "gemini"
    wire: ClassVar[str | None] = "gemini"
    credentials_class: ClassVar[type[Credentials]] = GeminiCredentials

    def url(self, request: ChatRequest) -> str:
        model = quote(request["model"], safe="")
        return f"{self.base_url}/models/{model}:streamGenerateContent?alt=sse"

    def build_body(self, request: ChatRequest) -> dict[str, Any]:
        body: dict[str, Any] = {"contents": to_gemini_contents(request["messages"])}
        system = joined(request["system"])
        if system:
            body["systemInstruction"] = {"parts": [{"text": system}]}
        if "tools" in request:
            body["tools"] = [
                {
                    "functionDeclarations": [
                        {
                            "name": t["name"],
                            "description": t["description"],
                            "parametersJsonSchema": t["input_schema"],
                        }
                        for t in request["tools"]
                    ]
                }
            ]
        if self.builtin:
            body["tools"] = [*body.get("tools", ()), *self.builtin]
        settings = request.get("settings")
        config: dict[str, Any] = {}
        if settings:
            check_settings(settings)
            if "tools" in request:
                tool_config = _tool_config(settings, request)
                if tool_config is not None:
                    body["toolConfig"] = tool_config
            _generation_config(config, settings)
        if "response_format" in request:
            config["responseMimeType"] = "application/json"
            config["responseJsonSchema"] = request["response_format"]["schema"]
        if config:
            body["generationConfig"] = config
        return body

    def new_parser(self) -> GeminiStream:
        return GeminiStream()
