"""`Runtime.create_agent`, `Runtime(defaults=...)` and per-run overrides: typed parameters,
errors that name the parameter and say where a misplaced key goes, the two aliases, and the
precedence run > agent > runtime defaults (model config and settings merged key by key)."""

from __future__ import annotations

from typing import Any

import pytest

import tether.lab._host as host_module
from tether import define_guardrail, define_tool
from tether.errors import ConfigError
from tether.lab import Runtime
from tether.testing import ScriptClient

from .conftest import scripted


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"tools": "search"}, r"tools= takes a list of tools.*; got str 'search'"),
        ({"guardrails": [print]}, r"guardrails\[0\] must be a Guardrail"),
        ({"resources": "notes"}, r"resources= takes a list of a Resource"),
        ({"integrations": ["https://x"]}, r"integrations\[0\] must be an MCP source"),
        ({"services": ["db"]}, r"services= takes a dict of named services"),
        ({"trace": "yes"}, r"trace= takes True, False or a sink function"),
        ({"max_tool_rounds": 0}, r"max_tool_rounds= takes an integer >= 1, or None"),
        ({"max_retries": -1}, r"max_retries= takes an integer >= 0; got int -1"),
        ({"stop_when": 20}, r"stop_when= takes a stop condition"),
        ({"system_prompt": 42}, r"system_prompt= takes a string, a PromptLayer, a Template"),
        (
            {"model": 42},
            r"model= takes a 'provider:model' string, a model-config dict or an LLMClient",
        ),
        ({"settings": {"temprature": 0.2}}, r"unknown setting 'temprature' \(did you mean "),
        ({"settings": {"base_url": "x"}}, r"'base_url' is a model-config key: it goes inside"),
        ({"model": {"temperature": 0.2}}, r"'temperature' is a model setting.*settings="),
        ({"model": "a:b", "llm": "c:d"}, r"llm= is another name for model=; give only one"),
        ({"prompt": "x", "system_prompt": "y"}, r"prompt= is another name for system_prompt="),
        ({"max_tool_round": 3}, r"unknown key 'max_tool_round' \(did you mean 'max_tool_rounds'"),
        ({"base_url": "http://x"}, r"'base_url' is a model-config key: it goes inside model="),
        ({"temperature": 0.2}, r"'temperature' is a model setting: it goes inside settings="),
    ],
)
def test_a_wrong_part_is_a_config_error_naming_the_parameter(
    kwargs: dict[str, Any], message: str
) -> None:
    lab = Runtime(store="memory", version=False, defaults={"model": scripted()})
    with pytest.raises(ConfigError, match=message) as caught:
        lab.create_agent(id="a", **kwargs)
    if "model" not in kwargs and "llm" not in kwargs and "prompt" not in kwargs:
        assert "agent 'a'" in str(caught.value) or "create_agent" in str(caught.value)


@pytest.mark.parametrize(
    ("defaults", "message"),
    [
        (
            {"base_url": "http://localhost:8000/v1"},
            r"'base_url' is a model-config key: it goes "
            r"inside model=\{\.\.\.\}, e\.g\. model=\{'model': 'openai:gpt-4o', 'base_url'",
        ),
        ({"temperature": 0.2}, r"'temperature' is a model setting: it goes inside settings="),
        ({"id": "x"}, r"'id' names one agent"),
        (
            {"max_tool_rounds": "8"},
            r"Runtime\(defaults=\.\.\.\): max_tool_rounds= takes an integer",
        ),
    ],
)
def test_runtime_defaults_take_the_agent_keys_and_say_where_others_go(
    defaults: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        Runtime(store="memory", version=False, defaults=defaults)


def test_the_aliases_are_the_canonical_parameters() -> None:
    lab = Runtime(store="memory", version=False)
    client = scripted()
    agent = lab.create_agent(id="a", llm=client, prompt="You are terse.")
    assert agent.model is client
    assert agent.render_system_prompt() == "You are terse."
    assert agent.system_prompt == "You are terse."


async def test_defaults_fill_what_the_agent_does_not_set_and_the_agent_wins(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    built: list[dict[str, Any]] = []

    def fake(config: dict[str, Any]) -> ScriptClient:
        built.append(dict(config))
        return ScriptClient([{"text": "ok"}] * 8, model=config["model"])

    monkeypatch.setattr(host_module, "client_from_config", fake)
    guard = define_guardrail(name="g", output=lambda text: None)
    lab = Runtime(
        store="memory",
        version=False,
        defaults={
            "model": {"model": "openai:gpt-4o", "base_url": "http://proxy/v1", "idle_timeout": 30},
            "settings": {"temperature": 0.2, "max_tokens": 100},
            "guardrails": [guard],
            "max_tool_rounds": 4,
            "services": {"db": "default-db", "cache": "default-cache"},
        },
    )
    plain = lab.create_agent(id="plain")
    tuned = lab.create_agent(
        id="tuned",
        model={"model": "openai:gpt-4o-mini", "idle_timeout": 5},
        settings={"temperature": 0.9},
        max_tool_rounds=2,
        services={"db": "tuned-db"},
    )
    assert plain.guardrails == [guard] and plain.max_tool_rounds == 4
    assert plain.settings == {"temperature": 0.2, "max_tokens": 100}
    assert tuned.settings == {"temperature": 0.9, "max_tokens": 100}
    assert tuned.max_tool_rounds == 2
    assert tuned.definition.services == {"db": "tuned-db", "cache": "default-cache"}
    assert tuned.model_label == "openai:gpt-4o-mini"
    await plain.run(user="1").result
    await tuned.run(user="2").result
    # A run's model merges over the agent's, key by key; max_retries joins the config.
    await tuned.run(user="3", model={"total_timeout": 60}, max_retries=1).result
    await tuned.run(user="4", llm="openai:o4-mini").result
    assert built == [
        {"model": "openai:gpt-4o", "base_url": "http://proxy/v1", "idle_timeout": 30},
        {"model": "openai:gpt-4o-mini", "base_url": "http://proxy/v1", "idle_timeout": 5},
        {
            "model": "openai:gpt-4o-mini",
            "base_url": "http://proxy/v1",
            "idle_timeout": 5,
            "total_timeout": 60,
            "max_retries": 1,
        },
        {"model": "openai:o4-mini", "base_url": "http://proxy/v1", "idle_timeout": 5},
    ]
    await lab.aclose()


async def test_a_run_may_use_another_model_client_for_one_episode() -> None:
    lab = Runtime(store="memory", version=False)
    own, other = scripted({"text": "own"}), scripted({"text": "other"})
    agent = lab.create_agent(id="a", model=own, tools=[define_tool(name="t", execute=print)])
    assert (await agent.run(user="x", model=other).result).text == "other"
    assert (await agent.run(user="y").result).text == "own"
    with pytest.raises(ConfigError, match="cannot apply to a client object"):
        agent.run(user="z", model={"base_url": "http://x"})
    await lab.aclose()


def test_a_typo_in_a_run_option_names_the_options() -> None:
    lab = Runtime(store="memory", version=False)
    agent = lab.create_agent(id="a", model=scripted())
    with pytest.raises(ConfigError, match=r"unknown run option\(s\) \['setting'\]; the options"):
        agent.run(user="x", setting={"temperature": 1})  # type: ignore[call-overload]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"model": "gpt-4o"}, r"agent 'a': model= must be 'provider:model'.*got 'gpt-4o'"),
        ({"llm": "opnai:gpt-4o"}, r"llm= names an unknown provider 'opnai'"),
        ({"model": {"model": "gpt-4o"}}, r"model\['model'\] must be 'provider:model'"),
    ],
)
def test_a_bad_model_string_is_refused_when_the_agent_is_defined(
    kwargs: dict[str, Any], message: str
) -> None:
    lab = Runtime(store="memory", version=False)
    with pytest.raises(ConfigError, match=message) as caught:
        lab.create_agent(id="a", **kwargs)
    assert "llm.model" not in str(caught.value)


async def test_a_model_of_another_provider_drops_the_base_url_written_for_the_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    built: list[dict[str, Any]] = []

    def fake(config: dict[str, Any]) -> ScriptClient:
        built.append(dict(config))
        return ScriptClient([{"text": "ok"}] * 4, model=config["model"])

    monkeypatch.setattr(host_module, "client_from_config", fake)
    lab = Runtime(store="memory", version=False)
    local = {
        "model": "openai:llama3",
        "base_url": "http://localhost:11434/v1",
        "api_key": "ollama",
        "headers": {"x-proxy": "1"},
        "idle_timeout": 5,
    }
    agent = lab.create_agent(id="a", model=local)
    await agent.run(user="1", model="anthropic:claude-sonnet-4-5").result
    await agent.run(user="2", model="openai:qwen").result
    assert built == [
        {"model": "anthropic:claude-sonnet-4-5", "idle_timeout": 5},
        {**local, "model": "openai:qwen"},
    ]
    await lab.aclose()
