"""Model fallback: one `LLMClient` over several, trying the next when one fails before it
answered.

``tether.llm.fallback(a, b, c)`` (or ``model=["anthropic:…", "bedrock:…", "openai:…"]`` on an
agent) sends each model call to `a`; when that call fails *before its first content chunk* (text,
thinking, a tool-call fragment or the finish) with

- a connection error or a deadline (`LLMConnectionError`, `DeadlineError`),
- a 429 or a 5xx after the client's own request retries (`RateLimitError`, `LLMHTTPError`),
- a refusal to authenticate or missing cloud credentials (`AuthenticationError`,
  `MissingCredentialsError`),
- or a stream that broke (or carried a transient error event) before anything was said
  (a retryable `LLMStreamError`),

the same request goes to `b` (its ``model`` replaced by `b`'s), and so on. A failure after content
began is raised as it is: part of an answer was streamed, and another model's answer would not
continue it. Any other error (a bad request, a context too long) is raised at once: the next
model would be asked the same thing.

Each switch is a `FallbackChunk` on the stream (a ``request``/``fallback`` trace record and the
chat span's ``tether.fallback.model`` attribute in the loop), and the finish chunk says which model
answered in ``model`` (``"provider:model"``), which `done` carries on. Settings are checked
against every model when the agent is defined (`validate_settings`), so a setting a later
model cannot honour fails there, not mid-turn.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import cast

from ..errors import (
    AuthenticationError,
    ConfigError,
    DeadlineError,
    LLMConnectionError,
    LLMError,
    LLMHTTPError,
    LLMStreamError,
    MissingCredentialsError,
    RateLimitError,
)
from .base import ChatRequest, FallbackChunk, LLMClient, ModelSettings, StreamChunk

__all__ = ["FallbackClient", "falls_back", "model_name"]


def model_name(client: LLMClient) -> str:
    """``provider:model`` for a client (its model alone when it names no provider)."""
    provider = getattr(client, "provider", None)
    return f"{provider}:{client.model}" if provider else client.model


def falls_back(error: Exception) -> bool:
    """Whether `error`, raised before any content, sends the request to the next model."""
    if isinstance(error, MissingCredentialsError | AuthenticationError | RateLimitError):
        return True
    if isinstance(error, LLMConnectionError | DeadlineError):
        return True
    if isinstance(error, LLMHTTPError):
        return error.status >= 500
    if isinstance(error, LLMStreamError):
        return bool(getattr(error, "retryable", False))
    return False


class FallbackClient:
    """Several clients tried in order for each model call (see the module docstring).

    A client stays the caller's unless `owned` says otherwise at its position (it was built
    from a model string): `aclose()` closes those.
    """

    def __init__(self, clients: Sequence[LLMClient], *, owned: Sequence[bool] = ()) -> None:
        if len(clients) < 2:
            raise ConfigError(
                f"fallback() takes at least two models, got {len(clients)}: with one, use it as "
                "the model itself"
            )
        for client in clients:
            if not isinstance(client, LLMClient):
                raise ConfigError(f"fallback(): {client!r:.80} is not an LLMClient")
        self.clients = list(clients)
        self.model = clients[0].model
        """The first model's (the one a request names until a switch)."""
        self.provider = getattr(clients[0], "provider", None)
        self.models = [model_name(c) for c in clients]
        """Every model, in the order they are tried, as ``provider:model``."""
        self.stream_retries = max(getattr(c, "stream_retries", 0) for c in clients)
        self._owned = [c for c, mine in zip(self.clients, owned, strict=False) if mine]

    def __repr__(self) -> str:
        return f"FallbackClient({', '.join(self.models)})"

    def validate_settings(self, settings: ModelSettings, tools: Sequence[str] = ()) -> None:
        """Every model must honour the settings: the first that cannot raises its
        ModelSettingError, naming its provider."""
        for client in self.clients:
            validate = getattr(client, "validate_settings", None)
            if validate is not None:
                validate(settings, tools)

    async def chat(self, request: ChatRequest) -> AsyncIterator[StreamChunk]:
        last = len(self.clients) - 1
        for index, client in enumerate(self.clients):
            this = request if index == 0 else cast(ChatRequest, {**request, "model": client.model})
            began = False
            try:
                async for chunk in client.chat(this):
                    if chunk["type"] == "finish":
                        chunk["model"] = self.models[index]
                        yield chunk
                        return
                    if chunk["type"] != "retry":
                        began = True
                    yield chunk
                return
            except (LLMError, MissingCredentialsError) as exc:
                if began or index == last or not falls_back(exc):
                    raise
                switch: FallbackChunk = {
                    "type": "fallback",
                    "model": self.models[index + 1],
                    "after": self.models[index],
                    "reason": f"{type(exc).__name__}: {str(exc)[:300]}",
                }
                yield switch

    async def aclose(self) -> None:
        """Close the clients when they are ours (built from model strings)."""
        for client in self._owned:
            await client.aclose()
