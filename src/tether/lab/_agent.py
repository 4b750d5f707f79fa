"""Lab agents: reusable definitions (identity, model, tools, memory, structured output) whose
episodes persist to a memory scope. Build them with `Runtime.create_agent(...)`."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

from .._json import check_json_safe
from ..errors import ConfigError, NotJSONSafeError, SessionFormatError
from ..llm import LLMClient
from ..session import Message, Session
from ..signals import AbortController
from ..stop import StopCondition, step_count_is
from ..stores.message_store import MessageStore
from ..workflows import Workflow, current_step
from ._episode import Episode, SystemPromptConflict, WorkflowLink
from ._handles import AgentRunHandle, AgentRunResult, AgentStreamHandle, _EventBuffer
from ._output import OutputSpec
from ._provenance import merge_tags
from ._tags import context_tags
from ._template import PromptInspection, Template
from ._tools import ToolProvider, ToolsSpec, check_tool_set

if TYPE_CHECKING:
    from ._runtime import Runtime

__all__ = ["DEFAULT_STOP_WHEN", "LabAgent", "ModelSpec"]

T = TypeVar("T")
U = TypeVar("U")

ModelSpec = str | Mapping[str, Any] | LLMClient
"""A model: ``"provider:model"``, an llm config dict (``{"model", "base_url"?, ...}``), or an
LLMClient instance."""

DEFAULT_STOP_WHEN: StopCondition = step_count_is(20)
"""At most 20 model requests per episode unless the agent or the call says otherwise."""

_CONFLICTS = ("keep-pinned", "use-current")


def _stop_list(value: StopCondition | Sequence[StopCondition], where: str) -> list[StopCondition]:
    items = [value] if callable(value) else list(value)
    for i, cond in enumerate(items):
        if not callable(cond):
            raise ConfigError(f"{where}[{i}] is not a stop condition (a callable of steps)")
    return items


def _normalize_messages(messages: Sequence[Mapping[str, Any]]) -> list[Message]:
    """Caller messages as stored Messages; string content becomes one text part, system
    messages are dropped (the system prompt is the agent's)."""
    if isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Sequence):
        raise ConfigError("messages must be a list of {'role', 'content'} dicts")
    out: list[Message] = []
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping):
            raise ConfigError(f"messages[{i}] must be a dict with 'role' and 'content'")
        if m.get("role") == "system":
            continue
        content = m.get("content")
        msg: dict[str, Any] = dict(m)
        if isinstance(content, str):
            msg["content"] = [{"type": "text", "text": content}]
        try:
            Session.from_json({"id": "input", "messages": [msg]})
            check_json_safe(msg, f"messages[{i}]")
        except SessionFormatError as exc:
            raise ConfigError(str(exc).replace("session.messages[0]", f"messages[{i}]")) from exc
        except NotJSONSafeError as exc:
            raise ConfigError(str(exc)) from exc
        out.append(msg)  # type: ignore[arg-type]
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


class LabAgent(Generic[T]):
    """A reusable agent definition. `run()` / `stream()` each start one episode.

    `T` is the output type: the output schema's type, or `str` without one.
    """

    def __init__(
        self,
        runtime: Runtime,
        *,
        id: str,
        system_prompt: str | Template | None = None,
        model: ModelSpec | None = None,
        tools: ToolsSpec | None = None,
        output_schema: Any = None,
        stop_when: StopCondition | Sequence[StopCondition] | None = None,
        title_workflow: Workflow[Any, Any] | None = None,
        max_retries: int | None = None,
        stream_retries: int | None = None,
        memory_store: MessageStore | None = None,
        description: str = "",
    ) -> None:
        if not isinstance(id, str) or not id.strip():
            raise ConfigError(f"an agent id must be a non-empty string, got {id!r}")
        if system_prompt is not None and not isinstance(system_prompt, (str, Template)):
            raise ConfigError(
                f"agent {id!r}: system_prompt must be a string or a Template, "
                f"got {type(system_prompt).__name__}"
            )
        if model is None and runtime.defaults.get("model") is None:
            raise ConfigError(
                f"agent {id!r} has no model: pass model='provider:model' to create_agent, or "
                "give the runtime a default with Runtime(defaults={'model': ...})"
            )
        for name, value in (("max_retries", max_retries), ("stream_retries", stream_retries)):
            if value is not None and (not isinstance(value, int) or value < 0):
                raise ConfigError(f"agent {id!r}: {name} must be an integer >= 0, got {value!r}")
        if tools is not None and not isinstance(tools, ToolProvider):
            tools = check_tool_set(tools, f"agent {id!r} tools")
        if title_workflow is not None and not isinstance(title_workflow, Workflow):
            raise ConfigError(
                f"agent {id!r}: title_workflow must be a workflow (runtime.create_workflow), "
                f"got {title_workflow!r:.80}"
            )
        self.runtime = runtime
        self.id = id
        self.system_prompt = system_prompt
        self.model = model
        self.tools: ToolsSpec | None = tools
        self.output_schema = output_schema
        self._output = OutputSpec.of(output_schema) if output_schema is not None else None
        self.stop_when = (
            _stop_list(stop_when, f"agent {id!r} stop_when")
            if stop_when is not None
            else [DEFAULT_STOP_WHEN]
        )
        self.title_workflow = title_workflow
        self.max_retries = max_retries
        self.stream_retries = stream_retries
        self.memory_store = memory_store
        self.description = description

    def __repr__(self) -> str:
        return f"LabAgent({self.id!r})"

    @property
    def uses_tool_provider(self) -> bool:
        """True when the tools come from a ToolProvider (the CLI's `(tool-context)` mark)."""
        return isinstance(self.tools, ToolProvider) and not isinstance(self.tools, Sequence)

    def render_system_prompt(self) -> str:
        """The live definition's system prompt, rendered now.

        Raises:
            TemplateError: the template cannot render.
        """
        sp = self.system_prompt
        if sp is None:
            return ""
        return sp if isinstance(sp, str) else sp.render()

    def inspect_system_prompt(self) -> PromptInspection:
        """What the live system prompt renders to, or why it cannot (for the UI)."""
        sp = self.system_prompt
        if isinstance(sp, Template):
            return sp.inspect()
        return PromptInspection(sp or "")

    # -- episodes ----------------------------------------------------------------------------

    @overload
    def run(
        self,
        *,
        memory_scope: str | None = ...,
        context: Any = ...,
        user: str | None = ...,
        messages: Sequence[Mapping[str, Any]] | None = ...,
        output_schema: None = ...,
        stop_when: StopCondition | Sequence[StopCondition] | None = ...,
        max_retries: int | None = ...,
        stream_retries: int | None = ...,
        system_prompt_conflict: SystemPromptConflict = ...,
        suppress_system_prompt_conflict_warning: bool = ...,
        workflow: Any = ...,
        tools: ToolsSpec | None = ...,
        tool_provider_context: Any = ...,
        tags: Sequence[str] | None = ...,
    ) -> AgentRunHandle[T]: ...
    @overload
    def run(
        self,
        *,
        memory_scope: str | None = ...,
        context: Any = ...,
        user: str | None = ...,
        messages: Sequence[Mapping[str, Any]] | None = ...,
        output_schema: type[U],
        stop_when: StopCondition | Sequence[StopCondition] | None = ...,
        max_retries: int | None = ...,
        stream_retries: int | None = ...,
        system_prompt_conflict: SystemPromptConflict = ...,
        suppress_system_prompt_conflict_warning: bool = ...,
        workflow: Any = ...,
        tools: ToolsSpec | None = ...,
        tool_provider_context: Any = ...,
        tags: Sequence[str] | None = ...,
    ) -> AgentRunHandle[U]: ...

    def run(self, **kwargs: Any) -> AgentRunHandle[Any]:
        """Start one episode and return its handle at once; the episode drains the model
        stream itself (observers still get every `agent_text_delta`).

        Args:
            memory_scope: The conversation; omitted, a new random id (on the handle and result).
            context: Handed to tools as `ctx.context`; never stored, never sent to the model.
            user: A user message appended after the stored transcript.
            messages: Messages appended after `user` (string content allowed; system
                messages are dropped).
            output_schema: Structured output for this call (overrides the agent's).
            stop_when: Loop control for this call (default: the agent's, else step_count_is(20)).
            max_retries: Request retries before streaming (the call wins over the agent, 0 too).
            stream_retries: Reruns of a step whose stream broke (the call wins, 0 too).
            system_prompt_conflict: "keep-pinned" (default) or "use-current" (this episode
                only; the stored pin is not rewritten).
            suppress_system_prompt_conflict_warning: No warning when keeping another agent's pin.
            workflow: `{"workflow_run_id", "step_id"}` to link a standalone call; inside a
                workflow run the active run and step are used.
            tools: This episode's tools (a list or a ToolProvider) instead of the agent's.
            tool_provider_context: The raw value a ToolProvider's `get_tools` receives.
            tags: Labels for the run; `version:` / `commit:` are added unless given.

        Raises:
            ConfigError: bad input, or no model (nothing has run or been stored).
        """
        episode = self._episode(kwargs, buffer=None)
        task = self._spawn(episode)
        return AgentRunHandle(
            agent_id=self.id,
            run_id=episode.run_id,
            memory_scope=episode.scope,
            task=task,
            controller=episode.controller,
        )

    @overload
    def stream(
        self,
        *,
        memory_scope: str | None = ...,
        context: Any = ...,
        user: str | None = ...,
        messages: Sequence[Mapping[str, Any]] | None = ...,
        output_schema: None = ...,
        stop_when: StopCondition | Sequence[StopCondition] | None = ...,
        max_retries: int | None = ...,
        stream_retries: int | None = ...,
        system_prompt_conflict: SystemPromptConflict = ...,
        suppress_system_prompt_conflict_warning: bool = ...,
        workflow: Any = ...,
        tools: ToolsSpec | None = ...,
        tool_provider_context: Any = ...,
        tags: Sequence[str] | None = ...,
    ) -> AgentStreamHandle[T]: ...
    @overload
    def stream(
        self,
        *,
        memory_scope: str | None = ...,
        context: Any = ...,
        user: str | None = ...,
        messages: Sequence[Mapping[str, Any]] | None = ...,
        output_schema: type[U],
        stop_when: StopCondition | Sequence[StopCondition] | None = ...,
        max_retries: int | None = ...,
        stream_retries: int | None = ...,
        system_prompt_conflict: SystemPromptConflict = ...,
        suppress_system_prompt_conflict_warning: bool = ...,
        workflow: Any = ...,
        tools: ToolsSpec | None = ...,
        tool_provider_context: Any = ...,
        tags: Sequence[str] | None = ...,
    ) -> AgentStreamHandle[U]: ...

    def stream(self, **kwargs: Any) -> AgentStreamHandle[Any]:
        """Like `run()`, and the handle exposes `text_stream` and `full_stream`."""
        buffer = _EventBuffer()
        episode = self._episode(kwargs, buffer=buffer)
        task = self._spawn(episode)
        return AgentStreamHandle(
            agent_id=self.id,
            run_id=episode.run_id,
            memory_scope=episode.scope,
            task=task,
            controller=episode.controller,
            buffer=buffer,
        )

    def _episode(self, kw: dict[str, Any], *, buffer: _EventBuffer | None) -> Episode:
        known = {
            "memory_scope",
            "context",
            "user",
            "messages",
            "output_schema",
            "stop_when",
            "max_retries",
            "stream_retries",
            "system_prompt_conflict",
            "suppress_system_prompt_conflict_warning",
            "workflow",
            "tools",
            "tool_provider_context",
            "tags",
        }
        unknown = sorted(set(kw) - known)
        if unknown:
            raise ConfigError(f"agent {self.id!r}: unknown run option(s) {unknown}")
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
            scope = uuid.uuid4().hex
        user = kw.get("user")
        if user is not None and not isinstance(user, str):
            raise ConfigError(f"user must be a string, got {type(user).__name__}")
        new_input: list[Message] = []
        if user is not None:
            new_input.append({"role": "user", "content": [{"type": "text", "text": user}]})
        messages = kw.get("messages")
        if messages is not None:
            new_input.extend(_normalize_messages(messages))
        # Refused here, before anything runs or is stored (messages are checked as normalized).
        check_json_safe(scope, "memory_scope")
        check_json_safe(user, "user")
        schema = kw.get("output_schema")
        output = OutputSpec.of(schema) if schema is not None else self._output
        stop = kw.get("stop_when")
        stop_when = _stop_list(stop, "stop_when") if stop is not None else self.stop_when
        retries: dict[str, int | None] = {}
        for name, agent_value in (
            ("max_retries", self.max_retries),
            ("stream_retries", self.stream_retries),
        ):
            value = kw.get(name)
            if value is not None and (not isinstance(value, int) or value < 0):
                raise ConfigError(f"{name} must be an integer >= 0, got {value!r}")
            retries[name] = value if value is not None else agent_value
        conflict = kw.get("system_prompt_conflict", "keep-pinned")
        if conflict not in _CONFLICTS:
            raise ConfigError(
                f"system_prompt_conflict must be 'keep-pinned' or 'use-current', got {conflict!r}"
            )
        tools = kw.get("tools")
        if tools is not None and not isinstance(tools, ToolProvider):
            tools = check_tool_set(tools, "tools")
        tags = kw.get("tags")
        if tags is not None and (
            isinstance(tags, str) or not all(isinstance(t, str) for t in tags)
        ):
            raise ConfigError("tags must be a list of strings")
        runtime = self.runtime
        harness = runtime._harness(self.model, retries["max_retries"], self.id)
        return Episode(
            self,
            run_id=uuid.uuid4().hex,
            memory_scope=scope,
            scope_generated=generated,
            harness=harness,
            store=self.memory_store or runtime.message_store,
            new_input=new_input,
            output=output,
            stop_when=stop_when,
            stream_retries=retries["stream_retries"],
            conflict=conflict,
            suppress_warning=bool(kw.get("suppress_system_prompt_conflict_warning", False)),
            link=_link(kw.get("workflow")),
            tools=tools,
            tool_provider_context=kw.get("tool_provider_context"),
            context=kw.get("context"),
            tags=merge_tags([*(tags or ()), *context_tags()], runtime.provenance_tags()),
            controller=AbortController(),
            buffer=buffer,
        )

    def _spawn(self, episode: Episode) -> asyncio.Task[AgentRunResult[Any]]:
        task = asyncio.get_running_loop().create_task(
            episode.run(), name=f"tether-lab:{self.id}:{episode.run_id}"
        )
        self.runtime._track(task)
        return task


def model_label(spec: Any) -> str:
    """How an agent's model is shown (CLI listings, the UI): the model string, a config's
    `model` (never its key or headers), or a client's ``provider:model``; "(none)" when there
    is no model at all."""
    if spec is None:
        return "(none)"
    if isinstance(spec, str):
        return spec
    if isinstance(spec, Mapping):
        model = spec.get("model")
        return str(model) if model is not None else "(config without a model)"
    model = getattr(spec, "model", None)
    provider = getattr(spec, "provider", None)
    if isinstance(model, str) and isinstance(provider, str):
        return f"{provider}:{model}"
    if isinstance(model, str):
        return f"{model} ({type(spec).__name__})"
    return type(spec).__name__
