"""An agent whose tools wait for a person, served by `tether serve` in test_decisions.py (beside
the shared test project's runtime): `send_email` waits for an approval, `pick_color` is run by
the caller (external). The fake model asks for them by the user's words and, once a result is
there, answers with it. `asker` calls an MCP tool (the in-process test server, speaking
2026-07-28) that asks the person who they are: an input call."""

from __future__ import annotations

from typing import Any

from project_app import runtime  # type: ignore[import-not-found]  # the served project's module

from tether import define_tool
from tether.llm.base import ChatRequest
from tether.mcp import mcp_server
from tether.testing import ScriptTurn, create_test_mcp_server, paced_client

SENT: list[Any] = []


def reply(request: ChatRequest) -> ScriptTurn:
    last = request["messages"][-1]
    if last["role"] == "tool":
        outputs = [p.get("output") for p in last["content"] if p["type"] == "tool_result"]
        return {"text": ["Done: ", str(outputs[-1])]}
    text = "".join(p["text"] for p in last["content"] if p["type"] == "text")
    if text.startswith("mail "):
        return {"tool_use": [{"name": "send_email", "input": {"to": text.split()[1]}}]}
    if text.startswith("color"):
        return {"tool_use": [{"name": "pick_color", "input": {"hint": "warm"}}]}
    return {"text": "Nothing to do."}


def send_email(value: dict[str, Any]) -> str:
    SENT.append(value["to"])
    return f"sent to {value['to']}"


clerk = runtime.create_agent(
    id="clerk",
    model=paced_client(reply, delay=0),
    system_prompt="You send mail.",
    tools=[
        define_tool(
            name="send_email",
            description="Send an email.",
            input_schema={
                "type": "object",
                "properties": {"to": {"type": "string"}},
                "required": ["to"],
            },
            execute=send_email,
            approval=True,
        ),
        define_tool(
            name="pick_color",
            description="Ask the person for a color.",
            input_schema={"type": "object", "properties": {"hint": {"type": "string"}}},
            external=True,
        ),
    ],
)


async def mailroom(to: str, ctx: Any) -> str:
    """Has the clerk mail `to` in a step: its pause makes the workflow wait for a decision."""

    async def mail() -> str:
        handle = clerk.run(memory_scope=ctx.run_local_scope("clerk"), user=f"mail {to}")
        text: str = (await handle.result).text
        return text

    done: str = await ctx.step("mail", mail)
    return done


mailroom_workflow = runtime.create_workflow("mailroom", mailroom)


NAME_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


async def whoami(arguments: dict[str, Any], call: Any) -> str:
    answer = await call.elicit("Who are you?", NAME_SCHEMA)
    if answer["action"] != "accept":
        return "no name given"
    return f"hello {answer['content']['name']}"


people = create_test_mcp_server(tools=[{"name": "whoami", "run": whoami}], modern=True)


def ask_reply(request: ChatRequest) -> ScriptTurn:
    last = request["messages"][-1]
    if last["role"] == "tool":
        return {"text": ["Done: ", str(last["content"][-1].get("output"))]}
    return {"tool_use": [{"name": "whoami", "input": {}}]}


asker = runtime.create_agent(
    id="asker",
    model=paced_client(ask_reply, delay=0),
    integrations=[mcp_server(people.url, transport=people, elicitation="pause")],
)
