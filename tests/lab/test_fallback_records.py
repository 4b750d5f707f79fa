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


async def test_a_model_list_is_a_fallback_chain_in_the_lab() -> None:
    """`model=[...]` on a lab agent (config dicts: the runtime builds, reuses and closes the
    clients); the same chain serves every episode, and a run's own model replaces it."""
    first, second = WireServer(), WireServer()
    await first.start()
    await second.start()
    lab = Runtime(store="memory", version=False)
    try:
        chain: list[Any] = [
            {"model": "openai:model-a", "base_url": first.url, "api_key": "k", "max_retries": 0},
            {"model": "openai:model-b", "base_url": second.url, "api_key": "k"},
        ]
        agent = lab.create_agent(id="chain", model=chain)
        assert agent.model_label == "openai:model-a → openai:model-b"
        first.reply(Reply(503, b'{"error": {"message": "down"}}'), Reply(503, b"{}"))
        second.reply(Reply(body=ANSWER), Reply(body=ANSWER))
        for _ in range(2):
            result = await agent.run(user="hi").result
            assert result.text == "from b"
        assert agent.harness() is agent.harness()  # one chain, reused
        events = await lab.run_store.events(result.run_id)
        (end,) = [e for e in events if e["type"] == "model_call_finished"]
        assert end["data"]["model"] == "openai:model-b"
        assert len(first.requests) == len(second.requests) == 2
        # A run naming one model replaces the chain for that run.
        second.reply(Reply(body=ANSWER))
        one = {"model": "openai:model-b", "base_url": second.url, "api_key": "k"}
        assert (await agent.run(user="hi", model=one).result).text == "from b"
        assert len(first.requests) == 2
    finally:
        await lab.aclose()
        await first.stop()
        await second.stop()


@pytest.mark.parametrize(
    ("model", "message"),
    [
        (["openai:a"], "takes at least two models, got 1"),
        (["openai:a", ["openai:b", "openai:c"]], "model[1] is a list: fallback chains do not nest"),
        (["openai:a", 3], "model[1]"),
        (["openai:a", "nope"], "model[1]"),
    ],
)
def test_bad_chains_are_refused_at_definition(model: Any, message: str) -> None:
    from tether.errors import ConfigError

    lab = Runtime(store="memory", version=False)
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        lab.create_agent(id="chain", model=model)


async def test_a_config_without_a_model_cannot_apply_to_a_chain() -> None:
    from tether.errors import ConfigError

    lab = Runtime(store="memory", version=False)
    agent = lab.create_agent(id="chain", model=["openai:a", "openai:b"])
    with pytest.raises(ConfigError, match="cannot apply to a fallback chain"):
        agent.run(user="hi", model={"base_url": "http://x"})
    await lab.aclose()
