"""The keyless test model: `model="test"` (echo), `test:echo`, `test:tools`, wherever a model
string goes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tether import create_agent, reduce, tool
from tether.errors import ConfigError, UnknownProviderError
from tether.lab import Runtime
from tether.llm import client_from_config, model_problem
from tether.llm.test import TestModel, example_value


async def _turn(model: str, text: str, **options: Any) -> tuple[str, list[dict[str, Any]]]:
    agent = create_agent(model=model, **options)
    session = agent.create_session()
    streamed: list[str] = []
    async for event in agent.send(session, text):
        session = reduce(session, event)
        if event["type"] == "text":
            streamed.append(event["text"])
    final = session.messages[-1]
    assert final["role"] == "assistant"
    answer = "".join(p["text"] for p in final["content"] if p["type"] == "text")
    assert "".join(streamed) == answer  # streamed as it is stored
    return answer, [dict(m) for m in session.messages]


async def test_test_and_test_echo_answer_with_the_user_message() -> None:
    for model in ("test", "test:echo"):
        answer, messages = await _turn(model, "hello there, model")
        assert answer == "hello there, model"
        assert [m["role"] for m in messages] == ["user", "assistant"]


async def test_test_tools_calls_each_tool_once_with_arguments_from_its_schema() -> None:
    seen: list[tuple[str, Any]] = []

    def add(a: int, b: int) -> int:
        """Add two numbers."""
        seen.append(("add", (a, b)))
        return a + b

    def shout(text: str, times: int = 2) -> str:
        """Shout some text."""
        seen.append(("shout", (text, times)))
        return text.upper() * times

    tools = [tool(add), tool(shout)]
    answer, messages = await _turn("test:tools", "go", tools=tools)
    assert seen == [("add", (0, 0)), ("shout", ("a", 2))]
    assert json.loads(answer) == {"add": "0", "shout": "AA"}  # the outputs as the model saw them
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]


async def test_test_tools_without_tools_echoes() -> None:
    answer, _ = await _turn("test:tools", "nothing to call")
    assert answer == "nothing to call"


def test_structured_output_is_made_from_the_schema() -> None:
    schema = {
        "type": "object",
        "properties": {
            "title": {"type": "string", "minLength": 3},
            "tags": {"type": "array", "items": {"type": "string"}},
            "kind": {"enum": ["note", "todo"]},
            "score": {"type": "number", "minimum": 1.5},
            "done": {"type": "boolean"},
            "owner": {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/Owner"}]},
        },
        "required": ["title"],
        "$defs": {"Owner": {"type": "object", "properties": {"id": {"type": "integer"}}}},
    }
    assert example_value(schema) == {
        "title": "aaa",
        "tags": ["a"],
        "kind": "note",
        "score": 1.5,
        "done": False,
        "owner": {"id": 0},
    }


async def test_a_lab_agent_runs_on_the_test_model_with_structured_output() -> None:
    from pydantic import BaseModel

    class Summary(BaseModel):
        title: str
        points: list[str]

    lab = Runtime(store="memory", version=False)
    agent = lab.create_agent(id="s", model="test", output_schema=Summary)
    result = await agent.run(user="summarize").result
    assert result.output == Summary(title="a", points=["a"])
    plain = lab.create_agent(id="p", model="test:echo")
    assert (await plain.run(user="ping").result).text == "ping"
    await lab.aclose()


def test_an_unknown_test_mode_names_the_modes() -> None:
    with pytest.raises(ConfigError, match=r"unknown test model 'test:loud'.*test:echo, test:tools"):
        client_from_config("test:loud")


def test_the_test_model_takes_a_real_models_config_keys() -> None:
    client = client_from_config({"model": "test", "base_url": "http://x/v1", "idle_timeout": 5})
    assert isinstance(client, TestModel) and client.model == "echo"


def test_model_problem_accepts_test_and_known_providers_only() -> None:
    assert model_problem("test") is None
    assert model_problem("test:tools") is None
    assert model_problem("openai:gpt-4o") is None
    assert "must be 'provider:model'" in str(model_problem("gpt-4o"))
    assert "unknown provider 'opnai'" in str(model_problem("opnai:gpt-4o"))
    with pytest.raises(UnknownProviderError, match="must be 'provider:model'"):
        client_from_config("gpt-4o")
