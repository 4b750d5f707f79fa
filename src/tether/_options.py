"""The agent's keyword parameters, written once as `TypedDict`s.

`create_agent(**options: Unpack[AgentOptions])`, `Agent(...)` and the per-turn overrides of
`send()` / `run_turn()` / `run_turn_sync()` (`TurnOverrides`) take these keywords, and the lab's
`Runtime.create_agent`, `Runtime(defaults=...)` and `LabAgent.run()` / `stream()` build theirs
on `AgentParts` (`tether.lab._definition`). mypy checks every keyword against them (a misspelt
one is an error before anything runs); at run time `refuse_unknown` says the same thing with
the closest name. What a value may be is checked by `tether._params`.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypedDict

if TYPE_CHECKING:
    from .blobs import BlobResolver, BlobStore
    from .guardrails import Guardrail, ToolCallGuardrail
    from .handoffs import Handoff, HandoffAgent
    from .history import HistoryProcessor
    from .integrations import IntegrationSource
    from .llm.base import ModelSettings
    from .resources import Resource
    from .signals import AbortSignal
    from .stop import StopCondition
    from .tools import Tool
    from .tracing import TraceSink
    from .turn import ModelSpec, SystemPromptSpec
    from .workflows import LadderWorkflow, Workflow

__all__ = ["AgentOptions", "AgentParts", "TurnOverrides", "keys_of", "refuse_unknown"]


class AgentParts(TypedDict, total=False):
    """The parts a harness agent and a lab agent share, under the same names. None is the same
    as not giving a part (`max_tool_rounds=None` aside: no bound)."""

    model: ModelSpec | list[ModelSpec] | None
    """``"provider:model"``, an `LLMClient`, or a model config dict; a list of them is a
    fallback chain, tried in order (`tether.llm.fallback`; harness agents)."""
    llm: ModelSpec | list[ModelSpec] | None
    """The harness seed's name for `model` (give one of the two)."""
    settings: ModelSettings | None
    """Portable model settings; a run's overlay them key by key."""
    resources: Sequence[Resource] | None
    integrations: Sequence[IntegrationSource] | None
    guardrails: Sequence[Guardrail] | None
    services: Mapping[str, Any] | None
    trace: bool | TraceSink | None
    max_tool_rounds: int | None
    max_tool_result_chars: int | None
    max_tool_result_bytes: int | None
    stop_when: StopCondition | Sequence[StopCondition] | None
    on_tool_call: ToolCallGuardrail | None
    history: Sequence[HistoryProcessor] | None
    """Processors run in order on what each model call sends (`tether.history`)."""
    max_handoffs: int | None
    """How many times one turn may hand the conversation over (default 5; `tether.handoffs`)."""


class AgentOptions(AgentParts, total=False):
    """The keywords of `create_agent` / `Agent` (see `Agent` for what each does)."""

    system_prompt: SystemPromptSpec | None
    prompt: SystemPromptSpec | None
    """The harness seed's name for `system_prompt` (give one of the two)."""
    tools: Sequence[Tool] | None
    workflows: Sequence[LadderWorkflow | Workflow[Any, Any]] | None
    blobs: BlobResolver | BlobStore | None
    """Where media referred to by `{"blob": sha256}` parts is read from (`tether.blobs`)."""
    name: str | None
    """The agent's name: its assistant messages carry it, and a handoff to it is the tool
    ``transfer_to_<name>`` (`tether.handoffs`)."""
    handoffs: Sequence[HandoffAgent | Handoff[HandoffAgent]] | None
    """The agents this one may hand the conversation over to (`tether.handoffs`)."""


class TurnOverrides(TypedDict, total=False):
    """The per-turn keywords of `send()` / `run_turn()` / `run_turn_sync()` (`TurnOptions`
    under keyword names; None keeps the agent's)."""

    signal: AbortSignal | None
    services: Mapping[str, Any] | None
    context: Any
    system_prompt: SystemPromptSpec | None
    prompt: SystemPromptSpec | None
    tools: Sequence[Tool] | None
    stop_when: Sequence[StopCondition] | StopCondition | None
    response_format: dict[str, Any] | None
    stream_retries: int | None
    settings: ModelSettings | None
    agent: str | None
    """Which agent of the entry agent's handoffs takes the turn (by name); None: the one
    holding the conversation."""


def keys_of(options: type) -> frozenset[str]:
    """The keywords a `TypedDict` of this module names (its own and inherited)."""
    return frozenset(options.__annotations__)


def refuse_unknown(where: str, given: Mapping[str, Any], known: Collection[str]) -> None:
    """Raise the `TypeError` Python raises for an unexpected keyword, with the closest name.

    Raises:
        TypeError: ``create_agent() got an unexpected keyword argument 'max_tool_round' (did
            you mean 'max_tool_rounds'?)``.
    """
    for key in given:
        if key not in known:
            close = difflib.get_close_matches(key, sorted(known), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise TypeError(f"{where}() got an unexpected keyword argument {key!r}{hint}")
