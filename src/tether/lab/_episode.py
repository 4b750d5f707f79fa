"""The episode runner: one `agent.run()` / `agent.stream()` call, start to finish.

The per-run flow, in this order:

1. resolve the memory scope (the caller's, or a generated id);
2. load the stored transcript (the leading pinned system prompt extracted, stray system
   records dropped);
3. append `user`, then each of `messages`;
4. resolve the system prompt: the pinned copy, unless `system_prompt_conflict="use-current"`;
   on a new scope the current prompt becomes the pin;
5. drive the harness loop (`Agent.send`) with `stop_when`, forwarding its events and
   persisting after each step (a complete model round: the reply and its tool results);
6. return the final text / output, `turns` (model requests), the new messages and usage.

Persistence is by step: the new input (and, on a new scope, the pin) is stored together with
the first completed step, and each later step is one atomic append. A failed or cancelled
episode therefore leaves the stored list as it was after its last complete step: always a
transcript a provider accepts, never a dangling tool call.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, TypeVar

from ..agent import Agent
from ..errors import (
    AbortedError,
    ConfigError,
    NoObjectGeneratedError,
    SessionFormatError,
    StoreCorruptError,
)
from ..events import DoneEvent, Usage
from ..loop import TurnOptions
from ..prompt import prompt_layer
from ..session import Message, Session, fold
from ..signals import AbortController
from ..stop import StepResult, StopCondition, step_count_is
from ..stores.message_store import MessageStore, StoredRecord, SystemRecord
from ..stores.run_store import RunInfo
from ._handles import AgentRunResult, _EventBuffer
from ._output import JSON_REQUEST, NoMatch, OutputSpec, jsonable
from ._recorder import RunRecorder
from ._tools import ToolsSpec, resolve_tools

if TYPE_CHECKING:
    from ..tools import Tool
    from ._agent import LabAgent

__all__ = ["Episode", "SystemPromptConflict", "WorkflowLink", "in_title_workflow"]

logger = logging.getLogger("tether.lab")

SystemPromptConflict: TypeAlias = Literal["keep-pinned", "use-current"]

T = TypeVar("T")

_TITLING: ContextVar[bool] = ContextVar("tether_lab_titling", default=False)
"""Set while a title workflow runs, so the episodes it starts never start another title."""


def in_title_workflow() -> bool:
    return _TITLING.get()


@dataclass(slots=True, frozen=True)
class WorkflowLink:
    """The workflow run (and step) an episode belongs to."""

    workflow_run_id: str
    step_id: str | None = None


def split_pin(scope: str, stored: list[StoredRecord]) -> tuple[SystemRecord | None, list[Message]]:
    """The leading pinned prompt, and the transcript with every other system record dropped."""
    pin: SystemRecord | None = None
    rest: Sequence[StoredRecord] = stored
    if stored and stored[0].get("role") == "system":
        pin = stored[0]  # type: ignore[assignment]
        rest = stored[1:]
    messages = [r for r in rest if r.get("role") != "system"]
    try:
        Session.from_json({"id": scope, "messages": messages})
    except SessionFormatError as exc:
        raise StoreCorruptError(f"memory scope {scope!r}: {exc}") from exc
    return pin, messages  # type: ignore[return-value]


def pin_text(pin: SystemRecord) -> str:
    content: Any = pin.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def _error_data(exc: BaseException) -> dict[str, Any]:
    return {"type": type(exc).__name__, "message": str(exc)}


class Episode:
    """Everything one episode needs, resolved when `run()`/`stream()` was called."""

    def __init__(
        self,
        agent: LabAgent[Any],
        *,
        run_id: str,
        memory_scope: str,
        scope_generated: bool,
        harness: Agent,
        store: MessageStore,
        new_input: list[Message],
        output: OutputSpec[Any] | None,
        stop_when: list[StopCondition],
        stream_retries: int | None,
        conflict: SystemPromptConflict,
        suppress_warning: bool,
        link: WorkflowLink | None,
        tools: ToolsSpec | None,
        tool_provider_context: Any,
        context: Any,
        tags: list[str],
        controller: AbortController,
        buffer: _EventBuffer | None,
    ) -> None:
        self.agent = agent
        self.run_id = run_id
        self.scope = memory_scope
        self.scope_generated = scope_generated
        self.harness = harness
        self.store = store
        self.new_input = new_input
        self.output = output
        self.stop_when = stop_when
        self.stream_retries = stream_retries
        self.conflict = conflict
        self.suppress_warning = suppress_warning
        self.link = link
        self.tools = tools
        self.tool_provider_context = tool_provider_context
        self.context = context
        self.tags = tags
        self.controller = controller
        self.buffer = buffer
        # Filled as the episode runs.
        self.view: list[Message] = []
        self.committed = 0
        self.pending_pin: SystemRecord | None = None
        self.first_index: int | None = None
        """Where this episode's first write landed: 0 when it is the one that created the scope
        (two first episodes racing on a new scope both found it empty; only one starts it)."""
        self.new_messages: list[Message] = []
        self.steps: list[StepResult] = []
        self.usage: Usage = {}
        self.recorder: RunRecorder | None = None

    # -- the whole episode -------------------------------------------------------------------

    async def run(self) -> AgentRunResult[Any]:
        try:
            return await self._run()
        finally:
            # Stream readers end with the episode, however it ends.
            if self.buffer is not None:
                self.buffer.close()

    async def _run(self) -> AgentRunResult[Any]:
        runtime = self.agent.runtime
        recorder = RunRecorder(
            runtime.run_store,
            runtime._listeners,
            RunInfo(
                run_id=self.run_id,
                kind="agent",
                name=self.agent.id,
                status="running",
                started_at=time.time(),
                tags=list(self.tags),
                memory_scope=self.scope,
                workflow_run_id=self.link.workflow_run_id if self.link else None,
                step_id=self.link.step_id if self.link else None,
                meta={"model": self.harness.client.model},
            ),
        )
        self.recorder = recorder
        try:
            await recorder.start()
            recorder.emit(
                "agent_started",
                {
                    "agent_id": self.agent.id,
                    "memory_scope": self.scope,
                    "memory_scope_generated": self.scope_generated,
                    "tags": list(self.tags),
                    "workflow_run_id": self.link.workflow_run_id if self.link else None,
                    "step_id": self.link.step_id if self.link else None,
                    "model": self.harness.client.model,
                },
            )
            result, new_scope = await self._body()
        except BaseException as exc:
            cancelled = isinstance(exc, (AbortedError, asyncio.CancelledError))
            data: dict[str, Any] = {"error": _error_data(exc), "cancelled": cancelled}
            if isinstance(exc, NoObjectGeneratedError):
                data["text"] = exc.text
            recorder.emit("agent_failed", data)
            await recorder.close(
                "cancelled" if cancelled else "failed", error=f"{type(exc).__name__}: {exc}"
            )
            raise
        recorder.emit(
            "agent_finished",
            {
                "text": result.text,
                "output": jsonable(result.output),
                "turns": result.turns,
                "usage": dict(result.usage),
                "stop_reason": result.stop_reason,
                "memory_scope": self.scope,
            },
        )
        await recorder.close("completed")
        created = new_scope and self.first_index == 0
        if created and self.agent.title_workflow is not None and not _TITLING.get():
            runtime._start_title(self.agent, self.scope, self.run_id)
        return result

    async def _body(self) -> tuple[AgentRunResult[Any], bool]:
        recorder = self.recorder
        assert recorder is not None
        stored = await self._interruptible(lambda: self.store.load(self.scope))
        new_scope = not stored
        pin, history = split_pin(self.scope, stored)
        self.view = history + self.new_input
        self.committed = len(history)
        if not self.view:
            raise ConfigError(
                f"nothing to send: memory scope {self.scope!r} is empty and the call gave "
                "neither user= nor messages="
            )
        system = self._system_prompt(pin, new_scope, recorder)
        prompt = [prompt_layer("system", system)] if system else []
        spec = self.tools if self.tools is not None else self.agent.tools
        tools = await self._interruptible(
            lambda: resolve_tools(
                spec, self.tool_provider_context, f"agent {self.agent.id!r} tools"
            )
        )
        output = self.output
        response_format = output.response_format if output is not None and not tools else None
        done = await self._send(prompt, tools, self.stop_when, response_format)
        text = done["text"]
        value: Any = text
        if output is not None:
            if self.steps and self.steps[-1].tool_calls:
                raise NoObjectGeneratedError(
                    f"agent {self.agent.id!r}: the loop stopped on a tool call "
                    f"({self.steps[-1].tool_calls[-1]['name']}) before a final answer, so there "
                    "is no object to parse",
                    text=text,
                )
            try:
                value = output.parse(text)
            except NoMatch as first:
                if not tools:
                    raise NoObjectGeneratedError(
                        f"agent {self.agent.id!r}: {first}", text=text
                    ) from None
                # One follow-up without tools turns the transcript into the object.
                self.view.append(
                    {"role": "user", "content": [{"type": "text", "text": JSON_REQUEST}]}
                )
                done = await self._send(prompt, [], [step_count_is(1)], output.response_format)
                text = done["text"]
                if self.steps[-1].tool_calls:
                    raise NoObjectGeneratedError(
                        f"agent {self.agent.id!r}: the structured-output follow-up called a "
                        "tool instead of answering with JSON",
                        text=text,
                    ) from None
                try:
                    value = output.parse(text)
                except NoMatch as second:
                    raise NoObjectGeneratedError(
                        f"agent {self.agent.id!r}: {second}", text=text
                    ) from None
        result = AgentRunResult(
            text=text,
            output=value,
            turns=len(self.steps),
            memory_scope=self.scope,
            new_messages=self.new_messages,
            usage=self.usage,
            run_id=self.run_id,
            stop_reason=done["stop_reason"],
            steps=self.steps,
        )
        return result, new_scope

    # -- the system prompt -------------------------------------------------------------------

    def _system_prompt(
        self, pin: SystemRecord | None, new_scope: bool, recorder: RunRecorder
    ) -> str:
        agent = self.agent
        if pin is None:
            current = agent.render_system_prompt()
            if new_scope and current:
                self.pending_pin = {
                    "role": "system",
                    "content": [{"type": "text", "text": current}],
                    "agent_id": agent.id,
                }
            return current
        pinned = pin_text(pin)
        same_agent = pin.get("agent_id") == agent.id
        if same_agent and self.conflict == "keep-pinned":
            # The conversation loop: the pin stays, even if the live definition changed since.
            return pinned
        current = agent.render_system_prompt()
        if current == pinned:
            return pinned
        if self.conflict == "use-current":
            return current  # for this episode only; the stored pin is not rewritten
        if not self.suppress_warning:
            message = (
                f"agent {agent.id!r} runs on memory scope {self.scope!r}, whose pinned system "
                f"prompt belongs to agent {pin.get('agent_id')!r}; keeping the pinned prompt "
                "(pass system_prompt_conflict='use-current' to use this agent's prompt for "
                "this episode, or suppress_system_prompt_conflict_warning=True to silence this)"
            )
            logger.warning(message)
            recorder.emit(
                "agent_warning",
                {
                    "code": "system_prompt_conflict",
                    "message": message,
                    "memory_scope": self.scope,
                    "agent_id": agent.id,
                    "pinned_agent_id": pin.get("agent_id"),
                },
            )
        return pinned

    # -- driving the harness loop ------------------------------------------------------------

    async def _send(
        self,
        prompt: list[Any],
        tools: list[Tool],
        stop_when: list[StopCondition],
        response_format: dict[str, Any] | None,
    ) -> DoneEvent:
        recorder = self.recorder
        assert recorder is not None
        buffer = self.buffer
        view = self.view
        memory: dict[str, Any] = {}
        opts = TurnOptions()
        session = Session(id=self.scope, messages=view)  # the loop copies the list it is given
        events = self.harness.send(
            session,
            None,
            signal=self.controller.signal,
            context=self.context,
            prompt=prompt,
            tools=tools,
            stop_when=stop_when,
            response_format=response_format,
            stream_retries=self.stream_retries,
            options=opts,
        )
        done: DoneEvent | None = None
        error: BaseException | None = None
        try:
            async for event in events:
                if buffer is not None:
                    buffer.push(event)
                kind = event["type"]
                if kind == "text":
                    if event["text"]:  # type: ignore[typeddict-item]
                        recorder.emit("agent_text_delta", {"text": event["text"]})  # type: ignore[typeddict-item]
                elif kind == "tool_use":
                    fold(view, memory, event)
                    recorder.emit(
                        "agent_tool_call",
                        {"id": event["id"], "name": event["name"], "input": event["input"]},  # type: ignore[typeddict-item]
                    )
                elif kind == "tool_result":
                    fold(view, memory, event)
                    recorder.emit(
                        "agent_tool_result",
                        {
                            "id": event["id"],  # type: ignore[typeddict-item]
                            "name": event["name"],  # type: ignore[typeddict-item]
                            "output": event["output"],  # type: ignore[typeddict-item]
                            "is_error": bool(event.get("is_error", False)),
                        },
                    )
                    step = opts.steps[-1] if opts.steps else None
                    # The loop records a result on its step only for calls that really ran;
                    # the placeholders of an aborted round never complete a step.
                    if step is not None and len(step.tool_results) == len(step.tool_calls):
                        await self._commit()
                elif kind == "done":
                    fold(view, memory, event)
                    done = event  # type: ignore[assignment]
                    await self._commit()
                elif kind == "error":
                    error = event["error"]  # type: ignore[typeddict-item]
                else:
                    fold(view, memory, event)
        finally:
            self.steps.extend(opts.steps)
            await events.aclose()  # type: ignore[attr-defined]
        if error is not None:
            raise error
        assert done is not None, "the harness loop ended without done or error"
        total: dict[str, int] = self.usage  # type: ignore[assignment]
        turn_usage: dict[str, int] = done["usage"]  # type: ignore[assignment]
        for key, n in turn_usage.items():
            total[key] = total.get(key, 0) + n
        return done

    async def _interruptible(self, op: Callable[[], Awaitable[T]]) -> T:
        """Await `op()` so that `handle.cancel()` stops it: outside the harness loop's own
        waits (loading, committing a step, asking a ToolProvider) nothing else turns the abort
        into a stop, and a store waiting for a lock would hold the episode until it got it.
        The write of an interrupted append is atomic: it is stored whole or not at all."""
        signal = self.controller.signal
        if signal.aborted:
            # Aborted before: the harness loop stops the episode at its next wait, after a
            # step that completed meanwhile is stored.
            return await op()
        task = asyncio.current_task()
        assert task is not None
        fired = False

        def interrupt() -> None:
            nonlocal fired
            fired = True
            task.cancel()

        remove = signal.add_callback(interrupt)
        try:
            value = await op()
        except BaseException:
            # Our cancellation is taken back; one from outside that came as well goes on.
            if not fired or task.uncancel() > 0:
                raise
            raise AbortedError(signal.reason) from None
        finally:
            remove()
        if fired:  # `op` swallowed the cancellation and returned
            task.uncancel()
            raise AbortedError(signal.reason)
        return value

    async def _commit(self) -> None:
        """Append everything since the last commit as one atomic write."""
        batch = self.view[self.committed :]
        records: list[StoredRecord] = list(batch)
        if self.pending_pin is not None:
            records.insert(0, self.pending_pin)
        if not records:
            return
        length = await self._interruptible(lambda: self.store.append(self.scope, records))
        if self.first_index is None:
            self.first_index = length - len(records)
        self.committed = len(self.view)
        self.pending_pin = None
        snapshot = copy.deepcopy(records)
        self.new_messages.extend(r for r in copy.deepcopy(batch))
        assert self.recorder is not None
        self.recorder.emit(
            "agent_messages_committed",
            {"start": length - len(records), "count": len(records), "messages": snapshot},
        )
