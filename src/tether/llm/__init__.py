"""Providers behind one LLMClient protocol, and `client_from_config()` for model strings."""

from __future__ import annotations

from typing import Any as _Any

from ..errors import UnknownProviderError as _UnknownProviderError
from .base import (
    ChatRequest,
    FinishChunk,
    LLMClient,
    ModelSettings,
    ReasoningSetting,
    RetryChunk,
    StreamChunk,
    SystemBlock,
    TextChunk,
    ThinkingChunk,
    ToolInputDeltaChunk,
    ToolSpec,
)

__all__ = [
    "PROVIDERS",
    "ChatRequest",
    "FinishChunk",
    "LLMClient",
    "ModelSettings",
    "ReasoningSetting",
    "RetryChunk",
    "StreamChunk",
    "SystemBlock",
    "TextChunk",
    "ThinkingChunk",
    "ToolInputDeltaChunk",
    "ToolSpec",
    "client_from_config",
]

#: provider prefix -> "module:Class" of its adapter, imported on first use.
PROVIDERS: dict[str, str] = {
    "anthropic": "tether.llm.anthropic:AnthropicClient",
    "openai": "tether.llm.openai_chat:OpenAIChatClient",
    "openai-responses": "tether.llm.openai_responses:OpenAIResponsesClient",
    "gemini": "tether.llm.gemini:GeminiClient",
}


def client_from_config(config: dict[str, _Any] | LLMClient) -> LLMClient:
    """Build the adapter for ``{"model": "provider:model", "base_url"?, "api_key"?, "headers"?,
    "max_retries"?, "stream_retries"?}``; an LLMClient instance is returned as is."""
    if not isinstance(config, dict):
        return config
    model = config.get("model")
    if not isinstance(model, str) or ":" not in model:
        raise _UnknownProviderError(
            f"llm.model must be 'provider:model' (one of {', '.join(PROVIDERS)}), got {model!r}"
        )
    provider, name = model.split(":", 1)
    target = PROVIDERS.get(provider)
    if target is None:
        raise _UnknownProviderError(
            f"unknown provider {provider!r} in {model!r}; known: {', '.join(PROVIDERS)}"
        )
    import importlib

    module_name, cls_name = target.split(":")
    cls = getattr(importlib.import_module(module_name), cls_name)
    options = {k: v for k, v in config.items() if k != "model"}
    client: LLMClient = cls(model=name, **options)
    return client
