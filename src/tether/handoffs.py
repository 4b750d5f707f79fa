"""Handoffs: an agent hands the conversation over to another, inside one turn.

An agent declared with ``handoffs=[billing, Handoff(refunds, input_filter=...)]`` offers the
model one tool per target, ``transfer_to_<name>`` (an optional ``reason``). A successful call
ends the current agent's round, and the **same turn** goes on with the target: its system
prompt, tools, model, settings and guardrails, on the same session (the lab: the same memory
scope). Each assistant message says which agent wrote it (`agent`); the agent of the last one
holds the conversation, so the next turn sent to the entry agent goes to it unless the caller
names another (``send(..., agent="triage")``).

A turn hands over at most `max_handoffs` times (the entry agent's, default 5); a transfer past
that is a `HandoffLimitError` the model reads as the call's error result, and the agent that
made it answers itself.

`input_filter` decides what of the transcript the target is sent (`handoff_filters`: `all`,
the default; `last_user_message`; `no_tool_calls`); what is stored is always all of it.

This module holds what the harness and the lab share (the declaration, the filters, the
transfer tool, the turn's chain) and the harness's driver (`stream_handoffs`), which chains
the one tool loop (`tether.loop.stream_turn`) over the agents of a turn.
"""

from __future__ import annotations

import re
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeAlias, TypeVar, cast

from ._params import bad, check_function, where_prefix
from .errors import ConfigError, HandoffLimitError, ToolError
from .events import AgentEvent, DoneEvent, HandoffEvent, Part, Usage
from .loop import stream_turn
from .session import Message, Session, fold
from .stop import RoundResult, StopCondition
from .tools import Tool, define_tool
from .turn import TurnOptions

if TYPE_CHECKING:
    from .context import RunContext
    from .session import SessionLike
    from .turn import TurnPlan

__all__ = [
    "DEFAULT_MAX_HANDOFFS",
    "Handoff",
    "HandoffChain",
    "HandoffFilters",
    "InputFilter",
    "handoff_filters",
    "stream_handoffs",
    "transfer_tool",
    "transfer_tool_name",
]

DEFAULT_MAX_HANDOFFS = 5
"""How many times one turn may hand the conversation over, unless the agent says otherwise."""

InputFilter: TypeAlias = Callable[[list[Message]], list[Message]]
"""What a handoff target is sent: a function of the transcript (the transfer call and its
result included) returning the messages the target sees. It must not change its input."""

A = TypeVar("A")


class HandoffAgent(Protocol):
    """What a turn that hands over needs of each agent in it (a harness `Agent` is one; this
    module sits below the class, which is checked where handoffs are declared)."""

    name: str | None
    max_handoffs: int

    @property
    def stop_when(self) -> Sequence[StopCondition]: ...

    @property
    def handoffs_by_name(self) -> Mapping[str, Handoff[Any]]: ...

    def plan_turn(self, session: SessionLike, options: TurnOptions | None = None) -> TurnPlan: ...


_NAME = re.compile(r"^[A-Za-z0-9_-]{1,48}$")


# -- the built-in filters ----------------------------------------------------------------


def _all(messages: list[Message]) -> list[Message]:
    return messages


def _last_user_message(messages: list[Message]) -> list[Message]:
    for message in reversed(messages):
        if message["role"] == "user":
            return [message]
    return []


def _no_tool_calls(messages: list[Message]) -> list[Message]:
    out: list[Message] = []
    for message in messages:
        if message["role"] == "tool":
            continue
        if message["role"] == "assistant":
            kept: list[Part] = [p for p in message["content"] if p["type"] != "tool_call"]
            if not kept:
                continue
            if len(kept) != len(message["content"]):
                trimmed: Message = {**message, "content": kept}
                out.append(trimmed)
                continue
        out.append(message)
    return out


class HandoffFilters:
    """The built-in input filters (`handoff_filters.all`, `.last_user_message`,
    `.no_tool_calls`)."""

    __slots__ = ()

    all: InputFilter = staticmethod(_all)
    """The whole transcript (the default)."""
    last_user_message: InputFilter = staticmethod(_last_user_message)
    """Only the turn's user message: the target starts afresh on the request."""
    no_tool_calls: InputFilter = staticmethod(_no_tool_calls)
    """The transcript without tool calls and tool results (the transfer's included): what was
    said, not what was done; an assistant message left empty is dropped."""


handoff_filters = HandoffFilters()
"""The built-in input filters: ``input_filter=handoff_filters.last_user_message``."""


# -- the declaration -----------------------------------------------------------------------


def transfer_tool_name(name: str) -> str:
    """``transfer_to_<name>``, the tool that hands over to the agent `name`."""
    return f"transfer_to_{name}"


@dataclass(slots=True, frozen=True, init=False)
class Handoff(Generic[A]):
    """A handoff target as an agent declares it (``handoffs=[Handoff(billing, ...)]``).

    Args:
        agent: The agent the conversation goes to (a named `Agent`; the lab's `LabHandoff`
            takes a lab agent or its id).
        description: What the transfer tool tells the model about when to use it (default:
            the target's description, or a sentence naming it).
        input_filter: What of the transcript the target is sent (`handoff_filters`; default:
            all of it).
    """

    agent: A
    description: str | None
    input_filter: InputFilter | None

    def __init__(
        self,
        agent: A,
        *,
        description: str | None = None,
        input_filter: InputFilter | None = None,
    ) -> None:
        self._check_target(agent)
        if description is not None and not isinstance(description, str):
            raise bad("description", description, "a string")
        check_function(
            "input_filter", input_filter, "a function (messages) -> messages (handoff_filters)"
        )
        object.__setattr__(self, "agent", agent)
        object.__setattr__(self, "description", description)
        object.__setattr__(self, "input_filter", input_filter)

    def _check_target(self, agent: Any) -> None:
        # That it is an `Agent` is checked where it is declared (`create_agent(handoffs=)`,
        # beside the class): this module sits below the agent it hands over to.
        if not isinstance(getattr(agent, "name", 0), str | None):
            raise bad("Handoff(agent)", agent, "an Agent (create_agent(name=...))")
        if agent.name is None:
            raise ConfigError(
                "Handoff(agent): a handoff target needs a name, the one its transfer tool and "
                "its messages carry: create_agent(name='billing', ...)"
            )
        check_handoff_name(agent.name, "Handoff(agent)")

    @property
    def name(self) -> str:
        """The target's name (the tool is ``transfer_to_<name>``)."""
        name: str = getattr(self.agent, "name", None) or str(getattr(self.agent, "id", ""))
        return name

    def filtered(self, messages: list[Message]) -> list[Message]:
        """What the target is sent of `messages` (checked: a filter must return a list)."""
        if self.input_filter is None:
            return messages
        out = self.input_filter(list(messages))
        if not isinstance(out, list):
            raise ConfigError(
                f"the input_filter of the handoff to {self.name!r} returned "
                f"{type(out).__name__}; it must return a list of messages"
            )
        return out


def check_handoff_name(name: Any, where: str = "") -> str:
    """A name a transfer tool can carry (letters, digits, '_' or '-', at most 48)."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise ConfigError(
            f"{where_prefix(where)}{name!r} cannot name a handoff target: a name is 1-48 "
            "letters, digits, '_' or '-' (its tool is transfer_to_<name>)"
        )
    return name


# -- one turn's chain ------------------------------------------------------------------------


class HandoffChain:
    """The handoffs of one turn: how many happened, the bound, and the transfer the current
    agent asked for (its target, reason and call id), until the driver takes it."""

    __slots__ = ("count", "limit", "requested")

    def __init__(self, limit: int) -> None:
        self.count = 0
        self.limit = limit
        self.requested: tuple[str, str | None, str] | None = None
        """(target name, reason, tool call id) of the transfer asked for this round."""

    def request(self, target: str, reason: str | None, call_id: str) -> str:
        """A transfer call: accepted (the tool's text) or refused (`HandoffLimitError`, or a
        `ToolError` for a second transfer in one round)."""
        if self.requested is not None:
            raise ToolError(
                f"this turn is already being handed over to {self.requested[0]!r}; "
                "one transfer per round"
            )
        if self.count >= self.limit:
            raise HandoffLimitError(
                f"cannot transfer to {target!r}: this turn was handed over {self.count} "
                f"time(s), the most it may be (max_handoffs={self.limit}); answer the user "
                "yourself",
                limit=self.limit,
            )
        self.requested = (target, reason, call_id)
        return f"Transferred to {target}. {target} answers from here on."

    def take(self) -> tuple[str, str | None, str] | None:
        """The transfer asked for (counted now), or None; the chain is ready for the next."""
        requested, self.requested = self.requested, None
        if requested is not None:
            self.count += 1
        return requested

    def stop(self, rounds: Sequence[RoundResult]) -> bool:
        """The stop condition of a turn that may hand over: a round with a transfer ends it."""
        return self.requested is not None


def transfer_tool(name: str, description: str | None) -> Tool:
    """The tool ``transfer_to_<name>``: it asks the turn's chain (`RunContext`) to hand over."""

    async def execute(value: dict[str, Any], ctx: RunContext) -> str:
        chain = ctx.handoff_chain
        if not isinstance(chain, HandoffChain) or ctx.tool_call_id is None:
            raise ToolError(f"transfer_to_{name} works only inside a turn of its agent")
        reason = value.get("reason")
        return chain.request(name, reason if isinstance(reason, str) else None, ctx.tool_call_id)

    text = f"Hand the conversation over to the {name} agent, which answers the user from here on."
    if description:
        text = f"{text} {description}"
    return define_tool(
        name=transfer_tool_name(name),
        description=text,
        input_schema={
            "type": "object",
            "properties": {
                "reason": {"type": "string", "description": "Why the conversation goes to it."}
            },
        },
        execute=execute,
    )


# -- the harness's driver --------------------------------------------------------------------


def _add_usage(total: dict[str, int], usage: Usage) -> None:
    for key, value in usage.items():
        if isinstance(value, int):
            total[key] = total.get(key, 0) + value


async def stream_handoffs(
    entry: HandoffAgent,
    start: HandoffAgent,
    session: Session,
    text: str | list[Part] | None,
    options: TurnOptions,
    rounds: list[RoundResult] | None = None,
) -> AsyncGenerator[AgentEvent, None]:
    """One turn of `start` (the entry agent, or the agent of its handoffs holding the
    conversation) that goes on with each agent handed to, yielding every event like
    `Agent.send()`. Between two agents: a `handoff` event (the first agent's `done` is not
    handed out: the turn is not over); the last `done` carries the whole turn's usage.

    The session is read, never written; what the target is sent is its handoff's
    `input_filter` applied to the transcript as the turn made it so far. `rounds` gets every
    agent's rounds, in order.
    """
    chain = HandoffChain(entry.max_handoffs)
    agent = start
    messages: list[Message] = list(session.messages)
    memory: dict[str, Any] = dict(session.memory)
    view = session
    total: dict[str, int] = {}
    opts = options
    while True:
        plan = agent.plan_turn(view, _with_stop(agent, opts, chain))
        plan.ctx.handoff_chain = chain
        done: DoneEvent | None = None
        events = stream_turn(plan, view, text)
        try:
            async for event in events:
                if event["type"] == "done":
                    done = event
                    break
                if event["type"] == "progress" and event["stage"] == "done" and chain.requested:
                    continue  # the turn goes on with the next agent
                fold(messages, memory, event)
                yield event
        finally:
            await events.aclose()
            if rounds is not None:
                rounds.extend(plan.rounds)
        if done is None:  # an error ended the turn (already handed out)
            return
        _add_usage(total, done["usage"])
        requested = chain.take()
        if requested is None:
            done["usage"] = cast(Usage, dict(total))
            yield done
            return
        target_name, reason, call_id = requested
        handoff = agent.handoffs_by_name[target_name]
        handed: HandoffEvent = {
            "type": "handoff",
            "from_agent": agent.name or "",
            "to_agent": target_name,
            "reason": reason,
            "tool_call_id": call_id,
        }
        yield handed
        view = Session(id=session.id, messages=handoff.filtered(messages), memory=memory)
        agent = handoff.agent
        text = None
        # The caller's signal, services and context go on; the entry agent's own overrides
        # (its prompt, tools, settings) are not the target's.
        opts = _carried(options)


def _with_stop(agent: HandoffAgent, options: TurnOptions, chain: HandoffChain) -> TurnOptions:
    given = options.stop_when
    if given is None:
        conditions: list[StopCondition] = list(agent.stop_when)
    elif callable(given):
        conditions = [given]
    else:
        conditions = list(given)
    conditions.append(chain.stop)
    return replace(options, stop_when=conditions)


def _carried(options: TurnOptions) -> TurnOptions:
    return TurnOptions(signal=options.signal, services=options.services, context=options.context)
