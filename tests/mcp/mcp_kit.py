"""Helpers of the MCP tests (imported by name: tests/mcp is not a package, so that it cannot
shadow the `mcp` SDK the interop tests run)."""

from __future__ import annotations

from typing import Any

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


async def process_gone(pid: int) -> None:
    """Wait (no clock) until process `pid` has ended, through a Linux pidfd."""
    import asyncio
    import os

    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    loop = asyncio.get_running_loop()
    ended: asyncio.Future[None] = loop.create_future()

    def on_exit() -> None:
        if not ended.done():
            ended.set_result(None)

    loop.add_reader(fd, on_exit)
    try:
        await ended
    finally:
        loop.remove_reader(fd)
        os.close(fd)
