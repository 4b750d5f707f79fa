"""OpenAI Responses API (``POST {base_url}/responses``, streamed).

Wire mapping:

- The system blocks are joined into ``instructions``; the transcript goes out as ``input`` items:
  user / assistant messages, ``function_call`` items (the tool call's id is the ``call_id``),
  ``function_call_output`` items for tool results, and ``reasoning`` items for thinking parts
  that came from this API (see below).
- Stream: ``response.output_text.delta`` (and ``response.refusal.delta``) → text;
  ``response.reasoning_summary_text.delta`` / ``response.reasoning_text.delta`` → thinking (the
  summary parts of one reasoning item are separated by a blank line);
  ``response.function_call_arguments.delta`` → ``tool_input_delta`` keyed by ``call_id`` (the
  ``fc_…`` item id is internal to the API). ``response.completed`` / ``response.incomplete`` end
  the stream and carry usage; ``response.failed`` and ``error`` raise `LLMStreamError`.
- `stop_reason` is the response ``status`` (``completed``), or for an incomplete response the
  reason the API gives (``max_output_tokens``, ``content_filter``).
- A reasoning item becomes a thinking part whose text is its summary and whose ``signature`` is
  the compact JSON ``{"id": "rs_…", "encrypted_content"?: …}``; that is what goes back as the
  ``reasoning`` input item on the next request (by id with the API's default ``store``; the
  encrypted content when you ask for it with ``extra_body={"include":
  ["reasoning.encrypted_content"], "store": False}``). Thinking from other providers is not sent.
- `response_format` becomes ``text.format`` ``{"type": "json_schema", name, schema, strict?}``.

Finish reasons (`FINISH_REASONS`):

| `stop_reason`                                    | `finish_reason`    |
|--------------------------------------------------|--------------------|
| ``completed``                                    | ``stop``           |
| ``completed`` with function calls                | ``tool_calls``     |
| ``completed`` with a refusal                     | ``refusal``        |
| ``max_output_tokens`` (incomplete)               | ``length``         |
| ``content_filter`` (incomplete)                  | ``content_filter`` |
| anything else                                    | ``error``          |
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, ClassVar

from .._json import dumps
from .._sse import ServerSentEvent
from ..events import FinishReason, MediaPart, Part, Usage
from ._adapter import HTTPAdapter
from ._errors import stream_error
from ._finish import identify, normalize_finish
from ._media import MEDIA, data_url, inline_text, refuse, source_of
from ._settings import check_settings, copy_settings, reasoning_effort, tool_settings, unsupported
from ._wire import loads, openai_usage, parse_json_or_raw
from .base import ChatRequest, FinishChunk, ModelSettings, StreamChunk, joined
from .credentials import Credentials, OpenAICredentials

__all__ = ["OpenAIResponsesClient", "OpenAIResponsesStream", "to_responses_input"]

_NONE: tuple[StreamChunk, ...] = ()

FINISH_REASONS: dict[str, FinishReason] = {
    "completed": "stop",
    "max_output_tokens": "length",
    "content_filter": "content_filter",
    "incomplete": "length",
}
"""`stop_reason` (the status, or an incomplete response's reason) → `FinishReason`; any other
value is ``error``. ``completed`` with function calls is ``tool_calls``, with a refusal
``refusal``."""


def _reasoning_ref(signature: str) -> dict[str, Any] | None:
    """The reasoning item a thinking part's signature names, or None if it is not ours."""
    if not signature.startswith("{"):
        return None
    try:
        ref = json.loads(signature)
    except ValueError:
        return None
    if isinstance(ref, dict) and isinstance(ref.get("id"), str):
        return ref
    return None


# C901 allowed: one branch per part type, run once per part of the transcript.
def to_responses_input(messages: Sequence[Any]) -> list[dict[str, Any]]:  # noqa: C901
    """Neutral transcript → Responses ``input`` items."""
    items: list[dict[str, Any]] = []
    for message in messages:
        role = message["role"]
        parts = message["content"]
        if role == "user":
            texts = [p["text"] for p in parts if p["type"] == "text"]
            if any(p["type"] in MEDIA for p in parts):
                items.append({"role": "user", "content": [_input_part(p) for p in parts]})
            elif len(texts) == 1:
                items.append({"role": "user", "content": texts[0]})
            elif texts:
                items.append(
                    {"role": "user", "content": [{"type": "input_text", "text": t} for t in texts]}
                )
            continue
        for part in parts:
            kind = part["type"]
            if kind == "text":
                if part["text"]:
                    items.append({"role": "assistant", "content": part["text"]})
            elif kind == "tool_call":
                value = part["input"]
                items.append(
                    {
                        "type": "function_call",
                        "call_id": part["id"],
                        "name": part["name"],
                        "arguments": value if isinstance(value, str) else dumps(value),
                    }
                )
            elif kind == "provider":
                if part["wire"] == "openai-responses":  # a built-in tool's item, as it came
                    items.append(part["block"])
            elif kind == "tool_result":
                items.append(
                    {
                        "type": "function_call_output",
                        "call_id": part["id"],
                        "output": _tool_output(part),
                    }
                )
            elif kind == "thinking":
                ref = _reasoning_ref(part.get("signature") or "")
                if ref is None:
                    continue
                item: dict[str, Any] = {
                    "type": "reasoning",
                    "id": ref["id"],
                    "summary": (
                        [{"type": "summary_text", "text": part["text"]}] if part["text"] else []
                    ),
                }
                if ref.get("encrypted_content"):
                    item["encrypted_content"] = ref["encrypted_content"]
                items.append(item)
    return items


def _tool_output(part: Any) -> str | list[dict[str, Any]]:
    """A tool result's ``output``: its text, or with media a list of input parts."""
    media = part.get("parts")
    if not media:
        output: str = part["output"]
        return output
    head = [{"type": "input_text", "text": part["output"]}] if part["output"] else []
    return head + [_input_part(p) for p in media]


def _input_part(part: Any) -> dict[str, Any]:
    """A user message's part → ``input_text`` / ``input_image`` / ``input_file``."""
    kind = part["type"]
    if kind == "text":
        return {"type": "input_text", "text": part["text"]}
    if kind == "audio":
        refuse("openai-responses", part, "the Responses API takes no audio input")
    where, value = source_of("openai-responses", part)
    if kind == "image":
        url = value if where == "url" else data_url(part)
        return {"type": "input_image", "image_url": url, "detail": part.get("detail", "auto")}
    if part["media_type"] == "text/plain":
        return {"type": "input_text", "text": inline_text("openai-responses", part)}
    if where == "url":
        return {"type": "input_file", "file_url": value}
    name = part.get("name") or "document.pdf"
    return {"type": "input_file", "filename": name, "file_data": data_url(part)}


BUILTIN_ITEMS = frozenset({"web_search_call", "file_search_call", "code_interpreter_call"})
"""Output items of the provider-hosted tools (`tether.llm.builtin`), kept whole."""


_IMAGE_FORMATS = {"png": "image/png", "jpeg": "image/jpeg", "webp": "image/webp"}


def _generated_image(raw: Any) -> MediaPart | None:
    """An ``image_generation_call`` item's ``result`` (base64) as an image part."""
    if not isinstance(raw, dict) or not isinstance(raw.get("result"), str) or not raw["result"]:
        return None
    media_type = _IMAGE_FORMATS.get(str(raw.get("output_format") or "png"), "image/png")
    return {"type": "image", "media_type": media_type, "data": raw["result"]}


class _Item:
    __slots__ = (
        "arguments",
        "call_id",
        "chunks",
        "encrypted",
        "id",
        "kind",
        "name",
        "parts",
        "raw",
    )

    def __init__(self, kind: str, id: str) -> None:
        self.kind = kind
        self.id = id
        self.chunks: list[str] = []
        self.call_id = ""
        self.name = ""
        self.arguments: str | None = None
        """The final arguments from ``.done`` / ``output_item.done``, when they arrived."""
        self.encrypted: str | None = None
        self.parts = 0
        """Reasoning summary parts seen, to separate them."""
        self.raw: dict[str, Any] = {}
        """A built-in tool's item as the API sent it (``output_item.done``)."""


class OpenAIResponsesStream:
    """Parser for one Responses stream."""

    __slots__ = (
        "_items",
        "_usage",
        "done",
        "refused",
        "response_id",
        "response_model",
        "stop_reason",
    )

    def __init__(self) -> None:
        self._items: dict[str, _Item] = {}
        self._usage: dict[str, Any] | None = None
        self.stop_reason: str | None = None
        self.refused = False
        self.done = False
        self.response_id: str | None = None
        self.response_model: str | None = None

    def _item(self, kind: str, item_id: str) -> _Item:
        item = self._items.get(item_id)
        if item is None:
            item = self._items[item_id] = _Item(kind, item_id)
        return item

    # C901 allowed: the SSE event state machine, run per event; no dispatch call per event.
    def handle(self, event: ServerSentEvent) -> Sequence[StreamChunk]:  # noqa: C901
        payload = loads(event.data)
        kind = payload.get("type") or event.event
        if kind == "response.output_text.delta" or kind == "response.refusal.delta":
            text = payload["delta"]
            if not text:
                return _NONE
            if kind == "response.refusal.delta":
                self.refused = True
            self._item("message", payload["item_id"]).chunks.append(text)
            return ({"type": "text", "text": text},)
        if kind == "response.function_call_arguments.delta":
            partial = payload["delta"]
            item = self._item("function_call", payload["item_id"])
            if not partial:
                return _NONE
            item.chunks.append(partial)
            return (
                {
                    "type": "tool_input_delta",
                    "id": item.call_id or item.id,
                    "name": item.name,
                    "partial": partial,
                },
            )
        if (
            kind == "response.reasoning_summary_text.delta"
            or kind == "response.reasoning_text.delta"
        ):
            text = payload["delta"]
            if not text:
                return _NONE
            self._item("reasoning", payload["item_id"]).chunks.append(text)
            return ({"type": "thinking", "text": text},)
        if kind == "response.reasoning_summary_part.added":
            item = self._item("reasoning", payload["item_id"])
            item.parts += 1
            if item.parts > 1 and item.chunks:
                item.chunks.append("\n\n")
                return ({"type": "thinking", "text": "\n\n"},)
            return _NONE
        if kind == "response.output_item.added":
            self._added(payload["item"])
            return _NONE
        if kind == "response.function_call_arguments.done":
            self._item("function_call", payload["item_id"]).arguments = payload.get("arguments")
            return _NONE
        if kind == "response.output_item.done":
            return self._item_done(payload["item"])
        if kind == "response.completed" or kind == "response.incomplete":
            response = payload.get("response") or {}
            self.response_id, self.response_model = response.get("id"), response.get("model")
            self._usage = response.get("usage") or self._usage
            status = response.get("status") or kind.rsplit(".", 1)[-1]
            reason = (response.get("incomplete_details") or {}).get("reason")
            self.stop_reason = reason if status == "incomplete" and reason else status
            self.done = True
            return _NONE
        if kind == "response.failed":
            response = payload.get("response") or {}
            raise stream_error(
                "openai-responses", {"error": response.get("error") or {}}, what="failed"
            )
        if kind == "error":
            # Either {"type": "error", "code", "message"} or the error nested under "error".
            error = payload.get("error")
            if not isinstance(error, dict):
                error = {"type": payload.get("code"), "message": payload.get("message")}
            raise stream_error("openai-responses", {"error": error})
        return _NONE

    def _added(self, data: dict[str, Any]) -> None:
        kind = data.get("type") or ""
        item_id = data.get("id") or f"item_{len(self._items)}"
        if kind in BUILTIN_ITEMS:
            self._item("builtin", item_id)  # in output order; its item comes whole at .done
            return
        if kind == "image_generation_call":
            self._item("image", item_id)  # its base64 comes whole at .done
            return
        if kind not in ("message", "function_call", "reasoning"):
            return  # other item kinds: not part of the neutral transcript
        item = self._item(kind, item_id)
        if kind == "function_call":
            item.call_id = data.get("call_id") or item_id
            item.name = data.get("name") or ""

    def _item_done(self, data: dict[str, Any]) -> Sequence[StreamChunk]:
        kind = data.get("type")
        item_id = data.get("id")
        if kind in BUILTIN_ITEMS and item_id:
            self._item("builtin", item_id).raw = data
            return _NONE
        if kind == "image_generation_call" and item_id:
            self._item("image", item_id).raw = data
            return _NONE
        if kind not in ("message", "function_call", "reasoning") or not item_id:
            return _NONE
        item = self._item(kind, item_id)
        if kind == "function_call":
            item.call_id = data.get("call_id") or item.call_id or item_id
            item.name = data.get("name") or item.name
            if isinstance(data.get("arguments"), str):
                item.arguments = data["arguments"]
        elif kind == "reasoning":
            item.encrypted = data.get("encrypted_content") or None
            if not item.chunks:  # a server that sent the summary only here
                summary = [s.get("text", "") for s in data.get("summary") or ()]
                text = "\n\n".join(t for t in summary if t)
                if text:
                    item.chunks.append(text)
                    return ({"type": "thinking", "text": text},)
        elif not item.chunks:
            parts = data.get("content") or ()
            if any(c.get("refusal") for c in parts):
                self.refused = True
            text = "".join(c.get("text") or c.get("refusal") or "" for c in parts)
            if text:
                item.chunks.append(text)
                return ({"type": "text", "text": text},)
        return _NONE

    def usage(self) -> Usage:
        return openai_usage(self._usage, "input", "output")

    def finish(self) -> FinishChunk:
        content: list[Part] = []
        for item in self._items.values():
            if item.kind == "message":
                text = "".join(item.chunks)
                if text:
                    content.append({"type": "text", "text": text})
            elif item.kind == "function_call":
                raw = item.arguments if item.arguments is not None else "".join(item.chunks)
                content.append(
                    {
                        "type": "tool_call",
                        "id": item.call_id or item.id,
                        "name": item.name,
                        "input": parse_json_or_raw(raw, {}),
                    }
                )
            elif item.kind == "image":
                made = _generated_image(item.raw)
                if made is not None:
                    content.append(made)
            elif item.kind == "builtin":
                if item.raw:
                    block = item.raw
                    content.append({"type": "provider", "wire": "openai-responses", "block": block})
            else:
                ref: dict[str, str] = {"id": item.id}
                if item.encrypted:
                    ref["encrypted_content"] = item.encrypted
                content.append(
                    {"type": "thinking", "text": "".join(item.chunks), "signature": dumps(ref)}
                )
        calls = any(p["type"] == "tool_call" for p in content)
        finish: FinishChunk = {
            "type": "finish",
            "content": content,
            "stop_reason": self.stop_reason,
            "finish_reason": normalize_finish(
                self.stop_reason, FINISH_REASONS, tool_calls=calls, refusal=self.refused
            ),
            "usage": self.usage(),
        }
        return identify(finish, self.response_id, self.response_model)


_FIELDS = {"temperature": "temperature", "top_p": "top_p", "max_tokens": "max_output_tokens"}
"""The settings the Responses API takes as they are, and its name for each."""


def _settings(body: dict[str, Any], settings: ModelSettings, request: ChatRequest) -> None:
    check_settings(settings)
    for key in ("stop", "seed"):
        if key in settings:
            raise unsupported(
                "openai-responses",
                key,
                f"the Responses API has no {key} parameter; use the 'openai:' provider "
                "(Chat Completions), which has one",
            )
    copy_settings(body, settings, _FIELDS)
    tool_settings(
        "openai-responses", body, settings, request, lambda name: {"type": "function", "name": name}
    )
    effort = reasoning_effort(
        "openai-responses",
        settings,
        "the Responses API takes an effort, not a token budget: use reasoning={'effort': ...}",
    )
    if effort is not None:
        body["reasoning"] = {"effort": effort}


class OpenAIResponsesClient(HTTPAdapter):
    """`openai-responses:<model>`: the Responses API. Key from OPENAI_API_KEY (organization and
    project from OPENAI_ORG_ID / OPENAI_PROJECT_ID), as the OpenAI SDK reads them.

    `base_url` includes the version path (default OPENAI_BASE_URL, else
    ``https://api.openai.com/v1``).
    """

    provider: ClassVar[str] = "openai-responses"
    wire: ClassVar[str | None] = "openai-responses"
    credentials_class: ClassVar[type[Credentials]] = OpenAICredentials

    def url(self, request: ChatRequest) -> str:
        return f"{self.base_url}/responses"

    def build_body(self, request: ChatRequest) -> dict[str, Any]:
        body: dict[str, Any] = {"model": request["model"]}
        system = joined(request["system"])
        if system:
            body["instructions"] = system
        body["input"] = to_responses_input(request["messages"])
        if "tools" in request:
            body["tools"] = [
                {
                    "type": "function",
                    "name": t["name"],
                    "description": t["description"],
                    "parameters": t["input_schema"],
                }
                for t in request["tools"]
            ]
        if self.builtin:
            body["tools"] = [*body.get("tools", ()), *self.builtin]
        settings = request.get("settings")
        if settings:
            _settings(body, settings, request)
        if "response_format" in request:
            fmt = request["response_format"]
            spec: dict[str, Any] = {
                "type": "json_schema",
                "name": fmt["name"],
                "schema": fmt["schema"],
            }
            if "strict" in fmt:
                spec["strict"] = fmt["strict"]
            body["text"] = {"format": spec}
        body["stream"] = True
        return body

    def new_parser(self) -> OpenAIResponsesStream:
        return OpenAIResponsesStream()
