"""Media is encoded once, by the helper: the adapters put the part's own base64 text in the
request (the same string object, not a new encoding), turn after turn."""

from __future__ import annotations

from typing import Any

from tether import image
from tether.llm.anthropic import to_anthropic_messages
from tether.llm.gemini import to_gemini_contents

PNG = b"\x89PNG\r\n\x1a\n" + bytes(1000)


def _transcript() -> tuple[list[Any], str]:
    part = image(PNG)
    messages: list[Any] = [{"role": "user", "content": [{"type": "text", "text": "?"}, part]}]
    return messages, part["data"]


def test_anthropic_sends_the_parts_own_base64() -> None:
    messages, data = _transcript()
    for _ in range(3):  # every turn's request
        (sent,) = to_anthropic_messages(messages)
        assert sent["content"][1]["source"]["data"] is data


def test_gemini_sends_the_parts_own_base64() -> None:
    messages, data = _transcript()
    for _ in range(3):
        (sent,) = to_gemini_contents(messages)
        assert sent["parts"][1]["inlineData"]["data"] is data
