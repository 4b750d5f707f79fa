"""The Session the caller owns, and `reduce()`, the one function that writes it."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias, TypedDict

from ._json import check_json_safe, copy_json
from .errors import SessionFormatError
from .events import AgentEvent, MemoryEvent, Part

__all__ = ["Message", "Session", "reduce", "remember"]

Role: TypeAlias = Literal["user", "assistant", "tool"]


class Message(TypedDict):
    role: Role
    content: list[Part]


@dataclass(slots=True, eq=True)
class Session:
    """A conversation: its id, its transcript and its memory. Plain JSON-safe data.

    Write it only through `reduce()`. Where the JSON from `to_json()` is stored is the caller's.
    """

    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    messages: list[Message] = field(default_factory=list)
    memory: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "messages": self.messages, "memory": self.memory}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_json(cls, data: str | bytes | dict[str, Any]) -> Session:
        """Rebuild a Session; raise SessionFormatError naming the first thing that is wrong."""
        if isinstance(data, (str, bytes)):
            try:
                data = json.loads(data)
            except ValueError as exc:
                raise SessionFormatError(f"session is not JSON: {exc}") from exc
        if not isinstance(data, dict):
            raise SessionFormatError(f"session must be an object, got {type(data).__name__}")
        sid = data.get("id")
        if not isinstance(sid, str):
            raise SessionFormatError("session.id must be a string")
        messages = data.get("messages", [])
        if not isinstance(messages, list):
            raise SessionFormatError("session.messages must be a list")
        for i, m in enumerate(messages):
            _check_message(m, f"session.messages[{i}]")
        memory = data.get("memory", {})
        if not isinstance(memory, dict):
            raise SessionFormatError("session.memory must be an object")
        return cls(id=sid, messages=messages, memory=memory)


_PART_KEYS: dict[str, tuple[tuple[str, type | None], ...]] = {
    "text": (("text", str),),
    "thinking": (("text", str),),
    "tool_call": (("id", str), ("name", str), ("input", None)),
    "tool_result": (("id", str), ("name", str), ("output", str), ("is_error", bool)),
}
_OPTIONAL_STR = ("signature", "redacted")


def _check_message(m: Any, path: str) -> None:
    if not isinstance(m, dict) or m.get("role") not in ("user", "assistant", "tool"):
        raise SessionFormatError(f"{path}: a message needs role user, assistant or tool")
    content = m.get("content")
    if not isinstance(content, list):
        raise SessionFormatError(f"{path}.content must be a list of parts")
    for j, part in enumerate(content):
        keys = _PART_KEYS.get(str(part.get("type"))) if isinstance(part, dict) else None
        if keys is None:
            raise SessionFormatError(f"{path}.content[{j}]: unknown part {part!r:.80}")
        for k, kind in keys:
            if k not in part:
                raise SessionFormatError(f"{path}.content[{j}]: {part['type']} part lacks {k!r}")
            if kind is not None and type(part[k]) is not kind:
                raise SessionFormatError(
                    f"{path}.content[{j}].{k} must be {kind.__name__}, got {type(part[k]).__name__}"
                )
        for k in _OPTIONAL_STR:
            if k in part and type(part[k]) is not str:
                raise SessionFormatError(f"{path}.content[{j}].{k} must be str")


def remember(patch: dict[str, Any]) -> MemoryEvent:
    """A memory event for `reduce()`: set keys, or delete them with None.

    Raises NotJSONSafeError naming the path (``memory.when: datetime is not JSON-safe``) for a
    value that would not survive a JSON round trip.
    """
    if not isinstance(patch, dict):
        raise TypeError(f"remember() takes a dict patch, got {type(patch).__name__}")
    check_json_safe(patch, "memory")
    return {"type": "memory", "patch": copy_json(patch)}  # what was checked is what is written


def reduce(session: Session, event: AgentEvent) -> Session:
    """Fold one event into the session and return it.

    Render-only events return the session untouched. The others append to the transcript in
    place, so the cost of an event does not depend on how long the conversation already is.
    """
    fold(session.messages, session.memory, event)
    return session


def fold(messages: list[Message], memory: dict[str, Any], event: AgentEvent) -> None:
    """The transcript rules, shared by `reduce()` and the loop's own view of the turn."""
    ev: Any = event  # one dict-shaped union; the `type` tag decides which keys exist
    kind = ev["type"]
    if kind == "tool_result":
        part: Part = {
            "type": "tool_result",
            "id": ev["id"],
            "name": ev["name"],
            "output": ev["output"],
            "is_error": bool(ev.get("is_error", False)),
        }
        if messages and messages[-1]["role"] == "tool":
            messages[-1]["content"].append(part)
        else:
            messages.append({"role": "tool", "content": [part]})
    elif kind == "tool_use":
        call: Part = {
            "type": "tool_call",
            "id": ev["id"],
            "name": ev["name"],
            "input": ev["input"],
        }
        preamble = ev.get("preamble")
        if preamble is not None or not messages or messages[-1]["role"] != "assistant":
            content: list[Any] = [dict(p) for p in preamble or ()]
            content.append(call)
            messages.append({"role": "assistant", "content": content})
        else:
            messages[-1]["content"].append(call)
    elif kind == "message":
        messages.append({"role": "user", "content": [{"type": "text", "text": ev["text"]}]})
    elif kind == "done":
        content = [dict(p) for p in ev.get("preamble") or ()]
        text = ev["text"]
        if text:
            content.append({"type": "text", "text": text})
        if content:
            messages.append({"role": "assistant", "content": content})
    elif kind == "memory":
        for key, value in ev["patch"].items():
            if value is None:
                memory.pop(key, None)
            else:
                memory[key] = value
