"""`elicitation="pause"` against the official `mcp` SDK's server (tests/mcp/mcp_interop_app.py,
its `whoami` tool elicits a profile): a 2026-07-28 server's elicitation stops the call with an
`InputRequest` (the schema asked for, JSON-safe state) instead of going to a live handler, and a
fresh connection — another process, as far as the server can tell — goes on with the person's
answer. A server of the handshake era keeps `on_elicitation`."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from mcp_interop_servers import STDIO_COMMAND, HttpAppServer

from tether import RunContext
from tether.integrations import SourceConnection
from tether.mcp import Elicitation, McpSource, mcp_server, mcp_stdio
from tether.tools import Tool


@pytest.fixture(params=["http-sse", "http-json", "stdio"])
async def modern(request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    if request.param == "stdio":
        command, args = STDIO_COMMAND

        def stdio(**kwargs: Any) -> McpSource:
            return mcp_stdio(command, args, **kwargs)

        yield stdio
        return
    server = HttpAppServer(json_response=request.param == "http-json")
    await server.astart()

    def http(**kwargs: Any) -> McpSource:
        return mcp_server(server.url, **kwargs)

    try:
        yield http
    finally:
        await server.astop()


async def close(connection: SourceConnection) -> None:
    if connection.close is not None:
        await connection.close()


async def whoami(source: McpSource) -> tuple[SourceConnection, Tool]:
    connection = await source.connect()
    [tool] = [t for t in connection.tools if t.name == "whoami"]
    return connection, tool


async def test_a_paused_elicitation_goes_on_with_the_answer_over_a_fresh_connection(
    modern: Any, request: pytest.FixtureRequest
) -> None:
    stdio = "stdio" in request.node.callspec.id
    first, tool = await whoami(modern(elicitation="pause"))
    try:
        paused = await tool.call({}, RunContext("s1"))
        asked = paused.input_request
        assert asked is not None and paused.is_error
        assert "asks for input ('Who are you?')" in paused.output
        assert asked.message == "Who are you?"
        assert set(asked.schema["properties"]) == {"name", "age", "verified"}
        # What a stored session would keep: JSON, and nothing else.
        state = json.loads(json.dumps(asked.to_json()))["state"]
        if stdio:
            # A server over stdio is one child process; its requestState is sealed with a key
            # of that process: the answer goes to the same child.
            second, again = first, tool
        else:
            await close(first)
            # Another connection, as another process of ours would open.
            second, again = await whoami(modern(elicitation="pause"))
        assert again.resume_input is not None
        done = await again.resume_input(
            state, {"action": "accept", "content": {"name": "Ada"}}, RunContext("s2")
        )
        declined = await again.resume_input(state, {"action": "decline"}, RunContext("s3"))
        nonsense = await again.resume_input(state, {"action": "maybe"}, RunContext("s4"))
    finally:
        await close(first)
        if not stdio:
            await close(second)
    assert not done.is_error and done.input_request is None, done.output
    # The schema's defaults fill what the person left out (SEP-1034).
    assert json.loads(done.output) == {
        "action": "accept",
        "content": {"name": "Ada", "age": 30, "verified": True},
    }
    assert json.loads(declined.output) == {"action": "decline", "content": None}
    assert nonsense.is_error and "'action': 'accept'|'decline'|'cancel'" in nonsense.output


async def test_a_new_stdio_child_refuses_the_state_another_sealed() -> None:
    command, args = STDIO_COMMAND
    first, tool = await whoami(mcp_stdio(command, args, elicitation="pause"))
    try:
        paused = await tool.call({}, RunContext("s1"))
    finally:
        await close(first)
    assert paused.input_request is not None
    second, again = await whoami(mcp_stdio(command, args, elicitation="pause"))
    try:
        assert again.resume_input is not None
        refused = await again.resume_input(
            paused.input_request.state, {"action": "decline"}, RunContext("s2")
        )
    finally:
        await close(second)
    # The server's word, passed on: the call fails, typed, instead of guessing.
    assert refused.is_error and "Invalid or expired requestState" in refused.output


async def test_a_handler_still_answers_at_once_and_callback_mode_is_as_before(
    modern: Any,
) -> None:
    asked: list[Elicitation] = []

    async def on_elicitation(request: Elicitation) -> dict[str, Any]:
        asked.append(request)
        return {"action": "accept", "content": {"name": "Bo"}}

    connection, tool = await whoami(modern(elicitation="pause", on_elicitation=on_elicitation))
    try:
        answered = await tool.call({}, RunContext("s"))
    finally:
        await close(connection)
    assert answered.input_request is None and len(asked) == 1
    assert json.loads(answered.output)["content"]["name"] == "Bo"

    connection, tool = await whoami(modern())
    try:
        plain = await tool.call({}, RunContext("s"))
    finally:
        await close(connection)
    assert tool.resume_input is None
    assert plain.input_request is None and plain.is_error  # not declared: the SDK does not ask


async def test_a_server_of_the_handshake_era_keeps_the_callback() -> None:
    server = HttpAppServer(legacy=True)
    await server.astart()
    try:
        connection, tool = await whoami(mcp_server(server.url, elicitation="pause"))
        try:
            result = await tool.call({}, RunContext("s"))
        finally:
            await close(connection)
    finally:
        await server.astop()
    # A live stream cannot wait for a person across processes: no pause, as before.
    assert result.input_request is None and result.is_error


def test_elicitation_takes_callback_or_pause() -> None:
    from tether.errors import ConfigError

    with pytest.raises(ConfigError, match="'callback' or 'pause'"):
        mcp_server("http://127.0.0.1:1/mcp", elicitation="later")  # type: ignore[arg-type]
