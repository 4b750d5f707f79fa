"""The Session the caller owns, and `reduce()`, the one function that writes it."""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, MutableMapping
from typing import Any, Literal, NotRequired, TypeAlias, TypedDict, TypeVar

from ._json import check_json_safe, copy_json
from .errors import SessionFormatError
from .events import (
    RENDER_ONLY,
    AgentEvent,
    DoneEvent,
    MemoryEvent,
    Part,
    PendingCall,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultEvent,
    ToolResultPart,
    ToolUseEvent,
)

__all__ = [
    "Message",
    "Session",
    "SessionLike",
    "as_session",
    "fold",
    "fold_tool_result",
    "fold_tool_use",
    "holder",
    "reduce",
    "remember",
]

Role: TypeAlias = Literal["user", "assistant", "tool"]


class Message(TypedDict):
    role: Role
    content: list[Part]
    agent: NotRequired[str]
    """On an assistant message: the name of the agent that wrote it (agents with a `name`;
    a lab agent's id), so a conversation handed between agents says who said what."""


class Session(dict[str, Any]):
    """A conversation: its id, its transcript and its memory. Plain JSON data.

    A Session *is* a dict ``{"id", "messages", "memory"}`` (with `.id`, `.messages` and
    `.memory` to read it), so ``json.dumps(session)`` works and ``json.loads`` of that JSON is a
    session `Agent.send()` and `reduce()` accept as it is. Write it only through `reduce()`;
    where the JSON is stored is the caller's.
    """

    __slots__ = ()

    def __init__(
        self,
        id: str | None = None,
        messages: list[Message] | None = None,
        memory: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(
            id=uuid.uuid4().hex if id is None else id,
            messages=[] if messages is None else messages,
            memory={} if memory is None else memory,
        )

    @property
    def id(self) -> str:
        """The session's id (also the `session_id` of its trace records)."""
        value: str = self["id"]
        return value

    @id.setter
    def id(self, value: str) -> None:
        self["id"] = value

    @property
    def messages(self) -> list[Message]:
        """The transcript: user, assistant and tool messages, oldest first."""
        value: list[Message] = self["messages"]
        return value

    @messages.setter
    def messages(self, value: list[Message]) -> None:
        self["messages"] = value

    @property
    def pending(self) -> list[PendingCall]:
        """The tool calls a paused turn waits for (empty when it waits for nothing); kept as the
        session's ``"pending"`` key while there are any."""
        value: list[PendingCall] = self.get("pending") or []
        return value

    @property
    def memory(self) -> dict[str, Any]:
        """The session's JSON-safe memory (written by `memory` events)."""
        value: dict[str, Any] = self["memory"]
        return value

    @memory.setter
    def memory(self, value: dict[str, Any]) -> None:
        self["memory"] = value

    def __repr__(self) -> str:
        return f"Session({dict.__repr__(self)})"

    def to_dict(self) -> dict[str, Any]:
        """The session as a plain dict (sharing its lists and dicts)."""
        out = {"id": self.id, "messages": self.messages, "memory": self.memory}
        if "pending" in self:
            out["pending"] = self["pending"]
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_json(cls, data: str | bytes | Mapping[str, Any]) -> Session:
        """Rebuild a Session; raise SessionFormatError naming the first thing that is wrong.

        A mapping's lists and dicts are taken over, not copied.
        """
        if isinstance(data, (str, bytes)):
            try:
                data = json.loads(data)
            except ValueError as exc:
                raise SessionFormatError(f"session is not JSON: {exc}") from exc
        if not isinstance(data, Mapping):
            raise SessionFormatError(f"session must be an object, got {type(data).__name__}")
        sid = data.get("id")
        if not isinstance(sid, str):
            raise SessionFormatError("session.id must be a string")
        messages = data.get("messages", [])
        if not isinstance(messages, list):
            raise SessionFormatError("session.messages must be a list")
        for i, m in enumerate(messages):
            problem = _message_problem(m)
            if problem is not None:
                raise SessionFormatError(f"session.messages[{i}]{problem}")
        memory = data.get("memory", {})
        if not isinstance(memory, dict):
            raise SessionFormatError("session.memory must be an object")
        session = cls(id=sid, messages=messages, memory=memory)
        pending = data.get("pending")
        if pending is not None:
            problem = _pending_problem(pending)
            if problem is not None:
                raise SessionFormatError(f"session.pending{problem}")
            if pending:
                session["pending"] = pending
        return session


SessionLike: TypeAlias = Mapping[str, Any]
"""What `Agent.send()` accepts as a session: a `Session`, or a plain dict of the same shape (for
example ``json.loads(json.dumps(session))``)."""

S = TypeVar("S", bound=MutableMapping[str, Any])


def as_session(value: SessionLike) -> Session:
    """`value` as a Session: itself when it is one; a plain mapping is checked once (raising
    SessionFormatError) and wrapped, sharing its transcript list and memory dict."""
    if isinstance(value, Session):
        return value
    if isinstance(value, MutableMapping):
        value.setdefault("messages", [])
        value.setdefault("memory", {})
    return Session.from_json(value)


_PART_KEYS: dict[str, tuple[tuple[str, type | None], ...]] = {
    "text": (("text", str),),
    "thinking": (("text", str),),
    "tool_call": (("id", str), ("name", str), ("input", None)),
    "tool_result": (("id", str), ("name", str), ("output", str), ("is_error", bool)),
    "image": (("media_type", str),),
    "document": (("media_type", str),),
    "audio": (("media_type", str),),
}
_MEDIA = ("image", "document", "audio")
_SOURCES = ("data", "url", "blob")
_OPTIONAL_STR = ("signature", "redacted")


_ROLES = ("user", "assistant", "tool")  # a tuple: an unhashable role is wrong, not an error


def _message_problem(m: Any) -> str | None:
    """What is wrong with message `m` (to follow its path in an error), or None.

    A transcript is checked whole each time a session is loaded, so the common case (nothing
    wrong) builds no strings."""
    if not isinstance(m, dict) or m.get("role") not in _ROLES:
        return ": a message needs role user, assistant or tool"
    content = m.get("content")
    if not isinstance(content, list):
        return ".content must be a list of parts"
    if "agent" in m and type(m["agent"]) is not str:
        return ".agent must be a string (the name of the agent that wrote the message)"
    for j, part in enumerate(content):
        keys = None
        if isinstance(part, dict):
            t = part.get("type")
            keys = _PART_KEYS.get(t if type(t) is str else str(t))
        if keys is None:
            return f".content[{j}]: unknown part {part!r:.80}"
        for k, kind in keys:
            if k not in part:
                return f".content[{j}]: {part['type']} part lacks {k!r}"
            if kind is not None and type(part[k]) is not kind:
                return f".content[{j}].{k} must be {kind.__name__}, got {type(part[k]).__name__}"
        if part["type"] in _MEDIA:
            found = [k for k in _SOURCES if k in part]
            if len(found) != 1 or type(part[found[0]]) is not str:
                return f".content[{j}]: {part['type']} part needs one of data, url or blob (a str)"
        elif "signature" in part or "redacted" in part:
            for k in _OPTIONAL_STR:
                if k in part and type(part[k]) is not str:
                    return f".content[{j}].{k} must be str"
    return None


_KINDS = ("approval", "external", "input")


def _pending_problem(pending: Any) -> str | None:
    if not isinstance(pending, list):
        return " must be a list of pending calls"
    for i, p in enumerate(pending):
        if not isinstance(p, dict):
            return f"[{i}] must be an object"
        for key in ("id", "name"):
            if type(p.get(key)) is not str:
                return f"[{i}].{key} must be a string"
        if "input" not in p:
            return f"[{i}] lacks 'input'"
        if p.get("kind") not in _KINDS:
            return f"[{i}].kind must be approval, external or input"
        if p["kind"] == "input":
            for key in ("schema", "state"):
                if not isinstance(p.get(key), dict):
                    return f"[{i}].{key} must be an object (an input call keeps what it asks)"
    return None


def remember(patch: dict[str, Any]) -> MemoryEvent:
    """A memory event for `reduce()`: set keys, or delete them with None.

    Raises NotJSONSafeError naming the path (``memory.when: datetime is not JSON-safe``) for a
    value that would not survive a JSON round trip.
    """
    if not isinstance(patch, dict):
        raise TypeError(f"remember() takes a dict patch, got {type(patch).__name__}")
    check_json_safe(patch, "memory")
    return {"type": "memory", "patch": copy_json(patch)}  # what was checked is what is written


def reduce(session: S, event: AgentEvent) -> S:
    """Fold one event into `session` and return it: the same object, updated in place.

    Render-only events leave it untouched. The others append to the transcript (or patch the
    memory) in place, so the cost of an event does not depend on how long the conversation
    already is. `session` may be a `Session` or a plain dict of the same shape.
    """
    if event["type"] in RENDER_ONLY:
        return session
    if event["type"] == "paused":
        session["pending"] = event["pending"]
        return session
    if event["type"] == "resumed":
        session.pop("pending", None)
        return session
    try:
        memory = session["memory"]
    except KeyError:
        memory = session["memory"] = {}
    # The events most turns fold, without fold()'s own dispatch.
    if event["type"] == "tool_result":
        fold_tool_result(session["messages"], event)
    elif event["type"] == "tool_use":
        fold_tool_use(session["messages"], event)
    else:
        fold(session["messages"], memory, event)
    return session


def fold(messages: list[Message], memory: dict[str, Any], event: AgentEvent) -> None:
    """The transcript rules, shared by `reduce()` and the loop's own view of the turn."""
    if event["type"] == "tool_result":
        fold_tool_result(messages, event)
    elif event["type"] == "tool_use":
        fold_tool_use(messages, event)
    elif event["type"] == "message":
        parts = event.get("parts")
        if parts is None:
            messages.append({"role": "user", "content": [{"type": "text", "text": event["text"]}]})
        else:
            messages.append({"role": "user", "content": [p.copy() for p in parts]})
    elif event["type"] == "done":
        _fold_done(messages, event)
    elif event["type"] == "memory":
        apply_memory_patch(memory, event["patch"])


def apply_memory_patch(memory: dict[str, Any], patch: Mapping[str, Any]) -> None:
    """Apply a memory write's `patch` (`MemoryEvent`) to `memory`: each key set, a None value
    deleting it (`fold`, and the AG-UI endpoint's shared state)."""
    for key, value in patch.items():
        if value is None:
            memory.pop(key, None)
        else:
            memory[key] = value


def fold_tool_result(messages: list[Message], event: ToolResultEvent) -> ToolResultPart:
    """`fold()` of a `tool_result`: its part, appended to the tool message the round has (or
    opens), and returned (the loop keeps it as the round's result)."""
    part: ToolResultPart = {
        "type": "tool_result",
        "id": event["id"],
        "name": event["name"],
        "output": event["output"],
        "is_error": bool(event.get("is_error", False)),
    }
    media = event.get("parts")
    if media:
        part["parts"] = [p.copy() for p in media]
    if messages and messages[-1]["role"] == "tool":
        messages[-1]["content"].append(part)
    else:
        messages.append({"role": "tool", "content": [part]})
    return part


def fold_tool_use(messages: list[Message], event: ToolUseEvent) -> None:
    """`fold()` of a `tool_use`: its call joins the round's assistant message; the round's
    first call (the one with a `preamble`) opens that message, with the preamble's parts."""
    call: ToolCallPart = {
        "type": "tool_call",
        "id": event["id"],
        "name": event["name"],
        "input": event["input"],
    }
    preamble = event.get("preamble")
    if preamble is not None or not messages or messages[-1]["role"] != "assistant":
        content: list[Part] = [call]
        if preamble:
            content[:0] = [_copy_part(p) for p in preamble]
        opened: Message = {"role": "assistant", "content": content}
        if "agent" in event:
            opened["agent"] = event["agent"]
        messages.append(opened)
    else:
        messages[-1]["content"].append(call)


def _fold_done(messages: list[Message], event: DoneEvent) -> None:
    """The final round's thinking, provider blocks, text and images: the assistant message."""
    thinking = event.get("thinking")
    final: list[Part] = [_copy_part(p) for p in thinking] if thinking else []
    blocks = event.get("blocks")
    if blocks:
        final.extend({"type": "provider", "wire": b["wire"], "block": b["block"]} for b in blocks)
    if event["text"]:
        final.append({"type": "text", "text": event["text"]})
    made = event.get("media")
    if made:
        final.extend(p.copy() for p in made)
    if final:
        message: Message = {"role": "assistant", "content": final}
        if "agent" in event:
            message["agent"] = event["agent"]
        messages.append(message)


def _copy_part(part: TextPart | ThinkingPart) -> TextPart | ThinkingPart:
    return part.copy()


def holder(messages: list[Message]) -> str | None:
    """The agent holding the conversation: the `agent` of the last assistant message (None
    when it names none). Read from the end: the cost does not grow with the transcript."""
    for message in reversed(messages):
        if message["role"] == "assistant":
            agent = message.get("agent")
            return agent if isinstance(agent, str) else None
    return None
