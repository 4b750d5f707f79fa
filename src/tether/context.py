"""RunContext: what a tool, resource, prompt layer, guardrail or workflow step receives as `ctx`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ._json import check_json_safe, copy_json

if TYPE_CHECKING:
    import httpx

    from .signals import AbortSignal
    from .tracing import Tracer

__all__ = ["RunContext"]


@dataclass(slots=True, eq=False)
class RunContext:
    """The harness's own context for one turn (or one workflow run).

    `input` is what a run is about; `services` is what it may use.
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
    _http: Callable[[], httpx.AsyncClient] | None = None

    def remember(self, patch: dict[str, Any]) -> None:
        """Ask for a memory write; the loop yields it as a `memory` event right after this call."""
        if not isinstance(patch, dict):
            raise TypeError(f"remember() takes a dict patch, got {type(patch).__name__}")
        check_json_safe(patch, "memory")
        self._pending.append(copy_json(patch))  # what was checked is what is written

    def trace(self, name: str, data: dict[str, Any] | None = None) -> None:
        """Record a `workflow`-phase trace record (a no-op when tracing is off)."""
        if self._tracer is not None:
            self._tracer.record("workflow", name, data, buffer=True)

    def for_call(self, call_id: str) -> RunContext:
        """A copy for one tool call, sharing the turn's queues."""
        return RunContext(
            session_id=self.session_id,
            signal=self.signal,
            services=self.services,
            memory=self.memory,
            context=self.context,
            tool_call_id=call_id,
            _pending=self._pending,
            _tracer=self._tracer,
            _http=self._http,
        )
