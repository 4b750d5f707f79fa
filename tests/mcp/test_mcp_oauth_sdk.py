"""OAuth against the official MCP SDK's own authorization server (tests/mcp/mcp_sdk_auth_server.py):
dynamic registration, the login, client authentication as its /token handler checks it, and
refresh, all judged by the SDK's code rather than ours."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp_kit import call, results
from mcp_oauth_app import follow_login
from mcp_sdk_auth_server import SdkAuthServer

from tether import create_agent
from tether.mcp import OAuth, mcp_server
from tether.testing import collect, script_client


@pytest.fixture
def sdk() -> Iterator[SdkAuthServer]:
    server = SdkAuthServer(expires_in=4)
    server.start()
    try:
        yield server
    finally:
        server.stop()


async def test_dynamic_registration_then_a_login_the_sdks_token_endpoint_accepts(
    sdk: SdkAuthServer, tmp_path: Path
) -> None:
    # The SDK registers tether for client_secret_basic (it lists no `none`) and its /token
    # handler reads client_id from the form even then: without it, 401 "Missing client_id".
    auth = OAuth(authorize=follow_login, token_store=tmp_path / "tokens.json")
    turns = [call("add", {"a": 2, "b": 3}), call("add", {"a": 1, "b": 1}), {"text": "done"}]
    agent = create_agent(llm=script_client(turns), integrations=[mcp_server(sdk.url, auth=auth)])
    try:
        events = await collect(agent, agent.create_session(), "add twice")
    finally:
        await agent.aclose()
    assert [r["output"] for r in results(events)] == ["5", "2"], events
    [client] = sdk.provider.clients.values()
    assert client.token_endpoint_auth_method == "client_secret_basic"
    # A 4 s token is not refreshed within the second the turn takes.
    assert sdk.provider.grants == ["authorization_code"]
    assert sdk.calls == 2
