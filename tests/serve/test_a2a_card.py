"""The A2A card's skills (declared, from a tool list, for the agent itself) and a message sent to
return at once, in process over an ASGI transport."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tether import ConfigError, define_tool
from tether.a2a import declare_skills
from tether.lab import Runtime, tool_provider
from tether.serve import create_app
from tether.testing import paced_client, script_client

from .conftest import asgi_client


@pytest.fixture
async def served() -> AsyncIterator[tuple[Runtime, httpx.AsyncClient]]:
    lab = Runtime(store="memory", version=False)
    tool = define_tool(
        name="add",
        description="Add two numbers.",
        input_schema={"type": "object"},
        execute=lambda i: "3",
    )
    lab.create_agent(id="tools", model=script_client([{"text": "x"}]), tools=[tool])
    lab.create_agent(
        id="provided",
        model=script_client([{"text": "x"}]),
        tools=tool_provider(lambda ctx: []),
        description="Builds its tools per call.",
    )
    declared = lab.create_agent(id="declared", model=script_client([{"text": "x"}]))
    declare_skills(
        declared,
        [
            {
                "id": "triage",
                "name": "Triage",
                "description": "Routes a request.",
                "examples": ["hi"],
            }
        ],
    )
    slow = paced_client(lambda request: {"text": [f"w{i} " for i in range(50)]}, delay=0.01)
    lab.create_agent(id="slow", model=slow)
    async with asgi_client(create_app(lab)) as http:
        yield lab, http
    await lab.aclose()


async def card(http: httpx.AsyncClient, agent: str) -> dict[str, Any]:
    response = await http.get(f"/a2a/{agent}/.well-known/agent-card.json")
    assert response.status_code == 200, response.text
    found: dict[str, Any] = response.json()
    return found


async def test_skills_are_declared_or_the_tools_or_the_agent(
    served: tuple[Runtime, httpx.AsyncClient],
) -> None:
    _, http = served
    tools = await card(http, "tools")
    assert [(s["id"], s["description"]) for s in tools["skills"]] == [("add", "Add two numbers.")]
    provided = await card(http, "provided")
    assert [s["id"] for s in provided["skills"]] == ["provided"]
    assert provided["skills"][0]["description"] == "Builds its tools per call."
    declared = await card(http, "declared")
    assert declared["skills"] == [
        {
            "tags": [],
            "id": "triage",
            "name": "Triage",
            "description": "Routes a request.",
            "examples": ["hi"],
        }
    ]
    # No token on this app: no security scheme on the card.
    assert "securitySchemes" not in declared


def test_a_skill_without_its_fields_is_a_config_error() -> None:
    lab = Runtime(store="memory", version=False)
    agent = lab.create_agent(id="a", model=script_client([{"text": "x"}]))
    with pytest.raises(ConfigError, match=r"skills\[0\].description"):
        declare_skills(agent, [{"id": "x", "name": "X"}])
    with pytest.raises(ConfigError, match="unknown keys"):
        declare_skills(agent, [{"id": "x", "name": "X", "description": "d", "colour": "red"}])


async def test_return_immediately_answers_a_working_task_that_completes_later(
    served: tuple[Runtime, httpx.AsyncClient],
) -> None:
    _, http = served
    message = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": "go"}]}
    body = {
        "jsonrpc": "2.0",
        "id": "r1",
        "method": "SendMessage",
        "params": {"message": message, "configuration": {"returnImmediately": True}},
    }
    answer = (await http.post("/a2a/slow", json=body)).json()
    task = answer["result"]["task"]
    assert answer["id"] == "r1"
    assert task["status"]["state"] == "TASK_STATE_WORKING"
    get = {"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": task["id"]}}
    for _ in range(500):
        got = (await http.post("/a2a/slow", json=get)).json()["result"]
        if got["status"]["state"] != "TASK_STATE_WORKING":
            break
        await asyncio.sleep(0.02)
    assert got["status"]["state"] == "TASK_STATE_COMPLETED"
    assert got["artifacts"][0]["parts"][0]["text"] == "".join(f"w{i} " for i in range(50))
    # Another agent's task is not this agent's.
    other = (await http.post("/a2a/tools", json=get)).json()
    assert other["error"]["code"] == -32001
