"""An example agent: a weather assistant with one tool, a cached identity layer and a
per-turn context layer.

With ANTHROPIC_API_KEY, OPENAI_API_KEY or GEMINI_API_KEY in the environment it talks to that
provider; without one it says so and runs on tether's scripted client, which plays a fixed
two-round conversation (a tool call, then an answer) so the whole loop still runs.

    python examples/weather_agent.py ["question"]
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import sys
from typing import Any

from tether import Session, create_agent, prompt_layer, reduce, tool
from tether.testing import script_client

CITIES = {"oslo": (4.0, "light rain"), "lisbon": (19.0, "sunny"), "tokyo": (12.5, "cloudy")}


@tool
def get_weather(city: str) -> dict[str, Any]:
    """Current weather for a city (demo data for Oslo, Lisbon and Tokyo)."""
    found = CITIES.get(city.strip().lower())
    if found is None:
        return {"city": city, "error": "no data for this city; try Oslo, Lisbon or Tokyo"}
    return {"city": city, "celsius": found[0], "sky": found[1]}


def choose_llm() -> tuple[Any, str]:
    if os.environ.get("ANTHROPIC_API_KEY"):
        return {"model": "anthropic:claude-sonnet-4-5"}, "Anthropic (claude-sonnet-4-5)"
    if os.environ.get("OPENAI_API_KEY"):
        return {"model": "openai:gpt-4o-mini"}, "OpenAI (gpt-4o-mini)"
    if os.environ.get("GEMINI_API_KEY") or os.environ.get("GOOGLE_API_KEY"):
        return {"model": "gemini:gemini-2.5-flash"}, "Gemini (gemini-2.5-flash)"
    scripted = script_client(
        [
            {
                "text": "Let me check. ",
                "tool_use": [{"name": "get_weather", "input": {"city": "Oslo"}}],
            },
            {"text": ["It is 4 °C ", "with light rain ", "in Oslo: take an umbrella."]},
        ]
    )
    return scripted, "the SCRIPTED demo client (no provider key found in the environment)"


async def main(question: str) -> None:
    llm, label = choose_llm()
    print(f"tether example: using {label}\n")
    agent = create_agent(
        llm=llm,
        prompt=[
            prompt_layer("identity", "You are a concise weather assistant.", cache=True),
            prompt_layer("now", lambda: f"Current time: {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M}Z"),
        ],
        tools=[get_weather],
        max_tool_rounds=4,
    )
    session = Session()
    print(f"> {question}")
    async with agent:
        async for event in agent.send(session, question):
            session = reduce(session, event)
            kind = event["type"]
            if kind == "text":
                print(event["text"], end="", flush=True)
            elif kind == "tool_use":
                print(f"\n[tool] {event['name']}({event['input']})")
            elif kind == "tool_result":
                print(f"[result{' (error)' if event.get('is_error') else ''}] {event['output']}")
            elif kind == "done":
                print(f"\n\n[done] stop_reason={event['stop_reason']} usage={event['usage']}")
            elif kind == "error":
                print(f"\n[error] {event['error']}")
                raise SystemExit(1)
    print(f"[session] {len(session.messages)} messages, {len(session.to_json())} bytes of JSON")


if __name__ == "__main__":
    asyncio.run(main(" ".join(sys.argv[1:]) or "What's the weather in Oslo?"))
