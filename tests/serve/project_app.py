"""The project `tether serve` serves in these tests (imported by the server process from a
tether.toml the tests write): agents on a paced fake model whose answer depends on the last user
message, a backend tool, and durable workflows whose steps take time."""

from __future__ import annotations

import asyncio
import os
from typing import Any

from tether import define_tool
from tether.lab import Runtime
from tether.llm.base import ChatRequest
from tether.testing import ScriptTurn, paced_client
from tether.workflows import WorkflowContext

# A short lease makes a killed worker's runs read as interrupted within seconds.
_lease: dict[str, Any] = {"lease_ttl": float(os.environ["TETHER_TEST_LEASE_TTL"])} if os.environ.get("TETHER_TEST_LEASE_TTL") else {}  # fmt: skip
runtime = Runtime(store=os.environ["TETHER_TEST_STORE"], version=False, **_lease)


def _last_user_text(request: ChatRequest) -> str | None:
    """The last user message's text, or None when the last message is a tool result."""
    for message in reversed(request["messages"]):
        if message["role"] == "tool":
            return None
        if message["role"] == "user":
            return "".join(p["text"] for p in message["content"] if p["type"] == "text")
    return ""


def reply(request: ChatRequest) -> ScriptTurn:
    text = _last_user_text(request)
    if text is None:
        if "slowly" in str(request["messages"][-3]):
            return {"text": [f"s{i} " for i in range(2000)]}
        return {"text": ["The ", "tool ", "answered."]}
    if text.startswith("chunks "):
        count, size = (int(n) for n in text.split()[1:3])
        return {"text": [f"{i:06d}".ljust(size, "x") for i in range(count)]}
    if text.startswith("words "):
        count = int(text.split()[1])
        return {"text": [f"w{i} " for i in range(count)]}
    if text.startswith("tool"):
        return {
            "text": "Looking it up. ",
            "tool_use": [{"name": "lookup", "input": {"q": text}, "partials": ['{"q": ', '"x"}']}],
        }
    if text.startswith("front"):
        return {"tool_use": [{"name": "pick_color", "input": {"hint": "warm"}}]}
    if text.startswith("think"):
        return {"thinking": "Pondering it.", "text": ["Thought ", "through."]}
    if text.startswith("remember"):
        return {"tool_use": [{"name": "note", "input": {"fact": text}}]}
    turns = sum(1 for m in request["messages"] if m["role"] == "user")
    return {"text": ["Hello ", "from ", f"turn {turns}."]}


model = paced_client(reply, delay=float(os.environ.get("TETHER_TEST_DELAY", "0.02")))


def lookup(value: dict[str, Any]) -> str:
    return f"found {value['q']}"


def note(value: dict[str, Any], ctx: Any) -> str:
    ctx.remember({"fact": value["fact"]})
    return "noted"


chat = runtime.create_agent(
    id="chat",
    model=model,
    system_prompt="You are a test agent.",
    description="Answers by a rule, slowly.",
    tools=[
        define_tool(
            name="lookup",
            description="Look something up.",
            input_schema={"type": "object", "properties": {"q": {"type": "string"}}},
            execute=lookup,
        ),
        define_tool(
            name="note",
            description="Remember a fact.",
            input_schema={"type": "object", "properties": {"fact": {"type": "string"}}},
            execute=note,
        ),
    ],
)

STEP_SECONDS = float(os.environ.get("TETHER_TEST_STEP_SECONDS", "0.2"))


async def pipeline_run(input: Any, ctx: WorkflowContext[Any]) -> dict[str, Any]:
    done: list[str] = []
    for name in ("fetch", "think", "write"):

        async def step(name: str = name) -> str:
            await asyncio.sleep(STEP_SECONDS)
            return f"{name}:{os.getpid()}"

        done.append(await ctx.step(name, step))
    return {"input": input, "steps": done}


pipeline = runtime.create_workflow("pipeline", pipeline_run)
