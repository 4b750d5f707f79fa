"""RunContext: what a tool, resource, prompt layer, guardrail or workflow step receives as `ctx`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypeVar

from ._json import check_json_safe, copy_json

if TYPE_CHECKING:
    import httpx

    from .signals import AbortSignal
    from .tracing import Tracer

__all__ = ["HttpFactory", "RunContext"]

HttpFactory = Callable[[], "httpx.AsyncClient"]
"""Returns the agent's shared HTTP client (created on first use), for endpoint tools."""

C = TypeVar("C", bound="RunContext")


@dataclass(slots=True, eq=False)
class RunContext:
    """The harness's own context for one turn (or one workflow run).

    `input` is what a run is about; `services` is what it may use. A turn's context is made by
    `Agent.plan_turn()` (the one place with the rules: a fresh services dict, a read-only view of
    the session's memory); the context of a tool call or a ladder step is derived from it with
    `derive()` and shares its memory queue, tracer and HTTP client.
    """

    session_id: str
    signal: AbortSignal | None = None
    """The turn's cancellation; pass it on to anything slow."""
    services: dict[str, Any] = field(default_factory=dict)
    """Dependencies declared on the agent and per run (per run wins, key by key)."""
    memory: Mapping[str, Any] = field(default_factory=dict)
    """The session's memory, read-only (a turn gives a live view): write it with `remember()`."""
    context: Any = None
    """The caller's run context (the lab's `context=`); never stored, never sent to the model."""
    tool_call_id: str | None = None
    """Set while a tool call runs."""
    _pending: list[dict[str, Any]] = field(default_factory=list)
    _tracer: Tracer | None = None
    _http: HttpFactory | None = None
    _live: Callable[[dict[str, Any]], None] | None = None
    """Where a running tool's progress goes at once (set by the loop while it runs one)."""
    handoff_chain: Any = None
    """The turn's handoff chain (`tether.handoffs.HandoffChain`) when its agent can hand the
    conversation over: what a transfer tool asks."""

    @classmethod
    def for_turn(
        cls,
        session_id: str,
        memory: Mapping[str, Any],
        signal: AbortSignal | None,
        services: Mapping[str, Any],
        context: Any,
        tracer: Tracer | None,
        http: HttpFactory | None,
    ) -> RunContext:
        """A turn's context: `memory` as a read-only view (`reduce()` is its writer) and a fresh
        `services` dict (a tool that changes it cannot change the agent's)."""
        view = MappingProxyType(memory) if type(memory) is dict else memory
        return cls(session_id, signal, dict(services), view, context, None, [], tracer, http)

    @property
    def tracer(self) -> Tracer | None:
        """The turn's tracer (None when tracing is off); what a source records on goes here."""
        return self._tracer

    @property
    def http(self) -> httpx.AsyncClient | None:
        """The agent's shared HTTP client (None outside an agent's turn)."""
        return None if self._http is None else self._http()

    @property
    def has_memory_writes(self) -> bool:
        """True while a `remember()` patch waits to be yielded as a `memory` event."""
        return bool(self._pending)

    def remember(self, patch: dict[str, Any]) -> None:
        """Ask for a memory write; the loop yields it as a `memory` event right after this call."""
        if not isinstance(patch, dict):
            raise TypeError(f"remember() takes a dict patch, got {type(patch).__name__}")
        check_json_safe(patch, "memory")
        self._pending.append(copy_json(patch))  # what was checked is what is written

    def take_memory_writes(self) -> list[dict[str, Any]]:
        """The patches asked for so far, oldest first; the queue is left empty."""
        if not self._pending:
            return []
        out = list(self._pending)
        self._pending.clear()  # the queue is shared with derived contexts: empty it in place
        return out

    def progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """Report how far the running tool call is (an MCP server's progress notifications
        come this way): a `progress` event with stage `tool`, yielded while the call runs. A
        no-op outside a tool call."""
        live = self._live
        if live is None or self.tool_call_id is None:
            return
        event: dict[str, Any] = {
            "type": "progress",
            "stage": "tool",
            "tool_call_id": self.tool_call_id,
            "progress": progress,
        }
        if total is not None:
            event["total"] = total
        if message is not None:
            event["message"] = message
        live(event)

    def trace(self, name: str, data: dict[str, Any] | None = None) -> None:
        """Record a `workflow`-phase trace record (a no-op when tracing is off)."""
        if self._tracer is not None:
            self._tracer.record("workflow", name, data, buffer=True)

    def derive(self, cls: type[C], /, **fields: Any) -> C:
        """A context of type `cls` (this class or a subclass) with this one's fields, sharing its
        memory queue, tracer and HTTP client, plus `fields`."""
        return cls(
            session_id=self.session_id,
            signal=self.signal,
            services=self.services,
            memory=self.memory,
            context=self.context,
            _pending=self._pending,
            _tracer=self._tracer,
            _http=self._http,
            handoff_chain=self.handoff_chain,
            **fields,
        )

    def for_call(self, call_id: str) -> RunContext:
        """A copy for one tool call, sharing the turn's queues."""
        return RunContext(
            self.session_id,
            self.signal,
            self.services,
            self.memory,
            self.context,
            call_id,
            self._pending,
            self._tracer,
            self._http,
            self._live,
            self.handoff_chain,
        )
