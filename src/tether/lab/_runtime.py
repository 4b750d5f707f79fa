"""The lab Runtime: defaults, stores and run recording shared by a project's agents and workflows.

The Runtime composes and delegates; each job is an object of its own:

| job                          | where                                                     |
|------------------------------|-----------------------------------------------------------|
| the registry                 | `agents` / `workflows` dicts (`create_agent`, `create_workflow`) |
| defaults                     | a checked `Definition` (`tether.lab._definition`)         |
| stores                       | `RuntimeStores` (`tether.lab._stores`), open on first use |
| leases and heartbeat         | `Heartbeat`, `ScopeLocks` (`tether.lab._leases`)          |
| model clients, running tasks | `ClientPool`, `TaskSet` (`tether.lab._host`)              |
| workflow runs in the store   | `WorkflowRunRecorder` (`tether.lab._workflow_runs`)       |
| agents and workflows as tools| `tether.lab._as_tools`                                    |
| experiments                  | `tether.evals.evaluate(runtime, ...)`, on a Runtime       |

How a Runtime is used: the example in `tether.lab`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from os import PathLike
from pathlib import Path
from typing import Any, TypeAlias, TypeVar, Unpack, overload

from ..approvals import Decision, deny
from ..blobs import BlobResolver
from ..errors import ConfigError, RunNotFoundError, RunNotPausedError
from ..stores.message_store import MessageStore
from ..stores.run_store import RunStore
from ..stores.workflow_store import WorkflowStore
from ..workflows import (
    Workflow,
    WorkflowContext,
    WorkflowEventHandler,
    WorkflowHandle,
    create_workflow,
)
from ._agent import Checked, LabAgent, Resumes
from ._as_tools import ToolCallInfo, tool_from_agent, tool_from_workflow, workflow_from_agent
from ._definition import (
    AGENT_KEYS,
    AgentDefaults,
    Definition,
    LabAgentOptions,
    check_keys,
)
from ._handles import AgentStreamHandle
from ._host import ClientPool, TaskSet
from ._leases import LEASE_TTL, SCOPE_LOCK_TIMEOUT, Heartbeat, ScopeLocks
from ._provenance import detect_commit, detect_version
from ._recorder import RunListener
from ._resume import checked_run
from ._stores import DEFAULT_STORE, RuntimeStores
from ._template import Template, TemplateOptions
from ._titles import ConversationTitleInput, ConversationTitleOutput
from ._workflow_runs import (
    WorkflowRunRecorder,
    answer_waiting_workflow,
    expire_waits,
    signal_run,
    store_signal,
)

__all__ = ["ConversationTitleInput", "ConversationTitleOutput", "Runtime", "ToolCallInfo"]

APPROVAL_SWEEP = "approval-timeout sweep"
"""The key of the runtime's beat job that expires overdue pauses."""

ResumedHook: TypeAlias = Callable[[str, Any, "asyncio.Task[Any]"], None]
"""`on_resumed(run_id, handle, task)`: a run this runtime resumed by itself."""

logger = logging.getLogger("tether.lab")

EXPIRED = "expired"
"""The reason of the denial an undecided call gets once its approval timeout passed."""

T = TypeVar("T")
In = TypeVar("In")
Out = TypeVar("Out")


class _LazyWorkflowStore:
    """Stands in for the runtime's workflow store until the first journal write opens it, so
    declaring a workflow never touches the disk."""

    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime

    def __getattr__(self, name: str) -> Any:
        return getattr(self._runtime.workflow_store, name)


class Runtime(Resumes[Any]):
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
        self.stores = RuntimeStores(store, root, message_store, run_store, workflow_store)
        """Where conversations, journals and run records live (opened on first use)."""
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
        self._workflow_runs = WorkflowRunRecorder(self, self._defaults.trace)
        self.on_resumed: ResumedHook | None = None
        """Told of each run this runtime resumes by itself — a workflow run that waited for a
        paused run just decided, a paused run its approval sweep expired — with the run's id,
        its handle and its task (`tether serve` tracks them, so that any worker can cancel
        them and its streams know they run here)."""
        self._timeouts = self._defaults.approval_timeout is not None
        """Whether any agent (or the defaults) has an approval timeout: then the runtime
        sweeps for expired pauses on its beat (`awake`)."""
        self._remote_models: list[Any] = []
        """The A2A model clients `remote_agent` made (this runtime closes them)."""
        self._engines: dict[str, Any] = {}
        """What an experiment engine keeps for this runtime's life (its `aclose()` awaited when
        the runtime closes), by engine: the Ray engine's connection and actor pool."""
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

    # -- stores (`tether.lab._stores.RuntimeStores`) ---------------------------------------

    @property
    def root(self) -> Path:
        """The project directory: relative SQLite paths and provenance are read under it."""
        return self.stores.root

    @property
    def store_url(self) -> str | None:
        """The store URL given (or the project's), None for the default."""
        return self.stores.url

    @property
    def stores_open(self) -> bool:
        """True once the stores of the store URL were opened (the URL is then fixed)."""
        return self.stores.is_open

    def adopt_project(self, root: Path, store: str | None) -> None:
        """See `RuntimeStores.adopt_project` (the registry does this)."""
        self.stores.adopt_project(root, store)

    def use_store(self, url: str) -> None:
        """See `RuntimeStores.use`."""
        self.stores.use(url)

    @property
    def message_store(self) -> MessageStore:
        return self.stores.message

    @property
    def run_store(self) -> RunStore:
        return self.stores.run

    def blob_resolver(self, store: MessageStore) -> BlobResolver | None:
        """See `RuntimeStores.resolver`."""
        return self.stores.resolver(store)

    @property
    def workflow_store(self) -> WorkflowStore:
        return self.stores.workflow

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
            handoffs: Lab agents, their ids or `LabHandoff`s the agent may hand the
                conversation over to inside a turn (`transfer_to_<id>` tools; see
                `tether.handoffs`).
            max_handoffs: How many times a turn started on this agent may be handed over
                (default 5); a transfer past it is the model's tool error.

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
        if self._timeouts or _has_timeout(agent):
            self._timeouts = True
            self.awake()  # outside a loop, the first episode (or `async with`) starts it
        return agent

    def create_template(self, **options: Unpack[TemplateOptions]) -> Template:
        """A Jinja2 system-prompt template (StrictUndefined) from a file or a string; `path`
        is resolved against `relative_to` (pass `__file__`) or, without it, against the
        runtime's root."""
        if options.get("relative_to") is None and options.get("path") is not None:
            options["relative_to"] = self.root
        return Template(**options)

    def create_workflow(
        self, id: str, run: Callable[[In, WorkflowContext[In]], Awaitable[Out]]
    ) -> Workflow[In, Out]:
        """A durable workflow journaled in this runtime's workflow store, its runs recorded in
        the run store."""
        workflow = create_workflow(
            id,
            run,
            store=self._lazy_workflow_store,
            on_event=self._workflow_runs.handler(),
            lease_ttl=self.lease_ttl,
        )
        self.workflows[id] = workflow
        return workflow

    async def signal(
        self,
        run_id: str,
        name: str,
        value: Any,
        *,
        on_event: WorkflowEventHandler | None = None,
    ) -> WorkflowHandle[Any]:
        """Send signal `name` with `value` to workflow run `run_id`, which waits for it
        (`ctx.wait_for(name)`), and resume the run in this process: the handle of the resumed
        run (`await` it for the output; it raises `WorkflowWaitingError` when the run waits
        again). `run_id` may be the root run or the nested run that waits; `on_event` is a
        recorder of the resumed run, beside the runtime's.

        Raises:
            WorkflowNotWaitingError: the run does not wait for `name`; the message says what it
                waits for. Nothing is stored.
            WorkflowSignalError: `value` does not match the wait's schema (`.path` says where),
                or the wait timed out already. Nothing is stored.
            WorkflowError: there is no such run, or its workflow is not one of this runtime's.
        """
        return await signal_run(self.workflows, self.workflow_store, run_id, name, value, on_event)

    async def answer_workflow(
        self, workflow_run_id: str, paused_run_id: str, outcome: dict[str, Any]
    ) -> None:
        """See `AgentHost.answer_workflow`: the workflow resumed here runs as background work
        (`wait_idle()` and `aclose()` wait for it)."""
        await answer_waiting_workflow(self, workflow_run_id, paused_run_id, outcome)

    def awake(self) -> None:
        """Start the approval-timeout sweep on the runtime's beat (every sixth of `lease_ttl`,
        whether or not a lease is held), when an agent of this runtime (or its defaults, or a
        tool of an agent) has an `approval_timeout` and it does not run yet: each beat runs
        `expire_approvals()`, one indexed query of the run store when nothing expired. Called
        as an episode starts, by `async with runtime`, and by `create_agent` inside a loop;
        `aclose()` stops it. Nothing runs (no task at all) without a timeout."""
        if not self._timeouts or self._closed:
            return
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return
        self._heartbeat.keep(APPROVAL_SWEEP, self._sweep)

    async def _sweep(self) -> None:
        """One beat of the approval sweep: the runs it resumed are told to `on_resumed`."""
        for handle in await self.expire_approvals():
            self.resumed_here(handle.run_id, handle, handle.result)

    def resumed_here(self, run_id: str, handle: Any, task: asyncio.Task[Any]) -> None:
        """Tell `on_resumed` (if set) of a run this runtime resumed by itself."""
        hook = self.on_resumed
        if hook is not None:
            try:
                hook(run_id, handle, task)
            except Exception:
                logger.exception("on_resumed failed for run %s", run_id)

    async def expire_approvals(self, *, limit: int = 20) -> list[AgentStreamHandle[Any]]:
        """Resume, here, the paused runs of this runtime's agents whose `approval_timeout`
        passed: each undecided call is denied with reason "expired" (`decided_by`
        "approval_timeout"), and the turn goes on. The handles of the runs resumed here; a run
        another worker took first, or of an agent this runtime lacks, is left. `tether serve`
        does this on its sweep."""
        handles: list[AgentStreamHandle[Any]] = []
        for run_id in await self.run_store.expired_pauses(limit=limit):
            info = await self.run_store.get_run(run_id)
            if info is None or info.status != "paused" or info.name not in self.agents:
                continue
            decisions = {p["id"]: deny(EXPIRED) for p in info.pending}
            try:
                handle = await self.resume_stream(run_id, decisions, decided_by="approval_timeout")
            except (RunNotPausedError, RunNotFoundError):
                continue  # another worker expired (or someone decided) it first
            handles.append(handle)
        return handles

    async def _resumer(
        self, run_id: str, decisions: Mapping[str, Decision]
    ) -> tuple[LabAgent[Any], Checked]:
        checked = await checked_run(self.run_store, run_id, decisions, None)
        name = checked[0].name
        agent = self.agents.get(name)
        if agent is None:
            raise ConfigError(
                f"run {run_id!r} is a paused run of agent {name!r}, which this runtime does not "
                f"define (its agents: {', '.join(sorted(self.agents)) or 'none'}); create it "
                "with create_agent(id=...) or load the project's registry"
            )
        return agent, checked

    async def store_signal(self, run_id: str, name: str, value: Any) -> str:
        """Send signal `name` with `value` to workflow run `run_id` like `signal`, but leave the
        run to whichever process takes it over instead of resuming it here: a `tether serve`
        worker does on its next sweep (or `tether workflow run ID --run-id RUN` here). The root
        run's id. Raises what `signal` raises, before anything is stored."""
        return await store_signal(
            self.workflows, (self.workflow_store, self.run_store), run_id, name, value
        )

    async def resume_expired_waits(self, *, limit: int = 100) -> list[WorkflowHandle[Any]]:
        """Resume this runtime's waiting workflow runs whose `wait_for` timed out (their wait
        raises `WorkflowWaitTimeoutError`); the handles of the runs resumed here. `tether serve`
        does this on its sweep."""
        return await expire_waits(self.workflows, self.workflow_store, limit=limit)

    def remote_agent(
        self,
        url: str,
        *,
        id: str | None = None,
        headers: Mapping[str, str] | None = None,
        description: str | None = None,
        timeout: float = 120.0,
        **options: Any,
    ) -> LabAgent[str]:
        """A lab agent whose turns go to the A2A agent at `url` (synchronous: the card is read
        on the first turn). Its runs are lab runs like any other (stored by memory scope,
        recorded, served, listed); each turn sends the new user message to the remote agent on
        the remote context that belongs to the scope, and streams its answer back as text
        events. A remote task that fails is the run's `A2ATaskError`; a card or server that
        cannot be used, its `A2ACardError` / `A2AConnectionError`.

        Args:
            url: The agent's URL (its card is at ``{url}/.well-known/agent-card.json``).
            id: The registry id (default: the URL's last path segment).
            headers: Sent with every request (``{"Authorization": "Bearer …"}``).
            description: For listings and tools made from the agent.
            timeout: Seconds one read of the answer may wait.
            options: Any other `create_agent` keyword (`title_workflow`, `memory_store` ...).
        """
        from ..a2a._model import A2AModel
        from ._recorder import current_memory_scope

        model = A2AModel(url, headers=headers, context_of=current_memory_scope, timeout=timeout)
        self._remote_models.append(model)
        agent_id = id or (url.rstrip("/").rsplit("/", 1)[-1] or "remote")
        return self.create_agent(
            id=agent_id,
            model=model,
            description=description or f"The A2A agent at {model.client.url}.",
            **options,
        )

    # -- agents and workflows as tools (`tether.lab._as_tools`) -------------------------------

    tool_from_agent = staticmethod(tool_from_agent)
    tool_from_workflow = staticmethod(tool_from_workflow)
    workflow_from_agent = workflow_from_agent

    # -- background work ---------------------------------------------------------------------

    async def wait_idle(self) -> None:
        """Wait for running episodes and background title workflows to finish."""
        while self._episodes or self._background:
            pending = [*self._episodes.pending(), *self._background.pending()]
            await asyncio.gather(*pending, return_exceptions=True)

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
        self._heartbeat.drop(APPROVAL_SWEEP)  # resumes nothing more while it closes
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
        self.stores.closed = True
        await self._heartbeat.aclose()
        for agent in self._created:
            await agent.aclose()
        await self._clients.aclose()
        for model in self._remote_models:
            await model.aclose()
        while self._engines:
            await self._engines.popitem()[1].aclose()
        await self.stores.aclose()

    async def __aenter__(self) -> Runtime:
        self.awake()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def _has_timeout(agent: LabAgent[Any]) -> bool:
    """Whether a pause of `agent` can expire: it (or the defaults) or one of its listed tools
    has an `approval_timeout` (a ToolProvider's tools are not known before a run)."""
    if agent.definition.approval_timeout is not None:
        return True
    tools = agent.tools
    return isinstance(tools, list) and any(t.approval_timeout is not None for t in tools)


def _check_prices(prices: Any) -> dict[str, Any]:
    from ..pricing import check_overrides  # the lab extra's genai-prices

    return dict(check_overrides(prices, "Runtime(prices=...)"))
