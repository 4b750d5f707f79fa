"""The A2A 1.0 wire as both roles read and write it: the JSON-RPC binding's method names and
error codes, the task states, and parts in both directions.

The 1.0 JSON is the protobuf JSON mapping of `a2a.proto` (camelCase fields, enum values by
name: ``TASK_STATE_COMPLETED``, ``ROLE_AGENT``). A `Part` holds one of ``text``, ``raw`` (the
bytes, base64), ``url`` or ``data`` (any JSON value), with ``mediaType`` and ``filename`` beside
it. A tether message part maps onto it one to one: a text part is ``text``, an image, document or
audio part with inline bytes is ``raw`` and with a URL ``url``; a ``data`` part reaches a tether
model as a text part holding its JSON (a model reads text).

Imports nothing of tether but the part shapes, the media checks and the errors.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal, TypeAlias

from ..errors import A2AProtocolError
from ..media import MEDIA_TYPES, check_media_part

__all__ = [
    "CARD_PATH",
    "CONTENT_TYPE_NOT_SUPPORTED",
    "INTERNAL_ERROR",
    "INTERRUPTED_STATES",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "LEGACY_METHODS",
    "METHOD_NOT_FOUND",
    "PARSE_ERROR",
    "PROTOCOL_VERSION",
    "STATES",
    "TASK_NOT_CANCELABLE",
    "TASK_NOT_FOUND",
    "TERMINAL_STATES",
    "UNSUPPORTED_OPERATION",
    "VERSION_HEADER",
    "VERSION_NOT_SUPPORTED",
    "TaskState",
    "a2a_parts",
    "new_id",
    "rpc_error",
    "rpc_result",
    "short_state",
    "tether_parts",
]

PROTOCOL_VERSION: Final = "1.0"
VERSION_HEADER: Final = "A2A-Version"
CARD_PATH: Final = "/.well-known/agent-card.json"
"""Where an agent's card is read, under the agent's base URL (the specification's well-known
path)."""

# JSON-RPC 2.0's own codes, then A2A's (specification section 9.5).
PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603
TASK_NOT_FOUND: Final = -32001
TASK_NOT_CANCELABLE: Final = -32002
UNSUPPORTED_OPERATION: Final = -32004
CONTENT_TYPE_NOT_SUPPORTED: Final = -32005
VERSION_NOT_SUPPORTED: Final = -32009

LEGACY_METHODS: Final = {
    "message/send": "SendMessage",
    "message/stream": "SendStreamingMessage",
    "tasks/get": "GetTask",
    "tasks/cancel": "CancelTask",
}
"""The 0.3 names of the methods tether serves, and their 1.0 names."""

TaskState: TypeAlias = Literal[
    "TASK_STATE_SUBMITTED",
    "TASK_STATE_WORKING",
    "TASK_STATE_COMPLETED",
    "TASK_STATE_FAILED",
    "TASK_STATE_CANCELED",
    "TASK_STATE_INPUT_REQUIRED",
    "TASK_STATE_REJECTED",
    "TASK_STATE_AUTH_REQUIRED",
]

STATES: Final[dict[str, TaskState]] = {
    "running": "TASK_STATE_WORKING",
    "completed": "TASK_STATE_COMPLETED",
    "failed": "TASK_STATE_FAILED",
    "cancelled": "TASK_STATE_CANCELED",
    # Its process died: the run will not go on by itself.
    "interrupted": "TASK_STATE_FAILED",
    # A run that waits for a person (a paused lab run) or a signal (a workflow run).
    "paused": "TASK_STATE_INPUT_REQUIRED",
    "waiting": "TASK_STATE_INPUT_REQUIRED",
}
"""A run's status as a task's state."""

TERMINAL_STATES: Final = frozenset(
    {"TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED"}
)
INTERRUPTED_STATES: Final = frozenset({"TASK_STATE_INPUT_REQUIRED", "TASK_STATE_AUTH_REQUIRED"})
"""States in which a task stops until its client sends more."""

_KINDS = {media: kind for kind, types in MEDIA_TYPES.items() for media in types}


def short_state(state: str) -> str:
    """``TASK_STATE_INPUT_REQUIRED`` as a person reads it: ``input-required``."""
    return state.removeprefix("TASK_STATE_").lower().replace("_", "-")


def new_id() -> str:
    return uuid.uuid4().hex


def rpc_result(request_id: Any, result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def rpc_error(request_id: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


# -- parts -------------------------------------------------------------------------------------


def a2a_parts(content: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A tether message's content as A2A parts: text and media (inline or by URL); thinking,
    tool calls and tool results are the agent's own workings and stay out. A media part still
    held as a blob reference must be resolved first (`tether.blobs.BlobResolver`)."""
    out: list[dict[str, Any]] = []
    for part in content:
        kind = part.get("type")
        if kind == "text":
            if part.get("text"):
                out.append({"text": part["text"]})
        elif kind in MEDIA_TYPES:
            item: dict[str, Any] = {"mediaType": part["media_type"]}
            if "data" in part:
                item["raw"] = part["data"]
            elif "url" in part:
                item["url"] = part["url"]
            else:
                continue
            if part.get("name"):
                item["filename"] = part["name"]
            out.append(item)
    return out


def tether_parts(parts: Any, where: str = "message.parts") -> list[dict[str, Any]]:
    """A2A parts as tether parts: text as text, a file (``raw`` or an http(s) ``url``) of a
    media type some model takes as a media part, ``data`` as a text part holding its JSON.

    Raises:
        ContentError: a file whose bytes are not base64 or contradict its media type.
        A2AProtocolError: a part that is none of the four (`INVALID_PARAMS`), or a file of a
            media type no model takes (`CONTENT_TYPE_NOT_SUPPORTED`).
    """
    if not isinstance(parts, list) or not parts:
        raise A2AProtocolError(f"{where} must be a non-empty list of parts", code=INVALID_PARAMS)
    out: list[dict[str, Any]] = []
    for i, part in enumerate(parts):
        at = f"{where}[{i}]"
        if not isinstance(part, dict):
            raise A2AProtocolError(f"{at} is not a part object", code=INVALID_PARAMS)
        if isinstance(part.get("text"), str):
            out.append({"type": "text", "text": part["text"]})
        elif "data" in part:
            text = json.dumps(part["data"], ensure_ascii=False, sort_keys=True)
            out.append({"type": "text", "text": text})
        elif isinstance(part.get("raw"), str) or isinstance(part.get("url"), str):
            out.append(_file_part(part, at))
        else:
            raise A2AProtocolError(
                f"{at} holds none of text, raw, url or data", code=INVALID_PARAMS
            )
    return out


def _file_part(part: Mapping[str, Any], at: str) -> dict[str, Any]:
    media_type = str(part.get("mediaType") or "").split(";")[0].strip().lower()
    kind = _KINDS.get(media_type)
    if kind is None:
        known = ", ".join(sorted(_KINDS))
        raise A2AProtocolError(
            f"{at}: a file of media type {media_type or 'none'!r} is not taken here "
            f"(these are: {known})",
            code=CONTENT_TYPE_NOT_SUPPORTED,
        )
    media: dict[str, Any] = {"type": kind, "media_type": media_type}
    if isinstance(part.get("raw"), str):
        media["data"] = part["raw"]
    else:
        media["url"] = part["url"]
    if isinstance(part.get("filename"), str) and part["filename"]:
        media["name"] = part["filename"]
    return dict(check_media_part(media, at))
