"""A lab agent on a fallback chain: the run records and the cost name the model that answered."""

from __future__ import annotations

from typing import Any

import pytest
from tests.llm.conftest import Reply, WireServer, sse

from tether.lab import Runtime
from tether.llm import fallback
from tether.llm.openai_chat import OpenAIChatClient
from tether.pricing import cost

ANSWER = sse(
    (None, {"id": "c", "choices": [{"index": 0, "delta": {"content": "from b"}}]}),
    (None, {"id": "c", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
    (None, {"id": "c", "choices": [], "usage": {"prompt_tokens": 1000, "completion_tokens": 200}}),
    (None, "[DONE]"),
)


async def test_the_answering_model_is_recorded_and_priced() -> None:
    first, second = WireServer(), WireServer()
    await first.start()
    await second.start()
    prices: dict[str, Any] = {
        "openai:model-a": {"input_mtok": 100.0, "output_mtok": 100.0},
        "openai:model-b": {"input_mtok": 2.0, "output_mtok": 8.0},
    }
    lab = Runtime(store="memory", version=False, prices=prices)
    a = OpenAIChatClient("model-a", base_url=first.url, api_key="k", max_retries=0)
    b = OpenAIChatClient("model-b", base_url=second.url, api_key="k")
    try:
        first.reply(Reply(503, b'{"error": {"message": "down"}}'))
        second.reply(Reply(body=ANSWER))
        agent = lab.create_agent(id="chain", model=fallback(a, b))
        result = await agent.run(user="hi").result
        assert result.text == "from b"
        events = await lab.run_store.events(result.run_id)
        (end,) = [e for e in events if e["type"] == "model_call_finished"]
        assert end["data"]["model"] == "openai:model-b"
        expected = cost(end["data"]["usage"], "openai:model-b", overrides=prices)
        assert expected is not None and end["data"]["cost_usd"] == pytest.approx(float(expected))
        info = await lab.run_store.get_run(result.run_id)
        assert info is not None and info.cost_usd == pytest.approx(float(expected))
    finally:
        await lab.aclose()
        await a.aclose()
        await b.aclose()
        await first.stop()
        await second.stop()
