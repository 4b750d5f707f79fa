"""What `agent.run()` and `agent.stream()` return: a handle on a running episode, and its result."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Generator
from dataclasses import dataclass, field
from typing import Any, Generic, TypedDict, TypeVar, Unpack

from ..events import AgentEvent, PendingCall, Usage
from ..session import Message
from ..signals import AbortController
from ..stop import RoundResult

__all__ = [
    "KEEP_INPUT",
    "AgentRunHandle",
    "AgentRunResult",
    "AgentStreamHandle",
    "HandleParts",
    "StartGate",
]

KEEP_INPUT: dict[int, AbortController] = {}
"""The controllers (by id) of running episodes cancelled with ``keep_input=True``; the
episode reads and removes its own entry when it ends."""

T = TypeVar("T")


@dataclass(slots=True)
class AgentRunResult(Generic[T]):
    """How an episode ended."""

    text: str
    """The final answer's text (for structured output: the JSON it was parsed from)."""
    output: T
    """The parsed object when an output schema was set, else the same as `text`."""
    turns: int
    """Model requests made in the episode (steps), the structured-output follow-up included."""
    memory_scope: str
    """The conversation the episode ran on (the generated id when none was given)."""
    new_messages: list[Message]
    """Every message this episode appended to the stored transcript, in order."""
    usage: Usage
    """Tokens over every request of the episode."""
    run_id: str
    """The episode's id in the RunStore."""
    stop_reason: str | None = None
    """The provider's stop reason for the last request."""
    steps: list[RoundResult] = field(default_factory=list)
    """One entry per model request."""
    pending: list[PendingCall] = field(default_factory=list)
    """The calls the turn paused on (the run is "paused"; `agent.resume(run_id, decisions)`
    continues it); empty when the episode ended."""
    cost_usd: float | None = None
    """What run `run_id`'s model calls cost, as its record stores it (an earlier leg of a
    resumed run included); None when a call has no known price or none reported usage."""
    model: str | None = None
    """The model the run's record names (its `meta["model"]`)."""

    @property
    def paused(self) -> bool:
        """Whether the episode paused on calls that wait for a decision."""
        return bool(self.pending)


class _EventBuffer:
    """Every event of one episode, for any number of readers, each at its own pace.

    Appending is O(1) and wakes the readers waiting for more; a reader that starts late
    replays from the first event.
    """

    __slots__ = ("closed", "events", "wake")

    def __init__(self) -> None:
        self.events: list[AgentEvent] = []
        self.closed = False
        self.wake = asyncio.Event()

    def push(self, event: AgentEvent) -> None:
        self.events.append(event)
        wake, self.wake = self.wake, asyncio.Event()
        wake.set()

    def close(self) -> None:
        self.closed = True
        self.wake.set()

    async def read(self) -> AsyncIterator[AgentEvent]:
        i = 0
        while True:
            while i < len(self.events):
                yield self.events[i]
                i += 1
            if self.closed:
                return
            await self.wake.wait()


class HandleParts(TypedDict, Generic[T]):
    """What a handle is made of, the same for `AgentRunHandle` and `AgentStreamHandle`."""

    agent_id: str
    run_id: str
    memory_scope: str
    task: asyncio.Task[AgentRunResult[T]]
    controller: AbortController


class StartGate:
    """Holds a new episode between the creation of its run and its first step: `stored`
    resolves once the run is in the run store (read back by `get_run`, followed by a stream,
    read as interrupted once its lease lapses if this process dies), and the episode goes on
    when `release()` is called. What a server answers a start with, before the episode's
    first steps run (on SQLite they never wait: hundreds of starts arriving at once would
    each wait for all the episodes started before them).

    Release it in every case (a `finally`): an episode held at its gate never goes on.
    """

    __slots__ = ("_open", "stored")

    def __init__(self) -> None:
        self.stored: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        """Resolves once the run is stored (a run whose start fails never resolves it: its
        task ends with the error)."""
        self._open = asyncio.Event()

    def release(self) -> None:
        """Let the episode go on (idempotent)."""
        self._open.set()

    async def passed(self) -> None:
        """The episode's side: its run is stored; wait for `release()`."""
        if not self.stored.done():
            self.stored.set_result(None)
        await self._open.wait()


class AgentRunHandle(Generic[T]):
    """A started episode. `await handle.result` for its AgentRunResult; `cancel()` to stop it.

    The episode runs in its own task whether or not `result` is awaited. Cancelling it stops the
    model request or tool in flight; the steps completed before stay stored, and the stored
    transcript stays a valid list.
    """

    __slots__ = ("_controller", "agent_id", "memory_scope", "result", "run_id")

    def __init__(self, **parts: Unpack[HandleParts[T]]) -> None:
        self.agent_id = parts["agent_id"]
        self.run_id = parts["run_id"]
        """The episode's id in the RunStore."""
        self.memory_scope = parts["memory_scope"]
        """The conversation this episode runs on (generated when none was given)."""
        self.result: asyncio.Task[AgentRunResult[T]] = parts["task"]
        """Resolves to the AgentRunResult, or raises what failed the episode."""
        self._controller = parts["controller"]

    def cancel(self, reason: object = "cancelled", *, keep_input: bool = False) -> None:
        """Stop the episode. `result` then raises AbortedError.

        Args:
            reason: Why (the AbortedError's reason).
            keep_input: A turn stopped before it completed a step still stores its input,
                with an assistant record of what the answer said so far, marked cancelled
                (``"cancelled": true`` and a closing text the next turn's model reads), as a
                chat does with a message whose answer the user cut off. Without it, a
                cancelled episode leaves the conversation as its last complete step left it.
        """
        if keep_input and not self.result.done():
            KEEP_INPUT[id(self._controller)] = self._controller
        self._controller.abort(reason)

    def __await__(self) -> Generator[Any, None, AgentRunResult[T]]:
        return self.result.__await__()


class AgentStreamHandle(AgentRunHandle[T]):
    """A started episode whose events can be read as they happen.

    `text_stream` yields the answer's text deltas (and raises what failed the episode, after
    the text that came before the failure); `full_stream` yields every event of the harness
    loop, the final `done` or `error` included. Both can be read more than once, by several
    readers, and each starts from the beginning. Persistence is the same as `run()`.
    """

    __slots__ = ("_buffer",)

    def __init__(self, *, buffer: _EventBuffer, **parts: Unpack[HandleParts[T]]) -> None:
        super().__init__(**parts)
        self._buffer = buffer

    @property
    def full_stream(self) -> AsyncIterator[AgentEvent]:
        return self._buffer.read()

    @property
    def text_stream(self) -> AsyncIterator[str]:
        return self._text()

    async def _text(self) -> AsyncIterator[str]:
        async for event in self._buffer.read():
            if event["type"] == "text" and event["text"]:
                yield event["text"]
        # The buffer closes when the episode ends; surface a failure to a text-only reader.
        await self.result
