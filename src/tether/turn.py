"""What one turn runs with: the agent's tools (`Toolbox`) and the prepared turn (`TurnPlan`).

`Agent.plan_turn()` is the one factory of a `TurnPlan`: the client, the system prompt's parts,
the tools, the guards, the tracer, the `RunContext`, the model settings and the limits, resolved
once from the agent's declaration and the run's overrides. The tool loop (`tether.loop`), the
cascade ladder and the lab's episodes all start from a plan, so none of them needs to know how an
agent keeps its parts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, TypeAlias

from .errors import ToolDefinitionError
from .integrations import Integrations, IntegrationSource, SourceConnection
from .prompt import PromptLayer, assemble_system
from .resources import Resource, attach_envelope
from .stop import RoundResult, StopCondition

if TYPE_CHECKING:
    from .blobs import BlobResolver
    from .context import RunContext
    from .guardrails import OutputGuardrail, ToolCallGuardrail
    from .history import HistoryProcessor, Summary, TurnHistory
    from .llm.base import LLMClient, ModelSettings, SystemBlock, ToolSpec
    from .session import Session, SessionLike
    from .signals import AbortSignal
    from .tools import Tool
    from .tracing import Tracer

__all__ = [
    "DEFAULT_MAX_TOOL_RESULT_BYTES",
    "DEFAULT_MAX_TOOL_RESULT_CHARS",
    "DEFAULT_MAX_TOOL_ROUNDS",
    "UNSET",
    "ModelSpec",
    "SystemPromptSpec",
    "Toolbox",
    "Toolset",
    "TurnOptions",
    "TurnPlan",
    "TurnPlanner",
    "index_tools",
]

ModelSpec: TypeAlias = "str | LLMClient | Mapping[str, Any]"
"""A model: ``"provider:model"``, an `LLMClient`, or a model config dict (``{"model",
"base_url", "api_key", "headers", "max_retries", "stream_retries", …}``)."""

SystemPromptSpec: TypeAlias = "str | PromptLayer | Sequence[str | PromptLayer]"
"""A system prompt: one string (one layer), one `PromptLayer`, or a list of them in order."""

DEFAULT_MAX_TOOL_ROUNDS = 8
"""The harness's bound on tool rounds per turn (the seed's `maxToolRounds`)."""

DEFAULT_MAX_TOOL_RESULT_CHARS = 100_000
DEFAULT_MAX_TOOL_RESULT_BYTES = 10_000_000
"""The media (images, documents, audio) one tool result may carry, in decoded bytes."""
"""Tool and MCP results longer than this are truncated, with a marker the model can read."""

UNSET: Any = object()
"""`TurnOptions.max_tool_rounds` when the run does not set it (None means no bound)."""


class _NoTools(tuple["Tool", ...]):
    __slots__ = ()

    def __repr__(self) -> str:
        return "NO_TOOLS"


NO_TOOLS: tuple[Tool, ...] = _NoTools()
"""`TurnOptions(tools=NO_TOOLS)`: a turn that offers the model no tools at all, the integration
sources' (MCP servers') included (the lab's structured-output follow-up is an answer, not a
tool round)."""


@dataclass(slots=True)
class TurnOptions:
    """Per-turn overrides of the agent's own settings; None keeps the agent's. Never written
    to: one options object serves any number of turns (each turn's rounds are its plan's)."""

    signal: AbortSignal | None = None
    services: Mapping[str, Any] | None = None
    """Overlaid key by key on the agent's services."""
    context: Any = None
    """Handed to tools as `ctx.context`; never stored, never sent to the model."""
    system_prompt: SystemPromptSpec | None = None
    """Replaces the agent's system prompt for this turn."""
    tools: Sequence[Tool] | None = None
    """Replaces the agent's declared tools (the integration sources' stay; `NO_TOOLS`: none at
    all)."""
    stop_when: Sequence[StopCondition] | StopCondition | None = None
    response_format: dict[str, Any] | None = None
    stream_retries: int | None = None
    settings: ModelSettings | None = None
    """Overlaid key by key on the agent's settings (the run wins)."""
    max_tool_rounds: int | None = UNSET
    """This turn's bound on tool rounds (None: no bound); unset keeps the agent's."""
    history_sink: Callable[[Summary], None] | None = None
    """Where the summaries a `summarize` policy makes go (the lab stores them in the scope);
    with it, the processor keeps none of its own."""
    agent: str | None = None
    """Which agent of the entry agent's handoffs takes this turn (its name; the entry agent's
    own included); None: the agent holding the conversation (`tether.handoffs`)."""


class TurnPlanner(Protocol):
    """What runs turns for a ladder (an `Agent`): declared workflows, sessions, turn plans."""

    @property
    def workflows(self) -> Mapping[str, Any]: ...

    def create_session(self) -> Session: ...

    def plan_turn(self, session: SessionLike, options: TurnOptions | None = None) -> TurnPlan: ...


@dataclass(frozen=True, slots=True)
class Toolset:
    """The tools of one turn: by name, as wire specs, and the resources attached to the prompt."""

    index: Mapping[str, Tool]
    specs: list[ToolSpec]
    """Sent as the request's `tools`; shared between turns, never modified."""
    attach: tuple[Resource, ...]


class Toolbox:
    """The agent's tools: the declared ones, resources in `tool` mode, and what the integration
    sources (MCP servers) contribute once connected. Connection is lazy and memoized (see
    `tether.integrations`); the tool index is built once per set of connections."""

    def __init__(
        self,
        tools: Sequence[Tool],
        resources: Sequence[Resource],
        integrations: Sequence[IntegrationSource],
    ) -> None:
        self.declared: tuple[Tool, ...] = tuple(tools)
        """The tools declared on the agent."""
        self.resources: tuple[Resource, ...] = tuple(resources)
        self._attach = tuple(r for r in self.resources if r.mode == "attach")
        own = [*self.declared, *(r.as_tool() for r in self.resources if r.mode == "tool")]
        self._own = own
        self._own_index = index_tools(own)
        self._integrations = Integrations(integrations, list(self._own_index))
        self._cache: tuple[object, Toolset] | None = None
        self._static: Toolset | None = None
        if not self._integrations.sources:  # nothing to connect: the tools are known now
            self._static = Toolset(
                MappingProxyType(self._own_index), [t.spec for t in own], self._attach
            )

    @property
    def ready(self) -> Toolset | None:
        """The declared tools when there are no sources to connect (None otherwise)."""
        return self._static

    @property
    def sources(self) -> list[IntegrationSource]:
        """The integration sources (MCP servers) whose tools join the declared ones."""
        return self._integrations.sources

    @property
    def tools(self) -> list[Tool]:
        """The declared set until the sources connect, and everything afterwards."""
        conns = self._integrations.connected
        return self._own + [t for c in conns or () for t in c.tools]

    async def connect(
        self, signal: AbortSignal | None = None, *, tracer: Tracer | None = None
    ) -> list[SourceConnection]:
        """Connect every source unless connected; see `Integrations.ensure`."""
        return await self._integrations.ensure(signal, tracer=tracer)

    async def toolset(
        self,
        signal: AbortSignal | None = None,
        *,
        tracer: Tracer | None = None,
        override: Sequence[Tool] | None = None,
    ) -> Toolset:
        """Connect (unless connected), then the turn's tools: `override` replaces the declared
        ones (the sources' tools stay). Built once per set of connections when not overridden."""
        conns = await self._integrations.ensure(signal, tracer=tracer)
        if override is NO_TOOLS:
            return Toolset(
                MappingProxyType({}), [], self._attach + tuple(r for c in conns for r in c.attach)
            )
        if override is None:
            cached = self._cache
            if cached is not None and cached[0] is conns:
                return cached[1]
        tools = (self._own if override is None else list(override)) + [
            t for c in conns for t in c.tools
        ]
        value = Toolset(
            MappingProxyType(index_tools(tools)),
            [t.spec for t in tools],
            self._attach + tuple(r for c in conns for r in c.attach),
        )
        if override is None:
            self._cache = (conns, value)
        return value

    async def aclose(self) -> None:
        """End the integration sessions; a later turn reconnects."""
        await self._integrations.aclose()


def index_tools(tools: Sequence[Tool]) -> dict[str, Tool]:
    """Tools by name; two with one name are a ToolDefinitionError."""
    index: dict[str, Tool] = {}
    for t in tools:
        if t.name in index:
            raise ToolDefinitionError(f"two tools are named {t.name!r}; tool names must be unique")
        index[t.name] = t
    return index


class TurnPlan(NamedTuple):
    """One turn, prepared: everything the loop needs, resolved from the agent and the run.

    Made by `Agent.plan_turn()`; read-only (a tuple: the `rounds` list is filled as the turn
    runs).
    """

    client: LLMClient
    """The model client of this turn."""
    ctx: RunContext
    """The turn's context: what tools, resources, layers and guardrails receive."""
    toolbox: Toolbox
    """Where the tools come from (declared, resources, integration sources)."""
    tools: tuple[Tool, ...] | None
    """The run's replacement for the declared tools; None keeps the agent's."""
    static: list[SystemBlock]
    """The static prompt layers as system blocks (cache placement done); never modified."""
    dynamic: tuple[PromptLayer, ...]
    """Layers evaluated every turn, after the static ones."""
    tool_guards: tuple[tuple[str, ToolCallGuardrail], ...]
    """Tool-call guardrails in order (the agent's `on_tool_call` first, named so)."""
    output_guards: tuple[tuple[str, OutputGuardrail], ...]
    """Output guardrails in order."""
    settings: ModelSettings
    """The model settings: the agent's overlaid key by key with the run's (empty: none)."""
    response_format: dict[str, Any] | None
    """Structured output asked of the provider, or None."""
    max_tool_rounds: int | None
    """The bound on tool rounds; None: no bound (the stop conditions govern)."""
    stop_when: tuple[StopCondition, ...]
    """Checked after every tool round; the first that holds ends the turn."""
    stream_retries: int
    """Reruns of a model call whose stream broke after it started."""
    max_tool_result_chars: int | None
    """Longer tool and MCP results are truncated with a marker; None: no limit."""
    rounds: list[RoundResult]
    """One entry per model request, appended as the turn runs (the lab's `turns`)."""
    history: tuple[HistoryProcessor, ...] = ()
    """The history policy: processors run in order on what each model call sends (empty:
    the whole transcript, as it is)."""
    history_sink: Callable[[Summary], None] | None = None
    """Where summaries go (`TurnOptions.history_sink`); None: the processor keeps them."""
    blobs: BlobResolver | None = None
    """Reads the media a request refers to by blob reference (`tether.blobs`); None: the
    messages carry no references."""
    max_tool_result_bytes: int | None = None
    """The media bytes one tool result may carry (more are dropped, with a marker); None: no
    limit. The agent's default is `DEFAULT_MAX_TOOL_RESULT_BYTES`."""
    agent: str | None = None
    """The agent's name: its assistant messages carry it (`agent`); None: they carry none."""

    def history_of(self) -> TurnHistory:
        """A fresh history state for one turn of this plan (with `history` set)."""
        from .history import HistoryContext, TurnHistory, context_window_of

        client = self.client
        ctx = HistoryContext(
            session_id=self.ctx.session_id,
            model=client.model,
            provider=getattr(client, "provider", None),
            context_window=context_window_of(client),
            services=self.ctx.services,
            sink=self.history_sink,
        )
        return TurnHistory(self.history, ctx)

    @property
    def tracer(self) -> Tracer | None:
        """The turn's tracer (None when tracing is off)."""
        return self.ctx.tracer

    @property
    def signal(self) -> AbortSignal | None:
        """The turn's abort signal."""
        return self.ctx.signal

    @property
    def ready_toolset(self) -> Toolset | None:
        """This turn's tools when nothing needs connecting (None: await `toolset()`)."""
        return self.toolbox.ready if self.tools is None else None

    async def toolset(self) -> Toolset:
        """Connect the integration sources (unless connected) and return this turn's tools."""
        ctx = self.ctx
        return await self.toolbox.toolset(ctx.signal, tracer=ctx.tracer, override=self.tools)

    def static_prompt(self, toolset: Toolset) -> list[SystemBlock] | None:
        """The system prompt when it is all static (None: await `system_prompt()`)."""
        return self.static if not self.dynamic and not toolset.attach else None

    async def system_prompt(self, toolset: Toolset) -> list[SystemBlock]:
        """The system prompt of this turn: static blocks, then the dynamic layers rendered now,
        then the attached resources read now (each in its `<resource>` envelope)."""
        ctx = self.ctx
        extra = [await _attach_body(r, ctx) for r in toolset.attach] if toolset.attach else ()
        return await assemble_system(self.static, self.dynamic, extra, ctx)


async def _attach_body(resource: Resource, ctx: RunContext) -> str:
    body = await resource.read(None, ctx)
    return attach_envelope(resource.name, body, resource.description)
