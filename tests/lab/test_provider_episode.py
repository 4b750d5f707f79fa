"""An episode through a real provider adapter: OpenAI Chat Completions over HTTP against a
loopback server that replays recorded provider streams."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pydantic
import pytest
from tests.helpers import texts

from tether import define_tool
from tether.errors import LLMHTTPError
from tether.lab import Runtime

FIXTURES = (
    Path(os.environ.get("TETHER_SHARED_DIR") or Path(__file__).resolve().parents[3] / "shared")
    / "fixtures"
    / "providers"
    / "openai_chat"
)


def recorded(case: str) -> bytes:
    path = FIXTURES / f"{case}.sse"
    if not path.is_file():
        pytest.skip(f"provider wire fixtures not found at {FIXTURES} (a clone without ../shared)")
    return path.read_bytes()


def text_stream(text: str) -> bytes:
    """A Chat Completions stream in the recorded shape, carrying `text`."""
    chunks = [
        {
            "choices": [
                {"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}
            ]
        },
        {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}},
    ]
    body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    return body.encode()


@dataclass
class Loopback:
    """Answers each POST with the next queued (status, body); records the JSON bodies."""

    replies: list[tuple[int, bytes]] = field(default_factory=list)
    bodies: list[dict[str, Any]] = field(default_factory=list)
    url: str = ""

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = 0
        for line in head.decode("latin-1").split("\r\n")[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value)
        self.bodies.append(json.loads(await reader.readexactly(length)))
        status, body = self.replies.pop(0) if self.replies else (500, b"{}")
        kind = b"text/event-stream" if status == 200 else b"application/json"
        writer.write(
            b"HTTP/1.1 %d X\r\ncontent-type: %s\r\ncontent-length: %d\r\nconnection: close\r\n\r\n"
            % (status, kind, len(body))
            + body
        )
        await writer.drain()
        writer.close()


@pytest.fixture
async def server() -> AsyncIterator[Loopback]:
    loopback = Loopback()
    srv = await asyncio.start_server(loopback.handle, "127.0.0.1", 0)
    loopback.url = f"http://127.0.0.1:{srv.sockets[0].getsockname()[1]}/v1"
    yield loopback
    srv.close()
    await srv.wait_closed()


def model(server: Loopback) -> dict[str, Any]:
    return {
        "model": "openai:gpt-4o",
        "base_url": server.url,
        "api_key": "sk-test",
    }


async def test_a_tool_episode_over_the_openai_adapter_is_persisted(
    lab: Runtime, server: Loopback
) -> None:
    server.replies = [(200, recorded("sdk_tool_call")), (200, recorded("sdk_text"))]
    cities: list[str] = []

    def get_weather(value: dict[str, str]) -> str:
        cities.append(value["city"])
        return "Sunny, 22 C"

    weather = define_tool(
        name="get_weather",
        description="Current weather",
        input_schema={"type": "object", "properties": {"city": {"type": "string"}}},
        execute=get_weather,
    )
    agent = lab.create_agent(
        id="forecaster", system_prompt="You report weather.", model=model(server), tools=[weather]
    )
    result = await agent.run(memory_scope="w", user="Weather in NYC?").result
    assert cities == ["New York City"]
    assert result.text.startswith("I'm unable to provide real-time weather updates.")
    assert result.turns == 2
    assert result.usage["input_tokens"] == 44 + result.steps[1].usage["input_tokens"]
    first, second = server.bodies
    assert first["messages"] == [
        {"role": "system", "content": "You report weather."},
        {"role": "user", "content": "Weather in NYC?"},
    ]
    assert [t["function"]["name"] for t in first["tools"]] == ["get_weather"]
    assert second["messages"][2]["tool_calls"][0]["id"] == "call_4XzlGBLtUe9dy3GVNV4jhq7h"
    assert second["messages"][3] == {
        "role": "tool",
        "tool_call_id": "call_4XzlGBLtUe9dy3GVNV4jhq7h",
        "content": "Sunny, 22 C",
    }
    assert texts(await lab.message_store.load("w")) == [
        ("system", "You report weather."),
        ("user", "Weather in NYC?"),
        ("assistant", "<call get_weather>"),
        ("tool", "<result Sunny, 22 C>"),
        ("assistant", result.text),
    ]


class Forecast(pydantic.BaseModel):
    city: str
    sky: str


async def test_structured_output_sends_the_json_schema_response_format(
    lab: Runtime, server: Loopback
) -> None:
    server.replies = [(200, text_stream('{"city": "Oslo", "sky": "clear"}'))]
    agent = lab.create_agent(id="f", model=model(server), output_schema=Forecast)
    result = await agent.run(user="Oslo?").result
    assert result.output == Forecast(city="Oslo", sky="clear")
    fmt = server.bodies[0]["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["name"] == "Forecast"
    assert fmt["json_schema"]["schema"]["required"] == ["city", "sky"]


async def test_max_retries_on_the_call_wins_over_the_agent_including_zero(
    lab: Runtime, server: Loopback
) -> None:
    overloaded = (503, b'{"error": {"message": "overloaded"}}')
    server.replies = [overloaded]
    agent = lab.create_agent(id="f", model=model(server), max_retries=3)
    with pytest.raises(LLMHTTPError) as info:
        await agent.run(user="q", max_retries=0).result
    assert info.value.status == 503
    assert len(server.bodies) == 1

    server.replies = [overloaded, (200, text_stream("second try"))]
    strict = lab.create_agent(id="g", model=model(server), max_retries=0)
    result = await strict.run(user="q", max_retries=1).result
    assert result.text == "second try"
    assert len(server.bodies) == 3

    server.replies = [overloaded, (200, text_stream("agent default"))]
    assert (await agent.run(user="q").result).text == "agent default"
