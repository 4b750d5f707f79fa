"""Handoffs between lab agents: `LabHandoff`, the declared targets, and who holds a scope.

A lab agent declared with ``handoffs=[billing, LabHandoff(refunds, ...)]`` offers the model
``transfer_to_<id>`` tools (`tether.handoffs`). When one succeeds, the episode's round ends and
the turn goes on as a nested run of the target (under the transfer call) on the same memory
scope, within the scope hold the turn already has. Each stored assistant record carries the
`agent` that wrote it, so the agent of the scope's last assistant record holds the
conversation: a turn sent to the entry agent goes to it (``run(agent=...)`` names another).

A target may be given by id (a string), resolved in the runtime's registry when a turn hands
over: so two agents can hand the conversation back and forth.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._params import bad, bad_item, where_prefix
from ..errors import ConfigError
from ..handoffs import Handoff, check_handoff_name
from ..session import Message, holder
from ..stores.message_store import MessageStore

LabAgent = Any
"""A lab agent (`tether.lab.LabAgent`): typed loosely here, which `_agent` imports."""


def _is_agent(value: Any) -> bool:
    """A lab agent, known by what a handoff reads of it (this module is below `_agent`)."""
    return isinstance(getattr(value, "id", None), str) and hasattr(value, "prepare_episode")


__all__ = ["LabHandoff", "check_handoffs", "handoff_graph", "held_by", "resolve_target"]

HOLDER_TAIL = 8
"""How many of a scope's last records are read to find who holds it."""


class LabHandoff(Handoff[Any]):
    """A handoff target of a lab agent: the agent (a `LabAgent`, or its id), the transfer
    tool's `description` and the `input_filter` choosing what of the scope's transcript the
    target is sent (`tether.handoffs.handoff_filters`; default all of it)."""

    __slots__ = ()

    def _check_target(self, agent: Any) -> None:
        if isinstance(agent, str):
            check_handoff_name(agent, "LabHandoff")
            return
        if not _is_agent(agent):
            raise bad("LabHandoff(agent)", agent, "a lab agent (runtime.create_agent) or its id")
        check_handoff_name(agent.id, "LabHandoff")

    @property
    def name(self) -> str:
        return self.agent if isinstance(self.agent, str) else str(self.agent.id)


def check_handoffs(value: Any, where: str) -> list[LabHandoff] | None:
    """`handoffs=`: lab agents, their ids and `LabHandoff`s (each a `LabHandoff` now)."""
    if value is None:
        return None
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, list | tuple):
        raise bad("handoffs", value, "a list of lab agents, agent ids or LabHandoffs", where)
    out: list[LabHandoff] = []
    names: set[str] = set()
    for i, item in enumerate(value):
        if isinstance(item, LabHandoff):
            handoff = item
        elif isinstance(item, str) or _is_agent(item):
            handoff = LabHandoff(item)
        else:
            raise bad_item("handoffs", i, item, "a lab agent, an agent id or a LabHandoff", where)
        if handoff.name in names:
            raise ConfigError(f"{where_prefix(where)}handoffs= names {handoff.name!r} twice")
        names.add(handoff.name)
        out.append(handoff)
    return out


def resolve_target(handoff: Handoff[Any], runtime: Any, where: str) -> LabAgent:
    """The lab agent a handoff goes to (an id is looked up in the runtime's registry).

    Raises:
        ConfigError: no agent has that id.
    """
    target = handoff.agent
    if not isinstance(target, str):
        agent: LabAgent = target
        return agent
    agents: Mapping[str, Any] = getattr(runtime, "agents", {})
    found = agents.get(target)
    if found is None:
        known = ", ".join(sorted(agents)) or "none"
        raise ConfigError(
            f"{where_prefix(where)}hands over to {target!r}, and the runtime has no agent with "
            f"that id (agents: {known})"
        )
    result: LabAgent = found
    return result


def handoff_graph(entry: LabAgent) -> dict[str, LabAgent]:
    """`entry` and every agent reachable through handoffs, by id."""
    graph: dict[str, LabAgent] = {}
    todo = [entry]
    while todo:
        agent = todo.pop()
        if agent.id in graph:
            continue
        graph[agent.id] = agent
        for h in agent.handoffs:
            todo.append(resolve_target(h, agent.runtime, f"agent {agent.id!r}"))
    return graph


async def held_by(store: MessageStore, scope: str) -> str | None:
    """The agent holding `scope`: the `agent` of its last assistant record (within the last
    `HOLDER_TAIL` records), or None."""
    _, records = await store.tail(scope, HOLDER_TAIL)
    messages: list[Message] = [r for r in records if r["role"] != "system"]
    return holder(messages)
