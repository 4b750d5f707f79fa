"""The stateless revision (2026-07-28) and the fallback to the `initialize` handshake, against
the in-process server: which era is spoken, the envelope and headers of each request, the
x-mcp-header rules (SEP-2243), multi round-trip requests (SEP-2322) and elicitation (SEP-1034),
and the answers to the server's other requests."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from mcp_kit import Kit, add_tool, call, results

from tether import McpConnectionError, RunContext
from tether.mcp import Elicitation, mcp_server
from tether.mcp._headers import encode_header_value, param_headers, read_param_headers
from tether.testing import TestMcpCall, collect

ENVELOPE_KEYS = {
    "io.modelcontextprotocol/protocolVersion",
    "io.modelcontextprotocol/clientInfo",
    "io.modelcontextprotocol/clientCapabilities",
}


# -- which era --------------------------------------------------------------------------------


async def test_a_server_of_the_stateless_revision_gets_no_handshake(kit: Kit) -> None:
    server = kit.server(tools=[add_tool()], modern=True)
    agent, _ = kit.agent(server, [call("add", {"a": 2, "b": 3}), {"text": "5"}])
    [report] = await agent.connect()
    assert report["protocol_version"] == "2026-07-28"
    [res] = results(await collect(agent, agent.create_session(), "add"))
    await agent.aclose()
    assert res["output"] == "5"
    assert server.methods == ["server/discover", "tools/list", "tools/call"]
    for r in server.requests:
        assert r.session_id is None
        assert r.protocol_version_header == "2026-07-28"
        assert r.headers["mcp-method"] == r.method
        meta = r.params["_meta"]
        # A tool call asks for progress notifications too.
        assert set(meta) == ENVELOPE_KEYS | (
            {"progressToken"} if r.method == "tools/call" else set()
        )
        assert meta["io.modelcontextprotocol/clientInfo"]["name"] == "tether"
        assert meta["io.modelcontextprotocol/clientCapabilities"] == {}
    tools_call = server.requests[-1]
    assert tools_call.headers["mcp-name"] == "add"
    assert not server.deleted  # no session, nothing to end


async def test_a_server_that_speaks_only_the_stateless_revision(kit: Kit) -> None:
    server = kit.server(tools=[add_tool()], modern=True, legacy=False)
    agent, _ = kit.agent(server)
    [report] = await agent.connect()
    assert report["protocol_version"] == "2026-07-28"
    assert "initialize" not in server.methods


async def test_a_server_of_the_handshake_era_is_spoken_to_with_initialize(kit: Kit) -> None:
    server = kit.server(tools=[add_tool()], sse=True)
    agent, _ = kit.agent(server, [call("add", {"a": 2, "b": 3}), {"text": "5"}])
    [report] = await agent.connect()
    [res] = results(await collect(agent, agent.create_session(), "add"))
    assert report["protocol_version"] == "2025-11-25" and res["output"] == "5"
    probe, init, initialized, listen, *rest = server.requests
    assert probe.method == "server/discover" and init.method == "initialize"
    assert initialized.method == "notifications/initialized"
    assert listen.http_method == "GET"  # the session's own stream, for the server's requests
    call_request = next(r for r in rest if r.method == "tools/call")
    # The handshake era has no envelope: the call's _meta asks for progress notifications only.
    assert list(call_request.params["_meta"]) == ["progressToken"]
    assert call_request.session_id is not None


def _answering(status: int, body: Any, content_type: str = "application/json") -> Any:
    """A transport whose answer to the discover probe is fixed, and that otherwise is `inner`."""

    def wrap(inner: httpx.AsyncBaseTransport) -> httpx.AsyncBaseTransport:
        class Probe(httpx.AsyncBaseTransport):
            async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
                if request.headers.get("mcp-method") == "server/discover":
                    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
                    return httpx.Response(
                        status, content=raw, headers={"content-type": content_type}
                    )
                return await inner.handle_async_request(request)

        return Probe()

    return wrap


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (400, b"Bad Request: Missing session ID"),
        (404, b"Not Found"),
        (405, b""),
        (400, {"jsonrpc": "2.0", "id": None, "error": {"code": -32000, "message": "no session"}}),
        (200, {"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": "no such method"}}),
        (200, {"jsonrpc": "2.0", "id": 1, "result": {}}),
        (200, {"jsonrpc": "2.0", "id": 1, "result": {"supportedVersions": ["2025-11-25"]}}),
        (
            400,
            {
                "jsonrpc": "2.0",
                "id": 1,
                "error": {
                    "code": -32022,
                    "message": "Unsupported protocol version",
                    "data": {"supported": ["2025-11-25"], "requested": "2026-07-28"},
                },
            },
        ),
    ],
    ids=["400", "404", "405", "400-rpc", "-32601", "empty", "old-versions", "-32022-old"],
)
async def test_anything_but_evidence_of_the_stateless_revision_falls_back(
    kit: Kit, status: int, body: Any
) -> None:
    server = kit.server(tools=[add_tool()])
    source = mcp_server(server.url, transport=_answering(status, body)(server))
    [report] = await kit_agent(kit, source).connect()
    assert report["protocol_version"] == "2025-11-25"
    assert server.methods[:2] == ["initialize", "notifications/initialized"]


def kit_agent(kit: Kit, source: Any) -> Any:
    from tether import create_agent
    from tether.testing import script_client

    agent = create_agent(llm=script_client([]), integrations=[source])
    kit.agents.append(agent)
    return agent


async def test_a_server_of_the_stateless_revision_only_that_refuses_ours_is_refused(
    kit: Kit,
) -> None:
    server = kit.server(tools=[add_tool()])
    refusal = {
        "jsonrpc": "2.0",
        "id": 1,
        "error": {
            "code": -32022,
            "message": "Unsupported protocol version",
            "data": {"supported": ["2027-01-01"], "requested": "2026-07-28"},
        },
    }
    source = mcp_server(server.url, transport=_answering(400, refusal)(server))
    with pytest.raises(McpConnectionError, match=r"\['2027-01-01'\].*tether does not speak"):
        await kit_agent(kit, source).connect()
    assert "initialize" not in server.methods  # no fallback: it named its versions


async def test_a_refusal_that_names_our_version_is_retried_once(kit: Kit) -> None:
    server = kit.server(tools=[add_tool()], modern=True)
    refused: list[str] = []

    class OnceRefusing(httpx.AsyncBaseTransport):
        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            method = request.headers.get("mcp-method", "")
            if method in ("server/discover", "tools/call") and method not in refused:
                refused.append(method)
                body = json.loads(request.content)
                error = {
                    "code": -32022,
                    "message": "Unsupported protocol version",
                    "data": {"supported": ["2026-07-28"], "requested": "2026-07-28"},
                }
                return httpx.Response(
                    400, json={"jsonrpc": "2.0", "id": body["id"], "error": error}
                )
            return await server.handle_async_request(request)

    source = mcp_server(server.url, transport=OnceRefusing())
    agent = kit_agent(kit, source)
    [report] = await agent.connect()
    assert report["protocol_version"] == "2026-07-28"
    [add] = agent.tools
    assert (await add.call({"a": 1, "b": 2}, RunContext("s"))).output == "3"
    assert refused == ["server/discover", "tools/call"]


async def test_a_header_mismatch_is_a_modern_error_not_a_reason_to_fall_back(kit: Kit) -> None:
    server = kit.server(tools=[add_tool()])
    mismatch = {"jsonrpc": "2.0", "id": 1, "error": {"code": -32020, "message": "Header mismatch"}}
    source = mcp_server(server.url, transport=_answering(400, mismatch)(server))
    with pytest.raises(McpConnectionError, match=r"server/discover failed.*Header mismatch"):
        await kit_agent(kit, source).connect()
    assert "initialize" not in server.methods


async def test_a_401_is_no_verdict_on_the_era(kit: Kit) -> None:
    server = kit.server(tools=[add_tool()])
    source = mcp_server(server.url, transport=_answering(401, b"")(server))
    with pytest.raises(McpConnectionError, match=r"requires authorization.*auth=OAuth"):
        await kit_agent(kit, source).connect()
    assert "initialize" not in server.methods


async def test_the_verdict_is_kept_for_reconnects(kit: Kit) -> None:
    server = kit.server(tools=[add_tool()])
    turns = [
        call("add", {"a": 1, "b": 1}),
        {"text": "2"},
        call("add", {"a": 2, "b": 2}),
        {"text": "4"},
    ]
    agent, _ = kit.agent(server, turns)
    session = agent.create_session()
    await collect(agent, session, "one")
    server.restart()
    [res] = results(await collect(agent, session, "two"))
    assert res["output"] == "4"
    assert server.methods.count("server/discover") == 1  # the reconnect went straight to initialize
    assert server.methods.count("initialize") == 2


# -- the headers of the stateless revision ----------------------------------------------------


REGION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"},
        "priority": {"type": "integer", "x-mcp-header": "Priority"},
        "verbose": {"type": ["boolean", "null"], "x-mcp-header": "Verbose"},
        "where": {
            "type": "object",
            "properties": {"zone": {"type": "string", "x-mcp-header": "Zone"}},
        },
        "query": {"type": "string"},
    },
}


async def test_designated_arguments_are_mirrored_into_headers(kit: Kit) -> None:
    tool = {"name": "sql", "input_schema": REGION_SCHEMA, "run": lambda a: "ok"}
    server = kit.server(tools=[tool], modern=True)
    arguments = {
        "region": "Hello, 世界",
        "priority": 42,
        "verbose": None,
        "where": {"zone": " b "},
        "query": "SELECT 1",
    }
    agent, _ = kit.agent(server, [call("sql", arguments), {"text": "done"}])
    [res] = results(await collect(agent, agent.create_session(), "q"))
    assert res["output"] == "ok"  # the server checked every header against the body
    sent = server.requests[-1].headers
    assert sent["mcp-param-region"] == "=?base64?SGVsbG8sIOS4lueVjA==?="
    assert sent["mcp-param-priority"] == "42"
    assert sent["mcp-param-zone"] == "=?base64?IGIg?="
    assert "mcp-param-verbose" not in sent  # null: omitted
    assert not [h for h in sent if h.startswith("mcp-param-") and "query" in h]


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        ("us-west1", "us-west1"),
        ("", ""),
        ("us west 1", "us west 1"),
        (" padded ", "=?base64?IHBhZGRlZCA=?="),
        ("line1\nline2", "=?base64?bGluZTEKbGluZTI=?="),
        ("\tindented", "=?base64?CWluZGVudGVk?="),
        ("=?base64?literal?=", "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="),
    ],
)
def test_header_values_are_encoded_as_the_revision_says(value: str, encoded: str) -> None:
    assert encode_header_value(value) == encoded


def test_booleans_and_integers_become_their_text_and_others_are_refused() -> None:
    found, problem = read_param_headers(REGION_SCHEMA)
    assert problem is None
    assert param_headers(found, {"verbose": True, "priority": -7}) == {
        "Mcp-Param-Verbose": "true",
        "Mcp-Param-Priority": "-7",
    }
    with pytest.raises(ValueError, match="outside the integer range"):
        param_headers(found, {"priority": 2**60})
    with pytest.raises(ValueError, match="string, integer or boolean"):
        param_headers(found, {"region": ["a"]})


@pytest.mark.parametrize(
    ("schema", "why"),
    [
        ({"properties": {"v": {"type": "string", "x-mcp-header": ""}}}, "empty"),
        ({"properties": {"v": {"type": "string", "x-mcp-header": "A B"}}}, "token"),
        ({"properties": {"v": {"type": "string", "x-mcp-header": "Wörld"}}}, "token"),
        ({"properties": {"v": {"type": "string", "x-mcp-header": "a\r\nb"}}}, "token"),
        ({"properties": {"v": {"type": "string", "x-mcp-header": "A:B"}}}, "token"),
        ({"properties": {"v": {"type": "object", "x-mcp-header": "V"}}}, "only string"),
        ({"properties": {"v": {"type": "array", "x-mcp-header": "V"}}}, "only string"),
        ({"properties": {"v": {"type": "null", "x-mcp-header": "V"}}}, "only string"),
        ({"properties": {"v": {"type": "number", "x-mcp-header": "V"}}}, "only string"),
        (
            {
                "properties": {
                    "a": {"type": "string", "x-mcp-header": "Same"},
                    "b": {"type": "string", "x-mcp-header": "same"},
                }
            },
            "used twice",
        ),
        (
            {
                "properties": {
                    "v": {"type": "array", "items": {"type": "string", "x-mcp-header": "V"}}
                }
            },
            "properties alone",
        ),
        ({"anyOf": [{"properties": {"v": {"type": "string", "x-mcp-header": "V"}}}]}, "alone"),
        ({"$defs": {"d": {"type": "string", "x-mcp-header": "V"}}}, "properties alone"),
    ],
)
def test_invalid_header_designations_are_named(schema: dict[str, Any], why: str) -> None:
    found, problem = read_param_headers({"type": "object", **schema})
    assert found == [] and problem is not None and why in problem


async def test_a_tool_with_an_invalid_designation_is_left_out_and_the_others_kept(
    kit: Kit,
) -> None:
    bad = {
        "name": "bad",
        "input_schema": {
            "type": "object",
            "properties": {"v": {"type": "object", "x-mcp-header": "V"}},
        },
        "run": lambda a: "never",
    }
    server = kit.server(tools=[add_tool(), bad], modern=True)
    records: list[Any] = []
    agent, _ = kit.agent(server, agent_kwargs={"trace": records.append})
    [report] = await agent.connect()
    assert report["tools"] == ["add"]
    [rejected] = [r for r in records if r["name"] == "tool:rejected"]
    assert rejected["data"]["tool"] == "bad" and "only string" in rejected["data"]["reason"]
    with pytest.raises(McpConnectionError, match=r"tools= names \['bad'\].*invalid definitions"):
        picky, _ = kit.agent(server, tools=["bad"])
        await picky.connect()


# -- elicitation ------------------------------------------------------------------------------

PROFILE = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "default": "John Doe"},
        "age": {"type": "integer", "default": 30},
        "score": {"type": "number", "default": 95.5},
        "status": {"type": "string", "enum": ["active", "pending"], "default": "active"},
        "verified": {"type": "boolean", "default": True},
        "nickname": {"type": "string"},
    },
}


def asking_tool() -> dict[str, Any]:
    async def run(arguments: dict[str, Any], call: TestMcpCall) -> str:
        answer = await call.elicit("Who are you?", PROFILE)
        return json.dumps(answer, sort_keys=True)

    return {"name": "whoami", "run": run}


@pytest.mark.parametrize("modern", [True, False], ids=["2026-07-28", "handshake"])
async def test_an_elicitation_is_answered_by_the_handler_with_defaults_filled(
    kit: Kit, modern: bool
) -> None:
    asked: list[Elicitation] = []

    async def on_elicitation(request: Elicitation) -> dict[str, Any]:
        asked.append(request)
        return {"action": "accept", "content": {"name": "Ada"}}

    server = kit.server(tools=[asking_tool()], modern=modern, sse=True)
    agent, _ = kit.agent(server, [call("whoami"), {"text": "ok"}], on_elicitation=on_elicitation)
    [res] = results(await collect(agent, agent.create_session(), "who"))
    assert json.loads(res["output"]) == {
        "action": "accept",
        "content": {
            "name": "Ada",
            "age": 30,
            "score": 95.5,
            "status": "active",
            "verified": True,
        },
    }
    [request] = asked
    assert request.message == "Who are you?" and request.schema == PROFILE
    assert request.mode == "form" and request.server == server.url
    if modern:
        first, retry = [r for r in server.requests if r.method == "tools/call"]
        assert "inputResponses" not in first.params
        assert set(retry.params["inputResponses"]) == {"ask-0"}
        assert retry.id != first.id and "requestState" in retry.params
        caps = retry.params["_meta"]["io.modelcontextprotocol/clientCapabilities"]
        assert caps == {"elicitation": {"form": {}, "url": {}}}
    else:
        init = next(r for r in server.requests if r.method == "initialize")
        assert init.params["capabilities"] == {"elicitation": {"form": {}, "url": {}}}


@pytest.mark.parametrize("modern", [True, False], ids=["2026-07-28", "handshake"])
async def test_without_a_handler_the_client_declines_politely(kit: Kit, modern: bool) -> None:
    server = kit.server(tools=[asking_tool()], modern=modern, sse=True)
    agent, _ = kit.agent(server, [call("whoami"), {"text": "ok"}])
    [res] = results(await collect(agent, agent.create_session(), "who"))
    assert json.loads(res["output"]) == {"action": "decline"}


async def test_a_handler_that_answers_nonsense_fails_the_call_not_the_session(kit: Kit) -> None:
    async def on_elicitation(request: Elicitation) -> dict[str, Any]:
        return {"action": "maybe"}

    server = kit.server(tools=[asking_tool(), add_tool()], modern=True)
    agent, _ = kit.agent(
        server,
        [call("whoami"), call("add", {"a": 1, "b": 1}), {"text": "ok"}],
        on_elicitation=on_elicitation,
    )
    asked, added = results(await collect(agent, agent.create_session(), "who"))
    assert asked["is_error"] is True and "on_elicitation handler must return" in asked["output"]
    assert added["output"] == "2"


async def test_other_requests_of_the_server_get_method_not_found(kit: Kit) -> None:
    async def run(arguments: dict[str, Any], call: TestMcpCall) -> str:
        try:
            await server._ask(call._events, "sampling/createMessage", {"messages": []})  # type: ignore[arg-type]
        except Exception as exc:
            return f"refused: {exc}"
        return "answered"

    server = kit.server(tools=[{"name": "sample", "run": run}], sse=True)
    agent, _ = kit.agent(server, [call("sample"), {"text": "ok"}])
    [res] = results(await collect(agent, agent.create_session(), "s"))
    assert "refused" in res["output"] and "-32601" in res["output"]
    [answer] = server.client_responses
    assert (
        answer["error"]["code"] == -32601 and "sampling/createMessage" in answer["error"]["message"]
    )


async def test_a_request_for_input_we_do_not_provide_fails_the_call(kit: Kit) -> None:
    server = kit.server(modern=True)

    async def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        if body["method"] == "tools/call":
            result = {
                "resultType": "input_required",
                "inputRequests": {"s": {"method": "sampling/createMessage", "params": {}}},
            }
            return httpx.Response(200, json={"jsonrpc": "2.0", "id": body["id"], "result": result})
        return await server.handle_async_request(request)

    server.tools.append({"name": "t", "run": lambda a: "x"})
    source = mcp_server(server.url, transport=httpx.MockTransport(handler))
    agent = kit_agent(kit, source)
    await agent.connect()
    [tool] = agent.tools
    result = await tool.call({}, RunContext("s"))
    assert result.is_error and "'sampling/createMessage', which tether does not provide" in (
        result.output
    )


async def test_a_paused_elicitation_declares_forms_and_goes_on_with_one_answer(kit: Kit) -> None:
    server = kit.server(tools=[asking_tool()], modern=True, sse=True)
    agent, _ = kit.agent(server, elicitation="pause")
    await agent.connect()
    [tool] = agent.tools
    paused = await tool.call({}, RunContext("s"))
    asked = paused.input_request
    assert asked is not None and asked.schema == PROFILE and asked.source == server.url
    first = server.requests[-1]
    caps = first.params["_meta"]["io.modelcontextprotocol/clientCapabilities"]
    assert caps == {"elicitation": {"form": {}}}  # a form can be answered later; a URL cannot
    assert tool.resume_input is not None
    done = await tool.resume_input(asked.state, {"action": "cancel"}, RunContext("s"))
    assert json.loads(done.output) == {"action": "cancel"}
    retry = server.requests[-1]
    assert retry.params["inputResponses"] == {asked.state["key"]: {"action": "cancel"}}
    assert retry.params["requestState"] == asked.state["requestState"]
    assert retry.params["arguments"] == first.params["arguments"]
    await agent.aclose()
