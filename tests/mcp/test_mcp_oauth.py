"""OAuth for MCP over HTTP, each step against an authorization server of our own on loopback
(tests/mcp/mcp_oauth_app.py): discovery with its fallbacks, the checks on what was
discovered, registration in the spec's order, the authorization code flow with PKCE and the
`resource` parameter, client authentication, refresh, step-up, the client-credentials grant,
the token store, and secrets kept out of messages."""

from __future__ import annotations

import asyncio
import os
import stat
import webbrowser
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp_kit import add_tool, call, results
from mcp_oauth_app import Config, OAuthWorld, follow_login

from tether import Agent, McpAuthError, McpConnectionError, create_agent
from tether.mcp import (
    ClientCredentials,
    FileTokenStore,
    MemoryTokenStore,
    OAuth,
    mcp_server,
)
from tether.testing import collect, create_test_mcp_server, script_client

REDIRECT = "http://127.0.0.1:33418/callback"


@pytest.fixture(scope="module")
def world() -> Iterator[OAuthWorld]:
    w = OAuthWorld()
    w.start()
    try:
        yield w
    finally:
        w.stop()


class Harness:
    def __init__(self, world: OAuthWorld, tmp: Path) -> None:
        self.world = world
        self.tmp = tmp
        self.agents: list[Agent] = []
        self.logins: list[str] = []

    def configure(self, *, modern: bool = True, **config: Any) -> OAuthWorld:
        server = create_test_mcp_server(tools=[add_tool()], modern=modern)
        self.world.reset(server, Config(**config))
        return self.world

    async def login(self, url: str) -> str:
        self.logins.append(url)
        return await follow_login(url)

    def oauth(self, **kwargs: Any) -> OAuth:
        kwargs.setdefault("authorize", self.login)
        kwargs.setdefault("token_store", self.tmp / "tokens.json")
        return OAuth(**kwargs)

    def agent(
        self, auth: OAuth | ClientCredentials, turns: list[Any] | None = None, **kw: Any
    ) -> Agent:
        source = mcp_server(self.world.mcp_url, auth=auth, **kw)
        agent = create_agent(llm=script_client(turns or []), integrations=[source])
        self.agents.append(agent)
        return agent


@pytest.fixture
async def h(world: OAuthWorld, tmp_path: Path) -> AsyncIterator[Harness]:
    harness = Harness(world, tmp_path)
    try:
        yield harness
    finally:
        for agent in harness.agents:
            await agent.aclose()


# -- the whole flow ---------------------------------------------------------------------------


@pytest.mark.parametrize("modern", [True, False], ids=["2026-07-28", "handshake"])
async def test_a_401_runs_the_whole_flow_and_the_call_goes_through(
    h: Harness, modern: bool
) -> None:
    w = h.configure(modern=modern)
    agent = h.agent(h.oauth(), [call("add", {"a": 2, "b": 3}), {"text": "5"}])
    [res] = results(await collect(agent, agent.create_session(), "add"))
    assert res["output"] == "5"
    kinds = [k for k, _ in w.log if k != "404"]
    first_auth = kinds.index("authorize")
    # 401, then the metadata, then registration, then the login and the token.
    assert kinds[:first_auth] == ["mcp", "prm", "as-metadata", "register"]
    assert kinds[first_auth + 1] == "token"
    [registered] = w.seen("register")
    assert registered["redirect_uris"] == [REDIRECT]
    assert registered["application_type"] == "native"
    assert registered["grant_types"] == ["authorization_code", "refresh_token"]
    assert registered["token_endpoint_auth_method"] == "none"
    [asked] = w.seen("authorize")
    assert asked["response_type"] == "code"
    assert asked["code_challenge_method"] == "S256" and len(asked["code_challenge"]) == 43
    assert asked["resource"] == w.mcp_url
    assert asked["redirect_uri"] == REDIRECT and asked["state"]
    assert "scope" not in asked  # neither the challenge nor the metadata names one
    [token] = w.seen("token")
    assert token["grant_type"] == "authorization_code" and token["resource"] == w.mcp_url
    assert token["method"] == "none" and token["code_verifier"]
    # Every MCP request after the login carries the token.
    after = [d for k, d in w.log[w.log.index(("token", token)) :] if k == "mcp"]
    assert after and all(d["authorization"].startswith("Bearer at-") for d in after)


async def test_the_second_run_uses_the_stored_tokens(h: Harness) -> None:
    h.configure()
    await h.agent(h.oauth()).connect()
    assert len(h.logins) == 1
    again = h.agent(h.oauth())  # a new process would read the same file
    await again.connect()
    assert len(h.logins) == 1


def test_the_token_file_is_the_owners_alone(tmp_path: Path) -> None:
    store = FileTokenStore(tmp_path / "proj" / ".tether" / "mcp-auth.json")
    asyncio.run(store.save("http://x/mcp", {"tokens": {"access_token": "a"}}))
    assert stat.S_IMODE(os.stat(store.path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(store.path.parent).st_mode) == 0o700
    assert asyncio.run(store.load("http://x/mcp")) == {"tokens": {"access_token": "a"}}


def test_the_default_token_store_is_a_file_under_the_projects_tether_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    store = OAuth().store
    assert isinstance(store, FileTokenStore)
    asyncio.run(store.save("k", {"v": 1}))
    assert (tmp_path / ".tether" / "mcp-auth.json").exists()


# -- discovery --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "prm_asked"),
    [
        (
            {"prm_in_header": False},
            ["/.well-known/oauth-protected-resource/mcp"],
        ),
        (
            {"prm_in_header": False, "prm_paths": ["/.well-known/oauth-protected-resource"]},
            ["/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"],
        ),
        ({"prm_paths": ["/custom/metadata/location.json"]}, ["/custom/metadata/location.json"]),
    ],
    ids=["path-based", "root", "from-the-header"],
)
async def test_protected_resource_metadata_is_found_where_the_spec_says(
    h: Harness, config: dict[str, Any], prm_asked: list[str]
) -> None:
    w = h.configure(**config)
    await h.agent(h.oauth()).connect()
    assert [d["path"] for d in w.seen("prm")] == prm_asked


@pytest.mark.parametrize(
    ("prefix", "metadata_path", "asked"),
    [
        ("", "/.well-known/oauth-authorization-server", 1),
        ("", "/.well-known/openid-configuration", 2),
        ("/tenant1", "/.well-known/oauth-authorization-server{prefix}", 1),
        ("/tenant1", "/.well-known/openid-configuration{prefix}", 2),
        ("/tenant1", "{prefix}/.well-known/openid-configuration", 3),
    ],
)
async def test_authorization_server_metadata_is_found_in_the_spec_order(
    h: Harness, prefix: str, metadata_path: str, asked: int
) -> None:
    w = h.configure(as_prefix=prefix, as_metadata_path=metadata_path)
    await h.agent(h.oauth()).connect()
    paths = [d["path"] for d in w.seen("as-metadata")]
    assert len(paths) == asked and paths[-1] == metadata_path.replace("{prefix}", prefix)
    if prefix:  # never the root document when the issuer has a path
        assert "/.well-known/oauth-authorization-server" not in paths


async def test_without_protected_resource_metadata_the_2025_03_26_way(h: Harness) -> None:
    w = h.configure(prm_paths=[], prm_in_header=False)
    await h.agent(h.oauth()).connect()
    assert [d["path"] for d in w.seen("as-metadata")] == ["/.well-known/oauth-authorization-server"]
    [asked] = w.seen("authorize")
    assert asked["resource"] == w.mcp_url


async def test_without_protected_resource_metadata_the_origins_metadata_is_trusted(
    h: Harness,
) -> None:
    # 2025-03-26 servers: the MCP server's origin serves the metadata, whose issuer (and
    # endpoints) may sit under a path; nothing else names an issuer to hold it to.
    w = h.configure(
        prm_paths=[],
        prm_in_header=False,
        as_prefix="/oauth",
        as_metadata_path="/.well-known/oauth-authorization-server",
    )
    await h.agent(h.oauth()).connect()
    assert w.seen("register") and w.seen("token")


async def test_without_any_metadata_the_default_endpoints(h: Harness) -> None:
    w = h.configure(prm_paths=[], prm_in_header=False, as_metadata_path=None, iss_mode="omit")
    await h.agent(h.oauth()).connect()
    assert w.seen("register") and w.seen("authorize") and w.seen("token")


async def test_metadata_for_another_resource_is_refused_before_any_login(h: Harness) -> None:
    w = h.configure(prm_resource="https://evil.example.com/mcp")
    with pytest.raises(McpAuthError, match=r"names resource 'https://evil.example.com/mcp'"):
        await h.agent(h.oauth()).connect()
    assert not w.seen("authorize") and not h.logins


async def test_metadata_naming_another_issuer_is_refused(h: Harness) -> None:
    w = h.configure(issuer_override="https://attacker.example.com")
    with pytest.raises(McpAuthError):
        await h.agent(h.oauth()).connect()
    assert not w.seen("authorize")


async def test_a_server_without_pkce_s256_is_refused(h: Harness) -> None:
    w = h.configure(pkce_methods=None)
    with pytest.raises(McpAuthError, match="PKCE with S256"):
        await h.agent(h.oauth()).connect()
    assert not w.seen("authorize")


# -- registration -----------------------------------------------------------------------------


async def test_pre_registered_credentials_come_first(h: Harness) -> None:
    w = h.configure(registration=False, auth_methods=["client_secret_post"])
    w.config.pre_registered["pre-id"] = "pre-secret"
    await h.agent(h.oauth(client_id="pre-id", client_secret="pre-secret")).connect()
    assert not w.seen("register")
    [token] = w.seen("token")
    assert (token["client_id"], token["method"]) == ("pre-id", "client_secret_post")


async def test_a_client_id_metadata_document_when_the_server_supports_them(h: Harness) -> None:
    w = h.configure(cimd=True)
    doc = "https://app.example.com/oauth/client.json"
    await h.agent(h.oauth(client_metadata_url=doc)).connect()
    assert not w.seen("register")
    assert w.seen("authorize")[0]["client_id"] == doc


async def test_no_way_to_register_says_what_to_do(h: Harness) -> None:
    h.configure(registration=False)
    with pytest.raises(McpAuthError, match=r"OAuth\(client_id=\.\.\., client_secret=\.\.\.\)"):
        await h.agent(h.oauth()).connect()


@pytest.mark.parametrize("method", ["client_secret_basic", "client_secret_post", "none"])
async def test_the_token_endpoint_auth_method_the_server_advertises(
    h: Harness, method: str
) -> None:
    w = h.configure(auth_methods=[method])
    await h.agent(h.oauth()).connect()
    [token] = w.seen("token")
    assert token["method"] == method
    assert w.seen("register")[0]["token_endpoint_auth_method"] == method


async def test_a_new_authorization_server_gets_a_new_registration(h: Harness) -> None:
    w = h.configure()
    agent = h.agent(h.oauth(), [call("add", {"a": 1, "b": 1}), {"text": "2"}])
    await agent.connect()
    first_client = w.seen("register")
    assert len(first_client) == 1
    # The server moves to another authorization server (a new issuer path), and forgets us.
    w.config.as_prefix = "/new-as"
    w.config.as_metadata_path = "/.well-known/oauth-authorization-server{prefix}"
    w.tokens.clear()
    w.refresh_tokens.clear()
    [res] = results(await collect(agent, agent.create_session(), "add"))
    assert res["output"] == "2"
    assert len(w.seen("register")) == 2  # registered again, with the new one
    old_id = w.seen("token")[0]["client_id"]
    assert w.seen("authorize")[-1]["client_id"] != old_id


# -- scopes -----------------------------------------------------------------------------------


async def test_scope_from_the_challenge_then_from_the_metadata(h: Harness) -> None:
    w = h.configure(header_scope="mcp:read mcp:write", prm_scopes=["mcp:profile"])
    await h.agent(h.oauth()).connect()
    assert w.seen("authorize")[0]["scope"] == "mcp:read mcp:write"
    w = h.configure(prm_scopes=["mcp:profile", "mcp:basic"])
    await h.agent(h.oauth(token_store=MemoryTokenStore())).connect()
    assert w.seen("authorize")[0]["scope"] == "mcp:profile mcp:basic"


async def test_offline_access_when_the_authorization_server_offers_it(h: Harness) -> None:
    w = h.configure(prm_scopes=["mcp:basic"], scopes_supported=["mcp:basic", "offline_access"])
    await h.agent(h.oauth()).connect()
    assert w.seen("authorize")[0]["scope"] == "mcp:basic offline_access"


async def test_a_403_insufficient_scope_steps_up_with_the_union_of_scopes(h: Harness) -> None:
    w = h.configure(
        header_scope="mcp:basic",
        required={"tools/call": ["mcp:basic", "mcp:write"]},
        step_up_scope={"tools/call": "mcp:write"},
    )
    agent = h.agent(h.oauth(), [call("add", {"a": 1, "b": 1}), {"text": "2"}])
    [res] = results(await collect(agent, agent.create_session(), "add"))
    assert res["output"] == "2"
    first, second = w.seen("authorize")
    assert first["scope"] == "mcp:basic"
    assert second["scope"] == "mcp:basic mcp:write"  # the earlier grant is kept


async def test_step_up_gives_up_after_a_few_tries(h: Harness) -> None:
    w = h.configure(required={"tools/call": ["mcp:admin"]}, withheld=["mcp:admin"])
    agent = h.agent(h.oauth(), [call("add", {"a": 1, "b": 1}), {"text": "no"}])
    [res] = results(await collect(agent, agent.create_session(), "add"))
    assert res["is_error"] is True
    assert "still answers 403 insufficient_scope" in res["output"]
    assert len(w.seen("authorize")) == 3  # the first login and two step-ups, no more


# -- the authorization response ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("iss_supported", "iss_mode", "ok"),
    [
        (True, "correct", True),
        (None, "omit", True),
        (True, "omit", False),
        (True, "wrong", False),
        (None, "wrong", False),
        (True, "normalized", False),
    ],
    ids=["right", "not-advertised", "missing", "wrong", "unexpected", "normalized"],
)
async def test_the_iss_of_the_answer_is_checked_before_the_code_is_used(
    h: Harness, iss_supported: bool | None, iss_mode: str, ok: bool
) -> None:
    w = h.configure(iss_supported=iss_supported, iss_mode=iss_mode)
    agent = h.agent(h.oauth())
    if ok:
        await agent.connect()
    else:
        with pytest.raises(McpAuthError, match="iss"):
            await agent.connect()
    assert bool(w.seen("token")) is ok


async def test_an_answer_with_another_state_is_refused(h: Harness) -> None:
    w = h.configure()

    async def forged(url: str) -> str:
        back = await follow_login(url)
        return back.replace("state=", "state=x")

    with pytest.raises(McpAuthError, match="another state"):
        await h.agent(h.oauth(authorize=forged)).connect()
    assert not w.seen("token")


async def test_a_login_that_takes_longer_than_a_request_may(h: Harness) -> None:
    h.configure()

    async def slow(url: str) -> str:
        await asyncio.sleep(0.6)  # a person reading the consent page
        return await follow_login(url)

    await h.agent(h.oauth(authorize=slow), timeout_ms=200).connect()


async def test_the_default_login_opens_the_browser_and_listens_on_the_redirect_uri(
    h: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    h.configure()
    opened: list[str] = []

    def browser(url: str) -> bool:
        opened.append(url)
        # The "browser": the authorization server redirects it to our listener.
        httpx.get(url, follow_redirects=True, timeout=10)
        return True

    monkeypatch.setattr(webbrowser, "open", browser)  # what _login opens the page with
    redirect = "http://127.0.0.1:0/callback".replace(":0", f":{_free_port()}")
    await h.agent(OAuth(redirect_uri=redirect, token_store=MemoryTokenStore())).connect()
    assert len(opened) == 1 and opened[0].startswith(h.world.base + "/authorize?")


def _free_port() -> int:
    from mcp_interop_servers import free_port

    return free_port()


# -- refresh ----------------------------------------------------------------------------------


async def test_an_expiring_token_is_refreshed_before_it_is_sent(h: Harness) -> None:
    w = h.configure(expires_in=1)
    agent = h.agent(h.oauth(), [call("add", {"a": 1, "b": 1}), {"text": "2"}])
    await agent.connect()
    await asyncio.sleep(0.95)  # inside its last tenth: refreshed before the next request
    [res] = results(await collect(agent, agent.create_session(), "add"))
    assert res["output"] == "2"
    assert [t["grant_type"] for t in w.seen("token")][:2] == ["authorization_code", "refresh_token"]
    assert w.seen("token")[1]["resource"] == w.mcp_url
    assert len(h.logins) == 1


async def test_a_refused_token_is_refreshed_then_a_failed_refresh_logs_in_again(
    h: Harness,
) -> None:
    w = h.configure()
    agent = h.agent(h.oauth(), [call("add", {"a": 1, "b": 1}), {"text": "2"}] * 2)
    await agent.connect()
    w.tokens.clear()  # the server forgets every access token
    [res] = results(await collect(agent, agent.create_session(), "one"))
    assert res["output"] == "2"
    assert [t["grant_type"] for t in w.seen("token")] == ["authorization_code", "refresh_token"]
    w.tokens.clear()
    w.refresh_tokens.clear()  # and now every refresh token too
    [res] = results(await collect(agent, agent.create_session(), "two"))
    assert res["output"] == "2"
    assert len(h.logins) == 2


# -- client credentials -----------------------------------------------------------------------


async def test_client_credentials_for_machine_to_machine(h: Harness) -> None:
    w = h.configure(auth_methods=["client_secret_basic"], header_scope="mcp:tools")
    w.config.pre_registered["svc"] = "svc-secret"
    agent = h.agent(
        ClientCredentials(client_id="svc", client_secret="svc-secret"),
        [call("add", {"a": 1, "b": 1}), {"text": "2"}],
    )
    [res] = results(await collect(agent, agent.create_session(), "add"))
    assert res["output"] == "2"
    assert not w.seen("authorize") and not w.seen("register")
    [token] = w.seen("token")
    assert token["grant_type"] == "client_credentials" and token["method"] == "client_secret_basic"
    assert token["scope"] == "mcp:tools" and token["resource"] == w.mcp_url
    # Scopes given to the client are asked for instead of the challenge's.
    w.tokens.clear()
    chosen = h.agent(ClientCredentials(client_id="svc", client_secret="svc-secret", scope="a b"))
    await chosen.connect()
    assert w.seen("token")[-1]["scope"] == "a b"


async def test_the_refresh_margin_is_a_fraction_of_a_short_tokens_lifetime(h: Harness) -> None:
    w = h.configure(expires_in=4)  # shorter than the 30 s margin a long-lived token gets
    turns = [call("add", {"a": 1, "b": 1}), call("add", {"a": 2, "b": 2}), {"text": "4"}]
    agent = h.agent(h.oauth(), turns)
    assert [r["output"] for r in results(await collect(agent, agent.create_session(), "x"))] == [
        "2",
        "4",
    ]
    assert [t["grant_type"] for t in w.seen("token")] == ["authorization_code"]


async def test_client_credentials_against_a_server_of_public_clients_only_says_why(
    h: Harness,
) -> None:
    h.configure(auth_methods=["none"])
    agent = h.agent(ClientCredentials(client_id="svc", client_secret="svc-secret"))
    with pytest.raises(McpAuthError) as caught:
        await agent.connect()
    message = str(caught.value)
    assert "accepts client authentication by none only, so it cannot take ClientCredentials" in (
        message
    )
    assert "OAuth(" in message and "svc-secret" not in message


# -- secrets ----------------------------------------------------------------------------------


async def test_secrets_stay_out_of_errors_traces_and_reprs(h: Harness) -> None:
    w = h.configure(auth_methods=["client_secret_post"])
    w.config.pre_registered["pre-id"] = "s3cr3t-value"
    auth = h.oauth(client_id="pre-id", client_secret="wrong-s3cr3t")
    assert "s3cr3t" not in repr(auth)
    assert "s3cr3t" not in repr(ClientCredentials(client_id="a", client_secret="s3cr3t"))
    records: list[Any] = []
    source = mcp_server(w.mcp_url, auth=auth)
    agent = create_agent(
        llm=script_client([{"text": "x"}]), integrations=[source], trace=records.append
    )
    h.agents.append(agent)
    session = agent.create_session()
    with pytest.raises(McpConnectionError) as info:
        await collect(agent, session, "hi")
    message = str(info.value)
    assert "invalid_client" in message  # the authorization server's word, and nothing more
    for secret in ("s3cr3t", "code_verifier", "at-", "rt-"):
        assert secret not in message
        assert secret not in repr(records)
    assert "s3cr3t" not in str(session.to_json())


async def test_the_conformance_client_logs_in_and_calls_every_tool(h: Harness) -> None:
    import sys

    w = h.configure()
    script = Path(__file__).parents[2] / "scripts" / "mcp_conformance_client.py"
    env = {**os.environ, "MCP_CONFORMANCE_SCENARIO": "auth/metadata-default"}
    env.pop("MCP_CONFORMANCE_CONTEXT", None)
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(script),
        w.mcp_url,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    assert "add: 4" in out.decode()  # made-up arguments from the schema: a=2, b=2
    # It plays the browser against the redirect URI of the conformance suite's servers.
    assert w.seen("authorize")[0]["redirect_uri"] == "http://localhost:3000/callback"


async def test_credentials_never_go_to_a_plain_http_authorization_server_elsewhere(
    h: Harness,
) -> None:
    w = h.configure(issuer_override=None)
    # Metadata whose token endpoint is plain HTTP on another host.
    w.config.as_metadata_path = "/.well-known/oauth-authorization-server"
    original = w.as_metadata

    async def elsewhere(request: Any) -> Any:
        response = await original(request)
        import json as _json

        body = _json.loads(bytes(response.body))
        body["token_endpoint"] = "http://tokens.example.com/token"
        from starlette.responses import JSONResponse

        return JSONResponse(body)

    w.as_metadata = elsewhere  # type: ignore[method-assign]
    try:
        with pytest.raises(McpAuthError, match="plain HTTP on a host that is not this machine"):
            await h.agent(h.oauth()).connect()
    finally:
        w.as_metadata = original  # type: ignore[method-assign]
    assert not w.seen("authorize")


def test_a_redirect_uri_off_this_machine_must_be_https() -> None:
    from tether import ConfigError

    with pytest.raises(ConfigError, match="must be https, or http on a loopback"):
        OAuth(redirect_uri="http://app.example.com/callback")
    OAuth(redirect_uri="https://app.example.com/callback")
