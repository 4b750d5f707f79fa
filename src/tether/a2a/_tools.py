"""`a2a_agent(url)`: a remote A2A agent as tools a tether agent calls.

The provider reads the agent's card on first use and makes one `ask_<name>` tool (or, with
``tools="skills"``, one tool per skill the card lists). A call sends the model's `message` as
one A2A message and returns the answer (its text, and its images, documents and audio as media
parts); an `A2AError` (a bad card, a server that cannot be reached, a task that failed) becomes
the call's error result, which the model reads and can act on.

The remote conversation follows the local one: a call's `contextId` is derived from the
calling conversation (the lab's memory scope, the harness's session id) and the agent's URL, so
the next turn's call continues the same remote context, from any process, and two
conversations never share one.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any, Literal, cast

import httpx

from ..context import RunContext
from ..errors import A2AError, ConfigError, ToolError
from ..events import MediaPart
from ..tools import Tool, ToolResult, define_tool
from ._client import A2AClient, Reply

__all__ = ["A2AAgent", "a2a_agent", "context_id_for"]

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


def context_id_for(conversation: str, url: str) -> str:
    """The remote `contextId` of the local `conversation` with the agent at `url`: stable,
    and opaque (nothing of the local id is readable in it)."""
    digest = hashlib.sha256(f"{conversation}\n{url.rstrip('/')}".encode()).hexdigest()
    return f"tether-{digest[:32]}"


def _tool_name(text: str) -> str:
    name = _UNSAFE.sub("_", text).strip("_").lower() or "agent"
    return name[:56]


class A2AAgent:
    """A ToolProvider over one remote A2A agent (build it with `a2a_agent`)."""

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        name: str | None = None,
        tools: Literal["ask", "skills"] = "ask",
        timeout: float = 120.0,
        http: httpx.AsyncClient | None = None,
    ) -> None:
        if tools not in ("ask", "skills"):
            raise ConfigError(f'a2a_agent(tools=...) is "ask" or "skills", not {tools!r}')
        if name is not None and (not isinstance(name, str) or not name):
            raise ConfigError(f"a2a_agent(name=...) must be a non-empty string, got {name!r}")
        self.client = A2AClient(url, headers=headers, timeout=timeout, http=http)
        self.url = self.client.url
        self.name = name
        self.mode = tools
        self._tools: list[Tool] | None = None

    def __repr__(self) -> str:
        return f"a2a_agent({self.url!r})"

    async def aclose(self) -> None:
        await self.client.aclose()

    async def get_tools(self, context: Any) -> list[Tool]:
        """The tools (the card is read once; a card that cannot be read raises its
        `A2AError`, so the episode fails naming the agent, before the model runs)."""
        if self._tools is None:
            card = await self.client.card()
            self._tools = self._build(card)
        return list(self._tools)

    def _build(self, card: Mapping[str, Any]) -> list[Tool]:
        agent = self.name or _tool_name(str(card.get("name") or "agent"))
        about = str(card.get("description") or "").strip()
        if self.mode == "ask":
            skills = "; ".join(
                f"{s.get('name')}: {s.get('description')}"
                for s in card.get("skills") or []
                if isinstance(s, dict)
            )
            text = f"Ask the remote agent {card.get('name')!r} (A2A). {about}"
            if skills:
                text += f" Its skills: {skills}."
            return [self._tool(f"ask_{agent}", text.strip(), None)]
        tools = []
        for skill in card.get("skills") or []:
            if not isinstance(skill, dict) or not skill.get("id"):
                continue
            name = f"{agent}_{_tool_name(str(skill['id']))}"
            text = f"{skill.get('description') or skill.get('name')} (remote A2A agent {agent})"
            tools.append(self._tool(name, text, str(skill["id"])))
        if not tools:
            raise ToolError(f"the A2A agent at {self.url} lists no skills; use tools='ask'")
        return tools

    def _tool(self, name: str, description: str, skill: str | None) -> Tool:
        client, url = self.client, self.url

        async def execute(value: dict[str, Any], ctx: RunContext) -> ToolResult:
            context_id = context_id_for(ctx.session_id, url)
            metadata = {"skill": skill} if skill is not None else None
            reply: Reply | None = None
            try:
                async for item in client.send(
                    value["message"], context_id=context_id, metadata=metadata
                ):
                    if isinstance(item, Reply):
                        reply = item
            except A2AError as exc:
                raise ToolError(f"{type(exc).__name__}: {exc}") from exc
            assert reply is not None
            media = cast(list[MediaPart], [p for p in reply.parts if p["type"] != "text"])
            text = reply.text or "(the agent answered without text)"
            return ToolResult(text, parts=media or None)

        return define_tool(
            name=name,
            description=description,
            input_schema={
                "type": "object",
                "properties": {
                    "message": {"type": "string", "description": "What to ask or tell the agent."}
                },
                "required": ["message"],
                "additionalProperties": False,
            },
            execute=execute,
        )


def a2a_agent(
    url: str,
    *,
    headers: Mapping[str, str] | None = None,
    name: str | None = None,
    tools: Literal["ask", "skills"] = "ask",
    timeout: float = 120.0,
) -> A2AAgent:
    """The A2A agent at `url` as a ToolProvider: pass it as an agent's `tools=` (or ask it
    for its tools: ``await a2a_agent(url).get_tools(None)``).

    Args:
        url: The agent's URL (its card is at ``{url}/.well-known/agent-card.json``): for a
            tether server, ``http://host:8700/a2a/{agent_id}``.
        headers: Sent with every request: ``{"Authorization": "Bearer …"}``.
        name: What the tools are named after (default: the card's name): ``ask_<name>``.
        tools: ``"ask"`` (one `ask_<name>` tool) or ``"skills"`` (one `<name>_<skill>` tool per
            skill of the card).
        timeout: Seconds one read of the agent's answer may wait.
    """
    return A2AAgent(url, headers=headers, name=name, tools=tools, timeout=timeout)
