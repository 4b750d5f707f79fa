"""Portable model settings on every provider's wire.

For each provider and each setting, the request body is compared with the body of the same
request without settings, and the difference is pinned here: a setting is either sent (the diff
says exactly where and how) or refused with a `ModelSettingError` naming the provider and the key.
Nothing is dropped silently. The whole body with every supported setting is also pinned byte for
byte (key order included) and checked on the wire of a loopback server."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tether.errors import ConfigError, ModelSettingError
from tether.llm._adapter import HTTPAdapter
from tether.llm.anthropic import AnthropicClient
from tether.llm.base import ChatRequest, ModelSettings
from tether.llm.gemini import GeminiClient
from tether.llm.openai_chat import OpenAIChatClient
from tether.llm.openai_responses import OpenAIResponsesClient

from .conftest import Reply, Seen, WireServer, check_pinned, run_chat, simple_request, sse

TOOLS: Any = [
    {"name": "lookup", "description": "Look a word up.", "input_schema": {"type": "object"}},
    {"name": "other", "description": "Something else.", "input_schema": {"type": "object"}},
]


def client(provider: str, base_url: str | None = None) -> HTTPAdapter:
    if provider == "anthropic":
        return AnthropicClient("m", api_key="k", base_url=base_url)
    if provider == "openai":
        return OpenAIChatClient("m", api_key="k", base_url=base_url and f"{base_url}/v1")
    if provider == "openai-responses":
        return OpenAIResponsesClient("m", api_key="k", base_url=base_url and f"{base_url}/v1")
    return GeminiClient("m", api_key="k", base_url=base_url and f"{base_url}/v1beta")


def request(settings: ModelSettings | None = None, *, tools: bool = True) -> ChatRequest:
    req = simple_request("m")
    if tools:
        req["tools"] = TOOLS
    if settings is not None:
        req["settings"] = settings
    return req


def leaves(value: Any, prefix: str = "") -> dict[str, Any]:
    """A JSON value as {dotted path: leaf}; lists are leaves."""
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for key, inner in value.items():
            out.update(leaves(inner, f"{prefix}.{key}" if prefix else key))
        return out
    return {prefix: value}


GONE = "<removed>"


def body_diff(provider: str, settings: ModelSettings, *, tools: bool = True) -> dict[str, Any]:
    adapter = client(provider)
    before = leaves(json.loads(adapter.encode(request(tools=tools))))
    after = leaves(json.loads(adapter.encode(request(settings, tools=tools))))
    diff = {k: v for k, v in after.items() if before.get(k, GONE) != v}
    diff.update({k: GONE for k in before if k not in after})
    return diff


SETTINGS: dict[str, ModelSettings] = {
    "temperature": {"temperature": 0.3},
    "max_tokens": {"max_tokens": 77},
    "top_p": {"top_p": 0.9},
    "stop": {"stop": ["END", "STOP"]},
    "seed": {"seed": 7},
    "tool_choice=auto": {"tool_choice": "auto"},
    "tool_choice=none": {"tool_choice": "none"},
    "tool_choice=required": {"tool_choice": "required"},
    "tool_choice=<name>": {"tool_choice": "lookup"},
    "parallel_tool_calls=True": {"parallel_tool_calls": True},
    "parallel_tool_calls=False": {"parallel_tool_calls": False},
    "reasoning.effort": {"reasoning": {"effort": "medium"}},
    "reasoning.budget_tokens": {"reasoning": {"budget_tokens": 2048}},
}


class Refused:
    def __init__(self, key: str) -> None:
        self.key = key


EXPECTED: dict[str, dict[str, dict[str, Any] | Refused]] = {
    "anthropic": {
        "temperature": {"temperature": 0.3},
        "max_tokens": {"max_tokens": 77},
        "top_p": {"top_p": 0.9},
        "stop": {"stop_sequences": ["END", "STOP"]},
        "seed": Refused("seed"),
        "tool_choice=auto": {"tool_choice.type": "auto"},
        "tool_choice=none": {"tool_choice.type": "none"},
        "tool_choice=required": {"tool_choice.type": "any"},
        "tool_choice=<name>": {"tool_choice.type": "tool", "tool_choice.name": "lookup"},
        "parallel_tool_calls=True": {
            "tool_choice.type": "auto",
            "tool_choice.disable_parallel_tool_use": False,
        },
        "parallel_tool_calls=False": {
            "tool_choice.type": "auto",
            "tool_choice.disable_parallel_tool_use": True,
        },
        "reasoning.effort": {"output_config.effort": "medium"},
        "reasoning.budget_tokens": {
            "thinking.type": "enabled",
            "thinking.budget_tokens": 2048,
        },
    },
    "openai": {
        "temperature": {"temperature": 0.3},
        "max_tokens": {"max_completion_tokens": 77},
        "top_p": {"top_p": 0.9},
        "stop": {"stop": ["END", "STOP"]},
        "seed": {"seed": 7},
        "tool_choice=auto": {"tool_choice": "auto"},
        "tool_choice=none": {"tool_choice": "none"},
        "tool_choice=required": {"tool_choice": "required"},
        "tool_choice=<name>": {
            "tool_choice.type": "function",
            "tool_choice.function.name": "lookup",
        },
        "parallel_tool_calls=True": {"parallel_tool_calls": True},
        "parallel_tool_calls=False": {"parallel_tool_calls": False},
        "reasoning.effort": {"reasoning_effort": "medium"},
        "reasoning.budget_tokens": Refused("reasoning.budget_tokens"),
    },
    "openai-responses": {
        "temperature": {"temperature": 0.3},
        "max_tokens": {"max_output_tokens": 77},
        "top_p": {"top_p": 0.9},
        "stop": Refused("stop"),
        "seed": Refused("seed"),
        "tool_choice=auto": {"tool_choice": "auto"},
        "tool_choice=none": {"tool_choice": "none"},
        "tool_choice=required": {"tool_choice": "required"},
        "tool_choice=<name>": {"tool_choice.type": "function", "tool_choice.name": "lookup"},
        "parallel_tool_calls=True": {"parallel_tool_calls": True},
        "parallel_tool_calls=False": {"parallel_tool_calls": False},
        "reasoning.effort": {"reasoning.effort": "medium"},
        "reasoning.budget_tokens": Refused("reasoning.budget_tokens"),
    },
    "gemini": {
        "temperature": {"generationConfig.temperature": 0.3},
        "max_tokens": {"generationConfig.maxOutputTokens": 77},
        "top_p": {"generationConfig.topP": 0.9},
        "stop": {"generationConfig.stopSequences": ["END", "STOP"]},
        "seed": {"generationConfig.seed": 7},
        "tool_choice=auto": {"toolConfig.functionCallingConfig.mode": "AUTO"},
        "tool_choice=none": {"toolConfig.functionCallingConfig.mode": "NONE"},
        "tool_choice=required": {"toolConfig.functionCallingConfig.mode": "ANY"},
        "tool_choice=<name>": {
            "toolConfig.functionCallingConfig.mode": "ANY",
            "toolConfig.functionCallingConfig.allowedFunctionNames": ["lookup"],
        },
        # Gemini may always make several calls at once: asking for that sends nothing, asking
        # for the opposite is refused.
        "parallel_tool_calls=True": {},
        "parallel_tool_calls=False": Refused("parallel_tool_calls"),
        "reasoning.effort": {"generationConfig.thinkingConfig.thinkingLevel": "medium"},
        "reasoning.budget_tokens": {"generationConfig.thinkingConfig.thinkingBudget": 2048},
    },
}

MATRIX = [(p, name) for p in EXPECTED for name in SETTINGS]


def test_the_matrix_covers_every_setting_on_every_provider() -> None:
    keys = {next(iter(s)) for s in SETTINGS.values()}
    assert keys == set(ModelSettings.__annotations__)
    assert all(set(cases) == set(SETTINGS) for cases in EXPECTED.values())


@pytest.mark.parametrize(("provider", "name"), MATRIX, ids=[f"{p}:{n}" for p, n in MATRIX])
def test_each_setting_changes_the_body_as_pinned_or_is_refused(provider: str, name: str) -> None:
    expected = EXPECTED[provider][name]
    if isinstance(expected, Refused):
        with pytest.raises(ModelSettingError) as info:
            client(provider).encode(request(SETTINGS[name]))
        err = info.value
        assert (err.provider, err.key) == (provider, expected.key)
        assert provider in str(err) and repr(expected.key) in str(err)
        assert isinstance(err, ConfigError)
        return
    assert body_diff(provider, SETTINGS[name]) == expected


ALL: dict[str, ModelSettings] = {
    "anthropic": {
        "temperature": 1,
        "max_tokens": 4000,
        "top_p": 0.96,
        "stop": ["END"],
        "tool_choice": "auto",
        "parallel_tool_calls": False,
        "reasoning": {"budget_tokens": 2048},
    },
    "openai": {
        "temperature": 0.3,
        "max_tokens": 77,
        "top_p": 0.9,
        "stop": ["END"],
        "seed": 7,
        "tool_choice": "lookup",
        "parallel_tool_calls": False,
        "reasoning": {"effort": "low"},
    },
    "openai-responses": {
        "temperature": 0.3,
        "max_tokens": 77,
        "top_p": 0.9,
        "tool_choice": "required",
        "parallel_tool_calls": False,
        "reasoning": {"effort": "high"},
    },
    "gemini": {
        "temperature": 0.3,
        "max_tokens": 77,
        "top_p": 0.9,
        "stop": ["END"],
        "seed": 7,
        "tool_choice": "lookup",
        "parallel_tool_calls": True,
        "reasoning": {"budget_tokens": 2048},
    },
}

REPLIES = {
    "anthropic": sse(
        ("message_start", {"type": "message_start", "message": {"usage": {}}}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"}}),
        ("message_stop", {"type": "message_stop"}),
    ),
    "openai": sse(
        (None, {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}), (None, "[DONE]")
    ),
    "openai-responses": sse(
        (
            "response.completed",
            {"type": "response.completed", "response": {"status": "completed"}},
        )
    ),
    "gemini": sse((None, {"candidates": [{"content": {"parts": []}, "finishReason": "STOP"}]})),
}


@pytest.mark.parametrize("provider", list(ALL))
async def test_every_supported_setting_reaches_the_wire_as_pinned(
    provider: str, wire: WireServer
) -> None:
    wire.reply(Reply(body=REPLIES[provider]))
    adapter = client(provider, wire.url)
    try:
        out = await run_chat(adapter, request(ALL[provider]))
    finally:
        await adapter.aclose()
    assert out.error is None
    seen: Seen = wire.requests[0]
    assert seen.body == adapter.encode(request(ALL[provider]))
    check_pinned(f"settings_{provider.replace('-', '_')}", seen)


# -- without tools, and the checks every provider shares ----------------------------------------


@pytest.mark.parametrize("provider", list(EXPECTED))
def test_tool_settings_need_tools_to_apply_to(provider: str) -> None:
    # A call without tools (the structured-output follow-up of a tool loop) has nothing to
    # choose from or parallelize; the provider would reject a tool_choice there.
    settings: ModelSettings = {"tool_choice": "required", "parallel_tool_calls": True}
    assert body_diff(provider, settings, tools=False) == {}


@pytest.mark.parametrize("provider", list(EXPECTED))
def test_an_unknown_or_mistyped_setting_is_refused(provider: str) -> None:
    adapter = client(provider)
    bad: list[tuple[dict[str, Any], str, str]] = [
        ({"temprature": 0.2}, "temprature", "unknown model setting"),
        ({"temperature": "hot"}, "temperature", "a number"),
        ({"temperature": True}, "temperature", "a number"),
        ({"max_tokens": 0}, "max_tokens", "a positive int"),
        ({"max_tokens": 1.5}, "max_tokens", "a positive int"),
        ({"stop": "END"}, "stop", "list"),
        ({"stop": []}, "stop", "list"),
        ({"seed": "1"}, "seed", "an int"),
        ({"tool_choice": 3}, "tool_choice", "a tool's name"),
        ({"parallel_tool_calls": "yes"}, "parallel_tool_calls", "a bool"),
        ({"reasoning": "high"}, "reasoning", "exactly one of"),
        ({"reasoning": {"effort": "max"}}, "reasoning.effort", "low, medium, high"),
        ({"reasoning": {"budget_tokens": -1}}, "reasoning.budget_tokens", "int >= 0"),
        (
            {"reasoning": {"effort": "low", "budget_tokens": 1024}},
            "reasoning",
            "exactly one of",
        ),
    ]
    for settings, key, words in bad:
        with pytest.raises(ModelSettingError, match=words) as info:
            adapter.encode(request(settings))  # type: ignore[arg-type]
        assert info.value.key == key and info.value.provider is None


@pytest.mark.parametrize("provider", list(EXPECTED))
def test_forcing_a_tool_the_request_does_not_declare(provider: str) -> None:
    with pytest.raises(ModelSettingError, match=r"'lookpu'.*lookup, other") as info:
        client(provider).encode(request({"tool_choice": "lookpu"}))
    assert info.value.provider == provider


def test_anthropic_thinking_budget_and_the_output_limit() -> None:
    adapter = AnthropicClient("m", api_key="k")  # default max_tokens 4096

    def body(settings: ModelSettings) -> dict[str, Any]:
        out: dict[str, Any] = json.loads(adapter.encode(request(settings)))
        return out

    # A budget above the default limit raises the limit so there is room for the answer.
    assert body({"reasoning": {"budget_tokens": 8000}})["max_tokens"] == 8000 + 4096
    assert body({"reasoning": {"budget_tokens": 2048}})["max_tokens"] == 4096
    with pytest.raises(ModelSettingError, match="must be below") as info:
        body({"reasoning": {"budget_tokens": 2048}, "max_tokens": 2048})
    assert info.value.key == "reasoning.budget_tokens"
    with pytest.raises(ModelSettingError, match="at least 1024"):
        body({"reasoning": {"budget_tokens": 512}})
    # What the API refuses beside extended thinking is refused before the request.
    thinking: ModelSettings = {"reasoning": {"budget_tokens": 2048}}
    for extra, key in [
        ({"temperature": 0.2}, "temperature"),
        ({"top_p": 0.5}, "top_p"),
        ({"tool_choice": "required"}, "tool_choice"),
        ({"tool_choice": "lookup"}, "tool_choice"),
    ]:
        with pytest.raises(ModelSettingError, match="extended thinking") as info:
            body({**thinking, **extra})
        assert (info.value.provider, info.value.key) == ("anthropic", key)
    assert body({**thinking, "temperature": 1, "top_p": 0.95})["temperature"] == 1
    # Effort and a structured answer share output_config.
    both = request({"reasoning": {"effort": "low"}})
    both["response_format"] = {"name": "a", "schema": {"type": "object"}}
    assert json.loads(adapter.encode(both))["output_config"] == {
        "effort": "low",
        "format": {"type": "json_schema", "schema": {"type": "object"}},
    }


def test_extra_body_stays_the_escape_hatch_and_wins() -> None:
    adapter = OpenAIChatClient(
        "m", api_key="k", extra_body={"reasoning_effort": "minimal", "top_k": 20}
    )
    body = json.loads(adapter.encode(request({"reasoning": {"effort": "low"}})))
    assert (body["reasoning_effort"], body["top_k"]) == ("minimal", 20)


@pytest.mark.parametrize("provider", list(EXPECTED))
def test_settings_can_be_checked_before_any_request(provider: str) -> None:
    adapter = client(provider)
    adapter.validate_settings({"temperature": 0.1, "tool_choice": "lookup"}, tools=["lookup"])
    refused = [
        (name, expected.key)
        for name, expected in EXPECTED[provider].items()
        if isinstance(expected, Refused)
    ]
    for name, key in refused:
        with pytest.raises(ModelSettingError) as info:
            adapter.validate_settings(SETTINGS[name], tools=["lookup", "other"])
        assert info.value.key == key
    with pytest.raises(ModelSettingError, match="unknown model setting"):
        adapter.validate_settings({"temp": 1})  # type: ignore[typeddict-unknown-key]
    with pytest.raises(ModelSettingError, match="'nope'"):
        adapter.validate_settings({"tool_choice": "nope"}, tools=["lookup"])


def test_check_settings_is_public() -> None:
    from tether.llm import SETTING_KEYS, check_settings

    check_settings({"temperature": 1, "reasoning": {"effort": "low"}})
    assert set(SETTING_KEYS) == set(ModelSettings.__annotations__)
    with pytest.raises(ModelSettingError):
        check_settings({"temperature": "x"})


# -- through an agent: its settings, a run's overlay, and the finish reason on done -----------------


@pytest.mark.parametrize("provider", list(ALL))
async def test_agent_settings_and_a_runs_overlay_reach_the_wire(
    provider: str, wire: WireServer
) -> None:
    from tether import Session, create_agent

    from .conftest import run_turn

    wire.reply(Reply(body=REPLIES[provider]), Reply(body=REPLIES[provider]))
    suffix = {"anthropic": "", "gemini": "/v1beta"}.get(provider, "/v1")
    agent = create_agent(
        model={"model": f"{provider}:m", "base_url": wire.url + suffix, "api_key": "k"},
        system_prompt="Be brief.",
        settings={"temperature": 0.5, "max_tokens": 100},
    )
    async with agent:
        first = await run_turn(agent, Session(id="a"), "hi")
        events: list[Any] = []
        async for event in agent.send(Session(id="b"), "hi", settings={"max_tokens": 50}):
            events.append(event)
    assert first[-1]["type"] == "done" and first[-1]["finish_reason"] == "stop"
    assert events[-1]["type"] == "done"
    one, two = (leaves(r.json()) for r in wire.requests)
    temperature = {"gemini": "generationConfig.temperature"}.get(provider, "temperature")
    limit = {
        "anthropic": "max_tokens",
        "openai": "max_completion_tokens",
        "openai-responses": "max_output_tokens",
        "gemini": "generationConfig.maxOutputTokens",
    }[provider]
    assert (one[temperature], one[limit]) == (0.5, 100)
    assert (two[temperature], two[limit]) == (0.5, 50)  # the run wins, key by key
