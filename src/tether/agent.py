"""`create_agent()`: an agent assembled from prompt layers, tools, workflows and resources."""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import threading
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Callable,
    Coroutine,
    Mapping,
    MutableMapping,
    Sequence,
)
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar, Unpack

from ._options import AgentOptions, TurnOverrides, keys_of, refuse_unknown
from ._params import (
    bad,
    check_blobs,
    check_count,
    check_function,
    check_limit,
    check_max_tool_rounds,
    check_services,
    check_settings,
    check_stop_when,
    check_trace,
    merge_settings,
    model_client_spec,
    one_of,
    prompt_layers,
    sequence_of,
)
from .approvals import Decision, check_decisions
from .client_messages import ClientMessage, frame_client_message, should_run_turn
from .context import RunContext
from .errors import ConfigError, WorkflowError
from .events import AgentEvent, FinishReason, Part, PendingCall, Usage
from .guardrails import Guardrail, ToolCallGuardrail
from .handoffs import (
    DEFAULT_MAX_HANDOFFS,
    Handoff,
    stream_handoffs,
    transfer_tool,
)
from .history import HistoryProcessor, check_history
from .integrations import IntegrationSource
from .llm import LLMClient, client_from_config
from .llm.base import ModelSettings
from .loop import stream_turn
from .media import UserContent, user_parts
from .prompt import PromptLayer, static_blocks
from .resources import Resource
from .session import Session, SessionLike, as_session, holder, reduce
from .signals import AbortSignal
from .stop import RoundResult, StopCondition
from .tools import Tool
from .tracing import Tracer, TraceSink
from .turn import (
    DEFAULT_MAX_TOOL_RESULT_BYTES,
    DEFAULT_MAX_TOOL_RESULT_CHARS,
    DEFAULT_MAX_TOOL_ROUNDS,
    NO_TOOLS,
    UNSET,
    ModelSpec,
    SystemPromptSpec,
    Toolbox,
    TurnOptions,
    TurnPlan,
)
from .workflows import LadderOutcome, LadderWorkflow, Workflow, run_ladder

if TYPE_CHECKING:
    import httpx

T = TypeVar("T")

__all__ = [
    "DEFAULT_MAX_TOOL_RESULT_CHARS",
    "DEFAULT_MAX_TOOL_ROUNDS",
    "Agent",
    "ModelSpec",
    "RunTurnOptions",
    "SystemPromptSpec",
    "TurnOptions",
    "TurnResult",
    "create_agent",
]


class RunTurnOptions(TurnOverrides, total=False):
    """The keywords of `run_turn()` and `run_turn_sync()`: `send()`'s overrides, and two of
    their own."""

    decisions: Mapping[str, Decision] | None
    """Resume a paused turn with these decisions instead of sending `text` (see `resume()`)."""
    on_event: Callable[[AgentEvent], Any] | None
    """Called with each event as it happens."""


@dataclass(slots=True)
class TurnResult:
    """What `Agent.run_turn()` returns: the turn folded into the session, and its outcome."""

    session: MutableMapping[str, Any]
    """The session you passed, with the turn folded in (the same object: a `Session`, or the
    plain dict you gave)."""
    text: str
    """The final answer's text (after output guardrails)."""
    usage: Usage
    """The turn's token totals."""
    finish_reason: FinishReason | None
    """Why the turn ended, the same on every provider (see `FinishReason`)."""
    stop_reason: str | None
    """The provider's raw stop reason (or `max_tool_rounds` / `guardrail_denied`)."""
    rounds: list[RoundResult]
    """One entry per model request."""
    events: list[AgentEvent]
    """Every event of the turn, in order."""
    pending: list[PendingCall] = field(default_factory=list)
    """The calls the turn paused on (``finish_reason == "paused"``); resume with
    `run_turn(session, decisions=...)` or `resume()`."""


class Agent:
    """An agent assembled from declared parts. `send()` streams a turn, `run_turn()` runs one to
    its end, `run_workflow()` runs a declared workflow.

    Args:
        model: ``"provider:model"``, an `LLMClient`, or a model config dict. `llm=` is the
            harness seed's name for it (an alias; give one of the two).
        system_prompt: A string (one layer), a `PromptLayer`, or a list of strings and layers.
            `prompt=` is the harness seed's name for it (an alias).
        tools: Tools from `define_tool` / `@tool`.
        workflows: Cascade ladders (`define_workflow`) and durable workflows
            (`create_workflow`), run by name with `run_workflow()`.
        resources: Resources from `define_resource` (attached to the prompt, or read as tools).
        guardrails: Guardrails from `define_guardrail`, in order.
        integrations: Sources of tools and resources (`mcp_server`, `mcp_stdio`).
        settings: Portable model settings (temperature, max_tokens, reasoning, …); a run's
            `settings=` overlays them key by key.
        max_tool_rounds: The bound on tool rounds per turn (default 8); None: no bound.
        stop_when: Stop conditions checked after every tool round; the loop ends at whichever
            of these and `max_tool_rounds` comes first.
        max_tool_result_chars: Tool and MCP results longer than this are truncated with a marker
            the model can read (default 100,000; text only); None: no limit.
        max_tool_result_bytes: The media bytes (images, documents, audio) one tool or MCP
            result may carry (default 10 MB); parts past it are dropped with a marker the model
            can read; None: no limit.
        trace: True prints each trace record to stderr; a function is the sink.
        services: Dependencies tools and workflow steps receive as `ctx.services`.
        blobs: Where media parts that refer to a blob (`{"blob": sha256}`) are read from when
            a request is built: a `tether.blobs.BlobResolver` or a `BlobStore` (the lab passes
            its store's). Without it the messages must carry their media inline or by URL.
        on_tool_call: A tool-call guardrail that runs before the declared ones.
        history: A history policy: processors ``(messages, ctx) -> messages`` (sync or
            async) run in order on what each model call sends, e.g. ``[keep_last(turns=20)]``
            (`tether.history`); the session itself always keeps the whole transcript.
        name: The agent's name: its assistant messages carry it (`agent`), and handing over
            to it is the tool ``transfer_to_<name>``.
        handoffs: Agents (named) or `Handoff`s this agent may hand the conversation over to
            within a turn (`tether.handoffs`); needs a `name`.
        max_handoffs: How many times one turn started on this agent may be handed over
            (default 5); a transfer past it is the model's tool error.

    Raises:
        ConfigError: a parameter of the wrong type or value (the message names it).
    """

    def __init__(self, **options: Unpack[AgentOptions]) -> None:
        refuse_unknown("create_agent", options, _AGENT_KEYS)
        o = options
        name = o.get("name")
        if name is not None and not (isinstance(name, str) and name.strip()):
            raise bad("name", name, "a non-empty string")
        self.name: str | None = name
        """The agent's name (its messages carry it), or None."""
        handoffs = _handoffs(o.get("handoffs"), self.name)
        model = o.get("model")
        spec = one_of("model", model, "llm", o.get("llm"))
        if spec is None:
            raise ConfigError(
                "create_agent() needs model= ('provider:model', an LLMClient or a model config "
                "dict), e.g. create_agent(model='anthropic:claude-sonnet-4-6')"
            )
        config = model_client_spec("llm" if model is None else "model", spec)
        self._owns_client = not isinstance(config, LLMClient)
        self.client: LLMClient = client_from_config(config)
        """The model client (built from the model string or config, or the one given)."""
        layers = prompt_layers(
            "system_prompt",
            one_of("system_prompt", o.get("system_prompt"), "prompt", o.get("prompt")),
        )
        self.system_prompt: tuple[PromptLayer, ...] = tuple(layers)
        """The system prompt's layers, in order."""
        self._static = static_blocks(layers)
        self._dynamic = tuple(layer for layer in layers if not layer.is_static)
        self.guardrails: tuple[Guardrail, ...] = tuple(
            sequence_of(
                "guardrails", o.get("guardrails"), Guardrail, "a Guardrail (define_guardrail)"
            )
        )
        on_tool_call = check_function(
            "on_tool_call", o.get("on_tool_call"), "a function (call, ctx) -> decision | None"
        )
        self.on_tool_call: ToolCallGuardrail | None = on_tool_call
        guards: list[tuple[str, Any]] = []
        if on_tool_call is not None:
            guards.append(("on_tool_call", on_tool_call))
        guards.extend((g.name, g.tool_call) for g in self.guardrails if g.tool_call)
        self._tool_guards = tuple(guards)
        self._output_guards = tuple((g.name, g.output) for g in self.guardrails if g.output)
        self.toolbox = Toolbox(
            [
                *sequence_of("tools", o.get("tools"), Tool, "a Tool (define_tool or @tool)"),
                *(transfer_tool(h.name, h.description) for h in handoffs.values()),
            ],
            sequence_of("resources", o.get("resources"), Resource, "a Resource (define_resource)"),
            sequence_of(
                "integrations",
                o.get("integrations"),
                IntegrationSource,
                "an MCP source (mcp_server / mcp_stdio)",
            ),
        )
        """The agent's tools: declared, resources as tools, and the integration sources'."""
        self.workflows: dict[str, LadderWorkflow | Workflow[Any, Any]] = {}
        """The declared workflows by name (a ladder's name, a durable workflow's id)."""
        declared: list[LadderWorkflow | Workflow[Any, Any]] = sequence_of(
            "workflows",
            o.get("workflows"),
            (LadderWorkflow, Workflow),
            "a workflow (define_workflow or create_workflow)",
        )
        for w in declared:
            name = w.name if isinstance(w, LadderWorkflow) else w.id
            if name in self.workflows:
                raise ConfigError(f"workflows= has two workflows named {name!r}")
            self.workflows[name] = w
        self.settings: ModelSettings = merge_settings(check_settings("settings", o.get("settings")))
        """The agent's model settings (a run's overlay them key by key)."""
        if self._owns_client:
            self._validate_settings_for_client()
        self.max_tool_rounds = check_max_tool_rounds(
            o.get("max_tool_rounds", DEFAULT_MAX_TOOL_ROUNDS)
        )
        self.stop_when: tuple[StopCondition, ...] = tuple(check_stop_when(o.get("stop_when")) or ())
        self.max_tool_result_chars = check_limit(
            "max_tool_result_chars", o.get("max_tool_result_chars", DEFAULT_MAX_TOOL_RESULT_CHARS)
        )
        self.max_tool_result_bytes = check_limit(
            "max_tool_result_bytes", o.get("max_tool_result_bytes", DEFAULT_MAX_TOOL_RESULT_BYTES)
        )
        self.trace: bool | TraceSink = check_trace(o.get("trace")) or False
        self.services: dict[str, Any] = check_services(o.get("services")) or {}
        self.history: tuple[HistoryProcessor, ...] = tuple(check_history(o.get("history")) or ())
        """The history policy (empty: every call sends the whole transcript)."""
        self.blobs = check_blobs(o.get("blobs"))
        self._http_client: httpx.AsyncClient | None = None
        max_handoffs = check_count("max_handoffs", o.get("max_handoffs"))
        self.max_handoffs: int = DEFAULT_MAX_HANDOFFS if max_handoffs is None else max_handoffs
        """How many times one turn started on this agent may be handed over."""
        self.handoffs_by_name: dict[str, Handoff[Agent]] = handoffs
        """This agent's handoff targets by name (empty: it hands over to none)."""
        self._graph: dict[str, Agent] | None = None

    def __repr__(self) -> str:
        if self.name is not None:
            return f"Agent(name={self.name!r}, model={self.client.model!r})"
        return f"Agent(model={self.client.model!r})"

    # -- handoffs ----------------------------------------------------------------------------

    @property
    def handoff_graph(self) -> dict[str, Agent]:
        """This agent and every agent reachable through handoffs, by name (built once)."""
        if self._graph is None:
            graph: dict[str, Agent] = {}
            todo: list[Agent] = [self]
            while todo:
                agent = todo.pop()
                if agent.name is None or agent.name in graph:
                    continue
                graph[agent.name] = agent
                todo.extend(h.agent for h in agent.handoffs_by_name.values())
            self._graph = graph
        return self._graph

    def turn_agent(self, session: SessionLike, named: str | None = None) -> Agent:
        """The agent a turn sent to this one runs: `named` (this agent or one of its
        handoffs'), else the one holding the conversation, else this one.

        Raises:
            ConfigError: `named` is not in this agent's handoffs.
        """
        graph = self.handoff_graph
        if named is not None:
            agent = graph.get(named)
            if agent is None:
                known = ", ".join(repr(n) for n in graph) or "none"
                raise ConfigError(
                    f"agent={named!r} is not this agent or one it hands over to ({known})"
                )
            return agent
        held = holder(as_session(session).messages)
        return graph.get(held, self) if held is not None else self

    def _validate_settings_for_client(self) -> None:
        """Refuse now, not at the first turn, settings the client built from the model string or
        config cannot honour (`seed` on Anthropic, say). A `tool_choice` naming a tool only an
        integration may bring is left for the request to judge."""
        validate = getattr(self.client, "validate_settings", None)
        if validate is None or not self.settings:
            return
        names = [t.name for t in self.toolbox.tools]
        settings = dict(self.settings)
        if self.toolbox.sources and settings.get("tool_choice") not in (*names, None):
            settings.pop("tool_choice")
        validate(settings, tools=names)

    # -- parts -------------------------------------------------------------------------------

    @property
    def tools(self) -> list[Tool]:
        """The declared set until the sources connect, and everything afterwards."""
        return self.toolbox.tools

    @property
    def declared_tools(self) -> list[Tool]:
        return list(self.toolbox.declared)

    @property
    def resources(self) -> list[Resource]:
        return list(self.toolbox.resources)

    def _http(self) -> httpx.AsyncClient:
        if self._http_client is None:
            import httpx  # the first tool that asks for a client pays for httpx

            self._http_client = httpx.AsyncClient()
        return self._http_client

    # -- turns -------------------------------------------------------------------------------

    def create_session(self) -> Session:
        """A new, empty session (plain JSON data: `json.dumps(session)` works)."""
        return Session()

    def plan_turn(self, session: SessionLike, options: TurnOptions | None = None) -> TurnPlan:
        """Prepare one turn: the one place the agent's parts and the run's overrides meet.

        The loop, the ladder and the lab's episodes all run from the plan this returns.
        """
        opts = _NO_OPTIONS if options is None else options
        sess = as_session(session)
        ctx = RunContext.for_turn(
            sess.id,
            sess.memory,
            opts.signal,
            {**self.services, **opts.services} if opts.services else self.services,
            opts.context,
            Tracer.from_option(self.trace, sess.id) if self.trace else None,
            self._http,
        )
        if opts.system_prompt is None:
            static, dynamic = self._static, self._dynamic
        else:
            layers = prompt_layers("system_prompt", opts.system_prompt)
            static = static_blocks(layers)
            dynamic = tuple(layer for layer in layers if not layer.is_static)
        stream_retries = opts.stream_retries
        if stream_retries is None:
            stream_retries = getattr(self.client, "stream_retries", 0) or 0
        rounds = self.max_tool_rounds
        if opts.max_tool_rounds is not UNSET:
            rounds = check_max_tool_rounds(opts.max_tool_rounds)
        settings = self.settings
        if opts.settings is not None:
            settings = merge_settings(settings, check_settings("settings", opts.settings))
        stop_when = self.stop_when
        if opts.stop_when is not None:
            stop_when = tuple(check_stop_when(opts.stop_when) or ())
        return TurnPlan(
            self.client,
            ctx,
            self.toolbox,
            None if opts.tools is None else _tools(opts.tools),
            static,
            dynamic,
            self._tool_guards,
            self._output_guards,
            settings,
            opts.response_format,
            rounds,
            stop_when,
            stream_retries,
            self.max_tool_result_chars,
            [],
            self.history,
            opts.history_sink,
            blobs=self.blobs,
            max_tool_result_bytes=self.max_tool_result_bytes,
            agent=self.name,
        )

    def send(
        self,
        session: SessionLike,
        text: UserContent | None,
        *,
        options: TurnOptions | None = None,
        **overrides: Unpack[TurnOverrides],
    ) -> AsyncGenerator[AgentEvent, None]:
        """Run one turn, yielding events. Fold each with `reduce(session, event)`.

        `text` is the user's message: a string, or a list of strings and parts (`image()`,
        `document()`, `audio()`); `text=None` runs a turn on the transcript as it stands (no
        new user message). The
        keyword arguments override the agent's settings for this turn (see `TurnOptions`).
        `session` may be a `Session` or the plain dict `json.loads(json.dumps(session))` gives.

        Raises (out of the iteration, before any event that changes the session): what a
        source that cannot connect, an attached resource that cannot be read or a prompt layer
        that fails raised; the session is left exactly as it was.
        """
        if self.handoffs_by_name:
            opts = _options(options, overrides)
            sess = as_session(session)
            start = self.turn_agent(sess, opts.agent)
            return stream_handoffs(self, start, sess, _user(text), opts)
        if options is None and _none(overrides):
            plan = self.plan_turn(session)  # no overrides: the common case, kept cheap
        else:
            plan = self.plan_turn(session, _options(options, overrides))
        return stream_turn(plan, as_session(session), _user(text))

    def resume(
        self,
        session: SessionLike,
        decisions: Mapping[str, Decision],
        *,
        options: TurnOptions | None = None,
        **overrides: Unpack[TurnOverrides],
    ) -> AsyncGenerator[AgentEvent, None]:
        """Continue a paused turn, yielding its events like `send()` (fold each with `reduce`).

        `decisions` maps each pending call's id (`session["pending"]`) to `approve()`,
        `approve(input=...)`, `deny(reason)` or, for an external call, `result(output)`. The
        first event is `resumed`, then each call's `tool_result` (an approved call runs now,
        as approved: the guardrails that ran before the pause do not run again), then the
        turn's rounds go on.

        Raises:
            NotPausedError: the session waits for no decision.
            DecisionError: a pending call without a decision, an id that is not pending
                (unknown or already decided), a decision of the wrong kind; on the first
                iteration, an edited input the tool's schema refuses. The session is left as
                it was.
        """
        sess = as_session(session)
        resume = check_decisions(sess.pending, decisions, lambda: _decided_ids(sess))
        if options is None and _none(overrides):
            plan = self.plan_turn(sess)
        else:
            plan = self.plan_turn(sess, _options(options, overrides))
        return stream_turn(plan, sess, None, resume)

    async def run_turn(
        self,
        session: SessionLike,
        text: UserContent | None = None,
        **options: Unpack[RunTurnOptions],
    ) -> TurnResult:
        """Run one turn to its end, folding every event into `session` (in place).

        Takes the same overrides as `send()`, and `on_event`, a function that sees each event
        as it happens. `decisions=` resumes a paused turn instead (see `resume()`; no `text`
        then). A turn that pauses returns with ``finish_reason == "paused"`` and its `pending`
        calls.

        Raises:
            TetherError: The error of an `error` event (an `LLMError`, `AbortedError`, …),
                after folding what came before it; what `send()` raises before the turn
                starts.
        """
        decisions = options.pop("decisions", None)
        on_event = options.pop("on_event", None)
        opts = _options(None, options)
        target = session if isinstance(session, MutableMapping) else as_session(session)
        resume = None
        if decisions is not None:
            if text is not None:
                raise ConfigError("run_turn() takes text or decisions=, not both")
            sess = as_session(target)
            resume = check_decisions(sess.pending, decisions, lambda: _decided_ids(sess))
        rounds: list[RoundResult] = []
        if self.handoffs_by_name and resume is None:
            sess = as_session(target)
            start = self.turn_agent(sess, opts.agent)
            stream = stream_handoffs(self, start, sess, _user(text), opts, rounds)
        else:
            plan = self.plan_turn(target, opts)
            rounds = plan.rounds
            stream = stream_turn(plan, as_session(target), _user(text), resume)
        events: list[AgentEvent] = []
        done = None
        pending: list[PendingCall] = []
        try:
            async for event in stream:
                reduce(target, event)
                events.append(event)
                if on_event is not None:
                    on_event(event)
                if event["type"] == "done":
                    done = event
                elif event["type"] == "paused":
                    pending = event["pending"]
                elif event["type"] == "error":
                    raise event["error"]
        finally:
            await stream.aclose()
        if done is None:  # pragma: no cover - the loop always ends with done or error
            raise RuntimeError("the turn ended without a done event")
        return TurnResult(
            session=target,
            text=done["text"],
            usage=done["usage"],
            finish_reason=done.get("finish_reason"),
            stop_reason=done["stop_reason"],
            rounds=rounds,
            events=events,
            pending=pending,
        )

    def run_turn_sync(
        self,
        session: SessionLike,
        text: UserContent | None = None,
        **options: Unpack[RunTurnOptions],
    ) -> TurnResult:
        """`run_turn()` from synchronous code (a script, a test). Inside a running event loop
        (a notebook cell), the turn runs to its end in a worker thread with its own loop while
        this call blocks; `on_event` is then called from that thread."""
        coro = self.run_turn(session, text, **options)
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(coro)
        return _run_in_thread(coro)

    async def send_client_message(
        self,
        session: SessionLike,
        msg: ClientMessage,
        *,
        signal: AbortSignal | None = None,
        services: Mapping[str, Any] | None = None,
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
        session: SessionLike,
        name: str,
        input: Any = None,
        *,
        services: Mapping[str, Any] | None = None,
        signal: AbortSignal | None = None,
        on_event: Callable[[AgentEvent], Any] | None = None,
    ) -> LadderOutcome:
        """Run the declared workflow `name` on `input`.

        A cascade ladder (`define_workflow`) gets the agent's context (services overlaid with
        `services`, the session's memory, tracing); its step, trace and memory events are kept
        on `outcome.events` and `on_event` sees them live. A durable workflow
        (`create_workflow`) runs as `workflow.run(input)` does (journaled; `signal` cancels
        it), and its output is `outcome.result`.

        Raises:
            WorkflowError: the agent declares no workflow named `name`.
        """
        workflow = self.workflows.get(name)
        if workflow is None:
            known = ", ".join(repr(n) for n in self.workflows) or "none"
            raise WorkflowError(f"no workflow named {name!r}; the agent declares: {known}")
        if isinstance(workflow, Workflow):
            output = await workflow.run(input, signal=signal).result
            return LadderOutcome(output, None, True, [])
        return await run_ladder(
            self,
            as_session(session),
            workflow,
            input,
            services=services,
            signal=signal,
            on_event=on_event,
        )

    # -- integrations and lifecycle ----------------------------------------------------------

    async def connect(self, signal: AbortSignal | None = None) -> list[dict[str, Any]]:
        """Connect every integration now and report what each offered (traced like a turn's)."""
        tracer = Tracer.from_option(self.trace, None)
        return [c.report for c in await self.toolbox.connect(signal, tracer=tracer)]

    async def aclose(self) -> None:
        """End integration sessions and close what the agent opened: its HTTP client and the
        model client it built from a model string or config (one given to it stays the
        caller's). Idempotent; the agent stays usable: a later turn reconnects."""
        await self.toolbox.aclose()
        if self._http_client is not None:
            client, self._http_client = self._http_client, None
            await client.aclose()
        if self._owns_client:
            await self.client.aclose()

    async def __aenter__(self) -> Agent:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


_NO_OPTIONS = TurnOptions()


def _decided_ids(session: Session) -> frozenset[str]:
    """The ids of the calls in the transcript that have their result (read only to word an
    error: a walk of the transcript)."""
    return frozenset(
        p["id"]
        for m in session.messages
        if m["role"] == "tool"
        for p in m["content"]
        if p["type"] == "tool_result"
    )


def _handoffs(value: Any, name: str | None) -> dict[str, Handoff[Agent]]:
    """The handoffs declared (an Agent is a `Handoff` of it), by target name, checked."""
    items: list[Agent | Handoff[Agent]] = sequence_of(
        "handoffs", value, (Agent, Handoff), "a named Agent or a Handoff"
    )
    if items and name is None:
        raise ConfigError(
            "handoffs= needs the agent's own name= too (its messages carry it, so the "
            "conversation knows who holds it): create_agent(name='triage', handoffs=[...])"
        )
    out: dict[str, Handoff[Agent]] = {}
    for item in items:
        handoff = item if isinstance(item, Handoff) else Handoff(item)
        if not isinstance(handoff.agent, Agent):
            raise bad("Handoff(agent)", handoff.agent, "an Agent (create_agent(name=...))")
        if handoff.name in out:
            raise ConfigError(f"handoffs= names the agent {handoff.name!r} twice")
        out[handoff.name] = handoff
    return out


def _tools(tools: Sequence[Tool]) -> tuple[Tool, ...]:
    return tools if isinstance(tools, tuple) and tools is NO_TOOLS else tuple(tools)


_AGENT_KEYS = keys_of(AgentOptions)
_TURN_KEYS = keys_of(TurnOverrides)


def _none(overrides: Mapping[str, Any]) -> bool:
    """No override given (or each given as None, under a known name)."""
    if not overrides:
        return True
    return overrides.keys() <= _TURN_KEYS and all(v is None for v in overrides.values())


def _options(base: TurnOptions | None, overrides: Mapping[str, Any]) -> TurnOptions:
    """A copy of `base` (or fresh options) with every given (not None) override set on it; the
    caller's options are left as they were.

    Raises:
        TypeError: a keyword `TurnOverrides` does not name.
        ConfigError: both `system_prompt=` and its alias `prompt=`.
    """
    refuse_unknown("send", overrides, _TURN_KEYS)
    given: dict[str, Any] = {k: v for k, v in overrides.items() if v is not None}
    prompt = given.pop("prompt", None)
    if prompt is not None:
        given["system_prompt"] = one_of(
            "system_prompt", given.get("system_prompt"), "prompt", prompt
        )
    if base is None:
        return TurnOptions(**given)
    return dataclasses.replace(base, **given)


def _run_in_thread(coro: Coroutine[Any, Any, T]) -> T:
    """Run `coro` to its end in a new thread with its own event loop (the caller's loop is
    busy running the caller); context variables go along."""
    result: list[T] = []
    error: list[BaseException] = []
    ctx = contextvars.copy_context()

    def target() -> None:
        try:
            result.append(ctx.run(asyncio.run, coro))
        except BaseException as exc:  # handed to the calling thread
            error.append(exc)

    thread = threading.Thread(target=target, name="tether-run-turn-sync", daemon=True)
    thread.start()
    thread.join()
    if error:
        raise error[0]
    return result[0]


def create_agent(**options: Unpack[AgentOptions]) -> Agent:
    """Assemble an agent (see `Agent` for the parameters). Synchronous: nothing here reaches
    the network; MCP sources connect on the first turn or on `agent.connect()`."""
    return Agent(**options)


def _user(text: UserContent | None) -> str | list[Part] | None:
    """The user's message as the loop takes it: text, or its checked parts (ContentError)."""
    if text is None or type(text) is str:
        return text
    return user_parts(text)[1]
