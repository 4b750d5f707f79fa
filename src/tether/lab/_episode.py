"""The episode runner: one `agent.run()` / `agent.stream()` call, start to finish.

The per-run flow, in this order:

1. resolve the memory scope (the caller's, or a generated id);
2. load the stored transcript (the leading pinned system prompt extracted, stray system
   records dropped);
3. append `user`, then each of `messages`;
4. resolve the system prompt: the pinned copy of the static layers, unless
   `system_prompt_conflict="use-current"`; on a new scope the current static text becomes the
   pin. Dynamic layers and attached resources follow it on every turn, never stored;
5. drive the harness loop (`Agent.send`) with `stop_when`, forwarding its events and
   persisting after each step (a complete model round: the reply and its tool results);
6. return the final text / output, `turns` (model requests), the new messages and usage.

Steps 2-5 are one unit on the scope (`Episode._on_scope`): load, run, commit. That is where a
scope lease is taken and released, so turns on one scope run one after another.

Persistence is by step: the new input (and, on a new scope, the pin) is stored together with
the first completed step, and each later step is one atomic append. A failed or cancelled
episode therefore leaves the stored list as it was after its last complete step: always a
transcript a provider accepts, never a dangling tool call.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from traceback import format_exception
from typing import Any, Literal, TypeAlias, TypeVar, cast

from .._eager import advance
from .._json import CheckedJSON, copy_json
from ..agent import Agent
from ..approvals import Decision
from ..errors import (
    AbortedError,
    ConfigError,
    DecisionError,
    NoObjectGeneratedError,
    SessionFormatError,
    StoreCorruptError,
    StoreError,
    TemplateError,
)
from ..events import AgentEvent, DoneEvent, HandoffEvent, PendingCall, Usage
from ..handoffs import DEFAULT_MAX_HANDOFFS, Handoff, HandoffChain
from ..history import Summary
from ..llm.base import ModelSettings
from ..loop import stream_turn
from ..prompt import PromptLayer
from ..run_events import (
    AGENT_FAILED,
    AGENT_FINISHED,
    AGENT_HANDOFF,
    AGENT_MESSAGES_COMMITTED,
    AGENT_PAUSED,
    AGENT_STARTED,
    AGENT_SUMMARIZED,
    AGENT_TEXT_DELTA,
    AGENT_TOOL_CALL,
    AGENT_TOOL_RESULT,
    AGENT_WARNING,
    AgentFailedData,
    AgentMessagesCommittedData,
    ErrorData,
    RunEventBody,
)
from ..session import Message, Session, fold
from ..signals import AbortController, AbortScope
from ..stop import RoundResult, StopCondition, step_count_is
from ..stores.message_store import MessageStore, StoredRecord, SystemRecord
from ..stores.run_store import TRACEBACK_LIMIT, RunInfo, RunStore, ScopeAppend
from ..tools import Tool
from ..turn import NO_TOOLS, TurnOptions
from ..workflows import Workflow
from . import _kept
from ._callers import Caller, running_episode
from ._definition import SystemPrompt
from ._handles import KEEP_INPUT, AgentRunResult, StartGate, _EventBuffer
from ._history import load_kept, summary_record
from ._host import AgentHost
from ._leases import ScopeHold, ScopeHolding
from ._output import JSON_REQUEST, NoMatch, OutputSpec, jsonable
from ._recorder import RecordingLevel, RunRecorder
from ._titles import first_success, in_title_workflow, start_title
from ._tools import ToolProvider, resolve_tools

__all__ = [
    "Episode",
    "Resumed",
    "SystemPromptConflict",
    "WorkflowLink",
    "pin_texts",
    "split_pin",
    "traceback_text",
]

CANCELLED_MARKER = "[cancelled by the user before the answer was finished]"
"""The text that closes a cancelled turn's kept answer: what a later turn's model reads."""

logger = logging.getLogger("tether.lab")

SystemPromptConflict: TypeAlias = Literal["keep-pinned", "use-current"]

T = TypeVar("T")


@dataclass(slots=True, frozen=True)
class Resumed:
    """A paused run taken back to go on (`RunStore.resume_run` won it)."""

    info: RunInfo
    """The run as taken: running again."""
    turn: dict[str, Any]
    """The turn it paused in (`Episode.paused_turn` as stored)."""
    decisions: list[tuple[PendingCall, Decision]]
    """Each pending call with its checked decision."""


@dataclass(slots=True, frozen=True)
class WorkflowLink:
    """The workflow run (and step) an episode belongs to."""

    workflow_run_id: str
    step_id: str | None = None


def split_pin(scope: str, stored: list[StoredRecord]) -> tuple[SystemRecord | None, list[Message]]:
    """The leading pinned prompt, and the transcript with every other system record dropped."""
    pin: SystemRecord | None = None
    messages: list[Message] = []
    for i, record in enumerate(stored):
        if record["role"] == "system":
            if i == 0:
                pin = record
        else:
            messages.append(record)
    try:
        Session.from_json({"id": scope, "messages": messages})
    except SessionFormatError as exc:
        raise StoreCorruptError(f"memory scope {scope!r}: {exc}") from exc
    return pin, messages


def pin_texts(pin: SystemRecord) -> list[str]:
    """The pinned text of each static layer."""
    content: Any = pin.get("content")
    if isinstance(content, str):
        return [content] if content else []
    if isinstance(content, list):
        return [str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("text")]
    return []


def _input_text(messages: Sequence[Message]) -> str:
    """An episode's new input as plain text (its text parts), for listing and search."""
    texts: list[str] = []
    for message in messages:
        for part in message.get("content", []):
            if isinstance(part, dict) and part.get("type") == "text":
                texts.append(str(part.get("text", "")))
    return "\n".join(texts)[:4000]


def _output_text(result: AgentRunResult[Any]) -> str:
    """An episode's output as plain text: the text, or the structured output as JSON."""
    if result.output is not None and not isinstance(result.output, str):
        try:
            return json.dumps(jsonable(result.output), ensure_ascii=False)[:4000]
        except (TypeError, ValueError):
            pass
    return str(result.text)[:4000]


def traceback_text(exc: BaseException) -> str:
    """Where `exc` was raised, formatted (with the exceptions it came from): the last
    `TRACEBACK_LIMIT` characters, the frames nearest the failure."""
    return "".join(format_exception(exc))[-TRACEBACK_LIMIT:]


def _error_data(exc: BaseException) -> ErrorData:
    return {"type": type(exc).__name__, "message": str(exc)}


def _summary_cost(usage: dict[str, int], model: str, prices: Any) -> float | None:
    """What making a summary cost, when it can be priced (genai-prices, or an override)."""
    try:
        from ..pricing import cost
    except ImportError:
        return None
    try:
        usd = cost(cast(Usage, usage), model, overrides=prices)
    except Exception:
        logger.exception("could not price the summary made by %s", model)
        return None
    return float(usd) if usd is not None else None


def _pause_args(turn: dict[str, Any], deadline: float | None) -> dict[str, Any]:
    """The `finish_run` keywords of a pause from its stored turn."""
    return {"pending": turn["pending"], "paused": turn, "pending_deadline": deadline}


def _add_usage(total: dict[str, int], more: Usage) -> None:
    for key, n in more.items():
        if isinstance(n, int):
            total[key] = total.get(key, 0) + n


@dataclass(slots=True, frozen=True)
class EpisodeAgent:
    """What an episode needs of its agent, resolved when `run()`/`stream()` was called."""

    id: str
    harness: Agent
    """The agent's parts compiled into a harness agent on this episode's model."""
    system_prompt: SystemPrompt
    tools: list[Tool] | ToolProvider | None
    """The episode's tools when they replace the harness agent's (a ToolProvider, or the
    call's `tools=`); None to use the harness agent's own."""
    resource_tools: list[Tool]
    """The tool-mode resources, kept beside replaced tools."""
    has_tools: bool
    """Whether the model may call tools (own, provider, resource or MCP ones)."""
    title_workflow: Workflow[Any, Any] | None
    settings: ModelSettings | None
    """The model settings of this episode (run > agent > runtime defaults, key by key)."""
    recording: RecordingLevel = "metadata"
    """How much of each model request the run records."""
    handoffs: Mapping[str, Handoff[Any]] = field(default_factory=dict)
    """The agents this one may hand the turn over to, by id."""
    max_handoffs: int = DEFAULT_MAX_HANDOFFS
    """How many times a turn started on this agent may be handed over."""


@dataclass(slots=True, frozen=True)
class HandoffLink:
    """What a handed-over episode continues: the episode that handed over, its transfer call
    and the handoff (its input filter)."""

    parent: Episode
    tool_call_id: str
    reason: str | None
    handoff: Handoff[Any]


class Episode:
    """Everything one episode needs, resolved when `run()`/`stream()` was called."""

    def __init__(
        self,
        host: AgentHost,
        agent: EpisodeAgent,
        *,
        run_id: str,
        memory_scope: str,
        scope_generated: bool,
        store: MessageStore,
        new_input: list[Message],
        output: OutputSpec[Any] | None,
        stop_when: list[StopCondition],
        stream_retries: int | None,
        conflict: SystemPromptConflict,
        suppress_warning: bool,
        link: WorkflowLink | None,
        tool_provider_context: Any,
        context: Any,
        services: dict[str, Any] | None,
        tags: list[str],
        controller: AbortController,
        buffer: _EventBuffer | None,
        caller: Caller | None = None,
        resumed: Resumed | None = None,
        approval_timeout: float | None = None,
        kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        self.host = host
        self.agent = agent
        self.run_id = run_id
        self.scope = memory_scope
        self.scope_generated = scope_generated
        self.store = store
        self.new_input = new_input
        self.output = output
        self.stop_when = stop_when
        self.stream_retries = stream_retries
        self.conflict = conflict
        self.suppress_warning = suppress_warning
        self.link = link
        self.tool_provider_context = tool_provider_context
        self.context = context
        self.services = services
        self.tags = tags
        self.controller = controller
        self.buffer = buffer
        self.caller = caller
        """The episode whose tool call started this one, if any."""
        self.resumed = resumed
        """The paused run this episode continues, if it is a resume."""
        self.approval_timeout = approval_timeout
        """Seconds a pause waits for its decisions before they are denied as "expired"."""
        self._resume: list[tuple[PendingCall, Decision]] | None = None
        """The decisions the first harness turn applies (taken once)."""
        self.prime_resume()
        self.pending: list[PendingCall] = []
        """The calls the turn paused on (empty unless it paused)."""
        self.paused_turn: dict[str, Any] | None = None
        """What a paused episode stores with its run to be resumed from."""
        self._deadline: float | None = None
        """When the paused calls expire (`_approval_deadline`)."""
        self.kwargs: Mapping[str, Any] = kwargs or {}
        """The run options this episode was made from (a handoff target's carries some on)."""
        self.handed: HandoffLink | None = None
        """Set on an episode a handoff started: the episode it continues."""
        self.chain: HandoffChain | None = (
            HandoffChain(agent.max_handoffs) if agent.handoffs else None
        )
        """The turn's handoffs (shared with the episodes it hands over to)."""
        # Filled as the episode runs.
        self.view: list[Message] = []
        self.committed = 0
        self._partial = ""
        """The text streamed so far (kept if the turn is cancelled before its first step)."""
        self.pending_pin: SystemRecord | None = None
        self.first_index: int | None = None
        """Where this episode's first write landed: 0 when it is the one that created the scope
        (two first episodes racing on a new scope both found it empty; only one starts it)."""
        self.new_messages: list[Message] = []
        self.steps: list[RoundResult] = []
        self.usage: dict[str, int] = {}
        self.recorder: RunRecorder | None = None
        self._leased: RunStore | None = None
        """The run store holding this run's lease, while the heartbeat renews it."""
        self._hold: ScopeHold | None = None
        """This episode's hold on its scope, while it has it."""
        self._tool_started: float | None = None
        self.seqs: list[int] | None = None
        """Under a history policy: the store index of each committed message of the view."""
        self.stored_length = 0
        """Under a history policy: the scope's length as this episode last knew it."""
        self.pending_summary: Summary | None = None
        """The newest summary the policy made, stored with the next commit."""
        self._pinned = False
        """Under a history policy: the scope starts with a pinned prompt."""
        self._length: int | None = None
        """The scope's stored length as this episode last knew it (None: not known)."""
        self._deferred = False
        """The turn's last step is not stored yet: it goes with the run's end, in one write
        (`_end_turn`), or on its own (`_flush`) when anything else comes first."""
        self.gate: StartGate | None = None
        """Where the episode waits once its run is stored, until released (`StartGate`)."""

    def prime_resume(self) -> None:
        """The first harness turn applies the decisions of the run resumed (if any)."""
        self._resume = self.resumed.decisions if self.resumed is not None else None

    @property
    def model(self) -> str:
        return self.agent.harness.client.model

    # -- the whole episode -------------------------------------------------------------------

    async def run(self) -> AgentRunResult[Any]:
        try:
            return await self._run()
        finally:
            if self.recorder is not None:
                # The recorder's callback is this episode's: let go, the episode is freed by
                # reference counting once its task ends (no cycle left for the collector).
                self.recorder.on_failure = None
            if self._leased is not None:
                self.host.heartbeat.drop_run(self._leased, self.run_id)
            # Stream readers end with the episode, however it ends (a handed-over one's with
            # the turn's first episode).
            if self.buffer is not None and self.handed is None:
                self.buffer.close()

    async def _gated(self) -> None:
        """The run is stored: wait at the episode's gate until it is released, if it has one
        (`StartGate`)."""
        gate, self.gate = self.gate, None
        if gate is not None:
            await gate.passed()

    def _handed_input(self) -> str:
        """A handed-over run's input, for listings: the reason it was handed over."""
        if self.handed is None:
            return ""
        return self.handed.reason or f"handed over by {self.handed.parent.agent.id}"

    async def _run(self) -> AgentRunResult[Any]:
        link = self.link
        caller = self.caller
        resumed = self.resumed
        if self.handed is not None:  # nested under the transfer call
            caller = Caller(self.handed.parent.run_id, self.handed.tool_call_id)
        recorder = RunRecorder(
            self.host.run_store,
            self.host.listeners,
            level=self.agent.recording,
            prices=self.host.prices,
            lease_ttl=self.host.heartbeat.ttl,
            info=resumed.info
            if resumed is not None
            else RunInfo(
                run_id=self.run_id,
                kind="agent",
                name=self.agent.id,
                status="running",
                started_at=time.time(),
                tags=list(self.tags),
                memory_scope=self.scope,
                workflow_run_id=link.workflow_run_id if link else None,
                step_id=link.step_id if link else None,
                parent_run_id=caller.run_id if caller else None,
                parent_tool_call_id=caller.tool_call_id if caller else None,
                meta={"model": self.model},
                input_text=_input_text(self.new_input) or self._handed_input(),
            ),
        )
        recorder.on_failure = self._recording_failed
        self.recorder = recorder
        heartbeat = self.host.heartbeat
        try:
            if resumed is not None:
                # resume_run set the run running again, with a lease: nothing to create.
                recorder.resumed(resumed.info.usage, resumed.info.cost_usd)
            else:
                await recorder.start()
            # The run's lease is renewed while it runs: if this process dies, the run reads as
            # interrupted instead of running forever.
            self._leased = self.host.run_store
            heartbeat.hold_run(self._leased, self.run_id)
            await self._gated()
            if resumed is None:
                recorder.emit(
                    {
                        "type": AGENT_STARTED,
                        "data": {
                            "agent_id": self.agent.id,
                            "memory_scope": self.scope,
                            "memory_scope_generated": self.scope_generated,
                            "tags": list(self.tags),
                            "workflow_run_id": link.workflow_run_id if link else None,
                            "step_id": link.step_id if link else None,
                            "model": self.model,
                        },
                    }
                )
            async with self._on_scope():
                with recorder.recording(self.agent.harness), running_episode(self.run_id):
                    try:
                        result = await self._body(recorder)
                    except BaseException as exc:
                        await self._flush()  # the last step stays, however the turn ends
                        if (
                            isinstance(exc, AbortedError)
                            and KEEP_INPUT.pop(id(self.controller), None) is not None
                        ):
                            await self._keep_cancelled_input()
                        raise
                    finally:
                        KEEP_INPUT.pop(id(self.controller), None)
                closed = self.paused_turn is None and await self._end_turn(recorder, result)
        except DecisionError:
            if resumed is None or self.first_index is not None:
                raise
            # An edited input the tool's schema refuses (checked as the turn resumes, before
            # anything ran): the run waits again, as it was.
            turn = resumed.turn
            await recorder.close("paused", pause=_pause_args(turn, turn.get("deadline")))
            raise
        except BaseException as exc:
            if recorder.closed:
                raise  # its end is recorded (a cancellation came while it was written)
            failure = self._recording_error(exc)
            if failure is not None:
                # The run's record broke: the episode stopped for that, not by a cancel.
                recorder.emit(
                    {
                        "type": AGENT_FAILED,
                        "data": {"error": _error_data(failure), "cancelled": False},
                    }
                )
                await recorder.close(
                    "failed", error=f"StoreError: {failure}", traceback=traceback_text(exc)
                )
                raise failure from exc
            cancelled = isinstance(exc, AbortedError | asyncio.CancelledError)
            data: AgentFailedData = {"error": _error_data(exc), "cancelled": cancelled}
            if isinstance(exc, NoObjectGeneratedError):
                data["text"] = exc.text
            recorder.emit({"type": AGENT_FAILED, "data": data})
            await recorder.close(
                "cancelled" if cancelled else "failed",
                error=f"{type(exc).__name__}: {exc}",
                # Formatted only when a run fails: a cancel is no bug, and has no place to show.
                traceback=None if cancelled else traceback_text(exc),
            )
            raise
        if self.paused_turn is not None:
            return await self._paused(recorder, result)
        if not closed:
            recorder.emit(self._finished(recorder, result))
            await recorder.close("completed", output_text=_output_text(result))
        failure = self._recording_error(None)
        if failure is not None:
            raise failure
        await self._maybe_title()
        return result

    async def _paused(
        self, recorder: RunRecorder, result: AgentRunResult[Any]
    ) -> AgentRunResult[Any]:
        """The turn waits for decisions: the run is "paused", its pending calls and its turn
        stored with it; the scope and the worker are free (`resume()` continues it)."""
        turn = self.paused_turn
        assert turn is not None
        recorder.emit(
            {
                "type": AGENT_PAUSED,
                "data": {
                    "pending": cast(list[Any], copy_json(self.pending)),
                    "memory_scope": self.scope,
                    "deadline": turn["deadline"],
                },
            }
        )
        await recorder.close("paused", pause=_pause_args(turn, turn["deadline"]))
        failure = self._recording_error(None)
        if failure is not None:
            raise failure
        return result

    def _recording_failed(self, exc: BaseException) -> None:
        """A write of the run's events failed: stop the episode (what it did next could not
        be recorded in order)."""
        self.controller.abort(self._recording_error(exc))

    def _recording_error(self, exc: BaseException | None) -> StoreError | None:
        """The error the episode fails with when its run could not be recorded, or None."""
        recorder = self.recorder
        if recorder is None or recorder.write_error is None:
            return None
        if isinstance(exc, StoreError):
            return exc
        return StoreError(
            f"run {self.run_id} stopped: its events could not be recorded "
            f"({type(recorder.write_error).__name__}: {recorder.write_error})"
        )

    def _on_scope(self) -> _OnScope:
        """Load, run and commit happen inside this block, and only there: the place where the
        scope is held for one episode (a scope lease is acquired on entry and released on
        exit), so that turns on one memory scope never interleave. A handed-over episode runs
        within the hold of the turn it continues."""
        return _OnScope(self)

    async def _maybe_title(self) -> None:
        """Start the title workflow when this is the scope's first successful episode."""
        workflow = self.agent.title_workflow
        if workflow is None or in_title_workflow() or self.first_index is None:
            return
        if self.first_index != 0:
            # The scope existed: this is its first success only if every earlier episode failed.
            try:
                if not await first_success(self.host.run_store, self.scope, self.run_id):
                    return
            except Exception:
                logger.exception("could not read the runs of scope %r to title it", self.scope)
                return
        start_title(self.host, workflow, self.store, self.scope, self.run_id)

    async def _body(self, recorder: RunRecorder) -> AgentRunResult[Any]:
        policy = self.agent.harness.history
        if self.handed is not None:
            # The turn so far, as the handoff's input filter lets the target see it; its own
            # system prompt (the scope's pin stays as it is: seed 002's "use-current").
            handoff = self.handed.handoff
            history = handoff.filtered(list(self.handed.parent.view))
            self.view = list(history)
            self.committed = len(self.view)
            self.first_index = self.handed.parent.first_index
            if not self.view:
                raise ConfigError(
                    f"the input filter of the handoff to {self.agent.id!r} left nothing to send"
                )
            prompt = self.agent.system_prompt.layers(self.agent.system_prompt.render_static())
            return await self._answer(prompt)
        if policy:
            # Only what the policy can keep: the pin, the newest summary, the turns after it.
            loaded = await self._interruptible(lambda: load_kept(self.store, self.scope, policy))
            new_scope = loaded.length == 0
            pin, history = loaded.pin, loaded.messages
            self.seqs = list(loaded.seqs)
            self.stored_length = self._length = loaded.length
            self._pinned = pin is not None
        else:
            # The transcript the last episode here left, when nothing wrote the scope since.
            pin, history, self._length = await self._interruptible(
                lambda: _kept.load(self.store, self.scope, split_pin)
            )
            new_scope = not self._length
        resumed = self.resumed
        if resumed is not None:
            # The paused round (and the input, when no step was stored before the pause)
            # goes on after what the scope holds now.
            turn = resumed.turn
            kept: Any = turn.get("pin")
            if pin is None and kept:
                pin = cast(SystemRecord, kept)
            self.view = history + cast(list[Message], copy_json(turn["messages"]))
        else:
            self.view = history + self.new_input
        self.committed = len(history)
        if not self.view:
            raise ConfigError(
                f"nothing to send: memory scope {self.scope!r} is empty and the call gave "
                "neither user= nor messages="
            )
        prompt = self.agent.system_prompt.layers(self._static_texts(pin, new_scope, recorder))
        if resumed is not None and new_scope and pin is not None:
            self.pending_pin = pin
        return await self._answer(prompt)

    async def _answer(self, prompt: list[PromptLayer]) -> AgentRunResult[Any]:
        """The turn's rounds on `prompt`, and its answer (or the answer of the agent it was
        handed over to)."""
        tools = await self._tools()
        output = self.output
        has_tools = self.agent.has_tools or bool(tools)
        response_format = output.response_format if output is not None and not has_tools else None
        done = await self._send(prompt, tools, self.stop_when, response_format)
        if self.pending:
            return self._pause_result(done)
        requested = self.chain.take() if self.chain is not None else None
        if requested is not None:
            return await self._hand_over(*requested)
        text = self._final_text(done)
        value: Any = text
        if output is not None:
            text, value, done = await self._structured(output, prompt, done, text, has_tools)
        else:
            self._push(done)
        return self._result(done, text, value)

    def _result(
        self, done: DoneEvent, text: str, output: Any, pending: list[PendingCall] | None = None
    ) -> AgentRunResult[Any]:
        """The episode's result as it ended (or paused, with its `pending` calls)."""
        return AgentRunResult(
            text=text,
            output=output,
            turns=self._turns(),
            memory_scope=self.scope,
            new_messages=self.new_messages,
            usage=cast(Usage, self.usage),
            run_id=self.run_id,
            stop_reason=done["stop_reason"],
            steps=self.steps,
            pending=pending if pending is not None else [],
            cost_usd=self.recorder.cost_usd if self.recorder is not None else None,
            model=self.model,
        )

    def _turns(self) -> int:
        earlier = self.resumed.turn.get("turns", 0) if self.resumed is not None else 0
        return int(earlier) + len(self.steps)

    def _approval_deadline(self, tools: Sequence[Tool] | None) -> float | None:
        """When the paused calls are denied as "expired": the shortest approval timeout among
        them (a tool's own, else the agent's) from now; None when none has one. A run waits
        as one, so its first timeout expires every call still undecided."""
        known = {t.name: t for t in (tools if tools is not None else self.agent.harness.tools)}
        waits: list[float] = []
        for call in self.pending:
            tool = known.get(call["name"])
            own = tool.approval_timeout if tool is not None else None
            wait = own if own is not None else self.approval_timeout
            if wait is not None:
                waits.append(wait)
        return time.time() + min(waits) if waits else None

    def _pause_result(self, done: DoneEvent) -> AgentRunResult[Any]:
        """The turn paused: what the run stores to go on from, and the result saying so."""
        self._push(done)
        self.paused_turn = {
            "messages": copy_json(self.view[self.committed :]),
            "pin": copy_json(self.pending_pin),
            "pending": copy_json(self.pending),
            "turns": self._turns(),
            "deadline": self._deadline,
        }
        return self._result(done, "", None, list(self.pending))

    def _final_text(self, done: DoneEvent) -> str:
        """The answer's text: the final round's, or, when `stop_when` (or the round cap) ended
        the loop on a tool call, the text of that last step."""
        last = self.steps[-1] if self.steps else None
        if last is not None and last.tool_calls and not done["text"]:
            return last.text
        return done["text"]

    async def _structured(
        self,
        output: OutputSpec[Any],
        prompt: Sequence[PromptLayer],
        done: DoneEvent,
        text: str,
        has_tools: bool,
    ) -> tuple[str, Any, DoneEvent]:
        """The answer parsed into the output schema, with at most one follow-up request (no
        tools, the response format set) when the tool loop ended in other text. The turn
        hands on exactly one `done`: the follow-up's when there is one."""
        agent_id = self.agent.id
        last = self.steps[-1] if self.steps else None
        if last is not None and last.tool_calls:
            self._push(done)
            raise NoObjectGeneratedError(
                f"agent {agent_id!r}: the loop stopped on a tool call "
                f"({last.tool_calls[-1]['name']}) before a final answer, so there is no "
                "object to parse",
                text=text,
            )
        try:
            value = output.parse(text)
        except NoMatch as first:
            if not has_tools:
                self._push(done)
                raise NoObjectGeneratedError(f"agent {agent_id!r}: {first}", text=text) from None
        else:
            self._push(done)
            return text, value, done
        self.view.append({"role": "user", "content": [{"type": "text", "text": JSON_REQUEST}]})
        # No tools at all, an MCP server's included: the follow-up is an answer, not a round.
        done = await self._send(prompt, NO_TOOLS, [step_count_is(1)], output.response_format)
        self._push(done)
        text = done["text"]
        if self.steps[-1].tool_calls:
            raise NoObjectGeneratedError(
                f"agent {agent_id!r}: the structured-output follow-up called a tool instead "
                "of answering with JSON",
                text=text,
            )
        try:
            return text, output.parse(text), done
        except NoMatch as second:
            raise NoObjectGeneratedError(f"agent {agent_id!r}: {second}", text=text) from None

    async def _tools(self) -> list[Tool] | None:
        """The tools replacing the harness agent's for this episode, or None to keep them."""
        spec = self.agent.tools
        if spec is None:
            return None
        if isinstance(spec, list):
            tools = spec
        else:
            provider = spec
            tools = await self._interruptible(
                lambda: resolve_tools(
                    provider, self.tool_provider_context, f"agent {self.agent.id!r}"
                )
            )
        return [*tools, *self.agent.resource_tools]

    # -- the system prompt -------------------------------------------------------------------

    def _static_texts(
        self, pin: SystemRecord | None, new_scope: bool, recorder: RunRecorder
    ) -> list[str]:
        """The static prompt of this episode: the pin, or what becomes the pin."""
        agent = self.agent
        if pin is None:
            current = agent.system_prompt.render_static()
            if new_scope and current:
                self.pending_pin = {
                    "role": "system",
                    "content": [{"type": "text", "text": t} for t in current],
                    "agent_id": agent.id,
                }
            return current
        pinned = pin_texts(pin)
        same_agent = pin.get("agent_id") == agent.id
        if same_agent and self.conflict == "keep-pinned":
            # The conversation loop: the pin stays, even if the live definition changed since.
            return pinned
        try:
            current = agent.system_prompt.render_static()
        except TemplateError as exc:
            if self.conflict == "use-current":
                raise
            # The pin is what this episode uses anyway: it runs, and says why no comparison.
            message = (
                f"agent {agent.id!r} runs on memory scope {self.scope!r} with the prompt pinned "
                f"by agent {pin.get('agent_id')!r}; its own template {exc.template!r} cannot "
                f"render ({exc})"
            )
            logger.warning(message)
            recorder.emit(
                {
                    "type": AGENT_WARNING,
                    "data": {
                        "code": "template_unrendered",
                        "message": message,
                        "memory_scope": self.scope,
                        "agent_id": agent.id,
                        "template": exc.template,
                        "variable": exc.variable,
                    },
                }
            )
            return pinned
        if current == pinned:
            return pinned
        if self.conflict == "use-current" or self._declared_by(pin.get("agent_id")):
            # For this episode only; the stored pin is not rewritten. An agent the pinning
            # agent hands over to holds the conversation by declaration: no conflict.
            return current
        if not self.suppress_warning:
            message = (
                f"agent {agent.id!r} runs on memory scope {self.scope!r}, whose pinned system "
                f"prompt belongs to agent {pin.get('agent_id')!r}; keeping the pinned prompt "
                "(pass system_prompt_conflict='use-current' to use this agent's prompt for "
                "this episode, or suppress_system_prompt_conflict_warning=True to silence this)"
            )
            logger.warning(message)
            recorder.emit(
                {
                    "type": AGENT_WARNING,
                    "data": {
                        "code": "system_prompt_conflict",
                        "message": message,
                        "memory_scope": self.scope,
                        "agent_id": agent.id,
                        "pinned_agent_id": pin.get("agent_id"),
                    },
                }
            )
        return pinned

    def _declared_by(self, pinned_by: Any) -> bool:
        """True when the agent that pinned the scope hands over (directly or on) to this one."""
        from ._handoffs import handoff_graph

        agents: Mapping[str, Any] = getattr(self.host, "agents", {})
        pinning = agents.get(pinned_by) if isinstance(pinned_by, str) else None
        if pinning is None or not pinning.handoffs:
            return False
        try:
            return self.agent.id in handoff_graph(pinning)
        except ConfigError:
            return False

    # -- driving the harness loop ------------------------------------------------------------

    def _push(self, done: DoneEvent) -> None:
        """Hand the turn's one `done` to stream readers, with the usage of every request."""
        if self.buffer is not None:
            event: DoneEvent = {**done, "usage": cast(Usage, dict(self.usage))}
            self.buffer.push(event)

    async def _send(
        self,
        prompt: Sequence[PromptLayer],
        tools: Sequence[Tool] | None,
        stop_when: list[StopCondition],
        response_format: dict[str, Any] | None,
    ) -> DoneEvent:
        """One run of the harness loop. Every event but `done` goes to stream readers as it
        comes; `done` is handed on by the caller, which knows whether a follow-up comes."""
        await self._flush()  # a follow-up request comes after the step before it is stored
        recorder = self.recorder
        assert recorder is not None
        buffer = self.buffer
        view = self.view
        memory: dict[str, Any] = {}
        session = Session(id=self.scope, messages=view)  # the loop copies the list it is given
        resume, self._resume = self._resume, None
        undecided: set[str] = set()  # the decided calls still without their result
        if resume is not None:
            undecided = {p["id"] for p, _ in resume}
            # The loop appends the decided results to the paused round's last message: its
            # own copy of that round, so the view is folded once.
            paused = cast(list[Message], copy_json(view[self.committed :]))
            session = Session(id=self.scope, messages=view[: self.committed] + paused)
            session["pending"] = [p for p, _ in resume]
        opts = TurnOptions(
            signal=self.controller.signal,
            services=self.services,
            context=self.context,
            system_prompt=list(prompt),
            tools=tools,
            stop_when=stop_when if self.chain is None else [*stop_when, self.chain.stop],
            response_format=response_format,
            stream_retries=self.stream_retries,
            settings=self.agent.settings,
            history_sink=self._summarized if self.seqs is not None else None,
        )
        # The harness's one turn factory, then its one loop (what `Agent.send` runs).
        plan = self.agent.harness.plan_turn(session, opts)
        plan.ctx.handoff_chain = self.chain
        events = stream_turn(plan, session, None, resume)
        done: DoneEvent | None = None
        error: BaseException | None = None
        try:
            async for event in events:
                if event["type"] == "paused":
                    # The round's undecided calls: the turn ends paused, and the round (some
                    # calls without a result) is stored with the run, not in the scope.
                    self.pending = list(event["pending"])
                    self._deadline = self._approval_deadline(tools)
                    if buffer is not None:
                        buffer.push(event)
                    continue
                if event["type"] == "done":
                    fold(view, memory, event)
                    done = event
                    if not self.pending:
                        self._deferred = True  # stored with the run's end, or by _flush()
                    continue
                if buffer is not None:
                    buffer.push(event)
                if event["type"] == "error":
                    error = event["error"]
                    continue
                if self._record(event, view, memory, plan.rounds):
                    await self._commit()
                if undecided and event["type"] == "tool_result":
                    undecided.discard(event["id"])
                    if not undecided:
                        # The paused round is whole: stored now, before the next model call,
                        # so a turn that fails (or a process that dies) from here on keeps
                        # the decided results, and nothing runs the approved tools again.
                        await self._commit()
        finally:
            self.steps.extend(plan.rounds)
            await events.aclose()
        if error is not None:
            raise error
        assert done is not None, "the harness loop ended without done or error"
        _add_usage(self.usage, done["usage"])
        return done

    async def _hand_over(
        self, target_id: str, reason: str | None, call_id: str
    ) -> AgentRunResult[Any]:
        """The turn goes on as a nested run of `target_id` (under the transfer call), on this
        scope and this hold; its answer is the turn's."""
        from ._handoffs import resolve_target

        assert self.recorder is not None and self.chain is not None
        await self._flush()  # the target's steps go after this episode's
        handoff = self.agent.handoffs[target_id]
        target = resolve_target(handoff, self.host, f"agent {self.agent.id!r}")
        carried = {
            k: v
            for k, v in self.kwargs.items()
            if k in ("context", "services", "tool_provider_context", "workflow")
        }
        carried["memory_scope"] = self.scope
        child = target.prepare_episode(carried, buffer=self.buffer, controller=self.controller)
        child.handed = HandoffLink(self, call_id, reason, handoff)
        child.chain = self.chain
        child.tags = list(self.tags)
        self.recorder.emit(
            {
                "type": AGENT_HANDOFF,
                "data": {
                    "from_agent": self.agent.id,
                    "to_agent": target.id,
                    "reason": reason,
                    "tool_call_id": call_id,
                    "run_id": child.run_id,
                    "memory_scope": self.scope,
                },
            }
        )
        if self.buffer is not None:
            handed: HandoffEvent = {
                "type": "handoff",
                "from_agent": self.agent.id,
                "to_agent": target.id,
                "reason": reason,
                "tool_call_id": call_id,
            }
            self.buffer.push(handed)
        result = await child.run()
        self.new_messages.extend(result.new_messages)
        self.steps.extend(result.steps or ())
        _add_usage(self.usage, result.usage)
        return dataclasses.replace(
            result,
            turns=len(self.steps),
            new_messages=self.new_messages,
            usage=cast(Usage, dict(self.usage)),
            run_id=self.run_id,
            steps=self.steps,
            cost_usd=self.recorder.cost_usd,
            model=self.model,
        )

    def _record(
        self,
        event: AgentEvent,
        view: list[Message],
        memory: dict[str, Any],
        steps: list[RoundResult],
    ) -> bool:
        """Fold one event into the episode's view; record what the run store shows. True when
        the event completed a step, which the caller then commits."""
        recorder = self.recorder
        assert recorder is not None
        if event["type"] == "text":
            if event["text"]:
                self._partial += event["text"]
                recorder.emit({"type": AGENT_TEXT_DELTA, "data": {"text": event["text"]}})
            return False
        if event["type"] == "progress" and event["stage"] == "tool":
            self._tool_started = time.time()  # the loop runs the call right after this
            return False
        fold(view, memory, event)
        if event["type"] == "tool_use":
            recorder.emit(
                {
                    "type": AGENT_TOOL_CALL,
                    "data": {"id": event["id"], "name": event["name"], "input": event["input"]},
                }
            )
        elif event["type"] == "tool_result":
            recorder.emit(
                {
                    "type": AGENT_TOOL_RESULT,
                    "data": {
                        "id": event["id"],
                        "name": event["name"],
                        "output": event["output"],
                        "is_error": bool(event.get("is_error", False)),
                        "started_at": self._tool_started,
                    },
                }
            )
            self._tool_started = None
            step = steps[-1] if steps else None
            # The loop records a result on its step only for calls that really ran; the
            # placeholders of an aborted round never complete a step.
            return step is not None and len(step.tool_results) == len(step.tool_calls)
        return False

    async def _interruptible(self, op: Callable[[], Awaitable[T]]) -> T:
        """Await `op()` so that `handle.cancel()` stops it: outside the harness loop's own
        waits (loading, committing a step, asking a ToolProvider) nothing else turns the abort
        into a stop, and a store waiting for a lock would hold the episode until it got it.
        The write of an interrupted append is atomic: it is stored whole or not at all."""
        signal = self.controller.signal
        awaitable: Awaitable[T] = op()
        if isinstance(awaitable, Coroutine):
            # Run up to its first wait now: an op that never waits (the memory store's, and
            # SQLite's without a lock to wait for) has nothing to interrupt, and needs no scope.
            done, value = advance(awaitable)
            if done:
                return cast(T, value)
            awaitable = value
        if signal.aborted:
            # Aborted before: the harness loop stops the episode at its next wait, after a
            # step that completed meanwhile is stored.
            return await awaitable
        with AbortScope(signal) as scope:
            return await scope.wait(awaitable)

    async def _keep_cancelled_input(self) -> None:
        """A turn cancelled before it completed a step still keeps the user's message: it is
        stored with an assistant record holding what the answer had said so far and marked
        cancelled (``"cancelled": true``, and the text a later turn's model reads), so the
        conversation goes on from it. Nothing of an incomplete round (a tool call without its
        result) is stored: the transcript stays one a provider accepts."""
        if self.first_index is not None or not self.new_input or not self.view:
            return  # a step was stored (the input with it), or nothing was loaded yet
        start = self.committed + len(self.new_input)
        said = [
            str(part.get("text", ""))
            for message in self.view[start:]
            if message.get("role") == "assistant"
            for part in message.get("content") or ()
            if part.get("type") == "text" and part.get("text")
        ]
        # Before its first step is stored, the turn is in its first round: its text is in the
        # view once the round's message was folded, else only in what streamed.
        text = ("".join(said) or self._partial).strip()
        marker = CANCELLED_MARKER if not text else f"{text}\n\n{CANCELLED_MARKER}"
        del self.view[start:]
        record: dict[str, Any] = {
            "role": "assistant",
            "content": [{"type": "text", "text": marker}],
            "cancelled": True,
            "agent": self.agent.id,
        }
        self.view.append(cast(Message, record))
        try:
            await asyncio.shield(self._commit())
        except Exception:  # keeping it is a courtesy: the cancel still stands
            logger.exception("could not keep the cancelled turn's input on %s", self.scope)

    def _summarized(self, summary: Summary) -> None:
        """The policy made a summary: it is stored with the next commit (the newest wins)."""
        self.pending_summary = summary

    def _summary_record(self, records: list[StoredRecord], batch: int) -> dict[str, Any] | None:
        """The pending summary as the record to append after this commit's `batch` messages
        (`records` holds them, the pin first on a new scope), or None when it covers nothing."""
        summary = self.pending_summary
        seqs = self.seqs
        if summary is None or seqs is None:
            return None
        start = self.stored_length + len(records) - batch  # where the batch's first goes
        index = next((i for i, m in enumerate(self.view) if m is summary.first_kept), None)
        if index is None:
            return None
        kept = seqs[index] if index < len(seqs) else start + (index - self.committed)
        has_pin = self.pending_pin is not None or (self.stored_length > 0 and self._pinned)
        first = 1 if has_pin else 0
        if kept - 1 < first:
            return None
        return summary_record(summary.text, (first, kept - 1), summary.model)

    def _stored_summary(self, record: dict[str, Any], index: int) -> None:
        """The run's event for a summary just stored: where, what it covers, what it cost."""
        summary = self.pending_summary
        assert summary is not None and self.recorder is not None
        self.pending_summary = None
        usage = {k: v for k, v in summary.usage.items() if isinstance(v, int)}
        self.recorder.emit(
            {
                "type": AGENT_SUMMARIZED,
                "data": {
                    "memory_scope": self.scope,
                    "index": index,
                    "covers": list(record["covers"]),
                    "model": summary.model,
                    "usage": cast(Usage, usage),
                    "cost_usd": _summary_cost(usage, summary.model, self.host.prices),
                },
            }
        )

    def _records(self) -> tuple[list[StoredRecord], int, dict[str, Any] | None]:
        """What the next commit appends: the pin on a new scope, everything since the last
        commit (how many: the batch), then a summary the policy made since (or None)."""
        batch = self.view[self.committed :]
        records: list[StoredRecord] = list(batch)
        if self.pending_pin is not None:
            records.insert(0, self.pending_pin)
        summary = self._summary_record(records, len(batch))
        if summary is not None:
            records.append(cast(StoredRecord, summary))
        return records, len(batch), summary

    async def _commit(self) -> None:
        """Append everything since the last commit as one atomic write (a summary the policy
        made since goes last, covering what came before the turns it kept)."""
        records, batch, summary = self._records()
        if not records:
            return
        lease = None
        if self._hold is not None:
            self._hold.check()  # the scope is still this episode's, as far as we know
            lease = self._hold.lease
        if lease is None:
            length = await self._interruptible(lambda: self.store.append(self.scope, records))
        else:
            # Fenced: refused by the store, in the write itself, once another episode took the
            # scope over (this one stalled past its lease without knowing it).
            length = await self._interruptible(
                lambda: self.store.append(self.scope, records, lease=lease)
            )
        # One copy for the run's record and the result: what the loop goes on doing with its
        # own transcript cannot change either.
        snapshot = copy_json(records)
        self._stored(records, batch, summary, length, snapshot)
        assert self.recorder is not None
        self.recorder.emit(_committed(snapshot, length - len(records)))

    def _stored(
        self,
        records: list[StoredRecord],
        batch: int,
        summary: dict[str, Any] | None,
        length: int,
        snapshot: list[Any],
    ) -> None:
        """Take note of a commit of `records` (`_records`) that made the scope `length` long;
        `snapshot` is their copy for the run's record and the result."""
        if self.first_index is None:
            self.first_index = length - len(records)
        if self.seqs is not None:
            at = length - len(records) + (1 if self.pending_pin is not None else 0)
            self.seqs.extend(range(at, at + batch))
            self.stored_length = length
            if self.pending_pin is not None:
                self._pinned = True
            if summary is not None:
                self._stored_summary(summary, length - 1)
        self._length = length
        _kept.appended(self.store, self.scope, records, length)
        self.committed = len(self.view)
        self.pending_pin = None
        first_message = len(records) - batch - (1 if summary is not None else 0)
        self.new_messages.extend(snapshot[first_message : first_message + batch])

    async def _flush(self) -> None:
        """Store the turn's last step now, if it waits for the run's end."""
        if self._deferred:
            self._deferred = False
            await self._commit()

    async def _end_turn(self, recorder: RunRecorder, result: AgentRunResult[Any]) -> bool:
        """The turn's last step, the run's last events and its end, and the scope's lease given
        back, in one write when the stores can make it one (`TurnEnds`: the SQLite stores of
        one file). False when the run is still to be closed (the step stored meanwhile)."""
        if not self._deferred:
            return False
        self._deferred = False
        hold, start = self._hold, self._length
        if hold is None or start is None or self.handed is not None or self.pending_summary:
            await self._commit()
            return False
        records, batch, _ = self._records()
        hold.check()  # the scope is still this episode's, as far as we know
        snapshot = copy_json(records)
        append = ScopeAppend(self.store, self.scope, records, start, hold.lease)
        events = [_committed(snapshot, start), self._finished(recorder, result)]
        # Fenced like every append: refused, nothing written, once the scope was taken over.
        if not await recorder.close_turn(append, events, output_text=_output_text(result)):
            await self._commit()
            return False
        hold.given_back()
        self._stored(records, batch, None, start + len(records), snapshot)
        return True

    def _finished(self, recorder: RunRecorder, result: AgentRunResult[Any]) -> RunEventBody:
        return {
            "type": AGENT_FINISHED,
            "data": {
                "text": result.text,
                "output": jsonable(result.output),
                "turns": result.turns,
                "usage": {**result.usage},
                "stop_reason": result.stop_reason,
                "memory_scope": self.scope,
                "cost_usd": recorder.cost_usd,
            },
        }


class _OnScope:
    """`Episode._on_scope()`: the episode's hold on its scope (`Episode._hold`) for the block."""

    __slots__ = ("episode", "holding")

    def __init__(self, episode: Episode) -> None:
        self.episode = episode
        self.holding: ScopeHolding | None = None

    async def __aenter__(self) -> None:
        episode = self.episode
        if episode.handed is not None:
            episode._hold = episode.handed.parent._hold
            return
        holding = self.holding = episode.host.scopes.hold(
            episode.store, episode.scope, episode.run_id
        )
        episode._hold = await holding.__aenter__()

    async def __aexit__(self, *exc: Any) -> None:
        self.episode._hold = None
        if self.holding is not None:
            await self.holding.__aexit__(*exc)


def _committed(snapshot: list[Any], start: int) -> RunEventBody:
    """The run event of records stored at `start` (`snapshot`: their copy). The store checked
    them as it wrote them: the event need not walk the messages again (CheckedJSON)."""
    return {
        "type": AGENT_MESSAGES_COMMITTED,
        # a dict of AgentMessagesCommittedData's keys, marked as checked
        "data": cast(
            AgentMessagesCommittedData,
            CheckedJSON(start=start, count=len(snapshot), messages=snapshot),
        ),
    }
