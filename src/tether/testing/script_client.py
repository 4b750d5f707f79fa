"""`script_client(turns)`: a deterministic LLMClient that plays scripted turns and records every
request it was sent in `.calls`. Drives the whole loop with no key and no network."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, TypeAlias, cast

from ..errors import LLMError
from ..events import Part, ThinkingPart, Usage
from ..llm._finish import ANTHROPIC_FINISH_REASONS  # its stop reasons are Anthropic's
from ..llm.base import ChatRequest, FinishChunk, StreamChunk

__all__ = ["ScriptClient", "ScriptTurn", "script_client"]

ScriptTurn: TypeAlias = dict[str, Any]
"""``{"text": str | [chunks], "thinking": str | {"text", "signature"}, "tool_use": [{"name",
"input", "id"?, "partials"?: [str]}], "stop_reason"?, "finish_reason"?, "usage"?, "error"?:
LLMError}``. `finish_reason` defaults to the normalized reading of the stop reason (an
unknown stop reason gets none, as a custom client might send it); None leaves it out."""


class ScriptClient:
    """Plays `turns` in order, one per request; a callable turn receives the request."""

    def __init__(
        self,
        turns: Sequence[ScriptTurn | Callable[[ChatRequest], ScriptTurn]],
        *,
        model: str = "script",
        stream_retries: int = 0,
    ) -> None:
        self.turns = list(turns)
        self.model = model
        self.stream_retries = stream_retries
        self.calls: list[ChatRequest] = []
        self._next = 0
        self._ids = 0

    async def chat(self, request: ChatRequest) -> AsyncIterator[StreamChunk]:
        # The loop keeps appending to its transcript; record the list as it is now.
        self.calls.append({**request, "messages": list(request["messages"])})
        if self._next >= len(self.turns):
            raise LLMError(
                f"script_client ran out of turns: request {len(self.calls)} has no scripted reply",
                provider="script",
            )
        turn = self.turns[self._next]
        self._next += 1
        if callable(turn):
            turn = turn(request)
        content: list[Part] = []
        thinking = turn.get("thinking")
        if thinking is not None:
            part: ThinkingPart = (
                {"type": "thinking", "text": thinking}
                if isinstance(thinking, str)
                else cast(ThinkingPart, {"type": "thinking", **thinking})
            )
            yield {"type": "thinking", "text": part["text"]}
            content.append(part)
        text = turn.get("text")
        if text:
            chunks = [text] if isinstance(text, str) else list(text)
            for chunk in chunks:
                yield {"type": "text", "text": chunk}
            content.append({"type": "text", "text": "".join(chunks)})
        for call in turn.get("tool_use") or ():
            self._ids += 1
            cid = call.get("id") or f"call_{self._ids}"
            for partial in call.get("partials") or ():
                yield {
                    "type": "tool_input_delta",
                    "id": cid,
                    "name": call["name"],
                    "partial": partial,
                }
            content.append(
                {
                    "type": "tool_call",
                    "id": cid,
                    "name": call["name"],
                    "input": call.get("input", {}),
                }
            )
        error = turn.get("error")
        if error is not None:
            raise error
        usage: Usage = turn.get("usage") or {"input_tokens": 1, "output_tokens": 1}
        stop = turn.get("stop_reason") or ("tool_use" if turn.get("tool_use") else "end_turn")
        finish: FinishChunk = {
            "type": "finish",
            "content": content,
            "stop_reason": stop,
            "usage": usage.copy(),
        }
        reason = turn.get("finish_reason", ANTHROPIC_FINISH_REASONS.get(stop))
        if reason is not None:  # like an adapter: the normalized reason beside the raw one
            finish["finish_reason"] = reason
        yield finish

    async def aclose(self) -> None:
        return None


def script_client(
    turns: Sequence[ScriptTurn | Callable[[ChatRequest], ScriptTurn]], **kwargs: Any
) -> ScriptClient:
    return ScriptClient(turns, **kwargs)
