"""OpenAI Chat Completions (``POST {base_url}/chat/completions``, streamed), and through
`base_url` every server that speaks it: vLLM, Ollama, llama.cpp's server, LiteLLM's proxy, and the
hosted ones (DeepSeek, Groq, Mistral, xAI, Alibaba, Azure OpenAI, OpenRouter).

Wire mapping:

- The system blocks are joined into one ``system`` message (Chat has no cache markers).
- Messages: an assistant message carries its text as ``content`` and its calls as
  ``tool_calls`` (arguments as the JSON string). A ``tool`` message becomes one ``tool`` message
  per result.
- Stream: ``delta.content`` → text (a string, or Mistral's list of typed parts: ``text`` parts →
  text, ``thinking`` parts → thinking); ``delta.refusal`` → text as well (it is what the user
  should see); ``delta.reasoning_content`` / ``delta.reasoning`` / ``delta.reasoning_details``
  (DeepSeek, vLLM, xAI, Groq, Ollama, OpenRouter) → thinking. Tool-call fragments are keyed by
  ``index``: id and name arrive on a call's first fragment, later ones carry only arguments,
  and several calls can interleave; a new id at an index already in use starts a new call
  (Ollama numbers every call 0). ``stream_options.include_usage`` makes the server send usage
  in a last chunk with no choices; ``data: [DONE]`` (trailing whitespace allowed, as Azure's
  sample sends it) ends the stream. A server that closes right after a ``finish_reason``
  without ``[DONE]`` is accepted too (some compatible servers do).
- Reasoning is kept in the transcript only on a message with tool calls, and goes back there as
  ``reasoning_content``: DeepSeek's thinking mode requires it on tool-call turns (and ignores or
  refuses it elsewhere); after a plain answer no server needs it back.
- An ``{"error": ...}`` chunk inside the stream, alone or beside ``choices`` (OpenRouter), or
  vLLM's ``{"object": "error"}`` raises `LLMStreamError` carrying the provider's message.
- `response_format` becomes ``{"type": "json_schema", "json_schema": {name, schema, strict?}}``.

Finish reasons (`FINISH_REASONS`):

| ``finish_reason``                                        | `finish_reason` |
|----------------------------------------------------------|-----------------|
| ``stop`` (``eos``, ``eos_token``, ``end_turn``, ``stop_sequence``), none | ``stop`` |
| ``stop`` after a ``delta.refusal``                       | ``refusal``     |
| ``stop`` or none with tool calls in the response          | ``tool_calls``  |
| ``length`` (``max_tokens``, ``model_length``)             | ``length``      |
| ``tool_calls``, ``function_call`` (``tool_use``)          | ``tool_calls``  |
| ``content_filter``                                       | ``content_filter`` |
| anything else (``abort``, ``error``…)                    | ``error``       |
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any, ClassVar

from .._json import dumps
from .._sse import ServerSentEvent
from ..events import FinishReason, Part, Usage
from ._adapter import HTTPAdapter
from ._errors import stream_error
from ._finish import identify, normalize_finish
from ._media import MEDIA, data_url, inline_text, refuse, source_of
from ._settings import check_settings, copy_settings, reasoning_effort, tool_settings
from ._wire import loads, openai_usage, parse_json_or_raw
from .base import ChatRequest, FinishChunk, ModelSettings, StreamChunk, joined
from .credentials import Credentials, OpenAICredentials

__all__ = ["OpenAIChatClient", "OpenAIChatStream", "to_chat_messages"]

_NONE: tuple[StreamChunk, ...] = ()

FINISH_REASONS: dict[str, FinishReason] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "content_filter": "content_filter",
    # What OpenAI-compatible servers say instead:
    "eos": "stop",
    "eos_token": "stop",
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_length": "length",
    "tool_use": "tool_calls",
    "abort": "error",
    "error": "error",
}
"""`finish_reason` → the normalized `FinishReason`; any other value is ``error``."""


def _arguments(value: Any) -> str:
    return value if isinstance(value, str) else dumps(value)


def to_chat_messages(system: str, messages: Sequence[Any]) -> list[dict[str, Any]]:
    """Neutral transcript (plus the joined system prompt) → Chat ``messages``."""
    out: list[dict[str, Any]] = []
    if system:
        out.append({"role": "system", "content": system})
    for message in messages:
        role = message["role"]
        parts = message["content"]
        if role == "tool":
            follow: list[dict[str, Any]] = []
            for part in parts:
                if part["type"] == "tool_result":
                    out.append(
                        {"role": "tool", "tool_call_id": part["id"], "content": part["output"]}
                    )
                    if part.get("parts"):  # a tool message takes text only: media follows
                        follow.append(_media_note(part))
                        follow.extend(_chat_part(p) for p in part["parts"])
            if follow:
                out.append({"role": "user", "content": follow})
            continue
        texts = [p["text"] for p in parts if p["type"] == "text"]
        if role == "user":
            if any(p["type"] in MEDIA for p in parts):
                out.append({"role": "user", "content": [_chat_part(p) for p in parts]})
            elif len(texts) == 1:
                out.append({"role": "user", "content": texts[0]})
            else:
                out.append(
                    {"role": "user", "content": [{"type": "text", "text": t} for t in texts]}
                )
            continue
        calls = [
            {
                "id": p["id"],
                "type": "function",
                "function": {"name": p["name"], "arguments": _arguments(p["input"])},
            }
            for p in parts
            if p["type"] == "tool_call"
        ]
        entry: dict[str, Any] = {"role": "assistant", "content": "".join(texts) or None}
        if calls:
            # Reasoning from a Chat server (no signature: not another API's) goes back on a
            # message with tool calls, where DeepSeek's thinking mode requires it.
            reasoning = "".join(
                p["text"] for p in parts if p["type"] == "thinking" and not p.get("signature")
            )
            if reasoning:
                entry["reasoning_content"] = reasoning
            entry["tool_calls"] = calls
        elif entry["content"] is None:
            entry["content"] = ""
        out.append(entry)
    return out


def _media_note(part: Any) -> dict[str, Any]:
    n = len(part["parts"])
    return {
        "type": "text",
        "text": f"[the {n} attachment{'s' if n > 1 else ''} returned by tool {part['name']} "
        f"(call {part['id']})]",
    }


_AUDIO_FORMATS = {"audio/wav": "wav", "audio/mpeg": "mp3"}


def _chat_part(part: Any) -> dict[str, Any]:
    """A user message's part → a Chat content part: ``image_url`` (a data URL or the URL, with
    ``detail``), ``input_audio`` (WAV, MP3) or ``file`` (a PDF as ``file_data``)."""
    kind = part["type"]
    if kind == "text":
        return {"type": "text", "text": part["text"]}
    where, value = source_of("openai", part)
    if kind == "image":
        image: dict[str, Any] = {"url": value if where == "url" else data_url(part)}
        if "detail" in part:
            image["detail"] = part["detail"]
        return {"type": "image_url", "image_url": image}
    if kind == "audio":
        fmt = _AUDIO_FORMATS.get(part["media_type"])
        if fmt is None or where == "url":
            refuse("openai", part, "Chat Completions takes WAV or MP3 audio as data only")
        return {"type": "input_audio", "input_audio": {"data": value, "format": fmt}}
    if part["media_type"] == "text/plain":
        return {"type": "text", "text": inline_text("openai", part)}
    if where == "url":
        refuse("openai", part, "Chat Completions takes files as data, not by URL")
    file = {"filename": part.get("name") or "document.pdf", "file_data": data_url(part)}
    return {"type": "file", "file": file}


class _Call:
    __slots__ = ("chunks", "id", "name")

    def __init__(self, id: str, name: str) -> None:
        self.id = id
        self.name = name
        self.chunks: list[str] = []


class OpenAIChatStream:
    """Parser for one Chat Completions stream (choice 0; ``n > 1`` is not requested)."""

    __slots__ = (
        "_calls",
        "_slots",
        "_text",
        "_thinking",
        "_usage",
        "done",
        "refused",
        "response_id",
        "response_model",
        "stop_reason",
    )

    def __init__(self) -> None:
        self._text: list[str] = []
        self._thinking: list[str] = []
        self._calls: list[_Call] = []
        """In the order they started."""
        self._slots: dict[Any, _Call] = {}
        """The call each wire ``index`` currently names."""
        self._usage: dict[str, Any] | None = None
        self.stop_reason: str | None = None
        self.refused = False
        """A ``delta.refusal`` arrived: the model refused (the API still says ``stop``)."""
        self.done = False
        self.response_id: str | None = None
        self.response_model: str | None = None

    def handle(self, event: ServerSentEvent) -> Sequence[StreamChunk]:
        data = event.data
        if data == "[DONE]" or (data[:1] != "{" and data.strip() == "[DONE]"):
            # Azure's documented sample sends "data: [DONE] " with a trailing space.
            self.done = True
            return _NONE
        payload = loads(data)
        if payload.get("error"):
            # OpenAI's {"error": {...}} in place of a chunk, or OpenRouter's error object
            # inside a chunk that also has choices: either way the response failed.
            raise stream_error("openai", payload)
        # On every chunk; the first that names them says it (Azure's first, its prompt
        # filter results, has both empty).
        if self.response_id is None and payload.get("id"):
            self.response_id = payload["id"]
        if self.response_model is None and payload.get("model"):
            self.response_model = payload["model"]
        choices = payload.get("choices")
        if not choices:
            # The usage chunk (no choices), or vLLM's bare {"object": "error", "message",
            # "type", "code"} in place of a chunk.
            if payload.get("object") == "error":
                raise stream_error("openai", {"error": payload})
            if payload.get("usage"):
                self._usage = payload["usage"]
            return _NONE
        if payload.get("usage"):  # some servers put usage on the last choice chunk
            self._usage = payload["usage"]
        choice = choices[0]
        if choice.get("index", 0) != 0:
            choice = next((c for c in choices if c.get("index") == 0), None)
            if choice is None:
                return _NONE
        out: tuple[StreamChunk, ...] | list[StreamChunk] = _NONE
        delta = choice.get("delta")
        if delta:
            text = delta.get("content")
            if len(delta) == 1 and text.__class__ is str and text:
                # Nearly every chunk: {"content": "..."} and nothing else.
                self._text.append(text)
                out = ({"type": "text", "text": text},)
            else:
                out = self._delta(delta, text)
        reason = choice.get("finish_reason")
        if reason:
            self.stop_reason = reason
            self.done = True  # [DONE] and the usage chunk may still follow
        return out

    def _delta(self, delta: dict[str, Any], text: Any) -> list[StreamChunk]:
        out: list[StreamChunk] = []
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        if not isinstance(reasoning, str):
            reasoning = _details_text(delta.get("reasoning_details"))
        if reasoning:
            self._thinking.append(reasoning)
            out.append({"type": "thinking", "text": reasoning})
        if isinstance(text, list):
            self._typed_parts(text, out)
        elif text:
            self._text.append(text)
            out.append({"type": "text", "text": text})
        refusal = delta.get("refusal")
        if refusal:
            self.refused = True
            self._text.append(refusal)
            out.append({"type": "text", "text": refusal})
        calls = delta.get("tool_calls")
        if calls:
            self._tool_fragments(calls, out)
        return out

    def _typed_parts(self, parts: list[Any], out: list[StreamChunk]) -> None:
        """Mistral's ``delta.content`` as a list of typed parts: ``{"type": "text", "text"}`` and
        ``{"type": "thinking", "thinking": [{"type": "text", "text"}, ...]}``."""
        for part in parts:
            if not isinstance(part, dict):
                continue
            kind = part.get("type")
            if kind == "text":
                text = part.get("text")
                if isinstance(text, str) and text:
                    self._text.append(text)
                    out.append({"type": "text", "text": text})
            elif kind == "thinking":
                inner = part.get("thinking")
                texts = (
                    [inner]
                    if isinstance(inner, str)
                    else [p.get("text") for p in inner or () if isinstance(p, dict)]
                )
                for text in texts:
                    if isinstance(text, str) and text:
                        self._thinking.append(text)
                        out.append({"type": "thinking", "text": text})

    def _tool_fragments(self, fragments: list[dict[str, Any]], out: list[StreamChunk]) -> None:
        for fragment in fragments:
            function = fragment.get("function") or {}
            index = fragment.get("index")
            call_id = fragment.get("id")
            if index is None:
                # Servers that omit `index` send whole calls: an id or a name starts a new one,
                # a bare arguments fragment continues the last.
                call = self._call_for(call_id, function.get("name"))
            else:
                call = self._slots.get(index)
                if call is not None and call_id and call_id != call.id:
                    # A new id at an index in use starts a new call: Ollama (and some proxies)
                    # give every call of a response index 0.
                    call = None
            if call is None:
                call = _Call(call_id or f"call_{uuid.uuid4().hex[:24]}", function.get("name") or "")
                self._calls.append(call)
                if index is not None:
                    self._slots[index] = call
            elif not call.name and function.get("name"):
                call.name = function["name"]
            partial = function.get("arguments")
            if partial:
                if not isinstance(partial, str):  # a server that sends the object itself
                    partial = dumps(partial)
                call.chunks.append(partial)
                out.append(
                    {
                        "type": "tool_input_delta",
                        "id": call.id,
                        "name": call.name,
                        "partial": partial,
                    }
                )

    def _call_for(self, call_id: str | None, name: str | None) -> _Call | None:
        """The call a fragment without an index continues, or None when it starts one."""
        calls = self._calls
        if call_id:
            for call in calls:
                if call.id == call_id:
                    return call
        if call_id or name or not calls:
            return None
        return calls[-1]

    def usage(self) -> Usage:
        return openai_usage(self._usage, "prompt", "completion")

    def finish(self) -> FinishChunk:
        content: list[Part] = []
        calls = self._calls
        if self._thinking and calls:
            # Reasoning is kept only on a message with tool calls: DeepSeek requires it back
            # there (and refuses it elsewhere); no server needs it back after plain text.
            content.append({"type": "thinking", "text": "".join(self._thinking)})
        if self._text:
            content.append({"type": "text", "text": "".join(self._text)})
        for call in calls:
            content.append(
                {
                    "type": "tool_call",
                    "id": call.id,
                    "name": call.name,
                    "input": parse_json_or_raw("".join(call.chunks), {}),
                }
            )
        finish: FinishChunk = {
            "type": "finish",
            "content": content,
            "stop_reason": self.stop_reason,
            "finish_reason": normalize_finish(
                self.stop_reason, FINISH_REASONS, tool_calls=bool(calls), refusal=self.refused
            ),
            "usage": self.usage(),
        }
        return identify(finish, self.response_id, self.response_model)


def _details_text(details: Any) -> str:
    """The readable text of OpenRouter's ``reasoning_details`` (when no ``reasoning`` string
    came beside them): ``reasoning.text`` parts' text and ``reasoning.summary`` parts' summary;
    encrypted parts have none."""
    if not isinstance(details, list):
        return ""
    out = []
    for item in details:
        if isinstance(item, dict):
            text = item.get("text") if item.get("type") == "reasoning.text" else item.get("summary")
            if isinstance(text, str):
                out.append(text)
    return "".join(out)


_FIELDS = {
    "temperature": "temperature",
    "top_p": "top_p",
    "max_tokens": "max_completion_tokens",
    "stop": "stop",
    "seed": "seed",
}
"""The settings Chat Completions takes as they are, and its name for each."""


def _settings(body: dict[str, Any], settings: ModelSettings, request: ChatRequest) -> None:
    check_settings(settings)
    copy_settings(body, settings, _FIELDS)
    tool_settings(
        "openai",
        body,
        settings,
        request,
        lambda name: {"type": "function", "function": {"name": name}},
    )
    effort = reasoning_effort(
        "openai",
        settings,
        "Chat Completions takes an effort, not a token budget: use reasoning={'effort': ...}, "
        "or extra_body for a server with its own budget field",
    )
    if effort is not None:
        body["reasoning_effort"] = effort


class OpenAIChatClient(HTTPAdapter):
    """`openai:<model>`: Chat Completions. Key from OPENAI_API_KEY (organization and project from
    OPENAI_ORG_ID / OPENAI_PROJECT_ID), as the OpenAI SDK reads them.

    `base_url` includes the version path (default OPENAI_BASE_URL, else
    ``https://api.openai.com/v1``; for Ollama ``http://localhost:11434/v1``). With a base URL
    of your own, a key is optional: local servers usually need none, and no ``Authorization``
    header is sent without one.
    """

    provider: ClassVar[str] = "openai"
    media_in_tool_results: ClassVar[bool] = False
    """A tool message takes text only: a result's media follows as a user message."""
    credentials_class: ClassVar[type[Credentials]] = OpenAICredentials

    def url(self, request: ChatRequest) -> str:
        return f"{self.base_url}/chat/completions"

    def build_body(self, request: ChatRequest) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": request["model"],
            "messages": to_chat_messages(joined(request["system"]), request["messages"]),
        }
        if "tools" in request:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t["name"],
                        "description": t["description"],
                        "parameters": t["input_schema"],
                    },
                }
                for t in request["tools"]
            ]
        settings = request.get("settings")
        if settings:
            _settings(body, settings, request)
        if "response_format" in request:
            fmt = request["response_format"]
            schema: dict[str, Any] = {"name": fmt["name"], "schema": fmt["schema"]}
            if "strict" in fmt:
                schema["strict"] = fmt["strict"]
            body["response_format"] = {"type": "json_schema", "json_schema": schema}
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
        return body

    def new_parser(self) -> OpenAIChatStream:
        return OpenAIChatStream()
