"""Every adapter reports the response's id and the model that answered (OpenTelemetry's
`gen_ai.response.id` and `gen_ai.response.model`), read from the recorded provider streams."""

from __future__ import annotations

import json
from collections.abc import Callable

from tether.llm._adapter import StreamParser
from tether.llm.anthropic import AnthropicStream
from tether.llm.gemini import GeminiStream
from tether.llm.openai_chat import OpenAIChatStream
from tether.llm.openai_responses import OpenAIResponsesStream

from .conftest import WireCase, parse_pieces

PARSERS: dict[str, tuple[str, Callable[[], StreamParser]]] = {
    "anthropic": ("anthropic", AnthropicStream),
    "openai_chat": ("openai", OpenAIChatStream),
    "openai_compat": ("openai", OpenAIChatStream),
    "openai_responses": ("openai-responses", OpenAIResponsesStream),
    "gemini": ("gemini", GeminiStream),
}


def _wire_strings(sse: bytes, keys: tuple[str, ...]) -> set[str]:
    """Every string the stream's JSON holds under one of `keys`, outside lists (the choices,
    candidates and content arrays, where tool calls have ids of their own)."""
    found: set[str] = set()

    def walk(value: object) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                if k in keys and isinstance(v, str) and v:
                    found.add(v)
                walk(v)

    for line in sse.decode().splitlines():
        if line.startswith("data:"):
            try:
                walk(json.loads(line[5:]))
            except ValueError:
                pass  # [DONE] and the like
    return found


def test_the_finish_names_the_response_and_its_model(case: WireCase) -> None:
    provider, parser = PARSERS[case.path.parent.name]
    out = parse_pieces(provider, parser(), [case.sse])
    if out.finish is None:
        return  # a recorded failure: no response to name
    ids = _wire_strings(case.sse, ("id", "responseId"))
    models = _wire_strings(case.sse, ("model", "modelVersion"))
    if models:  # every provider but a few compatible servers sends both
        assert out.finish.get("response_model") in models, case.name
    if provider == "gemini":
        ids = _wire_strings(case.sse, ("responseId",))  # "id" there names function calls
    if ids:
        assert out.finish.get("response_id") in ids, case.name
