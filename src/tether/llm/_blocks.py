"""`Block`: one content block of a streamed response, its deltas gathered as they arrive, and the
part it becomes at the finish. Shared by the two block-indexed streams (Anthropic's Messages and
Bedrock's Converse, whose blocks are Anthropic's in another framing)."""

from __future__ import annotations

from typing import Any

from ..events import ThinkingPart, ToolCallPart
from ._wire import parse_json_or_raw

__all__ = ["Block", "called_tools"]


class Block:
    __slots__ = ("chunks", "id", "input", "kind", "name", "redacted", "signature")

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.chunks: list[str] = []
        """The text, thinking or tool-argument deltas, joined once at the finish."""
        self.id = ""
        self.name = ""
        self.signature = ""
        self.redacted = ""
        """A redacted thinking block's opaque data."""
        self.input: Any = None
        """What the block's start carried (a tool call's input, a server tool's result)."""

    def tool_call(self, empty: Any) -> ToolCallPart:
        """The tool call its arguments make (`empty` when none streamed)."""
        return {
            "type": "tool_call",
            "id": self.id,
            "name": self.name,
            "input": parse_json_or_raw("".join(self.chunks), empty),
        }

    def redacted_thinking(self) -> ThinkingPart:
        return {"type": "thinking", "text": "", "redacted": self.redacted}

    def thinking(self) -> ThinkingPart:
        """The thinking part: its text, and its signature when one came."""
        part: ThinkingPart = {"type": "thinking", "text": "".join(self.chunks)}
        if self.signature:
            part["signature"] = self.signature
        return part


def called_tools(messages: list[Any]) -> list[str]:
    """The names of the tools the history called, in first-call order: declared on a request
    that has no tools of its own, since both APIs refuse tool blocks without tool definitions."""
    names: dict[str, None] = {}
    for message in messages:
        for part in message["content"]:
            if part["type"] == "tool_call":
                names[part["name"]] = None
    return list(names)
