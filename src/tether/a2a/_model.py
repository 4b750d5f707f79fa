"""A remote A2A agent in the place of a model: what `Runtime.remote_agent(url)` runs on.

`A2AModel.chat(request)` sends the turn's new user message (everything after the last
assistant message of the request) to the agent, and streams its answer back as the normalized
chunks every model client yields: a `text` chunk per streamed piece of an artifact, then
`finish` with the answer's text and media. The remote agent keeps its own memory of the
conversation: the message goes to the `contextId` derived from the local conversation
(`context_of()`, the lab's memory scope), so the next turn continues it. A task that fails,
is rejected or canceled, or stops for input is an `A2ATaskError` (the run fails naming it).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, cast

from ..events import Part
from ..llm.base import ChatRequest, StreamChunk
from ._client import A2AClient, Delta, Reply
from ._tools import context_id_for

__all__ = ["A2AModel"]


class A2AModel:
    """An LLMClient whose answers come from the A2A agent at `url`.

    Args:
        url: The agent's URL (its card is at ``{url}/.well-known/agent-card.json``).
        headers: Sent with every request.
        context_of: Names the local conversation of the current call (None: a new remote
            context for every call).
        timeout: Seconds one read of the answer may wait.
    """

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        context_of: Callable[[], str | None] | None = None,
        timeout: float = 120.0,
    ) -> None:
        self.client = A2AClient(url, headers=headers, timeout=timeout)
        self.model = f"a2a:{self.client.url}"
        self.context_of = context_of

    async def aclose(self) -> None:
        await self.client.aclose()

    async def chat(self, request: ChatRequest) -> AsyncIterator[StreamChunk]:
        messages = list(request["messages"])
        if "blobs" in request and messages:
            messages = await request["blobs"].resolve(messages)
        content = _new_user_content(messages)
        conversation = self.context_of() if self.context_of is not None else None
        context_id = context_id_for(conversation, self.client.url) if conversation else None
        reply: Reply | None = None
        async for item in self.client.send(content, context_id=context_id):
            if isinstance(item, Delta):
                yield {"type": "text", "text": item.text}
            else:
                reply = item
        assert reply is not None
        parts = cast(list[Part], reply.parts or [{"type": "text", "text": ""}])
        yield {
            "type": "finish",
            "content": parts,
            "stop_reason": reply.state,
            "finish_reason": "stop",
            "usage": {},
        }


def _new_user_content(messages: list[Any]) -> list[dict[str, Any]]:
    """The user messages after the last assistant message, as one list of parts."""
    parts: list[dict[str, Any]] = []
    for message in reversed(messages):
        if message.get("role") == "assistant":
            break
        if message.get("role") == "user":
            parts[:0] = [p for p in message.get("content") or [] if isinstance(p, dict)]
    return parts or [{"type": "text", "text": ""}]
