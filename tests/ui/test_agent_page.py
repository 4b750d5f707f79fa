"""The agent page shows every part a lab agent runs with: its MCP servers with the tools each
offers (asked just now, over stdio from the official SDK's server), its guardrails, prompt
layers, resources, limits and tracing; a server that cannot be reached says why."""

from __future__ import annotations

import sys

import pytest
from tests.weather_mcp_server import COMMAND

from tether import define_guardrail, define_resource, prompt_layer
from tether.lab import Runtime
from tether.mcp import mcp_stdio
from tether.otel import OtelSink
from tether.testing import script_client

from .conftest import assert_inert, client_for
from .test_pages import page


def no_purge(subject: dict[str, object]) -> dict[str, str] | None:
    return {"action": "deny", "reason": "read-only"} if subject["name"] == "w_purge" else None


@pytest.fixture
async def runtime() -> Runtime:
    lab = Runtime(store="memory", version=False)
    lab.create_agent(
        id="weather",
        model="openai:gpt-4o",  # no key needed to list the agent's MCP tools
        system_prompt=[
            prompt_layer("identity", "You forecast.", cache=True),
            prompt_layer("today", lambda: "Tuesday"),
        ],
        integrations=[mcp_stdio(*COMMAND, prefix="w_", attach=["units"])],
        guardrails=[
            define_guardrail(name="read-only", tool_call=no_purge),
            define_guardrail(name="polite", output=lambda text: None),
        ],
        resources=[define_resource(name="calendar", mode="tool", get=lambda: "cal")],
        trace=OtelSink(agent_name="weather"),
        settings={"temperature": 0.2},
        max_tool_rounds=4,
    )
    lab.create_agent(
        id="unreachable",
        model=script_client([]),
        integrations=[mcp_stdio(sys.executable, ["-c", "import sys; sys.exit(3)"])],
    )
    return lab


async def test_the_agent_page_lists_mcp_tools_guardrails_and_the_other_parts(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    async with client_for(runtime) as client:
        html = await page(client, "/agents/weather")
    text = assert_inert(html)
    assert '<code class="tool-name mcp-tool">w_forecast</code>' in html
    assert '<code class="tool-name mcp-tool">w_purge</code>' in html
    assert "units (attach)" in text
    assert "read-only on tool calls" in " ".join(text.split())
    assert "polite on output" in " ".join(text.split())
    assert "identity static, cached" in " ".join(text.split())
    assert "today dynamic: evaluated every turn, never pinned" in " ".join(text.split())
    assert "calendar tool" in " ".join(text.split())
    assert "OtelSink" in text and "temperature=0.2" in text
    assert "after 4 tool rounds" in " ".join(text.split())
    await runtime.aclose()


async def test_an_mcp_server_that_cannot_be_reached_says_why_on_the_page(
    runtime: Runtime,
) -> None:
    async with client_for(runtime) as client:
        html = await page(client, "/agents/unreachable")
    text = assert_inert(html)
    assert "Could not connect" in text and "McpConnectionError" in text
    await runtime.aclose()
