"""`paced_client(reply, delay=...)`: a keyless LLMClient that answers every request by a rule
and streams the answer chunk by chunk, `delay` seconds apart, as a model does. For servers,
benchmarks and tests that need answers which take time (a stream to drop mid-answer, a run to
cancel, a worker to kill mid-run), without a network."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

from ..llm.base import ChatRequest, StreamChunk
from .script_client import ScriptClient, ScriptTurn

__all__ = ["PacedClient", "paced_client"]


class PacedClient:
    """Answers each request with the turn `reply(request)` returns (the `script_client` turn
    shape), one stream chunk every `delay` seconds. Every request is recorded in `.calls`."""

    def __init__(
        self,
        reply: Callable[[ChatRequest], ScriptTurn],
        *,
        delay: float = 0.0,
        model: str = "paced",
    ) -> None:
        self.reply = reply
        self.delay = delay
        self.model = model
        self.stream_retries = 0
        self.calls: list[ChatRequest] = []

    async def chat(self, request: ChatRequest) -> AsyncIterator[StreamChunk]:
        self.calls.append({**request, "messages": list(request["messages"])})
        turn = self.reply(request)
        # One scripted turn, played at the pace of a model.
        script = ScriptClient([turn], model=self.model)
        first = True
        async for chunk in script.chat(request):
            if self.delay and not first:
                await asyncio.sleep(self.delay)
            first = False
            yield chunk

    async def aclose(self) -> None:
        return None


def paced_client(
    reply: Callable[[ChatRequest], ScriptTurn], *, delay: float = 0.0, model: str = "paced"
) -> PacedClient:
    return PacedClient(reply, delay=delay, model=model)
