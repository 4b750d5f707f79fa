"""Helpers the test modules share: messages by role, reading text back, the `add` tool.

Import them (`from tests.helpers import user, assistant`); fixtures shared by every suite live in
`tests/conftest.py` instead, where pytest finds them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tether import define_tool
from tether.session import Message
from tether.tools import Tool

ADD_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
    "required": ["a", "b"],
}
"""Two required integers, `a` and `b`: the input of `add_tool()`."""


def user(text: str) -> Message:
    """A user message with one text part."""
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def assistant(text: str, agent: str | None = None) -> Message:
    """An assistant message with one text part (written by `agent`, when given)."""
    message: Message = {"role": "assistant", "content": [{"type": "text", "text": text}]}
    if agent is not None:
        message["agent"] = agent
    return message


def text_of(message: Any) -> str:
    """The text of a message's (or stored record's) first part."""
    part: Any = message["content"][0]
    return str(part["text"])


def texts(messages: Sequence[Any]) -> list[tuple[str, str]]:
    """(role, text) of each message or stored record, with tool parts shown by kind."""
    out = []
    for m in messages:
        parts = []
        for p in m["content"]:
            if p["type"] == "text":
                parts.append(p["text"])
            elif p["type"] == "tool_call":
                parts.append(f"<call {p['name']}>")
            elif p["type"] == "tool_result":
                parts.append(f"<result {p['output']}>")
        out.append((m["role"], " ".join(parts)))
    return out


def add_tool(**kwargs: Any) -> Tool:
    """A tool `add` that sums two integers; `kwargs` go to `define_tool` (guards, timeout, …)."""
    return define_tool(
        name="add",
        description="Add two integers",
        input_schema=ADD_SCHEMA,
        execute=lambda i: i["a"] + i["b"],
        **kwargs,
    )
