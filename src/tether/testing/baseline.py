"""The byte-identity baseline: the exact request a minimal agent produces.

Every axis of `create_agent` is optional, and leaving one out must produce the same request
byte for byte as before the axis existed. `tests/baseline/` pins it twice: the `ChatRequest` the
loop hands the model client (``prompt-equivalence.baseline.json``, keys in the order the loop
wrote them) and the exact body each provider adapter sends for it
(``prompt-equivalence.<provider>.body.json``, the bytes on the wire, key order included).
Regenerate deliberately with ``python scripts/regen_baseline.py`` and review the diff.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from ..agent import create_agent
from ..llm.anthropic import AnthropicClient
from ..llm.base import ChatRequest
from ..llm.gemini import GeminiClient
from ..llm.openai_chat import OpenAIChatClient
from ..llm.openai_responses import OpenAIResponsesClient
from ..prompt import prompt_layer
from ..session import Session
from .script_client import script_client
from .turns import collect

__all__ = ["OPTIONAL_KEYS", "PROVIDERS", "derive_baseline", "derive_bodies", "derive_request"]

#: Keys a request may carry only when their axis is configured; never present empty.
OPTIONAL_KEYS = ("tools", "response_format", "settings", "signal")

PROVIDERS = ("anthropic", "openai", "openai-responses", "gemini")
"""The adapters whose request body is pinned."""


def derive_request() -> ChatRequest:
    """The request of a minimal config (one static prompt layer, nothing else)."""
    client = script_client([{"text": "ok"}])
    agent = create_agent(
        llm=client, prompt=[prompt_layer("identity", "You are the tether copilot.")]
    )
    asyncio.run(collect(agent, Session(id="baseline"), "hello"))
    request: ChatRequest = client.calls[0]
    return request


def derive_baseline() -> str:
    """The minimal request as pinned text: indented JSON, keys in the order they were written."""
    return json.dumps(derive_request(), indent=2, ensure_ascii=False) + "\n"


def derive_bodies() -> dict[str, bytes]:
    """The exact body each provider adapter sends for the minimal request."""
    request = derive_request()
    clients: dict[str, Any] = {
        "anthropic": AnthropicClient("baseline", api_key="baseline"),
        "openai": OpenAIChatClient("baseline", api_key="baseline"),
        "openai-responses": OpenAIResponsesClient("baseline", api_key="baseline"),
        "gemini": GeminiClient("baseline", api_key="baseline"),
    }
    return {name: clients[name].encode(request) for name in PROVIDERS}
