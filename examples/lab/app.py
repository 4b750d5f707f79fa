"""An example lab project: an assistant that remembers its conversations, titles them, and a
workflow wrapping it. With OPENAI_API_KEY or ANTHROPIC_API_KEY set it uses that provider;
without, a scripted model that echoes (and the agents' descriptions say so).

    cd examples/lab
    ../../.venv/bin/tether agent run assistant --input "Hello" --scope demo
    ../../.venv/bin/tether agent run assistant --input "And again" --scope demo
    ../../.venv/bin/tether runs list
    ../../.venv/bin/tether ui
"""

from __future__ import annotations

import os
from typing import Any

from pydantic import BaseModel

from tether.lab import Runtime
from tether.testing import script_client
from tether.workflows import WorkflowContext


def _echo(request: Any) -> dict[str, Any]:
    last = request["messages"][-1]["content"][-1]
    if "response_format" in request:
        return {"text": '{"title": "A scripted conversation"}'}
    return {"text": f"(scripted model) you said: {last.get('text', '')}"}


if os.environ.get("OPENAI_API_KEY"):
    MODEL: Any = "openai:gpt-4o-mini"
    NOTE = ""
elif os.environ.get("ANTHROPIC_API_KEY"):
    MODEL = "anthropic:claude-sonnet-4-5"
    NOTE = ""
else:
    MODEL = script_client([_echo] * 1000)
    NOTE = " (scripted: no provider key in the environment)"

lab = Runtime(defaults={"model": MODEL})


class Title(BaseModel):
    title: str


namer = lab.create_agent(
    id="namer",
    system_prompt="Reply with a short title for the conversation.",
    output_schema=Title,
    description="Names conversations" + NOTE,
)


async def name_conversation(input: dict[str, Any], ctx: WorkflowContext[Any]) -> dict[str, str]:
    lines = [f"{m['role']}: {p.get('text', '')}" for m in input["messages"] for p in m["content"]]
    episode = await namer.run(
        memory_scope=ctx.memory_scope_with_suffix("namer"),
        user="Write a short title.\n\n" + "\n".join(lines),
    ).result
    return {"title": episode.output.title}


conversation_title = lab.create_workflow(id="conversation-title", run=name_conversation)

assistant = lab.create_agent(
    id="assistant",
    system_prompt="You are a helpful, concise assistant.",
    title_workflow=conversation_title,
    description="A general assistant" + NOTE,
)

ask = lab.workflow_from_agent(assistant, id="ask")
