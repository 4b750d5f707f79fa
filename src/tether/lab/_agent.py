"""Lab agents: a harness agent plus an id and a memory binding. Build them with
`Runtime.create_agent(...)`; every harness part is accepted under the harness's own name
(see `tether.lab._definition`), compiled into `tether.create_agent(...)`, and each episode
drives that agent's `send()` loop."""

from __future__ import annotations

import asyncio
import dataclasses
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import (
    Any,
    ClassVar,
    Generic,
    NamedTuple,
    TypeAlias,
    TypedDict,
    TypeVar,
    Unpack,
    overload,
)

from .._json import check_json_safe
from .._options import keys_of
from .._params import (
    check_count,
    check_model,
    check_services,
    check_settings,
    check_stop_when,
    merge_settings,
    one_of,
)
from ..agent import Agent, create_agent
from ..approvals import Decision
from ..errors import ConfigError, DecisionError, NotJSONSafeError, SessionFormatError
from ..events import PendingCall
from ..guardrails import Guardrail
from ..handoffs import DEFAULT_MAX_HANDOFFS, transfer_tool
from ..integrations import IntegrationSource
from ..llm import LLMClient, fallback
from ..llm.base import ModelSettings
from ..media import UserContent, user_parts
from ..resources import Resource
from ..session import Message, Session
from ..signals import AbortController
from ..stop import StopCondition, step_count_is
from ..stores.message_store import MessageStore
from ..stores.run_store import RunInfo
from ..tools import Tool
from ..turn import DEFAULT_MAX_TOOL_RESULT_CHARS
from ..workflows import RunSlot, Workflow, current_step
from ._callers import caller, current_workflow_run
from ._definition import (
    AGENT_KEYS,
    ALIASES,
    Definition,
    LabAgentOptions,
    ModelSpec,
    SystemPrompt,
    SystemPromptSpec,
    check_tools,
    merge_models,
    model_label,
)
from ._episode import Episode, EpisodeAgent, Resumed, SystemPromptConflict, WorkflowLink
from ._handles import (
    AgentRunHandle,
    AgentRunResult,
    AgentStreamHandle,
    HandleParts,
    StartGate,
    _EventBuffer,
)
from ._handoffs import LabHandoff, handoff_graph, held_by
from ._host import AgentHost
from ._output import OutputSpec
from ._provenance import merge_tags
from ._recorder import unwrapped
from ._resume import check_listed_edits, checked_run, take_run
from ._step_pauses import ended_outcome, failure_of, outcome_of, replayed, step_slot
from ._tags import context_tags
from ._template import PromptInspection
from ._tools import ToolProvider, ToolsSpec, is_provider

__all__ = [
    "DEFAULT_STOP_WHEN",
    "Checked",
    "IntegrationInspection",
    "LabAgent",
    "ModelSpec",
    "ResumeOptions",
    "Resumes",
    "RunOptions",
]

T = TypeVar("T")
U = TypeVar("U")

DEFAULT_STOP_WHEN: StopCondition = step_count_is(20)
"""At most 20 model requests per episode unless the agent or the call says otherwise."""

_CONFLICTS = ("keep-pinned", "use-current")


class RunOptions(TypedDict, total=False):
    """The keywords of `LabAgent.run()` / `stream()` besides `output_schema` (see `run()`)."""

    memory_scope: str | None
    context: Any
    user: UserContent | None
    messages: Sequence[Mapping[str, Any]] | None
    model: ModelSpec | list[ModelSpec] | None
    llm: ModelSpec | None
    settings: ModelSettings | None
    stop_when: StopCondition | Sequence[StopCondition] | None
    max_retries: int | None
    stream_retries: int | None
    system_prompt_conflict: SystemPromptConflict
    suppress_system_prompt_conflict_warning: bool
    workflow: Any
    tools: ToolsSpec | None
    tool_provider_context: Any
    services: Mapping[str, Any] | None
    tags: Sequence[str] | None
    agent: str | None


_RUN_OPTIONS = keys_of(RunOptions) | {"output_schema"}


class ResumeOptions(TypedDict, total=False):
    """The keywords of `LabAgent.resume()` besides `decided_by`: the run options a run does
    not store (what tools see, and the tools themselves when the run replaced them)."""

    context: Any
    services: Mapping[str, Any] | None
    tools: ToolsSpec | None
    tool_provider_context: Any


_RESUME_OPTIONS = keys_of(ResumeOptions)

Checked: TypeAlias = tuple[RunInfo, list[tuple[PendingCall, Decision]]]
"""A paused run and each of its pending calls with its decision, checked (`checked_run`)."""


class Resumes(Generic[T]):
    """`resume()` and `resume_stream()`, written once for `LabAgent` (a run of that agent) and
    `Runtime` (a run of any of its agents, by the run's name); each supplies `_resume`."""

    async def resume(
        self,
        run_id: str,
        decisions: Mapping[str, Decision],
        *,
        decided_by: str | None = None,
        **options: Unpack[ResumeOptions],
    ) -> AgentRunResult[T]:
        """Continue a paused run (`result.pending` of the episode that paused,
        `tether runs list --status paused`) in this process, and wait for its result.

        `decisions` maps each pending call's id to `approve()`, `approve(input=...)`,
        `deny(reason)` or, for an external call, `result(output)`; each is recorded as a
        `decision` run event with `decided_by` and the time. The turn goes on from where it
        paused (on the scope as it is now) and may pause again. `options` are the run
        options that are not stored with a run: `context`, `services`, `tools`,
        `tool_provider_context`. `Runtime.resume` runs it with the run's agent (its name).

        Raises:
            RunNotFoundError: there is no such run.
            RunNotPausedError: the run is not paused; when another resumer took it first,
                `.winner` names it. Nothing is written.
            DecisionError: a pending call without a decision, an id that is not pending, a
                decision of the wrong kind, an edited input a listed tool's schema refuses, an
                input call's answer its schema refuses. Nothing is written. (An edited input
                for a tool of an MCP source or a provider is checked as the turn resumes: the
                run is paused again.)
            ConfigError: the run is not one of this agent's (`LabAgent.resume`), or its agent
                is not one of this runtime's (`Runtime.resume`).
        """
        handle = await self._continue(run_id, decisions, decided_by, dict(options), None)
        return await handle.result

    async def resume_stream(
        self,
        run_id: str,
        decisions: Mapping[str, Decision],
        *,
        decided_by: str | None = None,
        **options: Unpack[ResumeOptions],
    ) -> AgentStreamHandle[T]:
        """Like `resume()`, but return the handle of the continued episode as soon as the run
        is taken (its `full_stream` starts with `resumed`). Raises what `resume()` raises
        before the run is taken."""
        buffer = _EventBuffer()
        handle = await self._continue(run_id, decisions, decided_by, dict(options), buffer)
        assert isinstance(handle, AgentStreamHandle)
        return handle

    async def _continue(
        self,
        run_id: str,
        decisions: Mapping[str, Decision],
        decided_by: str | None,
        options: dict[str, Any],
        buffer: _EventBuffer | None,
    ) -> AgentRunHandle[T]:
        agent, checked = await self._resumer(run_id, decisions)
        return await agent._resume(run_id, decisions, decided_by, options, buffer, checked)

    async def _resumer(
        self, run_id: str, decisions: Mapping[str, Decision]
    ) -> tuple[LabAgent[T], Checked]:
        """The agent that resumes run `run_id`, and the run with its checked decisions."""
        raise NotImplementedError


@dataclass(slots=True, frozen=True)
class IntegrationInspection:
    """What one MCP source of an agent offers, or why it could not be asked."""

    label: str
    """The source's URL or command line."""
    report: dict[str, Any] | None
    """Its connect report (`tools`, `resources`, `server_info`, ...), None when it failed."""
    error: str | None = None
    """Why connecting failed."""


def _normalize_messages(messages: Sequence[Mapping[str, Any]]) -> list[Message]:
    """Caller messages as stored Messages; string content becomes one text part, system
    messages are dropped (the system prompt is the agent's)."""
    if isinstance(messages, str | bytes | Mapping) or not isinstance(messages, Sequence):
        raise ConfigError("messages must be a list of {'role', 'content'} dicts")
    out: list[Message] = []
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping):
            raise ConfigError(f"messages[{i}] must be a dict with 'role' and 'content'")
        if m.get("role") == "system":
            continue
        msg: dict[str, Any] = dict(m)
        if isinstance(msg.get("content"), str):
            msg["content"] = [{"type": "text", "text": msg["content"]}]
        try:
            # Parsing is the check, and what it returns is the typed message.
            (parsed,) = Session.from_json({"id": "input", "messages": [msg]}).messages
            check_json_safe(msg, f"messages[{i}]")
        except SessionFormatError as exc:
            raise ConfigError(str(exc).replace("session.messages[0]", f"messages[{i}]")) from exc
        except NotJSONSafeError as exc:
            raise ConfigError(str(exc)) from exc
        out.append(parsed)
    return out


def _link(workflow: Any) -> WorkflowLink | None:
    if workflow is None:
        active = current_step()
        if active is None:
            return None
        return WorkflowLink(active.workflow_run_id, active.step_id)
    if isinstance(workflow, WorkflowLink):
        return workflow
    if isinstance(workflow, Mapping):
        run_id = workflow.get("workflow_run_id")
        step_id = workflow.get("step_id")
    else:
        run_id = getattr(workflow, "workflow_run_id", None)
        step_id = getattr(workflow, "step_id", None)
    if not isinstance(run_id, str) or not run_id:
        raise ConfigError("workflow= needs a workflow_run_id (and optionally a step_id)")
    if step_id is not None and not isinstance(step_id, str):
        raise ConfigError("workflow= step_id must be a string or None")
    return WorkflowLink(run_id, step_id)


class LabAgent(Resumes[T]):
    """A reusable agent definition. `run()` / `stream()` each start one episode.

    `T` is the output type: the output schema's type, or `str` without one. The parameters
    are `Runtime.create_agent`'s; what the agent does not set comes from the runtime's
    defaults.
    """

    PARAMETERS: ClassVar[frozenset[str]] = frozenset({"id", *AGENT_KEYS, *ALIASES})
    """The keyword parameters of `Runtime.create_agent`."""

    def __init__(
        self,
        runtime: AgentHost,
        *,
        id: str,
        output_schema: Any = None,
        **options: Unpack[LabAgentOptions],
    ) -> None:
        if not isinstance(id, str) or not id.strip():
            raise ConfigError(f"an agent id must be a non-empty string, got {id!r}")
        self.runtime = runtime
        """The runtime that created the agent (its stores, defaults and clients)."""
        self.id = id
        self._where = f"agent {id!r}"
        given: dict[str, Any] = {**options, "output_schema": output_schema}
        own = Definition.check(given, self._where)
        if own.model is None and runtime.defaults.model is None:
            raise ConfigError(
                f"agent {id!r} has no model: pass model='provider:model' to create_agent, or "
                "give the runtime a default with Runtime(defaults={'model': ...})"
            )
        merge_models([runtime.defaults.model, own.model], self._where)
        self._own = own
        system_prompt = options.get("system_prompt")
        self._raw_prompt = system_prompt if system_prompt is not None else options.get("prompt")
        self._harnesses: dict[str, Agent] = {}
        self._chains: dict[tuple[int, ...], LLMClient] = {}
        self._retired: list[Agent] = []
        self._apply()

    def _apply(self) -> None:
        """Recompute what the agent runs with from its own parts and the runtime defaults."""
        d = self._own.over(self.runtime.defaults)
        self._def = d
        self._output = OutputSpec.of(d.output_schema) if d.output_schema is not None else None
        self._prompt = d.system_prompt or SystemPrompt()
        self._resource_tools = [r.as_tool() for r in d.resources or () if r.mode == "tool"]
        self._transfer_tools = [transfer_tool(h.name, h.description) for h in d.handoffs or ()]
        self._plain: tuple[int, _Parts] | None = None
        """`_plain_parts`: (the client pool's generation, the parts)."""

    def __repr__(self) -> str:
        return f"LabAgent({self.id!r})"

    def _replace(self, **values: Any) -> None:
        """Replace parts of the live definition (a hot reload; a scope in flight keeps its
        pin). Episodes started afterwards use them."""
        checked = Definition.check(values, self._where)
        self._own = dataclasses.replace(self._own, **{k: getattr(checked, k) for k in values})
        if "model" in values:
            self._retired.extend(self._harnesses.values())
            self._harnesses = {}
        self._apply()

    # -- the definition, read-only (model and system_prompt may be replaced: hot reload) ------

    @property
    def definition(self) -> Definition:
        """Every part the agent runs with: its own, the runtime defaults filling the rest."""
        return self._def

    @property
    def model(self) -> ModelSpec | list[Any] | None:
        """The agent's own model, or its fallback chain (None: the runtime default's)."""
        return self._own.model

    @model.setter
    def model(self, value: ModelSpec | list[Any] | None) -> None:
        self._replace(model=value)

    @property
    def model_label(self) -> str:
        """The model this agent runs on, for listings (never a key or a header)."""
        return model_label(self._def.model)

    @property
    def system_prompt(self) -> SystemPromptSpec | None:
        """The system prompt as given (a string, PromptLayer, Template or a list of them)."""
        return self._raw_prompt

    @system_prompt.setter
    def system_prompt(self, value: SystemPromptSpec | None) -> None:
        self._replace(system_prompt=value)
        self._raw_prompt = value

    @property
    def prompt_layers(self) -> SystemPrompt:
        """The system prompt in its static layers (what a new scope pins) and dynamic ones."""
        return self._prompt

    @property
    def tools(self) -> list[Tool] | ToolProvider | None:
        return self._def.tools

    @property
    def resources(self) -> list[Resource]:
        return list(self._def.resources or ())

    @property
    def integrations(self) -> list[IntegrationSource]:
        return list(self._def.integrations or ())

    @property
    def guardrails(self) -> list[Guardrail]:
        return list(self._def.guardrails or ())

    @property
    def settings(self) -> ModelSettings | None:
        return self._def.settings

    @property
    def output_schema(self) -> Any:
        return self._def.output_schema

    @property
    def stop_when(self) -> list[StopCondition]:
        return self._def.stop_when or [DEFAULT_STOP_WHEN]

    @property
    def history(self) -> list[Any]:
        """The history policy's processors (empty: every turn loads and sends it all)."""
        return list(self._def.history or ())

    @property
    def max_tool_rounds(self) -> int | None:
        return self._def.max_tool_rounds

    @property
    def title_workflow(self) -> Workflow[Any, Any] | None:
        return self._def.title_workflow

    @title_workflow.setter
    def title_workflow(self, value: Workflow[Any, Any] | None) -> None:
        self._replace(title_workflow=value)

    @property
    def max_retries(self) -> int | None:
        return self._def.max_retries

    @property
    def stream_retries(self) -> int | None:
        return self._def.stream_retries

    @property
    def memory_store(self) -> MessageStore | None:
        return self._def.memory_store

    @property
    def description(self) -> str:
        return self._def.description or ""

    @property
    def handoffs(self) -> list[LabHandoff]:
        """The agents this one may hand the conversation over to."""
        return list(self._def.handoffs or ())

    async def held_by(self, memory_scope: str) -> str | None:
        """The id of the agent holding `memory_scope` (the writer of its last assistant
        record), or None; a turn this agent is sent there goes to it when it is one of this
        agent's handoffs."""
        return await held_by(self._def.memory_store or self.runtime.message_store, memory_scope)

    @property
    def max_handoffs(self) -> int:
        """How many times a turn started on this agent may be handed over."""
        value = self._def.max_handoffs
        return DEFAULT_MAX_HANDOFFS if value is None else value

    @property
    def uses_tool_provider(self) -> bool:
        """True when the tools come from a ToolProvider (the CLI's `(tool-context)` mark)."""
        return is_provider(self._def.tools)

    def render_system_prompt(self) -> str:
        """The static system prompt of the live definition, rendered now (what a new scope
        would pin), its layers joined by blank lines.

        Raises:
            TemplateError: a template cannot render.
        """
        return "\n\n".join(self._prompt.render_static())

    def inspect_system_prompt(self) -> PromptInspection:
        """What the live static system prompt renders to, or why it cannot (for the UI)."""
        for template in self._prompt.templates:
            inspection = template.inspect()
            if inspection.is_err:
                return inspection
        return PromptInspection(self.render_system_prompt())

    # -- the harness agent --------------------------------------------------------------------

    def harness(
        self, model: ModelSpec | list[Any] | None = None, *, max_retries: int | None = None
    ) -> Agent:
        """The harness agent this agent's episodes run on `model` (default: its own model),
        built on first use and reused; the runtime closes it.

        Raises:
            ConfigError: the model cannot be resolved or built (an unknown provider, a missing
                key, config keys applied to a client object).
        """
        spec = merge_models([self._def.model, model], self._where)
        client = (
            self._chain(spec, max_retries)
            if isinstance(spec, list)
            else self._client(spec, max_retries)
        )
        key = f"client:{id(client)}"
        agent = self._harnesses.get(key)
        if agent is None or unwrapped(agent.client) is not client:
            d = self._def
            own_tools = d.tools if isinstance(d.tools, list) else []
            agent = create_agent(
                name=self.id,
                model=client,
                tools=[*own_tools, *self._transfer_tools],
                resources=d.resources or (),
                guardrails=d.guardrails or (),
                integrations=d.integrations or (),
                # The lab's stop_when ends the loop; no bound unless the agent sets one.
                max_tool_rounds=d.max_tool_rounds,
                max_tool_result_chars=(
                    d.max_tool_result_chars
                    if d.max_tool_result_chars is not None
                    else DEFAULT_MAX_TOOL_RESULT_CHARS
                ),
                trace=_for_agent(d.trace, self.id) or False,
                services=d.services,
                on_tool_call=d.on_tool_call,
                history=d.history,
                # Stored transcripts refer to their media by blob: requests read it from there.
                blobs=self.runtime.blob_resolver(d.memory_store or self.runtime.message_store),
            )
            self._harnesses[key] = agent
        return agent

    def _chain(self, specs: list[Any], max_retries: int | None) -> LLMClient:
        """A fallback chain's client: its models' clients (each built or reused as `_client`
        builds one), tried in order; the same chain gives the same client each episode."""
        clients = [self._client(s, max_retries) for s in specs]
        key = tuple(id(c) for c in clients)
        chain = self._chains.get(key)
        if chain is None:
            chain = self._chains[key] = fallback(*clients)  # the runtime owns the clients
        return chain

    def _client(self, spec: dict[str, Any] | LLMClient, max_retries: int | None) -> LLMClient:
        if isinstance(spec, dict):
            config = dict(spec)
            if max_retries is not None:
                config["max_retries"] = max_retries
            return self.runtime.clients.get(config)
        # A client object keeps its own request retries. One without the notion (a scripted
        # or custom client) has nothing to configure; one with a different setting would
        # silently ignore the request, so that is refused.
        own = getattr(spec, "max_retries", None)
        if max_retries is not None and own is not None and own != max_retries:
            raise ConfigError(
                f"agent {self.id!r}: max_retries={max_retries} needs the model as a string or "
                "config dict; a client object keeps its own max_retries (set it on the client)"
            )
        return spec

    async def connect(self) -> list[dict[str, Any]]:
        """Connect the agent's MCP integrations now and report what each server offered
        (`tools`, `resources`, ...); the first episode connects otherwise."""
        return await self.harness().connect()

    async def inspect_integrations(self, wait: float = 15.0) -> list[IntegrationInspection]:
        """Ask each MCP source on its own what it offers, then close it again (for listings
        such as the UI's agent page: no model, no provider key, no lasting session). A source
        that fails or takes longer than `wait` seconds says why instead."""

        async def one(source: IntegrationSource) -> IntegrationInspection:
            label = str(getattr(source, "label", None) or type(source).__name__)
            try:
                async with asyncio.timeout(wait):
                    conn = await source.connect(None)
            except Exception as exc:
                return IntegrationInspection(label, None, f"{type(exc).__name__}: {exc}")
            try:
                return IntegrationInspection(label, dict(conn.report))
            finally:
                if conn.close is not None:
                    await conn.close()

        return list(await asyncio.gather(*(one(s) for s in self.integrations)))

    async def aclose(self) -> None:
        """End the MCP sessions of the harness agents this agent built; it stays usable."""
        agents = [*self._harnesses.values(), *self._retired]
        self._retired = []
        for agent in agents:
            await agent.aclose()

    # -- episodes ----------------------------------------------------------------------------

    @overload
    def run(
        self, *, output_schema: None = ..., **options: Unpack[RunOptions]
    ) -> AgentRunHandle[T]: ...
    @overload
    def run(
        self, *, output_schema: type[U], **options: Unpack[RunOptions]
    ) -> AgentRunHandle[U]: ...
    @overload
    def run(
        self, *, output_schema: Mapping[str, Any], **options: Unpack[RunOptions]
    ) -> AgentRunHandle[dict[str, Any]]: ...

    def run(self, **kwargs: Any) -> AgentRunHandle[Any]:
        """Start one episode and return its handle at once; the episode drains the model
        stream itself (observers still get every `agent_text_delta`).

        Args:
            memory_scope: The conversation; omitted, a new random id (on the handle and result).
            context: Handed to tools as `ctx.context`; never stored, never sent to the model.
            user: A user message appended after the stored transcript: a string, or a list
                of strings and parts (`image()`, `document()`, `audio()`).
            messages: Messages appended after `user` (string content allowed; system
                messages are dropped).
            output_schema: Structured output for this call (overrides the agent's).
            model: This call's model (alias `llm`): a string or a config dict merges over the
                agent's model config key by key; a client object replaces it.
            settings: This call's model settings, merged over the agent's key by key.
            stop_when: Loop control for this call (default: the agent's, else step_count_is(20)).
            max_retries: Request retries before streaming (the call wins over the agent, 0 too).
            stream_retries: Reruns of a step whose stream broke (the call wins, 0 too).
            system_prompt_conflict: "keep-pinned" (default) or "use-current" (this episode
                only; the stored pin is not rewritten).
            suppress_system_prompt_conflict_warning: No warning when keeping another agent's pin.
            workflow: `{"workflow_run_id", "step_id"}` to link a standalone call; inside a
                workflow run the active run and step are used.
            tools: This episode's tools (a list, a dict or a ToolProvider) instead of the
                agent's own (its resources and MCP tools stay).
            tool_provider_context: The raw value a ToolProvider's `get_tools` receives.
            services: Services for this call, merged over the agent's (`ctx.services`).
            tags: Labels for the run; `version:` / `commit:` are added unless given.

        Inside a durable workflow run, an episode whose turn pauses on calls that need a
        decision makes the workflow wait for it: `result` raises the workflow's suspension
        (not an `Exception`) through the step, the workflow run is stored `waiting`, and
        deciding the paused run (`runtime.resume`) resumes the workflow, whose replay gets the
        run's final result here (`tether.lab._step_pauses`).

        Raises:
            ConfigError: bad input, or no model (nothing has run or been stored).
        """
        return self._start(kwargs, None)

    def run_held(self, gate: StartGate, **kwargs: Any) -> AgentRunHandle[Any]:
        """`run()` whose episode, once its run is stored, waits at `gate` until it is
        released (see `StartGate`)."""
        return self._start(kwargs, None, gate)

    @overload
    def stream(
        self, *, output_schema: None = ..., **options: Unpack[RunOptions]
    ) -> AgentStreamHandle[T]: ...
    @overload
    def stream(
        self, *, output_schema: type[U], **options: Unpack[RunOptions]
    ) -> AgentStreamHandle[U]: ...
    @overload
    def stream(
        self, *, output_schema: Mapping[str, Any], **options: Unpack[RunOptions]
    ) -> AgentStreamHandle[dict[str, Any]]: ...

    def stream(self, **kwargs: Any) -> AgentStreamHandle[Any]:
        """Like `run()`, and the handle exposes `text_stream` and `full_stream` (with
        `partial_output` events while a structured answer streams)."""
        handle = self._start(kwargs, _EventBuffer())
        assert isinstance(handle, AgentStreamHandle)
        return handle

    def _start(
        self, kwargs: dict[str, Any], buffer: _EventBuffer | None, gate: StartGate | None = None
    ) -> AgentRunHandle[Any]:
        episode = self.prepare_episode(kwargs, buffer=buffer)
        episode.gate = gate
        self.runtime.awake()
        episodes = self.runtime.episodes
        # Held at a gate, its first steps run now (on SQLite its run is stored by the time
        # this returns); the rest in its task, once released.
        task = (episodes.spawn if gate is None else episodes.start)(
            self._started(episode, kwargs, step_slot(self.id, kwargs)),
            name=f"tether-lab:{self.id}:{episode.run_id}",
        )
        return self._handle(episode, episode.run_id, task, buffer)

    def _handle(
        self,
        episode: Episode,
        run_id: str,
        task: asyncio.Task[AgentRunResult[Any]],
        buffer: _EventBuffer | None,
    ) -> AgentRunHandle[Any]:
        """The handle of `episode` running as `task`: a streaming one when it has a buffer."""
        parts: HandleParts[Any] = {
            "agent_id": self.id,
            "run_id": run_id,
            "memory_scope": episode.scope,
            "task": task,
            "controller": episode.controller,
        }
        if buffer is None:
            return AgentRunHandle(**parts)
        return AgentStreamHandle(buffer=buffer, **parts)

    # -- resuming a paused episode (`resume()` / `resume_stream()`: `Resumes`) ----------------

    async def _resumer(
        self, run_id: str, decisions: Mapping[str, Decision]
    ) -> tuple[LabAgent[T], Checked]:
        return self, await checked_run(self.runtime.run_store, run_id, decisions, self.id)

    async def _resume(
        self,
        run_id: str,
        decisions: Mapping[str, Decision],
        decided_by: str | None,
        options: dict[str, Any],
        buffer: _EventBuffer | None,
        checked: Checked,
    ) -> AgentRunHandle[T]:
        unknown = sorted(set(options) - _RESUME_OPTIONS)
        if unknown:
            raise ConfigError(
                f"agent {self.id!r}: unknown resume option(s) {unknown}; the options are "
                f"{', '.join(sorted(_RESUME_OPTIONS))}"
            )
        if decided_by is not None and not isinstance(decided_by, str):
            raise ConfigError(f"decided_by must be a string, got {type(decided_by).__name__}")
        info, calls = checked
        assert info.memory_scope is not None
        # Everything that can be refused is checked before the run is taken.
        episode = self.prepare_episode(
            {**options, "memory_scope": info.memory_scope}, buffer=buffer, resume_of=info
        )
        given = options.get("tools")
        listed = check_tools(given, "") if given is not None else self._def.tools
        if isinstance(listed, list):
            check_listed_edits(listed, calls)
        listeners = self.runtime.listeners
        store = self.runtime.run_store
        taken = await take_run(
            store, listeners, run_id, calls, decided_by, self.runtime.heartbeat.ttl
        )
        episode.resumed = Resumed(taken.info, taken.turn, calls)
        episode.prime_resume()
        waiter = info.workflow_run_id
        self.runtime.awake()
        task = self.runtime.episodes.spawn(
            episode.run() if waiter is None else self._answering(episode, waiter),
            name=f"tether-lab:{self.id}:{run_id}",
        )
        return self._handle(episode, run_id, task, buffer)

    async def _started(
        self, episode: Episode, kw: dict[str, Any], slot: RunSlot | None
    ) -> AgentRunResult[Any]:
        """Run `episode`; inside a workflow run, at its journal place `slot`: a replay hands
        back the outcome a paused run journaled there, and a pause makes the workflow wait for
        it."""
        if slot is None:
            return await self._routed(episode, kw)
        outcome = await slot.answer()
        waited = slot.waited_run() if outcome is None else None
        if waited is not None:
            # The workflow was resumed while it waited for this place's paused run: it waits
            # for the same run again (no new episode), unless that run ended meanwhile.
            outcome = await ended_outcome(self.runtime.run_store, waited)
            if outcome is None:
                if episode.buffer is not None:
                    episode.buffer.close()
                slot.suspend(waited)
        if outcome is not None:
            if episode.buffer is not None:
                episode.buffer.close()
            return await replayed(self.runtime.run_store, outcome, episode.output, episode.scope)
        result = await self._routed(episode, kw)
        if result.paused:
            slot.suspend(result.run_id)
        return result

    async def _answering(self, episode: Episode, waiter: str) -> AgentRunResult[Any]:
        """Run resumed `episode`; once it ends (not paused again), the workflow run that waits
        for it, if one does, has its outcome and is resumed here."""
        try:
            result = await episode.run()
        except DecisionError:
            raise  # the run is paused again, as it was: the workflow still waits
        except Exception as exc:
            await self.runtime.answer_workflow(
                waiter, episode.run_id, failure_of(episode.run_id, exc)
            )
            raise
        if not result.paused:
            await self.runtime.answer_workflow(waiter, result.run_id, outcome_of(result))
        return result

    async def _routed(self, episode: Episode, kw: dict[str, Any]) -> AgentRunResult[Any]:
        """Run `episode`, or, when this agent hands over and the caller named no agent, the
        same run as the agent of its handoffs that holds the scope."""
        if self._def.handoffs and kw.get("agent") is None and not episode.scope_generated:
            held = await held_by(episode.store, episode.scope)
            if held is not None and held != episode.agent.id:
                target = handoff_graph(self).get(held)
                if target is not None:
                    routed = target.prepare_episode(
                        kw,
                        buffer=episode.buffer,
                        run_id=episode.run_id,
                        controller=episode.controller,
                    )
                    routed.gate, episode = episode.gate, routed
        return await episode.run()

    def prepare_episode(
        self,
        kw: dict[str, Any],
        *,
        buffer: _EventBuffer | None,
        resume_of: RunInfo | None = None,
        run_id: str | None = None,
        controller: AbortController | None = None,
    ) -> Episode:
        """The episode a `run()` / `stream()` with these options would run, checked and not
        started (`agent=` naming one of this agent's handoffs makes it that agent's); a given
        `run_id` / `controller` are its own (a routed or handed-over run keeps the handle's).

        Raises:
            ConfigError: bad options (nothing has run or been stored).
        """
        named = kw.get("agent")
        if named is not None and named != self.id:
            graph = handoff_graph(self)
            if named not in graph:
                known = ", ".join(repr(a) for a in graph)
                raise ConfigError(
                    f"agent {self.id!r}: agent={named!r} is neither this agent nor one it hands "
                    f"over to ({known})"
                )
            rest = {k: v for k, v in kw.items() if k != "agent"}
            episode: Episode = graph[named].prepare_episode(
                rest, buffer=buffer, run_id=run_id, controller=controller
            )
            return episode
        unknown = sorted(set(kw) - _RUN_OPTIONS)
        if unknown:
            raise ConfigError(
                f"agent {self.id!r}: unknown run option(s) {unknown}; the options are "
                f"{', '.join(sorted(_RUN_OPTIONS))}"
            )
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            raise ConfigError(
                f"agent {self.id!r}: run() and stream() start a task; call them inside a "
                "running event loop (for example from an async function run with asyncio.run)"
            ) from None
        scope = kw.get("memory_scope")
        if scope is not None and (not isinstance(scope, str) or not scope):
            raise ConfigError(f"memory_scope must be a non-empty string, got {scope!r}")
        generated = scope is None
        if scope is None:
            scope = new_id()
        user = kw.get("user")
        new_input: list[Message] = []
        if isinstance(user, str):
            new_input.append({"role": "user", "content": [{"type": "text", "text": user}]})
        elif user is not None:  # a list of strings and parts (images, documents, audio)
            if not isinstance(user, (list, tuple)):
                raise ConfigError(
                    f"user must be a string or a list of strings and parts, got "
                    f"{type(user).__name__}"
                )
            parts = user_parts(user)[1]
            assert parts is not None
            new_input.append({"role": "user", "content": parts})
        messages = kw.get("messages")
        if messages is not None:
            new_input.extend(_normalize_messages(messages))
        # Refused here, before anything runs or is stored (messages are checked as normalized).
        check_json_safe(scope, "memory_scope")
        check_json_safe(user, "user")
        resolved = self._plain_parts() if kw.keys() <= _PLAIN_OPTIONS else self._parts(kw)
        tags = kw.get("tags")
        if tags is not None and (
            isinstance(tags, str) or not all(isinstance(t, str) for t in tags)
        ):
            raise ConfigError("tags must be a list of strings")
        link = _link(kw.get("workflow"))
        if resume_of is not None:
            link = (
                WorkflowLink(resume_of.workflow_run_id, resume_of.step_id)
                if resume_of.workflow_run_id
                else None
            )
        return Episode(
            self.runtime,
            resolved.agent,
            run_id=resume_of.run_id if resume_of is not None else (run_id or new_id()),
            memory_scope=scope,
            scope_generated=generated,
            store=self._def.memory_store or self.runtime.message_store,
            new_input=new_input,
            output=resolved.output,
            stop_when=resolved.stop_when,
            stream_retries=resolved.stream_retries,
            conflict=resolved.conflict,
            suppress_warning=bool(kw.get("suppress_system_prompt_conflict_warning", False)),
            link=link,
            tool_provider_context=kw.get("tool_provider_context"),
            context=kw.get("context"),
            services=resolved.services,
            tags=merge_tags([*(tags or ()), *context_tags()], self.runtime.provenance_tags()),
            controller=controller or AbortController(),
            buffer=buffer,
            caller=caller(current_workflow_run()) if resume_of is None else None,
            approval_timeout=self._def.approval_timeout,
            kwargs=kw,
        )

    def _plain_parts(self) -> _Parts:
        """`_parts` of a run that sets none of the options they come from (`_PLAIN_OPTIONS`),
        worked out once: again after the definition changed (`_apply`), and once the runtime
        built its model clients anew (`ClientPool.generation`)."""
        generation = self.runtime.clients.generation
        cached = self._plain
        if cached is None or cached[0] != generation:
            cached = self._plain = (generation, self._parts({}))
        return cached[1]

    def _parts(self, kw: Mapping[str, Any]) -> _Parts:
        """What an episode with run options `kw` runs with, checked.

        Raises:
            ConfigError: a bad option, or a model that cannot be built.
        """
        d = self._def
        schema = kw.get("output_schema")
        output = OutputSpec.of(schema) if schema is not None else self._output
        stop_when = check_stop_when(kw.get("stop_when")) or self.stop_when
        retries: dict[str, int | None] = {}
        for name, agent_value in (
            ("max_retries", d.max_retries),
            ("stream_retries", d.stream_retries),
        ):
            value = check_count(name, kw.get(name))
            retries[name] = value if value is not None else agent_value
        conflict = kw.get("system_prompt_conflict", "keep-pinned")
        if conflict not in _CONFLICTS:
            raise ConfigError(
                f"system_prompt_conflict must be 'keep-pinned' or 'use-current', got {conflict!r}"
            )
        tools = check_tools(kw.get("tools"), "") if kw.get("tools") is not None else d.tools
        services = check_services(kw.get("services"))
        model = check_model(
            one_of("model", kw.get("model"), "llm", kw.get("llm")),
            param="model" if kw.get("llm") is None else "llm",
        )
        settings = (
            merge_settings(d.settings, check_settings("settings", kw.get("settings"))) or None
        )
        harness = self.harness(model, max_retries=retries["max_retries"])
        replaced = tools is not None and (is_provider(tools) or kw.get("tools") is not None)
        agent = EpisodeAgent(
            id=self.id,
            harness=harness,
            system_prompt=self._prompt,
            tools=tools if replaced else None,
            resource_tools=[*self._resource_tools, *self._transfer_tools],
            has_tools=bool(tools)
            or bool(self._resource_tools)
            or bool(d.integrations)
            or bool(self._transfer_tools),
            title_workflow=d.title_workflow,
            settings=settings,
            recording=d.recording or "metadata",
            handoffs={h.name: h for h in d.handoffs or ()},
            max_handoffs=self.max_handoffs,
        )
        return _Parts(agent, output, stop_when, retries["stream_retries"], conflict, services)


class _Parts(NamedTuple):
    """What an episode runs with by its run options (`LabAgent._parts`)."""

    agent: EpisodeAgent
    output: OutputSpec[Any] | None
    stop_when: list[StopCondition]
    stream_retries: int | None
    conflict: SystemPromptConflict
    services: dict[str, Any] | None


_PLAIN_OPTIONS = frozenset(
    {
        "memory_scope",
        "user",
        "messages",
        "tags",
        "workflow",
        "context",
        "tool_provider_context",
        "suppress_system_prompt_conflict_warning",
    }
)
"""The run options that make no difference to `LabAgent._parts`: a run setting no others
runs with the parts worked out once (`LabAgent._plain_parts`)."""


_UUID4_CLEAR = ~(0xC000 << 48 | 0xF000 << 64)
_UUID4_SET = 0x8000 << 48 | 0x4000 << 64


def new_id() -> str:
    """`uuid.uuid4().hex` (the same random version-4 id) without building a `UUID`, which
    costs more than the rest of the id: a run id and a generated scope per episode."""
    return "%032x" % (int.from_bytes(os.urandom(16)) & _UUID4_CLEAR | _UUID4_SET)


def _for_agent(trace: Any, agent_id: str) -> Any:
    """The agent's own view of a trace sink that names agents (`tether.otel.OtelSink`): one
    sink in the runtime's defaults then names each agent's spans by its id."""
    for_agent = getattr(trace, "for_agent", None)
    return for_agent(agent_id) if callable(for_agent) else trace
