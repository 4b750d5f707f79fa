"""The lab Runtime: defaults, stores and run recording shared by a project's agents and workflows.

```python
lab = Runtime(defaults={"model": "openai:gpt-4o"}, store="sqlite:///.tether/tether.db")
researcher = lab.create_agent(id="researcher", system_prompt="You are a research assistant.")
result = await researcher.run(memory_scope="notes", user="First turn").result
```
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from os import PathLike
from pathlib import Path
from typing import Any, TypeVar, Unpack, overload
from urllib.parse import quote

import pydantic

from ..context import RunContext
from ..errors import ConfigError, LeaseLostError, StoreError, WorkflowInputError
from ..run_events import WORKFLOW_FAILED, WORKFLOW_FINISHED, WORKFLOW_STARTED
from ..stores.message_store import MessageStore
from ..stores.run_store import RunInfo, RunStore
from ..stores.workflow_store import WorkflowStore
from ..tools import Tool, define_tool
from ..workflows import Workflow, WorkflowContext, WorkflowEvent, create_workflow, current_run
from ._agent import LabAgent
from ._callers import caller, tool_call
from ._definition import (
    AGENT_KEYS,
    AgentDefaults,
    Definition,
    LabAgentOptions,
    check_keys,
)
from ._host import ClientPool, TaskSet
from ._leases import LEASE_TTL, SCOPE_LOCK_TIMEOUT, Heartbeat, ScopeLocks
from ._output import jsonable
from ._provenance import detect_commit, detect_version
from ._recorder import RunListener, logger, notify
from ._stores import DEFAULT_STORE, StoreSet, open_stores
from ._tags import context_tags
from ._template import Template
from ._titles import ConversationTitleInput, ConversationTitleOutput

__all__ = ["ConversationTitleInput", "ConversationTitleOutput", "Runtime", "ToolCallInfo"]

T = TypeVar("T")
In = TypeVar("In")
Out = TypeVar("Out")

_TOOL_NAME_BAD = re.compile(r"[^A-Za-z0-9_-]")


class ToolCallInfo:
    """What `map_run` / `map_input` receive beside the tool's arguments."""

    __slots__ = ("ctx", "tool_ctx")

    def __init__(self, ctx: WorkflowContext[Any] | None, tool_ctx: RunContext) -> None:
        self.ctx = ctx
        """The workflow run the tool runs inside, or None outside any workflow."""
        self.tool_ctx = tool_ctx
        """The tool call's own context (`context`, `signal`, `services`, ...)."""


class _LazyWorkflowStore:
    """Stands in for the runtime's workflow store until the first journal write opens it, so
    declaring a workflow never touches the disk."""

    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime

    def __getattr__(self, name: str) -> Any:
        return getattr(self._runtime.workflow_store, name)


class Runtime:
    """Defaults, stores and run recording for a project's agents and workflows.

    Args:
        defaults: The parts every agent uses unless it sets its own: the same keys as
            `create_agent` (`model`, `settings`, `max_tool_rounds`, `stop_when`, `tools`,
            `guardrails`, `trace`, ...). The model config, the settings and the services
            merge key by key (run > agent > defaults); the rest is replaced whole. A model
            config's keys go inside `model`: ``defaults={"model": {"model": "openai:gpt-4o",
            "base_url": ...}}``.
        store: Where conversations, workflow journals and run records live: ``"memory"``,
            ``"sqlite:///relative/path.db"`` (relative to `root`), ``"sqlite:////abs/path.db"``.
            Default: ``sqlite:///.tether/tether.db``, opened on first use.
        message_store / run_store / workflow_store: Store objects to use instead (they stay
            the caller's: the runtime never closes them).
        version: True records `version:` / `commit:` tags on every run (read from the project
            under `root`); a string is used as the version; False records neither.
        root: The project directory (default: the current directory).
        prices: Prices of models genai-prices does not know (private ones), in US dollars per
            million tokens: ``{"openai:my-model": {"input_mtok": 0.5, "output_mtok": 1.5}}``
            (see `tether.pricing.PriceOverride`); the `[prices]` table of `tether.toml` too.
        scope_lock_timeout: Seconds an episode waits for its memory scope while other episodes
            (of this process or another) run on it, before it fails with `ScopeBusyError`.
            Default 600.
        lease_ttl: Seconds a lease of this runtime lasts unless renewed (every sixth of it): a
            memory scope's, a running run's, a workflow run's. How long after its process
            died a run reads as "interrupted" and a scope or workflow run is free. Default 30.
    """

    def __init__(
        self,
        *,
        defaults: AgentDefaults | Mapping[str, Any] | None = None,
        store: str | None = None,
        message_store: MessageStore | None = None,
        run_store: RunStore | None = None,
        workflow_store: WorkflowStore | None = None,
        version: bool | str = True,
        root: str | PathLike[str] | None = None,
        prices: Mapping[str, Any] | None = None,
        scope_lock_timeout: float = SCOPE_LOCK_TIMEOUT,
        lease_ttl: float = LEASE_TTL,
    ) -> None:
        if defaults is not None and not isinstance(defaults, Mapping):
            raise ConfigError(
                f"Runtime(defaults=...) takes a dict of agent keys, got {defaults!r:.80}"
            )
        self._defaults = Definition.check(defaults or {}, "Runtime(defaults=...)")
        self._prices: dict[str, Any] = _check_prices(prices) if prices is not None else {}
        self.root = Path(root) if root is not None else Path.cwd()
        self._root_given = root is not None
        self.store_url = store
        self._message_store = message_store
        self._run_store = run_store
        self._workflow_store = workflow_store
        self._stores: StoreSet | None = None
        self.version = version
        self._provenance: list[str] | None = None
        self.agents: dict[str, LabAgent[Any]] = {}
        """Agents created by this runtime, by id (a re-created id replaces the old one)."""
        self.workflows: dict[str, Workflow[Any, Any]] = {}
        """Workflows created by this runtime, by id."""
        self._created: list[LabAgent[Any]] = []
        self._listeners: list[RunListener] = []
        self._clients = ClientPool()
        self._episodes = TaskSet()
        self._background = TaskSet()
        self._lazy_workflow_store: Any = _LazyWorkflowStore(self)
        for name, value in (("scope_lock_timeout", scope_lock_timeout), ("lease_ttl", lease_ttl)):
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                raise ConfigError(
                    f"Runtime({name}=...) must be a positive number of seconds, got {value!r}"
                )
        self.lease_ttl = float(lease_ttl)
        """Seconds a lease of this runtime lasts unless renewed (renewed every sixth of it)."""
        self._heartbeat = Heartbeat(self.lease_ttl)
        self._scopes = ScopeLocks(self._heartbeat, timeout=float(scope_lock_timeout))
        self._closed = False

    def __repr__(self) -> str:
        return f"Runtime(store={self.store_url or DEFAULT_STORE!r})"

    # -- what agents see of the runtime (`AgentHost`) ----------------------------------------

    @property
    def defaults(self) -> Definition:
        """The checked `defaults=`: what every agent uses unless it sets its own."""
        return self._defaults

    @property
    def prices(self) -> dict[str, Any]:
        """Price overrides the run recorder uses for cost (by ``"provider:model"`` or id)."""
        return self._prices

    @prices.setter
    def prices(self, value: Mapping[str, Any]) -> None:
        self._prices = _check_prices(value)

    @property
    def listeners(self) -> Sequence[RunListener]:
        """Who `subscribe()` registered: told of every run event (a live, read-only view)."""
        return self._listeners

    @property
    def episodes(self) -> TaskSet:
        """The episodes running now (`wait_idle()` waits for them)."""
        return self._episodes

    @property
    def background(self) -> TaskSet:
        """Title workflows running now (`wait_idle()` waits for them)."""
        return self._background

    @property
    def scopes(self) -> ScopeLocks:
        """One writer per memory scope: what an episode holds while it loads, runs, commits."""
        return self._scopes

    @property
    def heartbeat(self) -> Heartbeat:
        """Renews the leases of this runtime's running runs and held scopes."""
        return self._heartbeat

    @property
    def clients(self) -> ClientPool:
        """The LLM clients built from model strings and configs (closed with the runtime)."""
        return self._clients

    # -- stores ------------------------------------------------------------------------------

    def _open(self) -> StoreSet:
        if self._closed:
            raise ConfigError("this runtime is closed")
        if self._stores is None:
            self._stores = open_stores(self.store_url or DEFAULT_STORE, self.root)
        return self._stores

    @property
    def stores_open(self) -> bool:
        """True once the stores of the store URL were opened (the URL is then fixed)."""
        return self._stores is not None

    def adopt_project(self, root: Path, store: str | None) -> None:
        """Make this runtime the project's at `root` (the registry does this): a runtime given
        no root keeps its default store and provenance in the project, not in whatever
        directory a command runs in; `store` (the project's store key) applies when the
        runtime was given none. Nothing changes once the stores are open."""
        if self._stores is not None:
            return
        if not self._root_given:
            self.root = root
        if store is not None and self.store_url is None:
            self.root = root
            self.use_store(store)

    def use_store(self, url: str) -> None:
        """Point a runtime that has not opened its stores yet at `url` (the registry's `store`
        key does this when the runtime was created without one)."""
        if self._stores is not None:
            raise ConfigError("the runtime's stores are already open; pass store= when creating it")
        self.store_url = url

    @property
    def message_store(self) -> MessageStore:
        given = self._message_store
        return given if given is not None else self._open().message

    @property
    def run_store(self) -> RunStore:
        given = self._run_store
        return given if given is not None else self._open().run

    @property
    def workflow_store(self) -> WorkflowStore:
        given = self._workflow_store
        return given if given is not None else self._open().workflow

    # -- provenance --------------------------------------------------------------------------

    def provenance_tags(self) -> list[str]:
        """The automatic `version:` / `commit:` tags (read once), or [] with version=False."""
        if self.version is False:
            return []
        if self._provenance is None:
            version = self.version if isinstance(self.version, str) else detect_version(self.root)
            commit = detect_commit(self.root)
            tags = []
            if version:
                tags.append(f"version:{version}")
            if commit:
                tags.append(f"commit:{commit}")
            self._provenance = tags
        return list(self._provenance)

    # -- listeners ---------------------------------------------------------------------------

    def subscribe(self, listener: RunListener) -> Callable[[], None]:
        """Call `listener(event)` for every run event of this runtime as it happens.
        Returns a function that unsubscribes."""
        self._listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return unsubscribe

    # -- definitions -------------------------------------------------------------------------

    @overload
    def create_agent(
        self, *, id: str, output_schema: None = ..., **options: Unpack[LabAgentOptions]
    ) -> LabAgent[str]: ...
    @overload
    def create_agent(
        self, *, id: str, output_schema: type[T], **options: Unpack[LabAgentOptions]
    ) -> LabAgent[T]: ...
    @overload
    def create_agent(
        self, *, id: str, output_schema: Mapping[str, Any], **options: Unpack[LabAgentOptions]
    ) -> LabAgent[dict[str, Any]]: ...

    def create_agent(self, **kwargs: Any) -> LabAgent[Any]:
        """Declare an agent (synchronous; nothing reaches the network or the disk).

        A lab agent is a harness agent (`tether.create_agent`) plus an id and a memory
        binding: every harness part is accepted here under the same name and meaning, and
        what the agent does not set comes from `Runtime(defaults=...)`.

        Args:
            id: The registry key.
            model: ``"provider:model"``, a model-config dict (``{"model", "base_url",
                "api_key", "headers", "max_retries", "stream_retries", "connect_timeout",
                "first_byte_timeout", "idle_timeout", "total_timeout", "max_connections",
                "extra_body"}``) or an LLMClient; optional when the runtime has a default
                model. Alias: `llm`.
            system_prompt: A string, a `PromptLayer`, a `Template`, or a list of those. The
                static layers (strings, static layers, templates) are what a new memory scope
                pins; dynamic layers (a function) and attached resources follow the pin on
                every turn, never stored. Alias: `prompt`.
            settings: Model settings (`temperature`, `max_tokens`, `top_p`, `stop`, `seed`,
                `tool_choice`, `parallel_tool_calls`, `reasoning`); a run's merge over them.
            tools: A list of tools, a dict of them (the key names the tool), or a
                ToolProvider building them per call.
            resources: `define_resource(...)`s: attach-mode ones join the prompt every turn,
                tool-mode ones become `read_<name>` tools.
            integrations: MCP sources (`mcp_server(...)`, `mcp_stdio(...)`): their tools and
                attached resources join the agent's.
            guardrails: `define_guardrail(...)`s on tool calls and on the final answer.
            services: What tools may use (`ctx.services`); a run's merge over them.
            trace: True (log), False, or a sink function such as `tether.otel.OtelSink()`.
            max_tool_rounds: A cap on tool rounds; default None: `stop_when` governs.
            max_tool_result_chars: Longer tool and MCP results are truncated with a marker
                (default: the harness's 100,000).
            stop_when: Loop control; default step_count_is(20). The loop ends at whichever
                of `stop_when` and `max_tool_rounds` comes first.
            on_tool_call: A function deciding on each tool call before the guardrails.
            output_schema: A pydantic model (or dataclass / TypedDict): structured output.
            title_workflow: Names a new conversation after its first successful episode.
            max_retries / stream_retries: Defaults for this agent's calls.
            memory_store: Where its conversations live (default: the runtime's).
            description: What the agent does (listings, and tools made from it).

        Raises:
            ConfigError: a bad definition (naming the parameter, what it got and what it
                takes), or no model here and none in the runtime defaults.
        """
        unknown = sorted(set(kwargs) - set(LabAgent.PARAMETERS))
        if unknown:
            check_keys(unknown, AGENT_KEYS, f"create_agent(id={kwargs.get('id')!r})")
        agent: LabAgent[Any] = LabAgent(self, **kwargs)
        self.agents[agent.id] = agent
        self._created.append(agent)
        return agent

    def create_template(
        self,
        *,
        path: str | PathLike[str] | None = None,
        relative_to: str | PathLike[str] | None = None,
        source: str | None = None,
        input_data: Any = None,
        data: Any = None,
    ) -> Template:
        """A Jinja2 system-prompt template (StrictUndefined) from a file or a string; `path`
        is resolved against `relative_to` (pass `__file__`) or, without it, against the
        runtime's root."""
        base = relative_to if relative_to is not None else (self.root if path is not None else None)
        return Template(
            path=path, relative_to=base, source=source, input_data=input_data, data=data
        )

    def create_workflow(
        self, id: str, run: Callable[[In, WorkflowContext[In]], Awaitable[Out]]
    ) -> Workflow[In, Out]:
        """A durable workflow journaled in this runtime's workflow store, its runs recorded in
        the run store."""
        workflow = create_workflow(
            id,
            run,
            store=self._lazy_workflow_store,
            on_event=self._workflow_recorder(),
            lease_ttl=self.lease_ttl,
        )
        self.workflows[id] = workflow
        return workflow

    # -- agents and workflows as tools -------------------------------------------------------

    def tool_from_agent(
        self,
        agent: LabAgent[Any],
        *,
        description: str | None = None,
        name: str | None = None,
        input_schema: Any = None,
        map_run: Callable[[Any, ToolCallInfo], Mapping[str, Any] | Awaitable[Mapping[str, Any]]]
        | None = None,
    ) -> Tool:
        """A tool that runs one episode of `agent` and returns its output.

        Without `input_schema` the tool takes `{"user": str}` and each call is a new
        conversation. With one (a pydantic model or a JSON Schema dict), `map_run(args, info)`
        receives the validated arguments (a model instance for a pydantic schema) and returns
        the run options (`memory_scope`, `user`, `messages`, `tags`, ...). `info.ctx` is the
        enclosing workflow run, or None. The caller's run `context` is passed on unless
        `map_run` sets `context` itself; aborting the outer turn cancels the inner episode.
        """
        if not isinstance(agent, LabAgent):
            raise ConfigError(f"tool_from_agent needs a lab agent, got {agent!r:.80}")
        schema, model = _tool_schema(input_schema, default=_USER_SCHEMA)
        if input_schema is None and map_run is None:

            def default_map(args: Any, info: ToolCallInfo) -> Mapping[str, Any]:
                return {"user": args["user"]}

            map_run = default_map
        elif map_run is None:
            raise ConfigError(
                f"tool_from_agent({agent.id!r}): with an input_schema, pass map_run to turn "
                "the arguments into run options"
            )
        mapper = map_run

        async def execute(value: Any, ctx: RunContext) -> Any:
            args = model.model_validate(value) if model is not None else value
            options = mapper(args, ToolCallInfo(current_run(), ctx))
            if asyncio.iscoroutine(options) or isinstance(options, Awaitable):
                options = await options
            if not isinstance(options, Mapping):
                raise ConfigError(
                    f"map_run of tool {tool_name!r} must return a dict of run options"
                )
            options = dict(options)
            options.setdefault("context", ctx.context)
            with tool_call(ctx.tool_call_id):
                handle = agent.run(**options)
            remove = ctx.signal.add_callback(handle.cancel) if ctx.signal is not None else None
            try:
                result = await handle.result
            finally:
                if remove is not None:
                    remove()
            return jsonable(result.output)

        tool_name = name or _tool_name(agent.id)
        return define_tool(
            name=tool_name,
            description=description
            or agent.description
            or f"Run one episode of the {agent.id} agent.",
            input_schema=schema,
            execute=execute,
        )

    def tool_from_workflow(
        self,
        workflow: Workflow[Any, Any],
        *,
        description: str | None = None,
        name: str | None = None,
        input_schema: Any = None,
        map_input: Callable[[Any, ToolCallInfo], Any] | None = None,
    ) -> Tool:
        """A tool that runs `workflow` and returns its output. The tool's arguments are the
        run's input, or `map_input(args, info)` turns them into it. Called inside a workflow
        run, the run nests under it."""
        if not isinstance(workflow, Workflow):
            raise ConfigError(f"tool_from_workflow needs a workflow, got {workflow!r:.80}")
        schema, model = _tool_schema(input_schema, default={"type": "object"})

        async def execute(value: Any, ctx: RunContext) -> Any:
            args = model.model_validate(value) if model is not None else value
            if map_input is not None:
                run_input = map_input(args, ToolCallInfo(current_run(), ctx))
                if asyncio.iscoroutine(run_input):
                    run_input = await run_input
            else:
                run_input = jsonable(args)
            with tool_call(ctx.tool_call_id):
                handle = workflow.run(run_input, signal=ctx.signal)
            return await handle.result

        return define_tool(
            name=name or _tool_name(workflow.id),
            description=description or f"Run the {workflow.id} workflow.",
            input_schema=schema,
            execute=execute,
        )

    def workflow_from_agent(self, agent: LabAgent[Any], *, id: str) -> Workflow[str, Any]:
        """A workflow that takes a user message (a string), runs one episode of `agent` as a
        journaled step on a scope private to the run, and returns the agent's output."""
        if not isinstance(agent, LabAgent):
            raise ConfigError(f"workflow_from_agent needs a lab agent, got {agent!r:.80}")

        async def run(user: str, ctx: WorkflowContext[str]) -> Any:
            if not isinstance(user, str):
                raise WorkflowInputError(
                    f"workflow {id!r} takes a user message (a string), got {type(user).__name__}"
                )

            async def episode() -> Any:
                handle = agent.run(memory_scope=ctx.run_local_scope(agent.id), user=user)
                return jsonable((await handle.result).output)

            # Step names may not hold '#' or '/'; agent ids may.
            return await ctx.step(quote(agent.id, safe=""), episode)

        return self.create_workflow(id, run)

    # -- background work ---------------------------------------------------------------------

    async def wait_idle(self) -> None:
        """Wait for running episodes and background title workflows to finish."""
        while self._episodes or self._background:
            pending = [*self._episodes.pending(), *self._background.pending()]
            await asyncio.gather(*pending, return_exceptions=True)

    # -- recording workflow runs -------------------------------------------------------------

    def _workflow_recorder(self) -> Callable[[WorkflowEvent], Awaitable[None]]:
        """The run store's recorder, after the default trace sink's workflow spans when it has
        them (`tether.otel.OtelSink.workflow_events`): a run and its steps are spans, current
        while they run, so the episodes they start are their children in one trace."""
        spans = getattr(self._defaults.trace, "workflow_events", None)
        if not callable(spans):
            return self._record_workflow_event
        workflow_events: Callable[[WorkflowEvent], object] = spans

        async def record(event: WorkflowEvent) -> None:
            try:
                workflow_events(event)
            except Exception:
                logger.exception("the trace sink could not take workflow event %s", event["type"])
            await self._record_workflow_event(event)

        return record

    async def _record_workflow_event(self, event: WorkflowEvent) -> None:
        # An event the run store could not take fails the run (StoreError: the engine lets it
        # through), rather than leave a gap in what the run's stream shows. The run's end
        # is the exception: the run has ended anyway, and its own outcome is kept.
        try:
            await self._write_workflow_event(event)
        except LeaseLostError:
            raise  # another process runs the run now: this one stops, and records nothing more
        except Exception as exc:
            kind = event.get("type")
            logger.exception("could not record workflow event %s", kind)
            if kind not in (WORKFLOW_FINISHED, WORKFLOW_FAILED):
                raise StoreError(
                    f"workflow run {event.get('workflow_run_id')} stopped: its event {kind} "
                    f"could not be recorded ({type(exc).__name__}: {exc})"
                ) from exc

    async def _write_workflow_event(self, event: WorkflowEvent) -> None:
        store = self.run_store
        kind = event["type"]
        run_id = event["workflow_run_id"]
        # The run's record is fenced by its workflow lease (recorded in the run's own task):
        # once another process took the run over, this one's writes to it are refused.
        ctx = current_run()
        lease = ctx.lease.owner if ctx is not None and ctx.workflow_run_id == run_id else None
        # A failure's traceback is kept with the run's error, not in its events.
        data = {k: v for k, v in event.items() if k not in ("type", "at", "traceback")}
        if kind == WORKFLOW_STARTED:
            existing = await store.get_run(run_id)
            if existing is None:
                # Recorded in the run's own task, whose context it inherited from where it was
                # started: the episode whose tool started it, if one did.
                parent = caller(event["parent_run_id"])
                await store.start_run(
                    RunInfo(
                        run_id=run_id,
                        kind="workflow",
                        name=event["workflow_id"],
                        started_at=event["at"],
                        tags=list(context_tags()),
                        workflow_run_id=event["parent_run_id"],
                        parent_run_id=parent.run_id if parent else None,
                        parent_tool_call_id=parent.tool_call_id if parent else None,
                        meta={"root_run_id": event["root_run_id"]},
                        input_text=_as_text(event.get("input")),
                    ),
                    lease_ttl=self.lease_ttl,
                    lease=lease,
                )
            else:
                await store.finish_run(run_id, "running", lease_ttl=self.lease_ttl, lease=lease)
            # While it runs, the run's record is renewed with the runtime's other leases: if
            # this process dies, `tether runs list` shows the run interrupted.
            self._heartbeat.hold_run(store, run_id)
        elif kind in (WORKFLOW_FINISHED, WORKFLOW_FAILED):
            self._heartbeat.drop_run(store, run_id)
        seq = await store.append_events(
            run_id, [{"type": kind, "at": event["at"], "data": data}], lease=lease
        )
        notify(
            self._listeners,
            {"run_id": run_id, "seq": seq, "type": kind, "at": event["at"], "data": data},
        )
        if kind == WORKFLOW_FINISHED:
            await store.finish_run(
                run_id,
                "completed",
                ended_at=event["at"],
                output_text=_as_text(event.get("output")),
                lease=lease,
            )
        elif kind == WORKFLOW_FAILED:
            fields: dict[str, Any] = dict(event)
            error = fields.get("error") or {}
            await store.finish_run(
                run_id,
                "cancelled" if fields.get("status") == "cancelled" else "failed",
                ended_at=event["at"],
                error=f"{error.get('type')}: {error.get('message')}",
                traceback=fields.get("traceback"),
                lease=lease,
            )

    # -- lifecycle ---------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Wait for background work, then close the clients and stores this runtime opened.
        Idempotent.

        Cancelling the wait (`asyncio.wait_for(lab.aclose(), 30)`, Ctrl-C) is the way out of a
        title workflow that never ends: what still runs is cancelled (and records that it was),
        and the runtime closes all the same before the cancellation propagates.
        """
        if self._closed:
            return
        try:
            await self.wait_idle()
        except asyncio.CancelledError:
            pending = [*self._episodes.pending(), *self._background.pending()]
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending)
            await self._release()
            raise
        await self._release()

    async def _release(self) -> None:
        self._closed = True
        await self._heartbeat.aclose()
        for agent in self._created:
            await agent.aclose()
        await self._clients.aclose()
        if self._stores is not None:
            await self._stores.aclose()

    async def __aenter__(self) -> Runtime:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


_USER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"user": {"type": "string", "description": "The message to send"}},
    "required": ["user"],
}


def _tool_schema(
    input_schema: Any, *, default: dict[str, Any]
) -> tuple[dict[str, Any], type[pydantic.BaseModel] | None]:
    if input_schema is None:
        return default, None
    if isinstance(input_schema, dict):
        return input_schema, None
    if isinstance(input_schema, type) and issubclass(input_schema, pydantic.BaseModel):
        schema = input_schema.model_json_schema()
        schema.pop("title", None)
        return schema, input_schema
    raise ConfigError(
        "input_schema must be a pydantic model class or a JSON Schema dict, "
        f"got {input_schema!r:.80}"
    )


def _tool_name(id: str) -> str:
    return _TOOL_NAME_BAD.sub("_", id)[:64] or "agent"


def _check_prices(prices: Any) -> dict[str, Any]:
    from ..pricing import check_overrides  # the lab extra's genai-prices

    return dict(check_overrides(prices, "Runtime(prices=...)"))


def _as_text(value: Any) -> str:
    """A run's input or output as plain text for listing and search."""
    if isinstance(value, str):
        return value[:4000]
    try:
        return json.dumps(value, ensure_ascii=False, default=repr)[:4000]
    except (TypeError, ValueError):
        return repr(value)[:4000]
