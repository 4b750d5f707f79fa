"""The run recorder's model calls: timestamps and time to first token, the request at each
recording level (secrets masked, size capped), and cost per call and per run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tether import define_tool
from tether.errors import ConfigError
from tether.lab import Runtime
from tether.lab._recorder import REQUEST_CAP, _capped, _mask, _request_record
from tether.pricing import cost

from .conftest import scripted
from .test_provider_episode import Loopback, model, recorded, server, text_stream  # noqa: F401


def of(events: list[Any], kind: str) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == kind]


async def test_each_model_call_is_recorded_with_its_times(lab: Runtime) -> None:
    add = define_tool(name="add", description="Add", execute=lambda v: v["a"] + v["b"])
    agent = lab.create_agent(
        id="calc",
        system_prompt="Add.",
        tools=[add],
        model=scripted(
            {
                "tool_use": [{"name": "add", "input": {"a": 1, "b": 2}}],
                "usage": {"input_tokens": 10, "output_tokens": 3},
            },
            {"text": ["The sum ", "is 3."], "usage": {"input_tokens": 14, "output_tokens": 4}},
        ),
    )
    result = await agent.run(user="1+2?").result
    events = await lab.run_store.events(result.run_id)
    starts, ends = of(events, "model_call_started"), of(events, "model_call_finished")
    assert [e["data"]["call"] for e in starts] == [1, 2] == [e["data"]["call"] for e in ends]
    for start, end in zip(starts, ends, strict=True):
        assert start["at"] <= end["at"]
        data = end["data"]
        assert 0 <= data["first_token_s"] <= data["duration_s"]
        assert data["model"] == "script" and data["cost_usd"] is None  # no price: no number
    assert ends[0]["data"]["tool_calls"] == 1 and ends[1]["data"]["tool_calls"] == 0
    assert ends[1]["data"]["usage"] == {"input_tokens": 14, "output_tokens": 4}
    # The tool ran between the two calls, and says when it began.
    [tool] = of(events, "agent_tool_result")
    assert ends[0]["at"] <= tool["data"]["started_at"] <= tool["at"] <= starts[1]["at"]
    info = await lab.run_store.get_run(result.run_id)
    assert info is not None
    assert info.usage == {"input_tokens": 24, "output_tokens": 7} and info.cost_usd is None
    assert info.input_text == "1+2?" and info.output_text == "The sum is 3."


async def test_the_recording_levels(lab: Runtime) -> None:
    lookup = define_tool(
        name="lookup",
        description="Look up",
        input_schema={"type": "object", "properties": {"q": {"type": "string"}}},
        execute=lambda v: "found",
    )
    requests: dict[str, Any] = {}
    for level in ("off", "metadata", "full"):
        agent = lab.create_agent(
            id=f"a-{level}",
            system_prompt="You look things up.",
            tools=[lookup],
            recording=level,
            model=scripted({"text": "ok"}),
        )
        result = await agent.run(user="find <b>it</b>").result
        [start] = of(await lab.run_store.events(result.run_id), "model_call_started")
        requests[level] = start["data"].get("request")
    assert requests["off"] is None
    meta = requests["metadata"]
    assert meta["system"] == [{"chars": len("You look things up."), "cache": False}]
    assert meta["tools"] == ["lookup"]
    assert meta["messages"] == {"count": 1, "roles": {"user": 1}}
    assert "find" not in json.dumps(meta)  # no content at the metadata level
    full = requests["full"]
    assert full["system"] == [{"type": "text", "text": "You look things up."}]
    assert full["tools"][0]["name"] == "lookup"
    assert full["tools"][0]["input_schema"]["properties"] == {"q": {"type": "string"}}
    assert full["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "find <b>it</b>"}]}
    ]
    with pytest.raises(ConfigError, match="recording must be one of"):
        lab.create_agent(id="bad", recording="everything", model=scripted())  # type: ignore[call-overload]


def test_secrets_are_masked_and_a_request_is_capped() -> None:
    masked = _mask(
        {"settings": {"api_key": "k", "max_tokens": 5, "x-api-key": "k", "auth_token": "t"},
         "text": "my key is sk-live-123456789 ok"},
        ["sk-live-123456789"],
    )  # fmt: skip
    assert masked == {
        "settings": {"api_key": "[redacted]", "max_tokens": 5, "x-api-key": "[redacted]",
                     "auth_token": "[redacted]"},
        "text": "my key is [redacted] ok",
    }  # fmt: skip
    big = {
        "level": "full",
        "system": [{"type": "text", "text": "S"}],
        "tools": [],
        "messages": [{"role": "user", "content": [{"type": "text", "text": f"{i} " + "x" * 999}]}
                     for i in range(400)],
        "settings": {},
    }  # fmt: skip
    capped = _capped(big)
    assert len(json.dumps(capped)) <= REQUEST_CAP
    assert capped["omitted_messages"] > 0
    # The newest messages are the ones kept.
    assert capped["messages"][-1]["content"][0]["text"].startswith("399 ")
    assert len(capped["messages"]) + capped["omitted_messages"] == 400


async def test_cost_per_call_and_per_run_over_a_real_adapter(
    server: Loopback,  # noqa: F811
) -> None:
    # A local OpenAI-compatible server is not OpenAI: its calls are priced only by an override.
    prices = {"openai:gpt-4o": {"input_mtok": 2.5, "output_mtok": 10.0, "cache_read_mtok": 1.25}}
    lab = Runtime(store="memory", version=False, prices=prices)
    server.replies = [(200, recorded("sdk_tool_call")), (200, recorded("sdk_text"))]
    weather = define_tool(
        name="get_weather",
        description="Current weather",
        input_schema={"type": "object", "properties": {"city": {"type": "string"}}},
        execute=lambda v: "Sunny",
    )
    agent = lab.create_agent(
        id="forecaster", model=model(server), tools=[weather], recording="full"
    )
    result = await agent.run(user="Weather in Paris?").result
    events = await lab.run_store.events(result.run_id)
    ends = of(events, "model_call_finished")
    assert len(ends) == 2
    total = 0.0
    for end in ends:
        data = end["data"]
        expected = cost(data["usage"], "openai:gpt-4o", overrides=prices)  # type: ignore[arg-type]
        assert expected is not None and data["cost_usd"] == float(expected) > 0
        assert data["model"] == "openai:gpt-4o"
        total += data["cost_usd"]
    info = await lab.run_store.get_run(result.run_id)
    assert info is not None and info.cost_usd == pytest.approx(total)
    finished = of(events, "agent_finished")[0]["data"]
    assert finished["cost_usd"] == pytest.approx(total)
    # The API key reached the server, and appears nowhere in what was recorded.
    assert "sk-test" not in json.dumps(events)
    await lab.aclose()


async def test_a_call_through_a_gateway_is_priced_as_its_provider(
    server: Loopback,  # noqa: F811
) -> None:
    # The loopback server stands for a corporate gateway or a LiteLLM proxy in front of OpenAI.
    lab = Runtime(store="memory", version=False)
    server.replies = [(200, text_stream("hi"))]
    agent = lab.create_agent(id="a", model={**model(server), "model": "openai:gpt-4o-mini"})
    result = await agent.run(user="hi").result
    [end] = of(await lab.run_store.events(result.run_id), "model_call_finished")
    expected = cost(end["data"]["usage"], "openai:gpt-4o-mini")
    assert expected is not None and end["data"]["cost_usd"] == float(expected) > 0
    assert "unpriced" not in end["data"]
    info = await lab.run_store.get_run(result.run_id)
    assert info is not None and info.cost_usd == float(expected)
    await lab.aclose()


async def test_pricing_false_leaves_a_self_hosted_servers_calls_unpriced(
    server: Loopback,  # noqa: F811
) -> None:
    lab = Runtime(store="memory", version=False)
    server.replies = [(200, text_stream("hi"))]
    agent = lab.create_agent(id="a", model={**model(server), "pricing": False})
    result = await agent.run(user="hi").result
    [end] = of(await lab.run_store.events(result.run_id), "model_call_finished")
    assert end["data"]["usage"] and end["data"]["cost_usd"] is None
    assert "pricing=False" in end["data"]["unpriced"]
    info = await lab.run_store.get_run(result.run_id)
    assert info is not None and info.usage and info.cost_usd is None
    await lab.aclose()


async def test_a_model_without_a_price_says_why(server: Loopback) -> None:  # noqa: F811
    lab = Runtime(store="memory", version=False)
    server.replies = [(200, text_stream("hi"))]
    agent = lab.create_agent(id="a", model={**model(server), "model": "openai:my-own-llama"})
    result = await agent.run(user="hi").result
    [end] = of(await lab.run_store.events(result.run_id), "model_call_finished")
    assert end["data"]["cost_usd"] is None
    assert "no price for 'my-own-llama'" in end["data"]["unpriced"]
    await lab.aclose()


def test_pricing_must_be_a_bool() -> None:
    with pytest.raises(ConfigError, match=r"model\['pricing'\]= takes True or False; got str"):
        Runtime(store="memory").create_agent(id="a", model={"model": "openai:m", "pricing": "no"})


def test_bad_price_overrides_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="missing"):
        Runtime(store="memory", prices={"m": {"input_mtok": 1}})


_PRICING_THREAD = """
import asyncio, sys, threading

import importlib.machinery

class Watch:
    # Notes the thread that runs genai-prices' module code (a find_spec alone is no import).
    seen = []
    def find_spec(self, name, path=None, target=None):
        if name != "genai_prices":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        run = spec.loader.exec_module
        def exec_module(module):
            Watch.seen.append(threading.current_thread().name)
            run(module)
        spec.loader.exec_module = exec_module
        return spec

sys.meta_path.insert(0, Watch())
from tether.lab import Runtime
from tether.testing import script_client

async def main():
    lab = Runtime(store="memory", version=False)
    # "gpt-4o-mini", a bare model id, asks genai-prices; "test" and "script" do not.
    model = sys.argv[1]
    if model in ("gpt-4o-mini", "script"):
        model = script_client([{"text": "ok", "usage": {"input_tokens": 1}}] * 4, model=model)
    agent = lab.create_agent(id="a", model=model)
    results = await asyncio.gather(*(agent.run(user=f"hi {i}").result for i in range(4)))
    assert all(r.text for r in results)
    await lab.aclose()
    print(",".join(Watch.seen))

asyncio.run(main())
"""


def _genai_prices_imported_by(tmp_path: Path, model: str) -> str:
    """The threads that imported genai-prices in a fresh interpreter running four concurrent
    runs on `model` (comma-separated; empty when none did)."""
    script = tmp_path / "pricing_thread.py"
    script.write_text(_PRICING_THREAD)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    done = subprocess.run(
        [sys.executable, str(script), model], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_price_data_is_loaded_off_the_event_loop(tmp_path: Path) -> None:
    # A fresh interpreter, where genai-prices is not imported yet: the first model calls of
    # concurrent runs must not import it on the event loop's thread.
    assert _genai_prices_imported_by(tmp_path, "gpt-4o-mini") == "tether-pricing"


def test_a_model_genai_prices_cannot_price_never_loads_its_data(tmp_path: Path) -> None:
    # The keyless test model ("test:echo": a provider genai-prices does not know): its runs
    # are unpriced without importing genai-prices (about 0.35 s of CPU) or waiting for it.
    assert _genai_prices_imported_by(tmp_path, "test") == ""
    # Nor the scripted client's default model id ("script": no price table has it).
    assert _genai_prices_imported_by(tmp_path, "script") == ""


def test_the_metadata_level_counts_messages_by_role_even_one_without_a_role() -> None:
    # The counts are what the UI shows of a request at this level; a message the harness did
    # not make (a client's own) may lack a role, and counts under None.
    messages: list[Any] = [
        {"role": "user", "content": []},
        {"role": "assistant", "content": []},
        {"role": "user", "content": []},
    ]
    record = _request_record({"messages": messages}, "metadata", [])
    assert record["messages"] == {"count": 3, "roles": {"user": 2, "assistant": 1}}
    messages.append({"content": []})
    record = _request_record({"messages": messages}, "metadata", [])
    assert record["messages"] == {"count": 4, "roles": {"user": 2, "assistant": 1, "None": 1}}
