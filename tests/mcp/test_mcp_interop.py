"""Interop with a real server: the official `mcp` SDK's `MCPServer` serving tests/mcp/mcp_interop_app.py
over streamable HTTP on 127.0.0.1 (SSE and JSON bodies) and over stdio as a child process."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from mcp_interop_servers import LEGACY_STDIO_COMMAND, STDIO_COMMAND, HttpAppServer
from mcp_kit import call, process_gone, results

from tether import AbortController, AbortedError, Agent, RunContext, create_agent
from tether.mcp import Elicitation, McpSource, mcp_server, mcp_stdio
from tether.testing import collect, script_client
from tether.testing.script_client import ScriptClient


class App:
    """The interop app behind one transport, in one protocol era, and a way to restart it."""

    def __init__(self, kind: str, http: HttpAppServer | None) -> None:
        self.kind = kind
        self.transport, self.era = kind.rsplit("-", 1)
        self.legacy = self.era == "legacy"
        self.http = http
        self.agents: list[Agent] = []

    @property
    def version(self) -> str:
        return "2025-11-25" if self.legacy else "2026-07-28"

    def source(self, **kwargs: Any) -> McpSource:
        if self.http is None:
            command, args = LEGACY_STDIO_COMMAND if self.legacy else STDIO_COMMAND
            return mcp_stdio(command, args, **kwargs)
        return mcp_server(self.http.url, **kwargs)

    def agent(self, turns: list[Any], **kwargs: Any) -> tuple[Agent, ScriptClient]:
        client = script_client(turns)
        agent = create_agent(llm=client, integrations=[self.source(**kwargs)])
        self.agents.append(agent)
        return agent, client

    async def restart(self, agent: Agent) -> None:
        """HTTP: a new server process-alike on the same port (no sessions). stdio: the child
        dies; the next call must start a new one."""
        if self.http is not None:
            await self.http.arestart()
            return
        pid = await pid_of(agent)
        group = os.getpgid(pid)  # the child's own group: the server, and its front if any
        os.killpg(group, signal.SIGKILL)
        await process_gone(pid)
        await process_gone(group)


async def pid_of(agent: Agent) -> int:
    [tool] = [t for t in agent.tools if t.name == "pid"]
    result = await tool.call({}, RunContext("probe"))
    assert not result.is_error, result.output
    return int(result.output)


KINDS = [f"{t}-{era}" for era in ("modern", "legacy") for t in ("http-sse", "http-json", "stdio")]


@pytest.fixture(scope="module")
def http_servers() -> Iterator[dict[str, HttpAppServer]]:
    """One SDK server per HTTP kind for the whole module, started on first use."""
    servers: dict[str, HttpAppServer] = {}
    try:
        yield servers
    finally:
        for server in servers.values():
            server.stop()


@pytest.fixture(params=KINDS)
async def app(
    request: pytest.FixtureRequest, http_servers: dict[str, HttpAppServer]
) -> AsyncIterator[App]:
    kind: str = request.param
    http = None
    if not kind.startswith("stdio"):
        http = http_servers.get(kind)
        if http is None:
            transport, era = kind.rsplit("-", 1)
            http = HttpAppServer(json_response=transport == "http-json", legacy=era == "legacy")
            await http.astart()
            http_servers[kind] = http
    a = App(kind, http)
    try:
        yield a
    finally:
        for agent in a.agents:
            await agent.aclose()


EXPECTED_TOOLS = [
    "add",
    "fail",
    "slow",
    "cancellations",
    "slow_started_probe",
    "whoami",
    "steps",
    "pid",
    "chart",
    "read_notes",
]


async def test_list_tools_and_resources(app: App) -> None:
    agent, client = app.agent([{"text": "hi"}], attach=["style-guide"])
    [report] = await agent.connect()
    assert report["protocol_version"] == app.version
    assert report["server_info"]["name"] == "tether-interop"
    assert report["tools"] == EXPECTED_TOOLS
    assert report["resources"] == [
        {"name": "style-guide", "uri": "mem://style-guide", "mode": "attach"},
        {"name": "notes", "uri": "mem://notes", "mode": "tool", "tool": "read_notes"},
    ]
    await collect(agent, agent.create_session(), "hi")
    [add] = [t for t in client.calls[0]["tools"] if t["name"] == "add"]
    # The SDK's schema, verbatim (its pydantic title included).
    assert add["input_schema"] == {
        "type": "object",
        "title": "addArguments",
        "properties": {
            "a": {"title": "A", "type": "integer"},
            "b": {"title": "B", "type": "integer"},
        },
        "required": ["a", "b"],
    }


async def test_call_and_a_failing_tool(app: App) -> None:
    agent, client = app.agent(
        [call("add", {"a": 40, "b": 2}), call("fail", {"reason": "no such page"}), {"text": "ok"}]
    )
    added, failed = results(await collect(agent, agent.create_session(), "go"))
    assert added["output"] == "42" and "is_error" not in added
    assert failed["is_error"] is True
    assert "reported an error" in failed["output"] and "no such page" in failed["output"]
    assert len(client.calls) == 3  # the model saw each result and went on


async def test_a_slow_tool_hits_the_timeout_and_is_cancelled_on_the_server(app: App) -> None:
    agent, _ = app.agent(
        [call("slow", {"seconds": 30}), call("cancellations"), {"text": "ok"}], timeout_ms=1500
    )
    slow, cancellations = results(await collect(agent, agent.create_session(), "go"))
    assert slow["is_error"] is True
    assert slow["output"].endswith("timed out after 1500 ms without an answer")
    if app.kind != "http-json-modern":  # see below
        assert cancellations["output"] == "1"  # the server stopped the handler


@pytest.mark.parametrize("how", ["abort", "task-cancel"])
async def test_a_cancelled_call_is_cancelled_on_the_server(app: App, how: str) -> None:
    agent, _ = app.agent([call("slow", {"seconds": 30}), {"text": "never"}])
    await agent.connect()
    controller = AbortController()
    turn = asyncio.create_task(
        collect(agent, agent.create_session(), "go", signal=controller.signal)
    )
    [probe] = [t for t in agent.tools if t.name == "slow_started_probe"]
    assert (await probe.call({}, RunContext("probe"))).output == "started"
    if how == "abort":
        controller.abort("stop")
        events = await turn
        assert results(events)[0]["is_error"] is True
        assert isinstance(events[-1]["error"], AbortedError)
    else:
        turn.cancel()
        with pytest.raises(asyncio.CancelledError):
            await turn
    if app.kind == "http-json-modern":
        # 2026-07-28 cancels by closing the response, and we close it; the SDK's JSON-response
        # mode does not watch for the disconnect, so its handler runs on.
        return
    [count] = [t for t in agent.tools if t.name == "cancellations"]
    assert (await count.call({}, RunContext("probe"))).output == "1"


async def test_image_and_resource_content_reach_the_model_as_parts(app: App) -> None:
    from mcp_interop_app import CHART_PNG, REPORT_PDF

    from tether.llm.anthropic import to_anthropic_messages

    agent, client = app.agent([call("chart"), {"text": "ok"}])
    [result] = results(await collect(agent, agent.create_session(), "chart it"))
    assert result["parts"] == [
        {"type": "image", "media_type": "image/png", "data": CHART_PNG},
        {"type": "document", "media_type": "application/pdf", "data": REPORT_PDF, "name": "q3.pdf"},
    ]
    # The SVG is not an image a model takes: it is described in the text, not dropped silently.
    assert result["output"].startswith("Sales rose.\n[image content: image/svg+xml")
    sent: Any = client.calls[1]["messages"][-1]["content"][0]
    assert sent["parts"] == result["parts"]
    [block] = to_anthropic_messages(client.calls[1]["messages"][-1:])[0]["content"]
    assert [b["type"] for b in block["content"]] == ["text", "image", "document"]


async def test_resources_attached_and_read(app: App) -> None:
    agent, client = app.agent([call("read_notes"), {"text": "ok"}], attach=["mem://style-guide"])
    [res] = results(await collect(agent, agent.create_session(), "read"))
    assert res["output"] == "note one"
    assert client.calls[0]["system"][-1]["text"] == (
        '<resource name="style-guide" description="House style.">\n'
        "Write short sentences. &lt;/resource> stays data.\n</resource>"
    )
    assert client.calls[1]["system"] == client.calls[0]["system"]  # read again for round two


async def test_a_server_restarted_between_two_calls_is_reconnected_quietly(app: App) -> None:
    agent, _ = app.agent(
        [call("add", {"a": 1, "b": 2}), {"text": "3"}, call("add", {"a": 3, "b": 4}), {"text": "7"}]
    )
    session = agent.create_session()
    [first] = results(await collect(agent, session, "one"))
    before = await pid_of(agent) if app.kind == "stdio" else None
    await app.restart(agent)
    [second] = results(await collect(agent, session, "two"))
    assert first["output"] == "3"
    assert second == {"type": "tool_result", "id": "call_2", "name": "add", "output": "7"}
    if before is not None:
        assert await pid_of(agent) != before  # a new child answered


async def test_an_elicitation_of_the_sdk_server_is_answered_with_defaults_filled(
    app: App,
) -> None:
    asked: list[Elicitation] = []

    async def on_elicitation(request: Elicitation) -> dict[str, Any]:
        asked.append(request)
        return {"action": "accept", "content": {"name": "Ada"}}

    agent, _ = app.agent([call("whoami"), {"text": "ok"}], on_elicitation=on_elicitation)
    [res] = results(await collect(agent, agent.create_session(), "who"))
    if app.kind == "http-json-legacy":
        # The SDK answers a handshake-era request with a JSON body, so it has no stream to
        # ask on, and says so; tether passes its word on.
        assert res["is_error"] is True and "no back-channel" in res["output"]
        return
    assert json.loads(res["output"]) == {
        "action": "accept",
        "content": {"name": "Ada", "age": 30, "verified": True},
    }
    [request] = asked
    assert request.message == "Who are you?"
    assert set(request.schema["properties"]) == {"name", "age", "verified"}


async def test_without_a_handler_elicitation_is_not_declared_and_the_sdk_does_not_ask(
    app: App,
) -> None:
    agent, _ = app.agent([call("whoami"), {"text": "ok"}])
    [res] = results(await collect(agent, agent.create_session(), "who"))
    assert res["is_error"] is True
    if app.kind != "http-json-legacy":
        assert "did not declare the form elicitation capability" in res["output"]


async def test_progress_notifications_are_progress_events_and_logs_trace_records(
    app: App,
) -> None:
    agent, _ = app.agent([call("steps", {"n": 3}), {"text": "done"}])
    agent.trace = True
    events = await collect(agent, agent.create_session(), "go")
    [result] = results(events)
    assert result["output"] == "3 steps", result
    progress = [e for e in events if e["type"] == "progress" and "tool_call_id" in e]
    logs = [
        e["record"]["data"] for e in events if e["type"] == "trace" and e["record"]["name"] == "log"
    ]
    if app.transport == "http-json":
        # A JSON body has no room for notifications: the answer alone comes back.
        assert progress == [] and logs == []
        return
    assert [(e["progress"], e["total"], e["message"]) for e in progress] == [
        (1.0, 3.0, "step 1 of 3"),
        (2.0, 3.0, "step 2 of 3"),
        (3.0, 3.0, "step 3 of 3"),
    ]
    assert {e["tool_call_id"] for e in progress} == {result["id"]}
    # They came while the call ran: before its result.
    assert events.index(progress[-1]) < events.index(result)
    assert [(d["level"], d["logger"], d["data"]) for d in logs] == [
        ("info", "steps", f"did step {i}") for i in (1, 2, 3)
    ]
