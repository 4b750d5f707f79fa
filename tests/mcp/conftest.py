"""Shared pieces of the MCP tests: servers and agents that clean up after themselves."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from tether import Agent, create_agent
from tether.mcp import mcp_server
from tether.testing import TestMcpServer, TestMcpTool, create_test_mcp_server, script_client
from tether.testing.script_client import ScriptClient

ADD_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
    "required": ["a", "b"],
}


def add_tool() -> TestMcpTool:
    return {
        "name": "add",
        "description": "Add two integers",
        "input_schema": ADD_SCHEMA,
        "run": lambda args: str(args["a"] + args["b"]),
    }


def call(name: str, input: dict[str, Any] | None = None) -> dict[str, Any]:
    """A scripted model turn that calls one tool."""
    return {"tool_use": [{"name": name, "input": input if input is not None else {}}]}


def results(events: list[Any]) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == "tool_result"]


class Kit:
    """Makes test servers and agents; closes all of them when the test ends."""

    def __init__(self) -> None:
        self.servers: list[TestMcpServer] = []
        self.agents: list[Agent] = []

    def server(self, **kwargs: Any) -> TestMcpServer:
        server = create_test_mcp_server(**kwargs)
        self.servers.append(server)
        return server

    def agent(
        self,
        servers: TestMcpServer | list[TestMcpServer],
        turns: list[Any] | None = None,
        *,
        agent_kwargs: dict[str, Any] | None = None,
        **source_kwargs: Any,
    ) -> tuple[Agent, ScriptClient]:
        client = script_client(turns or [])
        many = servers if isinstance(servers, list) else [servers]
        sources = [mcp_server(s.url, transport=s, **source_kwargs) for s in many]
        agent = create_agent(llm=client, integrations=sources, **(agent_kwargs or {}))
        self.agents.append(agent)
        return agent, client

    async def aclose(self) -> None:
        for agent in self.agents:
            await agent.aclose()
        for server in self.servers:
            await server.aclose()


@pytest.fixture
async def kit() -> AsyncIterator[Kit]:
    k = Kit()
    try:
        yield k
    finally:
        await k.aclose()
