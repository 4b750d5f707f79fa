"""Every row of the seed's failure table, against the in-process server, through a real agent."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import pytest
from mcp_kit import Kit, add_tool, call, results

from tether import (
    AbortController,
    AbortedError,
    McpCallError,
    McpConnectionError,
    RunContext,
    create_agent,
    define_tool,
)
from tether.mcp import mcp_server
from tether.testing import DropConnection, McpRpcError, collect, script_client

# -- connect: loud ----------------------------------------------------------------------------


async def test_an_unreachable_server_raises_out_of_connect_and_out_of_send(kit: Kit) -> None:
    server = kit.server(tools=[add_tool()])
    server.down = True
    agent, _ = kit.agent(server, [{"text": "never"}])
    with pytest.raises(McpConnectionError, match=r"http://mcp\.test/mcp.*cannot reach"):
        await agent.connect()
    with pytest.raises(McpConnectionError, match="cannot reach"):
        await collect(agent, agent.create_session(), "hi")
    assert agent.tools == []  # never a silent empty tool list standing in for the server


async def test_a_closed_loopback_port_is_unreachable() -> None:
    with socket.socket() as sock:  # bound, never listening: connecting is refused
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
        agent = create_agent(llm=script_client([]), integrations=[mcp_server(url)])
        with pytest.raises(McpConnectionError, match="cannot reach"):
            await agent.connect()
        await agent.aclose()


@pytest.mark.parametrize("method", ["initialize", "notifications/initialized", "tools/list"])
async def test_a_non_2xx_answer_while_connecting_raises_naming_the_status(
    kit: Kit, method: str
) -> None:
    server = kit.server(tools=[add_tool()])
    server.http_errors[method] = 503
    agent, _ = kit.agent(server)
    with pytest.raises(McpConnectionError, match="HTTP 503"):
        await agent.connect()
    assert server.sessions == {}  # a session that was opened was ended again


async def test_an_unspeakable_protocol_version_is_refused_loudly(kit: Kit) -> None:
    server = kit.server(tools=[add_tool()], answer_version="2099-01-01")
    agent, _ = kit.agent(server)
    with pytest.raises(McpConnectionError) as info:
        await agent.connect()
    message = str(info.value)
    assert "'2099-01-01'" in message and "2025-11-25" in message and "2024-11-05" in message
    assert "notifications/initialized" not in server.methods
    assert server.sessions == {} and len(server.deleted) == 1


async def test_a_server_that_refuses_initialize_raises_with_its_message(kit: Kit) -> None:
    server = kit.server(tools=[add_tool()])
    server.rpc_errors["initialize"] = (-32602, "Unsupported protocol version")
    agent, _ = kit.agent(server)
    with pytest.raises(McpConnectionError) as info:
        await agent.connect()
    assert str(info.value) == (
        "MCP server http://mcp.test/mcp: initialize failed: the server answered "
        "Unsupported protocol version (JSON-RPC error -32602)"
    )


@pytest.mark.parametrize("method", ["tools/list", "resources/list"])
async def test_a_failing_list_raises_and_closes_the_session(kit: Kit, method: str) -> None:
    server = kit.server(
        tools=[add_tool()], resources=[{"name": "doc", "uri": "mem://doc", "text": "d"}]
    )
    server.rpc_errors[method] = (-32603, "index unavailable")
    agent, _ = kit.agent(server)
    with pytest.raises(McpConnectionError, match=f"{method} failed.*index unavailable"):
        await agent.connect()
    assert server.sessions == {} and len(server.deleted) == 1


async def test_a_connect_that_times_out_raises_and_leaves_nothing_open(kit: Kit) -> None:
    server = kit.server(tools=[add_tool()])
    server.hold["tools/list"] = asyncio.Event()  # accepted, never answered
    agent, _ = kit.agent(server, timeout_ms=300)
    with pytest.raises(McpConnectionError, match="tools/list failed: no answer within 300 ms"):
        await agent.connect()
    assert server.sessions == {} and len(server.deleted) == 1


async def test_a_tool_name_clash_between_sources_raises_suggesting_a_prefix(kit: Kit) -> None:
    one, two = kit.server(tools=[add_tool()]), kit.server(tools=[add_tool()])
    agent, _ = kit.agent([one, two])
    with pytest.raises(McpConnectionError, match=r"'add'.*collides.*prefix="):
        await agent.connect()
    # Both handshakes succeeded; both sessions were ended before the error propagated.
    assert one.sessions == {} and two.sessions == {}
    assert len(one.deleted) == 1 and len(two.deleted) == 1


async def test_a_clash_with_a_declared_tool_raises_and_a_prefix_resolves_it(kit: Kit) -> None:
    server = kit.server(tools=[add_tool()])
    declared = define_tool(name="add", execute=lambda i: 0)
    agent = create_agent(
        llm=script_client([]),
        tools=[declared],
        integrations=[mcp_server(server.url, transport=server)],
    )
    with pytest.raises(McpConnectionError, match=r"'add'.*a declared tool.*prefix="):
        await agent.connect()
    assert server.sessions == {}
    fixed = create_agent(
        llm=script_client([]),
        tools=[declared],
        integrations=[mcp_server(server.url, transport=server, prefix="calc_")],
    )
    await fixed.connect()
    assert [t.name for t in fixed.tools] == ["add", "calc_add"]
    await fixed.aclose()


async def test_more_tools_than_max_tools_raises_naming_the_count(kit: Kit) -> None:
    tools: list[Any] = [
        {"name": f"t{i}", "run": lambda args: "ok"} for i in range(17)
    ]  # one past MAX_INTEGRATIONS
    server = kit.server(tools=tools)
    agent, _ = kit.agent(server)
    with pytest.raises(McpConnectionError, match=r"lists 17 tools, more than max_tools=16"):
        await agent.connect()
    assert server.sessions == {}
    roomy, _ = kit.agent(server, max_tools=17)
    assert len((await roomy.connect())[0]["tools"]) == 17
    narrowed, _ = kit.agent(server, tools=["t0", "t1"], max_tools=2)
    assert (await narrowed.connect())[0]["tools"] == ["t0", "t1"]


# -- calls: model-visible ---------------------------------------------------------------------


@pytest.mark.parametrize("sse", [False, True])
async def test_a_failing_call_is_an_error_result_and_the_loop_goes_on(kit: Kit, sse: bool) -> None:
    def broken(args: dict[str, Any]) -> str:
        raise McpRpcError(-32602, "Invalid params: b is required")

    server = kit.server(tools=[{"name": "add", "run": broken}], sse=sse)
    agent, client = kit.agent(server, [call("add", {"a": 1}), {"text": "sorry"}])
    events = await collect(agent, agent.create_session(), "add")
    [res] = results(events)
    assert res["is_error"] is True
    assert res["output"].startswith("MCP tool add on http://mcp.test/mcp failed:")
    assert "Invalid params: b is required" in res["output"]
    assert events[-1]["type"] == "done" and events[-1]["text"] == "sorry"
    assert len(client.calls) == 2  # the model saw the error and answered


@pytest.mark.parametrize("sse", [False, True])
async def test_a_server_is_error_answer_reaches_the_model_as_an_error(kit: Kit, sse: bool) -> None:
    def refuse(args: dict[str, Any]) -> str:
        raise RuntimeError("quota exceeded for today")

    server = kit.server(tools=[{"name": "search", "run": refuse}], sse=sse)
    agent, _ = kit.agent(server, [call("search", {"q": "x"}), {"text": "ok"}])
    [res] = results(await collect(agent, agent.create_session(), "s"))
    assert res["is_error"] is True
    assert res["output"] == (
        "MCP tool search on http://mcp.test/mcp reported an error: quota exceeded for today"
    )


@pytest.mark.parametrize(("sse", "prime"), [(False, False), (True, False), (True, True)])
async def test_a_call_that_times_out_is_an_error_result_and_is_cancelled_on_the_wire(
    kit: Kit, sse: bool, prime: bool
) -> None:
    # With SSE the POST is answered at once (headers, maybe a primer) and then nothing: the
    # timeout must cover the wait for the answer on the stream, not just the request.
    async def never(args: dict[str, Any]) -> str:
        await asyncio.Event().wait()
        return "unreachable"

    server = kit.server(tools=[{"name": "slow", "run": never}], sse=sse, prime=prime)
    agent, _ = kit.agent(server, [call("slow"), {"text": "gave up"}], timeout_ms=300)
    events = await collect(agent, agent.create_session(), "go")
    [res] = results(events)
    assert res["is_error"] is True
    assert res["output"].endswith("timed out after 300 ms without an answer")
    [rid] = [r.id for r in server.requests if r.method == "tools/call"]
    assert server.cancelled == [rid] and server.cancelled_handlers == [rid]
    assert events[-1]["type"] == "done"


async def test_aborting_the_turn_mid_call_cancels_the_call_on_the_wire(kit: Kit) -> None:
    started = asyncio.Event()

    async def slow(args: dict[str, Any]) -> str:
        started.set()
        await asyncio.Event().wait()
        return "unreachable"

    server = kit.server(tools=[{"name": "slow", "run": slow}])
    agent, _ = kit.agent(server, [call("slow"), {"text": "never"}])
    controller = AbortController()
    turn = asyncio.create_task(
        collect(agent, agent.create_session(), "go", signal=controller.signal)
    )
    await started.wait()
    controller.abort("the user pressed stop")
    events = await turn
    [res] = results(events)
    assert res["is_error"] is True
    assert isinstance(events[-1]["error"], AbortedError)
    await agent.aclose()  # lets the courtesy cancel finish, then ends the session
    [rid] = [r.id for r in server.requests if r.method == "tools/call"]
    assert server.cancelled == [rid] and server.cancelled_handlers == [rid]
    assert server.methods[-2:] == ["notifications/cancelled", "DELETE"]


async def test_an_abort_signal_on_a_direct_call_gives_an_mcp_call_error_result(kit: Kit) -> None:
    started = asyncio.Event()

    async def slow(args: dict[str, Any]) -> str:
        started.set()
        await asyncio.Event().wait()
        return "unreachable"

    server = kit.server(tools=[{"name": "slow", "run": slow}])
    agent, _ = kit.agent(server)
    await agent.connect()
    [tool] = agent.tools
    controller = AbortController()
    pending = asyncio.create_task(tool.call({}, RunContext("s", signal=controller.signal)))
    await started.wait()
    controller.abort()
    result = await pending
    assert result.is_error and result.output == "MCP tool slow on http://mcp.test/mcp was aborted"
    await agent.aclose()
    assert server.cancelled_handlers == [r.id for r in server.requests if r.method == "tools/call"]


async def test_cancelling_the_task_running_a_call_cancels_it_on_the_wire(kit: Kit) -> None:
    started = asyncio.Event()

    async def slow(args: dict[str, Any]) -> str:
        started.set()
        await asyncio.Event().wait()
        return "unreachable"

    server = kit.server(tools=[{"name": "slow", "run": slow}], sse=True)
    agent, _ = kit.agent(server, [call("slow"), {"text": "never"}])
    turn = asyncio.create_task(collect(agent, agent.create_session(), "go"))
    await started.wait()
    turn.cancel()
    with pytest.raises(asyncio.CancelledError):
        await turn
    await agent.aclose()
    [rid] = [r.id for r in server.requests if r.method == "tools/call"]
    assert server.cancelled == [rid] and server.cancelled_handlers == [rid]


@pytest.mark.parametrize("sse", [False, True])
async def test_a_server_that_goes_away_mid_call_is_an_error_result(kit: Kit, sse: bool) -> None:
    def crash(args: dict[str, Any]) -> str:
        raise DropConnection

    server = kit.server(tools=[{"name": "crash", "run": crash}, add_tool()], sse=sse)
    agent, _ = kit.agent(
        server, [call("crash"), call("add", {"a": 2, "b": 2}), {"text": "recovered"}]
    )
    events = await collect(agent, agent.create_session(), "go")
    crashed, added = results(events)
    assert crashed["is_error"] is True
    assert "MCP tool crash on http://mcp.test/mcp failed: the connection" in crashed["output"]
    assert added == {"type": "tool_result", "id": "call_2", "name": "add", "output": "4"}
    assert server.methods.count("tools/call") == 2  # the crashed call was not resent


async def test_an_attached_resource_that_cannot_be_read_raises_out_of_send(kit: Kit) -> None:
    fail = {"now": False}

    def read() -> str:
        if fail["now"]:
            raise RuntimeError("disk on fire")
        return "the guide"

    server = kit.server(resources=[{"name": "guide", "uri": "mem://guide", "read": read}])
    agent, client = kit.agent(server, [{"text": "one"}, {"text": "two"}], attach=["guide"])
    session = agent.create_session()
    await collect(agent, session, "first")
    assert "the guide" in client.calls[0]["system"][-1]["text"]
    fail["now"] = True
    with pytest.raises(McpCallError, match=r"reading MCP resource guide.*disk on fire"):
        await collect(agent, session, "second")
    assert len(client.calls) == 1  # the prompt could not be built, so nothing was sent


async def test_an_attach_read_that_times_out_raises_out_of_send(kit: Kit) -> None:
    server = kit.server(resources=[{"name": "guide", "uri": "mem://guide", "text": "g"}])
    agent, _ = kit.agent(server, [{"text": "never"}], attach=["guide"], timeout_ms=300)
    await agent.connect()
    server.hold["resources/read"] = asyncio.Event()
    with pytest.raises(McpCallError, match="timed out after 300 ms"):
        await collect(agent, agent.create_session(), "hi")


@pytest.mark.parametrize("how", ["abort", "task-cancel"])
async def test_cancelling_an_attach_read_reaches_the_wire(kit: Kit, how: str) -> None:
    started = asyncio.Event()

    async def slow() -> str:
        started.set()
        await asyncio.Event().wait()
        return "unreachable"

    server = kit.server(resources=[{"name": "guide", "uri": "mem://guide", "read": slow}])
    agent, client = kit.agent(server, [{"text": "never"}], attach=["guide"])
    controller = AbortController()
    turn = asyncio.create_task(
        collect(agent, agent.create_session(), "hi", signal=controller.signal)
    )
    await started.wait()
    if how == "abort":
        controller.abort("stop")
        with pytest.raises(AbortedError):  # before the turn started: out of send()
            await turn
    else:
        turn.cancel()
        with pytest.raises(asyncio.CancelledError):
            await turn
    await agent.aclose()  # lets the courtesy cancel finish, then ends the session
    [rid] = [r.id for r in server.requests if r.method == "resources/read"]
    assert server.cancelled == [rid] and server.cancelled_handlers == [rid]
    assert client.calls == []


async def test_a_read_tool_failure_is_an_error_result(kit: Kit) -> None:
    def read() -> str:
        raise RuntimeError("gone")

    server = kit.server(resources=[{"name": "notes", "uri": "mem://notes", "read": read}])
    agent, _ = kit.agent(server, [call("read_notes"), {"text": "ok"}])
    [res] = results(await collect(agent, agent.create_session(), "read"))
    assert res["is_error"] is True and "gone" in res["output"]


async def test_timeout_ms_zero_disables_the_clock(kit: Kit) -> None:
    # The same answer that a 50 ms timeout refuses arrives when timeout_ms=0: nothing waits on
    # a clock, the answer decides.
    async def later(args: dict[str, Any]) -> str:
        await asyncio.sleep(0.3)
        return "late but fine"

    for timeout_ms, expected_error in ((50, True), (0, False)):
        server = kit.server(tools=[{"name": "later", "run": later}], sse=True)
        agent, _ = kit.agent(server, [call("later"), {"text": "ok"}], timeout_ms=timeout_ms)
        [res] = results(await collect(agent, agent.create_session(), "go"))
        assert res.get("is_error", False) is expected_error
        if not expected_error:
            assert res["output"] == "late but fine"
