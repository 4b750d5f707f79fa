"""The MCP client the official conformance suite drives: tether's public API, nothing else.

    MCP_CONFORMANCE_SCENARIO=<name> [MCP_CONFORMANCE_CONTEXT=<json>] \
        python scripts/mcp_conformance_client.py <server-url>

It connects to the server with `tether.mcp.mcp_server` (the stateless revision first, the
handshake as fallback; OAuth when the server asks; elicitation answered with the schema's
defaults), then calls every tool the server offers: with the arguments the scenario's context
names, else with arguments made up from the tool's input schema. It exits 0 when it could
connect (a tool call the server fails is the scenario's to judge), 1 otherwise.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

import httpx

from tether import RunContext, TetherError
from tether.mcp import ClientCredentials, Elicitation, MemoryTokenStore, OAuth, mcp_server

CLIENT_METADATA_URL = "https://conformance-test.local/client-metadata.json"
"""A client ID metadata document URL, used when the authorization server supports them."""
REDIRECT_URI = "http://localhost:3000/callback"


async def follow(url: str) -> str:
    """Play the browser: the test authorization server answers the authorization request at
    once with a redirect to the redirect URI; return where it points."""
    async with httpx.AsyncClient(timeout=60) as client:
        resp = await client.get(url, follow_redirects=False)
    location = resp.headers.get("location")
    if resp.status_code not in (301, 302, 303, 307, 308) or not location:
        raise RuntimeError(f"the authorization endpoint answered HTTP {resp.status_code}")
    return location


async def accept_with_defaults(request: Elicitation) -> dict[str, Any]:
    """Accept, leaving every field out: tether fills in the schema's defaults (SEP-1034)."""
    return {"action": "accept", "content": {}}


def sample(schema: Any) -> Any:
    """Made-up input for a schema: a value of the right type for each property."""
    if not isinstance(schema, dict):
        return {}
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    if schema.get("enum"):
        return schema["enum"][0]
    if kind == "object" or "properties" in schema:
        props = schema.get("properties")
        return {k: sample(v) for k, v in props.items()} if isinstance(props, dict) else {}
    return {
        "string": "test",
        "integer": 2,
        "number": 3,
        "boolean": True,
        "array": [],
        "null": None,
    }.get(kind or "")


def auth_for(scenario: str, context: dict[str, Any]) -> OAuth | ClientCredentials:
    store = MemoryTokenStore()
    if scenario == "auth/client-credentials-basic":
        return ClientCredentials(
            client_id=context["client_id"], client_secret=context["client_secret"]
        )
    if scenario == "auth/pre-registration":
        return OAuth(
            client_name="tether-conformance",
            redirect_uri=REDIRECT_URI,
            authorize=follow,
            client_id=context["client_id"],
            client_secret=context["client_secret"],
            token_store=store,
        )
    return OAuth(
        client_name="tether-conformance",
        redirect_uri=REDIRECT_URI,
        authorize=follow,
        client_metadata_url=CLIENT_METADATA_URL,
        token_store=store,
    )


async def run(url: str, scenario: str, context: dict[str, Any]) -> int:
    source = mcp_server(
        url,
        auth=auth_for(scenario, context),
        on_elicitation=accept_with_defaults,
        max_tools=1000,
    )
    try:
        connection = await source.connect()
    except TetherError as exc:
        print(f"connect failed: {exc}", file=sys.stderr)
        return 1
    try:
        print(json.dumps(connection.report, default=str))
        tools = {t.name: t for t in connection.tools}
        calls: list[tuple[str, Any]] = [
            (c["name"], c.get("arguments", {})) for c in context.get("toolCalls", [])
        ]
        if scenario == "json-schema-2020-12-preservation" and "json_schema_echo" in tools:
            focal = tools.get("json_schema_2020_12_tool")
            schema = focal.input_schema if focal is not None else {}
            calls = [("json_schema_echo", {"schema": schema})]
        if not calls:
            calls = [(name, sample(t.input_schema)) for name, t in tools.items()]
        for name, arguments in calls:
            tool = tools.get(name)
            if tool is None:
                print(f"{name}: not offered", file=sys.stderr)
                continue
            result = await tool.call(arguments, RunContext(session_id="conformance"))
            print(f"{name}: {'error: ' if result.is_error else ''}{result.output[:300]}")
    finally:
        if connection.close is not None:
            await connection.close()
    return 0


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    raw = os.environ.get("MCP_CONFORMANCE_CONTEXT")
    context = json.loads(raw) if raw else {}
    return asyncio.run(run(sys.argv[1], scenario, context))


if __name__ == "__main__":
    sys.exit(main())
