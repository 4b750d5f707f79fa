"""The keyless ``test`` model: answers without a key or a network, wherever a model string goes.

```
test          same as test:echo
test:echo     answers with the text of the last user message
test:tools    calls each offered tool once, with arguments made from its input schema, then
              answers with the tools' outputs as one JSON object {tool name: output}
```

Asked for structured output (`response_format`), either mode answers with a JSON value made from
the schema instead. Everything is deterministic: the same request gets the same answer, streamed
word by word, with usage counted in words.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Mapping
from typing import Any, ClassVar

from ..errors import ConfigError
from ..events import Part, Usage
from ..session import Message
from .base import ChatRequest, FinishChunk, StreamChunk

__all__ = ["MODES", "TestModel", "example_value"]

MODES = ("echo", "tools")
"""The test model's modes: ``test:echo`` and ``test:tools`` (plain ``test`` is echo)."""

_WORDS = re.compile(r"\S+\s*|\s+")


class TestModel:
    """The `LLMClient` behind ``model="test"`` (see the module docstring for what it answers)."""

    __test__ = False  # not a pytest test class, despite the name
    provider: ClassVar[str] = "test"
    stream_retries = 0

    def __init__(self, model: str = "echo", **options: Any) -> None:
        """Args:
        model: ``echo`` or ``tools`` (empty: echo).
        options: The model-config keys of the real providers (``base_url``, ``api_key``,
            timeouts, ...) are accepted and ignored, so a config written for a real model runs
            on the test model when only its ``model`` is replaced.
        """
        mode = model or "echo"
        if mode not in MODES:
            raise ConfigError(
                f"unknown test model {'test:' + model!r}; the test models are test, "
                + ", ".join(f"test:{m}" for m in MODES)
            )
        self.model = mode
        self.options = options

    def __repr__(self) -> str:
        return f"TestModel(model={self.model!r})"

    async def chat(self, request: ChatRequest) -> AsyncIterator[StreamChunk]:
        messages = request["messages"]
        tools = request.get("tools") or []
        content: list[Part] = []
        if self.model == "tools" and tools and not _called_tools(messages):
            for i, tool in enumerate(tools, 1):
                call_input = example_value(tool.get("input_schema") or {"type": "object"})
                if not isinstance(call_input, dict):
                    call_input = {}
                cid = f"test_call_{_turn(messages)}_{i}"
                yield {
                    "type": "tool_input_delta",
                    "id": cid,
                    "name": tool["name"],
                    "partial": json.dumps(call_input),
                }
                content.append(
                    {"type": "tool_call", "id": cid, "name": tool["name"], "input": call_input}
                )
            yield _finish(content, "tool_use", request, "")
            return
        response_format = request.get("response_format")
        if response_format is not None:
            text = json.dumps(example_value(response_format.get("schema") or {}))
        elif self.model == "tools" and tools:
            text = json.dumps(_tool_outputs(messages), default=str)
        else:
            text = _last_user_text(messages)
        for word in _WORDS.findall(text):
            await asyncio.sleep(0)  # a point where a cancelled turn stops, as a real stream's
            yield {"type": "text", "text": word}
        if text:
            content.append({"type": "text", "text": text})
        yield _finish(content, "end_turn", request, text)

    async def aclose(self) -> None:
        return None

    async def __aenter__(self) -> TestModel:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def _finish(content: list[Part], stop: str, request: ChatRequest, text: str) -> FinishChunk:
    words = sum(len(_text_of(m).split()) for m in request["messages"])
    usage: Usage = {"input_tokens": words, "output_tokens": len(text.split()) or len(content)}
    return {
        "type": "finish",
        "content": content,
        "stop_reason": stop,
        "finish_reason": "tool_calls" if stop == "tool_use" else "stop",
        "usage": usage,
    }


def _text_of(message: Message) -> str:
    return "".join(
        str(p.get("text", "")) for p in message.get("content") or () if p.get("type") == "text"
    )


def _last_user(messages: list[Message]) -> int:
    """The index of the last user message that is not only tool results (-1: none)."""
    for i in range(len(messages) - 1, -1, -1):
        message = messages[i]
        if message.get("role") == "user" and any(
            p.get("type") != "tool_result" for p in message.get("content") or ()
        ):
            return i
    return -1


def _last_user_text(messages: list[Message]) -> str:
    i = _last_user(messages)
    return _text_of(messages[i]) if i >= 0 else ""


def _turn(messages: list[Message]) -> int:
    return sum(1 for m in messages if m.get("role") == "user")


def _called_tools(messages: list[Message]) -> bool:
    """Whether this turn (since the last user message) already called tools."""
    return any(
        p.get("type") == "tool_call"
        for m in messages[_last_user(messages) + 1 :]
        if m.get("role") == "assistant"
        for p in m.get("content") or ()
    )


def _tool_outputs(messages: list[Message]) -> dict[str, Any]:
    outputs: dict[str, Any] = {}
    for message in messages[_last_user(messages) + 1 :]:
        for part in message.get("content") or ():
            if part.get("type") == "tool_result":
                outputs[str(part.get("name"))] = part.get("output")
    return outputs


def example_value(schema: Mapping[str, Any], defs: Mapping[str, Any] | None = None) -> Any:
    """A value valid for the JSON Schema `schema` (its enums, consts, defaults, bounds, required
    properties and ``$ref``s into ``$defs`` followed), the same every time."""
    defs = (
        defs if defs is not None else {**schema.get("definitions", {}), **schema.get("$defs", {})}
    )
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.rsplit("/", 1)[-1] in defs:
        return example_value(defs[ref.rsplit("/", 1)[-1]], defs)
    if "const" in schema:
        return schema["const"]
    if "default" in schema:
        return schema["default"]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        options = schema.get(key)
        if options:
            chosen = [o for o in options if o.get("type") != "null"] or options
            return example_value(chosen[0], defs)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    return _typed_value(schema, kind, defs)


def _typed_value(schema: Mapping[str, Any], kind: Any, defs: Mapping[str, Any]) -> Any:
    """`example_value` for a schema of type `kind` (None: untyped)."""
    if kind == "object" or (kind is None and "properties" in schema):
        properties = schema.get("properties") or {}
        return {name: example_value(sub, defs) for name, sub in properties.items()}
    if kind == "array":
        items = schema.get("items") or {}
        return [example_value(items, defs) for _ in range(int(schema.get("minItems", 1)))]
    if kind == "string":
        return "a" * max(int(schema.get("minLength", 1)), 1)
    if kind in ("integer", "number"):
        value = schema.get("minimum", 0)
        if "exclusiveMinimum" in schema:
            value = schema["exclusiveMinimum"] + 1
        if "maximum" in schema:
            value = min(value, schema["maximum"])
        return int(value) if kind == "integer" else float(value)
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    return "a"
