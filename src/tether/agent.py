"""`create_agent()`: an agent assembled from prompt layers, tools, workflows and resources."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

import httpx

from .client_messages import ClientMessage, frame_client_message, should_run_turn
from .errors import ConfigError, ToolDefinitionError
from .events import AgentEvent
from .guardrails import Guardrail
from .integrations import Integrations, IntegrationSource, SourceConnection
from .llm import LLMClient, client_from_config
from .llm.base import ToolSpec
from .loop import TurnOptions, run_turn
from .prompt import PromptLayer, prompt_layer, static_blocks
from .resources import Resource
from .session import Session
from .stop import StopCondition
from .tools import Tool
from .tracing import Tracer, TraceSink

if TYPE_CHECKING:
    from .signals import AbortSignal
    from .workflows import LadderOutcome, LadderWorkflow

__all__ = ["Agent", "create_agent"]

_Toolset: TypeAlias = tuple[dict[str, Tool], list[ToolSpec], list[Resource]]


class Agent:
    """Holds the declared parts; `send()` runs a turn, `run_workflow()` runs a ladder."""

    def __init__(
        self,
        *,
        llm: dict[str, Any] | LLMClient,
        prompt: Sequence[PromptLayer | str] = (),
        tools: Sequence[Tool] = (),
        workflows: Sequence[LadderWorkflow] = (),
        resources: Sequence[Resource] = (),
        guardrails: Sequence[Guardrail] = (),
        integrations: Sequence[IntegrationSource] = (),
        max_tool_rounds: int = 8,
        stop_when: Sequence[StopCondition] | StopCondition | None = None,
        trace: bool | TraceSink = False,
        services: dict[str, Any] | None = None,
        on_tool_call: Callable[..., Any] | None = None,
    ) -> None:
        self._owns_client = isinstance(llm, dict)
        self.client: LLMClient = client_from_config(llm)
        layers = [
            prompt_layer(f"layer{i}", p) if isinstance(p, str) else p for i, p in enumerate(prompt)
        ]
        self.prompt = layers
        self._static = static_blocks(layers)
        self._dynamic = [layer for layer in layers if not layer.is_static]
        self.declared_tools = list(tools)
        self.resources = list(resources)
        self._attach = [r for r in self.resources if r.mode == "attach"]
        own = self.declared_tools + [r.as_tool() for r in self.resources if r.mode == "tool"]
        self._own_tools = own
        self._own_index = _index(own)
        self.workflows: dict[str, LadderWorkflow] = {}
        for w in workflows:
            name = getattr(w, "name", None)
            if not isinstance(name, str) or not hasattr(w, "steps"):
                raise ToolDefinitionError(
                    f"workflows= takes ladders from define_workflow(); got {w!r}. A durable "
                    "workflow from create_workflow() runs on its own with .run(input)"
                )
            if name in self.workflows:
                raise ToolDefinitionError(f"two workflows are named {name!r}")
            self.workflows[name] = w
        self.guardrails = list(guardrails)
        self._tool_guards = [(g.name, g.tool_call) for g in self.guardrails if g.tool_call]
        self._output_guards = [(g.name, g.output) for g in self.guardrails if g.output]
        self.on_tool_call = on_tool_call
        if max_tool_rounds < 1:
            raise ToolDefinitionError("max_tool_rounds must be at least 1")
        self.max_tool_rounds = max_tool_rounds
        self.stop_when: Sequence[StopCondition] = (
            () if stop_when is None else [stop_when] if callable(stop_when) else list(stop_when)
        )
        if not (isinstance(trace, bool) or callable(trace)):
            raise ConfigError(f"trace= must be True, False or a sink function, got {trace!r}")
        Tracer.from_option(trace, None)  # refuses an async sink now rather than at the first turn
        self.trace = trace
        self.services = dict(services or {})
        self._integrations = Integrations(integrations, list(self._own_index))
        self._toolset_cache: (
            tuple[object, tuple[dict[str, Tool], list[ToolSpec], list[Resource]]] | None
        ) = None
        self._http_client: httpx.AsyncClient | None = None

    # -- tools -------------------------------------------------------------------------------

    @property
    def tools(self) -> list[Tool]:
        """The declared set until the sources connect, and everything afterwards."""
        conns = self._integrations.connected
        return self._own_tools + [t for c in conns or () for t in c.tools]

    def _toolset(self, conns: list[SourceConnection], override: Sequence[Tool] | None) -> _Toolset:
        """Name index, wire specs and attach resources; built once per set of connections."""
        if override is None:
            cached = self._toolset_cache
            if cached is not None and cached[0] is conns:
                return cached[1]
        tools = (self._own_tools if override is None else list(override)) + [
            t for c in conns for t in c.tools
        ]
        value: _Toolset = (
            _index(tools),
            [t.spec for t in tools],
            self._attach + [r for c in conns for r in c.attach],
        )
        if override is None:
            self._toolset_cache = (conns, value)
        return value

    def _http(self) -> httpx.AsyncClient:
        if self._http_client is None:
            self._http_client = httpx.AsyncClient()
        return self._http_client

    # -- turns -------------------------------------------------------------------------------

    def create_session(self) -> Session:
        return Session()

    def send(
        self,
        session: Session,
        text: str | None,
        *,
        signal: AbortSignal | None = None,
        services: dict[str, Any] | None = None,
        context: Any = None,
        prompt: Sequence[PromptLayer] | None = None,
        tools: Sequence[Tool] | None = None,
        stop_when: Sequence[StopCondition] | None = None,
        response_format: dict[str, Any] | None = None,
        stream_retries: int | None = None,
        options: TurnOptions | None = None,
    ) -> AsyncIterator[AgentEvent]:
        """Run one turn, yielding events. Fold each with `reduce(session, event)`.

        `text=None` runs a turn on the transcript as it stands (no new user message).
        """
        opts = options or TurnOptions()
        opts.signal = signal or opts.signal
        opts.services = services or opts.services
        opts.context = context if context is not None else opts.context
        opts.prompt = prompt if prompt is not None else opts.prompt
        opts.tools = tools if tools is not None else opts.tools
        opts.stop_when = stop_when if stop_when is not None else opts.stop_when
        opts.response_format = response_format or opts.response_format
        opts.stream_retries = stream_retries if stream_retries is not None else opts.stream_retries
        return run_turn(self, session, text, opts)

    async def send_client_message(
        self,
        session: Session,
        msg: ClientMessage,
        *,
        signal: AbortSignal | None = None,
        services: dict[str, Any] | None = None,
    ) -> AsyncIterator[AgentEvent]:
        """Gate with should_run_turn, frame, then run the same loop as send(). A silent-apply
        message yields nothing and never reaches the provider."""
        if not should_run_turn(msg):
            return
        async for event in self.send(
            session, frame_client_message(msg), signal=signal, services=services
        ):
            yield event

    async def run_workflow(
        self,
        session: Session,
        name: str,
        input: Any = None,
        *,
        services: dict[str, Any] | None = None,
        signal: AbortSignal | None = None,
        on_event: Callable[[Any], Any] | None = None,
    ) -> LadderOutcome:
        """Run a declared cascade ladder; see `tether.workflows.define_workflow`.

        Step, trace and memory events are kept on `outcome.events`; `on_event` sees them live.
        """
        from .workflows import run_ladder

        return await run_ladder(
            self, session, name, input, services=services, signal=signal, on_event=on_event
        )

    # -- integrations ------------------------------------------------------------------------

    async def connect(self, signal: AbortSignal | None = None) -> list[dict[str, Any]]:
        """Connect every integration now and report what each offered (traced like a turn's)."""
        tracer = Tracer.from_option(self.trace, None)
        return [c.report for c in await self._integrations.ensure(signal, tracer=tracer)]

    async def aclose(self) -> None:
        """End integration sessions and close connections the agent opened. The agent stays
        usable: a later send() reconnects."""
        await self._integrations.aclose()
        if self._http_client is not None:
            await self._http_client.aclose()
            self._http_client = None

    async def close(self) -> None:
        """`aclose()` under the name the design gives it (``await agent.close()``)."""
        await self.aclose()

    async def __aenter__(self) -> Agent:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
        if self._owns_client:
            await self.client.aclose()


def _index(tools: Sequence[Tool]) -> dict[str, Tool]:
    index: dict[str, Tool] = {}
    for t in tools:
        if t.name in index:
            raise ToolDefinitionError(f"two tools are named {t.name!r}; tool names must be unique")
        index[t.name] = t
    return index


def create_agent(**config: Any) -> Agent:
    """Assemble an agent. Synchronous: nothing here reaches the network."""
    return Agent(**config)
