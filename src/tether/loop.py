"""The tool-call loop: the only one in tether.

One turn = the user's message, then rounds of (model request -> tools) until the model answers
without calling a tool, a bound is hit, or the turn is aborted. `stream_turn()` runs a turn from a
`TurnPlan` (made by `Agent.plan_turn()`), in named phases:

1. **prepare** (`_Turn.prepare`): connect the integration sources and assemble the system
   prompt. A failure here raises out of the iteration before any event that changes the session;
2. per round: **the request** (`_Turn.begin_round`); **one model call streamed** (`_Call`, streamed
   by `stream_turn` itself: the per-chunk hot path, with its stream retries); **the round
   settled** (`_Turn.settle`: usage, the round's result, tool round or final); **the tools run**
   (`_Turn.run_tool`: guardrails, the tool, its result, the memory it asked for; a call that
   nothing stands before, no guardrail, decision or span, runs in `stream_turn`'s own frame);
3. **finish** (`_Turn.finish`): output guardrails, queued memory, `done`.

`stream_turn` runs the phases in order in one frame, the generator the caller iterates, and
streams each model call itself: every event costs one resume of one generator (the rarer paths,
a resumed turn's decided calls and MCP tools that report progress, hand theirs out in batches
from generators of their own), and the phases cost nothing per streamed chunk.

The loop keeps its own view of the transcript by folding its own events with the same rules as
`reduce()`, so what it sends on the next round is exactly what a caller's reduced Session holds.

Per streamed event the loop does constant work: a `text` event's `snapshot` is built only when
read (see `tether._text`), and nothing is copied per chunk.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable
from typing import TYPE_CHECKING, Any, TypeGuard, TypeVar, cast

from ._json import copy_json
from ._partial import PartialOutput
from ._text import TextBuffer
from .approvals import Decision, check_edit, denial_text, input_answer
from .errors import (
    AbortedError,
    ContentError,
    ContextLengthError,
    DecisionError,
    LLMError,
    LLMStreamError,
)
from .events import (
    AgentEvent,
    DoneEvent,
    FinishReason,
    MediaPart,
    MemoryEvent,
    MessageEvent,
    Part,
    PausedEvent,
    PendingCall,
    ProgressEvent,
    ProgressStage,
    ResumedEvent,
    TextEvent,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultEvent,
    ToolUseEvent,
    Usage,
)
from .guardrails import Ask, run_output_guards, run_tool_call_guards
from .history import TurnHistory
from .llm._finish import finish_reason_of
from .llm.base import ChatRequest, FinishChunk, StreamChunk, SystemBlock
from .media import media_size
from .session import Message, Session, fold, fold_tool_result, fold_tool_use
from .signals import AbortScope
from .stop import RoundResult, should_stop
from .tools import InputRequest, Tool, ToolResult
from .tracing import Span
from .turn import Toolset, TurnPlan

if TYPE_CHECKING:
    from .context import RunContext

__all__ = ["finish_reason_of", "stream_turn"]

_MEDIA = frozenset({"image", "document", "audio"})

T = TypeVar("T")
E = TypeVar("E", bound=AgentEvent)


def _progress(stage: ProgressStage) -> ProgressEvent:
    # A fresh dict each time: a consumer may keep or annotate the events it is given.
    return {"type": "progress", "stage": stage}


async def stream_turn(  # noqa: C901 - the turn's phases and the per-chunk path in one frame
    plan: TurnPlan,
    session: Session,
    text: str | list[Part] | None,
    resume: list[tuple[PendingCall, Decision]] | None = None,
) -> AsyncGenerator[AgentEvent, None]:
    """Run one turn of `plan` on `session` (which it reads, never writes), yielding its events.

    `text=None` runs a turn on the transcript as it stands. The `message` event comes only once
    the turn could start (sources connected, prompt assembled): what fails before that raises
    out of the iteration and leaves the session as it was. Every later failure is an `error`
    event, after which the session is still a valid transcript.

    The phases run in order in this one frame (the generator the caller iterates, so that an
    event costs one resume): prepare; then per round the request, the model call streamed, the
    round settled and its tools run; finish. The per-chunk path is one `async for` over the
    provider's stream (with an abort signal, as `AbortScope.iterate()` gives it: each wait
    armed, so an abort interrupts the stream and never the caller). Whatever ends an attempt is
    left on the call (`_Call.error`) for `_Turn.failed` to judge.

    `resume` (from `Agent.resume()`: the session's pending calls, each with its checked
    decision) continues a paused turn: the decided calls get their results, then the rounds go
    on. A new message (`text`) on a paused session first denies its pending calls as
    "superseded".
    """
    turn = _Turn(plan, session, resume)
    call = turn.call
    tracer = turn.tracer
    if tracer is not None and tracer.spans is not None:
        turn.open_turn_span()
    started = False
    try:
        span = turn.span
        if span is None:
            toolset, system = await turn.prepare()
        else:
            with span:  # attached reads, prompt layers and MCP connects inside the turn
                toolset, system = await turn.prepare()
        started = True
        events = turn.started_turn(text, system)
        if turn.resume is not None:  # the decided calls of a paused turn get their results
            async for batch in turn.run_decided(events, toolset):
                for event in batch:
                    yield event
            if turn.pending:  # a tool that was given its input asks again
                for event in await turn.paused([], None):
                    yield event
                return
            events = []
        live = bool(plan.toolbox.sources)  # only MCP tools report progress
        request = turn.request_of(system, toolset)
        # What the tool rounds check once per turn: a call runs in this frame unless guardrails
        # or a span stand before it; its plain answer joins the transcript here unless traced.
        index, ctx, scope = toolset.index, turn.ctx, turn.scope
        guarded = bool(plan.tool_guards) or turn.span is not None
        plain = tracer is None
        limit = plan.max_tool_result_chars
        # Whether a bound may end the turn after a tool round: stop conditions, or the round
        # `max_tool_rounds` allows last (bound_reached says which).
        bounded = bool(plan.stop_when)
        rounds = plan.max_tool_rounds
        if rounds is None:
            rounds = sys.maxsize
        while True:
            kept = None if turn.history is None else await turn.kept(system, toolset)
            turn.begin_round(request, kept, events)
            while True:  # the round's model call: its attempts
                for event in events:
                    yield event
                try:
                    chunks = call.open()
                    add_text = call.text.add
                    partial = call.partial
                    async for chunk in chunks:
                        if chunk["type"] == "text":
                            yield add_text(chunk["text"])
                            if (
                                partial is not None
                                and call.text.size >= partial.next
                                and (parsed := partial.feed(call.text))
                            ):
                                yield parsed
                        elif chunk["type"] == "finish":
                            call.finish = chunk
                        elif (other := call.take(chunk)) is not None:
                            yield other
                    if partial is not None and (parsed := partial.flush(call.text)):
                        yield parsed
                except Exception as exc:  # an LLMError, an abort, or a client that raised
                    call.error = exc
                finally:
                    if call.guarded is None and getattr(call.stream, "ag_frame", True) is None:
                        call.stream = None  # an async generator that ran to its end
                    else:
                        await call.close()
                if call.finish is not None:
                    break
                events, again = await turn.failed(call)  # the attempt failed
                if not again:
                    for event in events:
                        yield event
                    return
            step = turn.settle(call.finish)
            if not step.tool_calls:
                events = turn.round_events(step) if tracer is not None else []
                reason = step.finish_reason or "stop"
                for event in await turn.finish(events, step.stop_reason, reason, step):
                    yield event
                return
            if live:
                async for batch in turn.run_round(step, toolset):
                    for event in batch:
                        yield event
            else:  # run_round's loop, inline: no generator per round
                for event in turn.tool_uses(step):
                    yield event
                for part in step.tool_calls:
                    yield {"type": "progress", "stage": "tool"}  # fresh: a consumer may keep it
                    tool = index.get(part["name"])
                    if (
                        tool is None
                        or guarded
                        or tool.decides
                        or isinstance(part["input"], str)
                        or (scope is not None and scope.fired)  # run_tool raises the abort
                    ):
                        ran = await turn.run_tool(part, step, toolset)
                    else:  # nothing stands before the call: the tool runs here, sync if it can
                        began = time.perf_counter() if tracer is not None else 0.0
                        own = ctx
                        if tool._takes_ctx or tool.endpoint is not None:  # it reads its own
                            own = ctx.for_call(part["id"])
                        # The tool gets its own copy: the call's input is also the transcript's.
                        value = copy_json(part["input"])
                        answer = tool._start(value, own)
                        if (
                            type(answer) is str
                            and plain
                            and (limit is None or len(answer) <= limit)
                        ):
                            # `took` of a plain answer: the result joins the transcript
                            result: ToolResultEvent = {
                                "type": "tool_result",
                                "id": part["id"],
                                "name": part["name"],
                                "output": answer,
                            }
                            step.tool_results.append(fold_tool_result(turn.messages, result))
                            turn.closed += 1
                            yield result
                            if ctx._pending:  # the memory the call asked for
                                for event in turn.memory_writes([]):
                                    yield event
                            continue
                        now = turn.answered_now(part, step, tool, value, answer, began)
                        ran = now if isinstance(now, list) else await now
                    for event in ran:
                        yield event
            events = []
            # After a tool round: calls wait for a decision, or a bound ends the turn.
            if turn.pending:
                ended = await turn.paused([], step.stop_reason)
            elif (bounded or turn.number >= rounds) and (
                ending := turn.bound_reached(step)
            ) is not None:
                ended = await turn.finish([], *ending)
            else:
                continue
            for event in ended:
                yield event
            return
    except AbortedError as exc:
        if started:
            for event in turn.aborted(exc):
                yield event
            return
        # Aborted while connecting or assembling the prompt: the turn never started, and send()
        # raises it like every other failure there (the session stays as it was).
        turn.end_spans({"error_type": type(exc).__name__})
        for event in turn.end_trace([], "turn:failed"):
            yield event
        raise
    except Exception as exc:
        # A fault the turn cannot degrade into (an MCP source that will not connect, an attach
        # read or a prompt layer that fails): what was traced reaches the stream.
        turn.end_spans({"error_type": type(exc).__name__})
        for event in turn.end_trace([], "turn:failed"):
            yield event
        raise
    finally:
        turn.close()


class _Turn:
    """One turn's state: the plan, the loop's own view of the transcript, the usage so far, the
    model call of the round, the calls of the running tool round, and the abort scope."""

    __slots__ = (
        "answered_by",
        "call",
        "chat_span",
        "closed",
        "ctx",
        "history",
        "memory_view",
        "messages",
        "number",
        "open_calls",
        "pending",
        "plan",
        "resume",
        "scope",
        "span",
        "started",
        "tracer",
        "usage",
    )

    def __init__(
        self,
        plan: TurnPlan,
        session: Session,
        resume: list[tuple[PendingCall, Decision]] | None = None,
    ) -> None:
        self.plan = plan
        self.ctx = plan.ctx
        self.tracer = plan.ctx.tracer
        signal = plan.ctx.signal
        self.scope = AbortScope(signal) if signal is not None else None
        self.messages: list[Message] = list(session["messages"])
        self.memory_view: dict[str, Any] = {}
        self.usage: Usage = {}
        self.open_calls: list[ToolCallPart] = []
        """The calls of the running tool round (a resumed turn's: its decided calls), in order;
        the first `closed` of them have their result or wait for a decision."""
        self.closed = 0
        self.pending: list[PendingCall] = []
        """The calls of the running round that wait for a decision."""
        waiting = session.get("pending")
        if resume is None and waiting:  # a new message supersedes them
            resume = [(p, {"action": "deny", "reason": "superseded"}) for p in waiting]
        self.resume = resume
        self.number = 0
        self.started = 0.0
        self.call = _Call(self)
        self.span: Span | None = None
        """The turn's live span, when the sink opens spans (`tracing.SpanSink`)."""
        self.chat_span: Span | None = None
        self.answered_by: str | None = None
        """The model that answered last, when a `FallbackClient` says (``provider:model``)."""
        self.history: TurnHistory | None = plan.history_of() if plan.history else None
        """The turn's history policy (None without one: every call sends the transcript)."""

    def close(self) -> None:
        # The call points back at its turn: with that link gone, the turn is freed by
        # reference counting once its generator ends (no cycle left for the collector).
        del self.call.turn
        if self.scope is not None:
            self.scope.close()
        if self.span is not None:  # the consumer stopped iterating before the turn ended
            self.end_spans(_DROPPED)

    def open_turn_span(self) -> None:
        assert self.tracer is not None
        client = self.plan.client
        data = {"model": client.model, "provider": getattr(client, "provider", None)}
        self.span = self.tracer.open_span("turn", "invoke_agent", data)

    def end_chat_span(self, data: dict[str, Any]) -> None:
        span, self.chat_span = self.chat_span, None
        if span is not None and self.tracer is not None:
            self.tracer.end_span(span, data)

    def end_spans(self, data: dict[str, Any]) -> None:
        """End the open model call's span (failed, with `data`) and the turn's, once."""
        if self.chat_span is not None:
            self.end_chat_span({"error_type": data.get("error_type", _DROPPED["error_type"])})
        span, self.span = self.span, None
        if span is not None and self.tracer is not None:
            self.tracer.end_span(span, {**data, "usage": dict(self.usage)})

    def drain(self, out: list[AgentEvent]) -> list[AgentEvent]:
        """Append what sources, layers, tools and guardrails traced meanwhile, in order."""
        if self.tracer is not None:
            out.extend(self.tracer.drain())
        return out

    async def wait(self, step: Awaitable[T]) -> T:
        """Await `step` so that the turn's abort signal interrupts it."""
        scope = self.scope
        return await (step if scope is None else scope.wait(step))

    # -- prepare -----------------------------------------------------------------------------

    async def prepare(self) -> tuple[Toolset, list[SystemBlock]]:
        """Connect the sources and assemble the system prompt, once per turn: the rounds of one
        turn answer the same question with the same context."""
        plan = self.plan
        toolset = plan.ready_toolset
        if toolset is None:
            toolset = await self.wait(plan.toolset())
        system = plan.static_prompt(toolset)
        if system is None:
            system = await self.wait(plan.system_prompt(toolset))
        if self.resume is not None:
            self.check_edits(toolset)
        return toolset, system

    def started_turn(
        self, text: str | list[Part] | None, system: list[SystemBlock]
    ) -> list[AgentEvent]:
        """The user's message (only now: the turn could start), then what the sources, layers
        and attached reads traced, and the prompt's record."""
        out: list[AgentEvent] = []
        if text is not None and self.resume is not None:  # superseded: denied before the message
            self.supersede(out)
        if isinstance(text, list):  # a message with media: its parts, and its text for readers
            joined = "\n".join(p["text"] for p in text if p["type"] == "text")
            message: MessageEvent = {"type": "message", "role": "user", "text": joined}
            message["parts"] = text
            fold(self.messages, self.memory_view, message)
            out.append(message)
        elif text is not None:
            message = {"type": "message", "role": "user", "text": text}
            fold(self.messages, self.memory_view, message)
            out.append(message)
        if self.tracer is not None:
            self.drain(out)
            data = {"layers": len(system)}
            data["cached_blocks"] = sum(1 for b in system if "cache_control" in b)
            data["chars"] = sum(len(b["text"]) for b in system)
            out.append(self.tracer.record("prompt", "assembled", data))
        return out

    # -- pause and resume --------------------------------------------------------------------

    def check_edits(self, toolset: Toolset) -> None:
        """Before the resumed turn starts: each approved call's tool is there, and its edited
        input (if any) is what its schema takes; each input call's tool is there to go on with
        the answer (else DecisionError, the session untouched)."""
        assert self.resume is not None
        for part, decision in self.resume:
            if part["kind"] == "input":
                tool = toolset.index.get(part["name"])
                if tool is None or tool.resume_input is None:
                    raise DecisionError(
                        f"call {part['id']!r} waits for input, but the agent has no tool "
                        f"{part['name']!r} that can go on with it any more (give the agent "
                        "the same MCP source, with elicitation='pause')",
                        call_id=part["id"],
                    )
                continue
            if decision["action"] != "approve":
                continue
            tool = toolset.index.get(part["name"])
            if tool is None:
                known = ", ".join(sorted(toolset.index)) or "none"
                raise DecisionError(
                    f"call {part['id']!r} was approved, but the agent has no tool "
                    f"{part['name']!r} any more (tools: {known})",
                    call_id=part["id"],
                )
            check_edit(part, decision, tool)

    def resumed(self, out: list[AgentEvent]) -> list[AgentEvent]:
        """The `resumed` event (the session waits for nothing any more); the decided calls are
        the turn's open calls until each has its result."""
        assert self.resume is not None
        decisions: dict[str, dict[str, Any]] = {p["id"]: dict(d) for p, d in self.resume}
        event: ResumedEvent = {"type": "resumed", "decisions": decisions}
        out.append(event)
        self.open_calls = [_call_part(p) for p, _ in self.resume]
        self.closed = 0
        return out

    async def run_decided(
        self, events: list[AgentEvent], toolset: Toolset
    ) -> AsyncGenerator[list[AgentEvent], None]:
        """A resumed turn's start: `resumed`, then each decided call's result, in batches."""
        assert self.resume is not None
        events = self.resumed(events)
        live = bool(self.plan.toolbox.sources)  # only MCP tools report progress
        for waited, decision in self.resume:
            events.append(_progress("tool"))
            yield events
            if not live or (decision["action"] != "approve" and waited["kind"] != "input"):
                events = await self.run_tool(waited, None, toolset, decision)
                continue
            reports: list[list[AgentEvent]] = []
            async for events in self.run_tool_live(waited, None, toolset, reports, decision):
                if reports:
                    yield events
        yield events

    def supersede(self, out: list[AgentEvent]) -> None:
        """A new message on a paused session: its pending calls are denied ("superseded")
        before the message, so the transcript stays one the provider takes."""
        assert self.resume is not None
        self.resumed(out)
        for part, decision in self.resume:
            result = self.decided(part, decision)
            fold(self.messages, self.memory_view, result)
            out.append(result)
        self.open_calls = []
        self.closed = 0
        self.resume = None

    def decided(self, part: PendingCall, decision: Decision) -> ToolResultEvent:
        """The result of a call decided without running it: a denial or an external result."""
        cid, name = part["id"], part["name"]
        if decision["action"] == "deny":
            return _result(cid, name, denial_text(name, decision["reason"]))
        if decision["action"] == "result":
            output = decision["output"]
            limit = self.plan.max_tool_result_chars
            if limit is not None and len(output) > limit:
                output = _truncate(output, limit)
            return _result(cid, name, output, decision["is_error"])
        raise AssertionError(decision)  # pragma: no cover - approvals run the tool

    async def paused(self, out: list[AgentEvent], stop_reason: str | None) -> list[AgentEvent]:
        """The round's undecided calls: the `paused` event, then `done` (finish_reason
        "paused", no text: the round's text went out with its calls)."""
        event: PausedEvent = {"type": "paused", "pending": self.pending}
        out.append(event)
        if self.tracer is not None:
            data = {"pending": [p["id"] for p in self.pending]}
            out.append(self.tracer.record("tool", "paused", data))
        return await self.finish(out, stop_reason, "paused")

    # -- the request -------------------------------------------------------------------------

    def request_of(self, system: list[SystemBlock], toolset: Toolset) -> ChatRequest:
        """What every request of the turn sends (optional keys absent, never empty: the
        baseline), with the loop's transcript as its messages."""
        plan = self.plan
        request: ChatRequest = {
            "model": plan.client.model,
            "system": system,
            "messages": self.messages,
        }
        if toolset.specs:
            request["tools"] = toolset.specs
        if plan.response_format is not None:
            request["response_format"] = plan.response_format
        if plan.settings:
            request["settings"] = plan.settings
        if plan.ctx.signal is not None:
            request["signal"] = plan.ctx.signal
        if plan.blobs is not None:
            request["blobs"] = plan.blobs
        return request

    def begin_round(
        self, turn: ChatRequest, sent: list[Message] | None, out: list[AgentEvent]
    ) -> None:
        """The next round's request (a copy of the `turn`'s, from `request_of`) on the round's
        call, and what comes before the call (appended to `out`). `sent`: what the history
        policy keeps (None: the transcript)."""
        self.number += 1
        request = turn.copy()
        if sent is not None:
            request["messages"] = sent
        call = self.call
        call.request = request
        call.attempts_left = self.plan.stream_retries
        call.attempt = 1
        if self.tracer is not None:
            self.started = time.perf_counter()
            out += self.call_started(call)
            return
        # Fresh progress dicts each time: a consumer may keep or annotate the events it is given.
        if self.number > 1:
            out.append({"type": "progress", "stage": "retry"})
        out.append({"type": "progress", "stage": "sent"})

    def call_started(self, call: _Call) -> list[AgentEvent]:
        """Before every provider call, stream retries included (`retry` first when the round
        repeats the model call after tool feedback)."""
        out: list[AgentEvent] = []
        if call.attempt == 1 and self.number > 1:
            out.append(_progress("retry"))
        out.append(_progress("sent"))
        if self.tracer is not None:
            data: dict[str, Any] = {"round": self.number, "model": self.plan.client.model}
            assert call.request is not None
            data["tools"] = len(call.request.get("tools", ()))
            if call.attempt > 1:
                data["attempt"] = call.attempt
            out.append(self.tracer.record("request", "chat", data))
            if self.span is not None:
                self.end_chat_span({"error_type": _DROPPED["error_type"]})  # never left open
                client = self.plan.client
                opened: dict[str, Any] = {"round": self.number, "attempt": call.attempt}
                opened["model"] = client.model
                opened.update(provider=getattr(client, "provider", None), request=call.request)
                self.chat_span = self.tracer.open_span("chat", client.model, opened, self.span)
        return out

    async def failed(self, call: _Call) -> tuple[list[AgentEvent], bool]:
        """After a failed attempt: its events, and whether the call is made again (a stream
        retry, or the one compaction a context-length refusal buys); else its `error` ends
        the turn."""
        compacted = await self.compacted(call)
        if compacted is not None:
            return compacted, True
        events = call.outcome()
        if not call.retry():
            return events, False
        return events + self.call_started(call), True

    async def kept(self, system: list[SystemBlock], toolset: Toolset) -> list[Message] | None:
        """What the history policy keeps of the transcript for the next model call (None
        without a policy: the transcript as it is)."""
        history = self.history
        if history is None:
            return None
        if history.ctx.round == 0:  # the prompt and tools count in every estimate
            history.ctx.system_chars = sum(len(b["text"]) for b in system) + sum(
                len(str(spec)) for spec in toolset.specs
            )
        return await self.wait(history.view(self.messages))

    async def compacted(self, call: _Call) -> list[AgentEvent] | None:
        """A context-length refusal under a policy that can shorten the request: compact once
        and make the call again (None: no retry, the refusal ends the turn)."""
        refused = call.error
        if self.history is None or not isinstance(refused, ContextLengthError):
            return None
        assert call.request is not None
        before = len(call.request["messages"])
        messages = await self.wait(
            self.history.compact(call.request["messages"], refused.tokens, refused.limit)
        )
        if messages is None:
            return None
        if self.chat_span is not None:
            self.end_chat_span({"error_type": type(refused).__name__})
        call.request = {**call.request, "messages": messages}
        call.error = None
        call.attempt += 1
        out: list[AgentEvent] = []
        if self.tracer is not None:
            data: dict[str, Any] = {"round": self.number, "messages": before}
            data.update(kept=len(messages), error=str(refused)[:500])
            data["summaries"] = len(self.history.ctx.summaries)
            out.append(self.tracer.record("request", "history:compacted", data))
        return out + self.call_started(call)

    def call_failed(self, exc: LLMError | ContentError) -> list[AgentEvent]:
        out: list[AgentEvent] = []
        if self.tracer is not None:
            data = {"round": self.number, "model": self.plan.client.model}
            data.update(error=repr(exc), error_type=type(exc).__name__)
            out.append(self.tracer.record("response", "chat:failed", data))
            self.end_trace(out, "turn:failed")
            self.end_spans({"error_type": type(exc).__name__})
        out.append({"type": "error", "error": exc})
        return out

    def end_trace(self, out: list[AgentEvent], name: str) -> list[AgentEvent]:
        if self.tracer is not None:
            self.drain(out)
            out.append(self.tracer.record("usage", name, dict(self.usage)))
        return out

    # -- settle the round --------------------------------------------------------------------

    def settle(self, finish: FinishChunk) -> RoundResult:
        """Account the model call and make the round's result (a call whose arguments the
        output-token limit cut leaves no calls: there is nothing to execute)."""
        usage = finish["usage"]
        counts: Any = self.usage  # Usage's values are all ints; items() reads them as objects
        for key, value in usage.items():
            counts[key] = counts.get(key, 0) + value
        if self.history is not None:
            self.history.counted(usage)
        content: list[Any] = finish["content"]
        calls: list[ToolCallPart] = []
        texts: list[str] = []
        for p in content:  # one pass over the round's parts
            kind = p["type"]
            if kind == "tool_call":
                calls.append(p)
            elif kind == "text":
                texts.append(p["text"])
        reason = finish.get("finish_reason") or finish_reason_of(finish)
        if calls and reason == "length" and any(isinstance(c["input"], str) for c in calls):
            # The partial call was on the stream (tool_input_delta); the transcript keeps the
            # round's text and thinking only, and the turn ends with the provider's reason.
            content = [p for p in content if p["type"] != "tool_call"]
            calls = []
        text = texts[0] if len(texts) == 1 else "".join(texts)
        step = RoundResult(text, calls, [], finish["stop_reason"], finish["usage"], content, reason)
        self.plan.rounds.append(step)
        if self.chat_span is not None:
            ended: dict[str, Any] = {"usage": finish["usage"]}
            ended["stop_reason"] = finish["stop_reason"]
            ended.update(finish_reason=reason, content=finish["content"])
            ended.update(response_id=finish.get("response_id"))
            ended.update(response_model=finish.get("response_model"))
            if "model" in finish:
                ended["fallback_model"] = finish["model"]
            self.end_chat_span(ended)
        if "model" in finish:
            self.answered_by = finish["model"]
        return step

    def round_events(self, step: RoundResult) -> list[AgentEvent]:
        """The round's `response` record (call only when tracing)."""
        assert self.tracer is not None
        data = {"round": self.number, "model": self.plan.client.model}
        data.update(stop_reason=step.stop_reason, finish_reason=step.finish_reason)
        calls = sum(1 for p in step.content if p["type"] == "tool_call")
        data.update(tool_calls=calls, usage=dict(step.usage))
        data["ms"] = round((time.perf_counter() - self.started) * 1000, 3)
        return [self.tracer.record("response", "chat", data)]

    def bound_reached(self, step: RoundResult) -> tuple[str | None, FinishReason] | None:
        """After a tool round: `max_tool_rounds` or a stop condition, whichever comes first,
        ends the turn (no text, no output guardrails) with these stop and finish reasons; None
        to go on."""
        plan = self.plan
        if plan.max_tool_rounds is not None and self.number >= plan.max_tool_rounds:
            return "max_tool_rounds", "max_tool_rounds"
        if plan.stop_when and should_stop(plan.stop_when, plan.rounds):
            return step.stop_reason, "tool_calls"
        return None

    # -- run the tools -----------------------------------------------------------------------

    def tool_uses(self, step: RoundResult) -> list[AgentEvent]:
        """The round's record, then its `tool_use` events; the first carries the round's text
        and thinking."""
        out = self.round_events(step) if self.tracer is not None else []
        content = step.content
        preamble: list[TextPart | ThinkingPart] = (
            []
            if len(content) == len(step.tool_calls)
            else [p for p in content if p["type"] != "tool_call"]
        )
        first = True
        agent = self.plan.agent
        messages = self.messages
        for call in step.tool_calls:
            use: ToolUseEvent = {
                "type": "tool_use",
                "id": call["id"],
                "name": call["name"],
                "input": call["input"],
            }
            if first:
                use["preamble"] = preamble
                first = False
                if agent is not None:
                    use["agent"] = agent
            fold_tool_use(messages, use)
            out.append(use)
        self.open_calls = step.tool_calls
        self.closed = 0
        return out

    async def run_round(
        self, step: RoundResult, toolset: Toolset
    ) -> AsyncGenerator[list[AgentEvent], None]:
        """The round's `tool_use` events, then its calls in order (`progress:tool` before
        each; an MCP tool's progress reports as they come), in batches."""
        events = self.tool_uses(step)
        live = bool(self.plan.toolbox.sources)  # only MCP tools report progress
        for part in step.tool_calls:
            events.append(_progress("tool"))
            yield events
            if not live:
                events = await self.run_tool(part, step, toolset)
                continue
            reports: list[list[AgentEvent]] = []
            async for events in self.run_tool_live(part, step, toolset, reports):
                if reports:
                    yield events
        yield events

    async def run_tool(
        self,
        call: ToolCallPart | PendingCall,
        step: RoundResult | None,
        toolset: Toolset,
        decision: Decision | None = None,
    ) -> list[AgentEvent]:
        """One call: guardrails, the tool, its record, its result and the memory it asked for.
        A call that waits for a decision joins `self.pending` and has no result yet; a decided
        one (`decision`, on resume) runs as decided."""
        started = time.perf_counter() if self.tracer is not None else 0.0
        scope = self.scope
        span = None
        if self.span is not None:
            assert self.tracer is not None
            opened = {"id": call["id"], "input": call["input"]}
            span = self.tracer.open_span("tool", call["name"], opened, self.span)
        if span is None:
            if scope is None:
                events, result = await self.call_tool(call, toolset, decision)
            else:
                events, result = await scope.wait(self.call_tool(call, toolset, decision))
        else:
            try:
                with span:  # current inside the guardrails and the tool
                    if scope is None:
                        events, result = await self.call_tool(call, toolset, decision)
                    else:
                        events, result = await scope.wait(self.call_tool(call, toolset, decision))
            except BaseException as exc:
                assert self.tracer is not None
                self.tracer.end_span(span, {"error_type": type(exc).__name__})
                raise
            assert self.tracer is not None
            if _is_pending(result):
                self.tracer.end_span(span, {"pending": result["kind"]})
            else:
                done = cast(ToolResultEvent, result)
                ended = {"is_error": done.get("is_error", False), "output": done["output"]}
                self.tracer.end_span(span, ended)
        return self.took(call, step, events, result, started)

    def answered_now(
        self,
        call: ToolCallPart,
        step: RoundResult,
        tool: Tool,
        value: Any,
        answer: str | ToolResult | Awaitable[ToolResult],
        started: float,
    ) -> list[AgentEvent] | Awaitable[list[AgentEvent]]:
        """A call `stream_turn` ran itself (no guardrail, decision or span before it), after
        `Tool._start`: its events at once when the tool answered without awaiting, else what
        to await for them (the rest of the call)."""
        if isinstance(answer, (str, ToolResult)):
            events: list[AgentEvent] = []
            return self.took(
                call, step, events, self.answered(events, call, tool, value, answer), started
            )
        return self.finish_now(call, step, tool, value, answer, started)

    async def finish_now(
        self,
        call: ToolCallPart,
        step: RoundResult,
        tool: Tool,
        value: Any,
        rest: Awaitable[ToolResult],
        started: float,
    ) -> list[AgentEvent]:
        """`answered_now`'s call when the tool awaits: the rest of it, under the abort scope."""
        result = await self.wait(rest)
        events: list[AgentEvent] = []
        return self.took(
            call, step, events, self.answered(events, call, tool, value, result), started
        )

    def took(
        self,
        call: ToolCallPart | PendingCall,
        step: RoundResult | None,
        events: list[AgentEvent],
        result: ToolResultEvent | PendingCall,
        started: float,
    ) -> list[AgentEvent]:
        """After a call: a pending one joins `self.pending`; a result gets its record, joins
        the transcript and the round's results, then the memory the call asked for."""
        self.closed += 1
        if "kind" in result:  # it waits for a decision (`_is_pending`, inline)
            self.drain(events)
            self.pending.append(cast(PendingCall, result))
            return events
        if self.tracer is not None:
            self.drain(events)
            data = {"id": call["id"], "ms": round((time.perf_counter() - started) * 1000, 3)}
            data["is_error"] = result.get("is_error", False)
            events.append(self.tracer.record("tool", call["name"], data))
        part = fold_tool_result(self.messages, result)
        if step is not None:
            step.tool_results.append(part)
        events.append(result)
        if self.ctx._pending:  # `has_memory_writes`, without a property call per tool call
            self.memory_writes(events)
        return events

    def memory_writes(self, out: list[AgentEvent]) -> list[AgentEvent]:
        """The `memory` events of the writes asked for so far (`ctx.remember`), appended."""
        for patch in self.ctx.take_memory_writes():
            mem: MemoryEvent = {"type": "memory", "patch": patch}
            out.append(mem)
        return out

    def call_context(self, tool: Tool, cid: str, decides: bool) -> RunContext:
        """The call's own context only where something reads it (a tool that takes `ctx`, an
        endpoint, a guardrail, a decision): a plain function tool never sees it."""
        if tool._takes_ctx or tool.endpoint is not None or decides or self.plan.tool_guards:
            return self.ctx.for_call(cid)
        return self.ctx

    def answered(
        self,
        events: list[AgentEvent],
        call: ToolCallPart | PendingCall,
        tool: Tool,
        value: Any,
        result: str | ToolResult,
    ) -> ToolResultEvent | PendingCall:
        """What a tool's answer makes (a plain text answer or a `ToolResult`): the pending call
        of a tool that asked a person for input (and can go on with it), else the call's
        `tool_result`."""
        cid, name = call["id"], call["name"]
        if isinstance(result, str):
            return self.result_event(events, cid, name, result)
        asked = result.input_request
        if asked is not None and tool.resume_input is not None:
            return _input_pending(cid, name, value, asked)
        return self.result_event(events, cid, name, result.output, result.is_error, result.parts)

    async def run_tool_live(
        self,
        call: ToolCallPart | PendingCall,
        step: RoundResult | None,
        toolset: Toolset,
        reports: list[list[AgentEvent]],
        decision: Decision | None = None,
    ) -> AsyncGenerator[list[AgentEvent], None]:
        """`run_tool` in a task of its own, so that the progress it reports (`ctx.progress`)
        goes out while it runs: each report is yielded as a batch (with `reports` non-empty),
        then the call's own events (with `reports` empty)."""
        queue: asyncio.Queue[AgentEvent] = asyncio.Queue()
        ctx = self.ctx
        ctx._live = queue.put_nowait  # type: ignore[assignment]
        task = asyncio.ensure_future(self.run_tool(call, step, toolset, decision))
        try:
            while not task.done():
                getter = asyncio.ensure_future(queue.get())
                try:
                    await asyncio.wait((task, getter), return_when=asyncio.FIRST_COMPLETED)
                finally:
                    if not getter.done():
                        getter.cancel()
                if getter.done() and not getter.cancelled():
                    reports.append([getter.result()])
                    yield reports[-1]
            reports.clear()
            events = task.result()
            late = []
            while not queue.empty():
                late.append(queue.get_nowait())
            yield late + events if late else events
        finally:
            ctx._live = None
            if not task.done():
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task

    async def call_tool(
        self,
        call: ToolCallPart | PendingCall,
        toolset: Toolset,
        decision: Decision | None = None,
    ) -> tuple[list[AgentEvent], ToolResultEvent | PendingCall]:
        """Guardrails, then the decision check, then the tool: the call's result, or the
        pending call when it waits for a decision. Every failure is a result; nothing
        tool-shaped raises. A `decision` (on resume) answers the guardrails and the check."""
        name, cid = call["name"], call["id"]
        if decision is not None and decision["action"] != "approve":
            waited = cast(PendingCall, call)
            if waited["kind"] == "input":  # the answer goes to the tool that asked for it
                return await self.answer_input(waited, decision, toolset)
            return [], self.decided(waited, decision)
        tool = toolset.index.get(name)
        if tool is None:
            known = ", ".join(sorted(toolset.index)) or "none"
            return [], _result(cid, name, f"Unknown tool {name!r}. Available tools: {known}.")
        if isinstance(call["input"], str):  # the model's arguments were not JSON
            bad = f"Invalid arguments for tool {name}: not valid JSON: {call['input'][:200]!r}"
            return [], _result(cid, name, bad)
        guards = self.plan.tool_guards
        decides = tool.decides
        call_ctx = self.call_context(tool, cid, decides)
        events: list[AgentEvent] = []
        if decision is not None:  # approved: as it was asked, or with the edited input
            value = copy_json(decision.get("input", call["input"]))
        else:
            # Guardrails and the tool get their own copy: the call's input is also the
            # transcript's, and the transcript is written only through reduce().
            value = copy_json(call["input"])
            ask: Ask | None = None
            if guards:
                events, value, denied = await run_tool_call_guards(
                    guards, cid, name, value, call_ctx
                )
                if isinstance(denied, str):
                    return events, _result(cid, name, denied)
                ask = denied
            if ask is not None or decides:
                problem = tool.check_input(value)
                if problem is not None:  # nothing to ask about: the model gets to fix it
                    return events, _result(cid, name, f"Invalid input for tool {name}: {problem}")
                reason = None if ask is None else ask.reason
                needs = ask is not None
                if not needs:
                    needs, reason = await tool.needs_decision(value, call_ctx)
                if needs:
                    pending: PendingCall = {
                        "id": cid,
                        "name": name,
                        "input": value,
                        "kind": "external" if tool.external else "approval",
                    }
                    if reason is not None:
                        pending["reason"] = reason
                    return events, pending
        answer = tool._start(value, call_ctx)
        if not isinstance(answer, (str, ToolResult)):
            answer = await answer
        return events, self.answered(events, call, tool, value, answer)

    async def answer_input(
        self, call: PendingCall, decision: Decision, toolset: Toolset
    ) -> tuple[list[AgentEvent], ToolResultEvent | PendingCall]:
        """A paused input call goes on: its tool gets the answer (a result's value accepted, a
        denial declined) with the state the pending call kept, and goes on with the call (for
        MCP: the same request again, carrying the answer and the server's `requestState`).
        Its result, or another pending input when the tool asks again."""
        cid, name = call["id"], call["name"]
        tool = toolset.index.get(name)
        go_on = None if tool is None else tool.resume_input
        if tool is None or go_on is None:  # pragma: no cover - check_edits refused it
            return [], _result(cid, name, f"Tool {name} cannot go on with the input it asked for")
        answer = input_answer(decision)
        ctx = self.ctx.for_call(cid)
        try:
            if tool.timeout is not None:
                async with asyncio.timeout(tool.timeout):
                    result = await go_on(call.get("state", {}), answer, ctx)
            else:
                result = await go_on(call.get("state", {}), answer, ctx)
        except Exception as exc:  # worded as a call that raised
            return [], _result(cid, name, tool._failed(exc).output)
        events: list[AgentEvent] = []  # the tool may ask again (another round of the same call)
        return events, self.answered(events, call, tool, call["input"], result)

    def result_event(
        self,
        events: list[AgentEvent],
        cid: str,
        name: str,
        text: str,
        is_error: bool = False,
        parts: list[MediaPart] | None = None,
    ) -> ToolResultEvent:
        """The `tool_result` event of what a tool returned: its text within
        `max_tool_result_chars`, its media within `max_tool_result_bytes` (trace records in
        `events` for what was cut or moved)."""
        output = text
        limit = self.plan.max_tool_result_chars
        if limit is not None and len(output) > limit:
            output = _truncate(output, limit)
            if self.tracer is not None:
                events.append(
                    self.tracer.record(
                        "tool",
                        "result:truncated",
                        {"id": cid, "name": name, "chars": len(text), "limit": limit},
                    )
                )
        ev: ToolResultEvent = {"type": "tool_result", "id": cid, "name": name, "output": output}
        if is_error:
            ev["is_error"] = True
        if parts:
            ev["parts"] = kept = self.bounded_media(events, cid, name, ev, parts)
            client = self.plan.client
            if (
                kept
                and self.tracer is not None
                and not getattr(client, "media_in_tool_results", True)
            ):
                data = {
                    "id": cid,
                    "name": name,
                    "parts": len(kept),
                    "provider": getattr(client, "provider", None),
                }
                events.append(self.tracer.record("tool", "result:media_follows", data))
        return ev

    def bounded_media(
        self,
        events: list[AgentEvent],
        cid: str,
        name: str,
        ev: ToolResultEvent,
        parts: list[MediaPart],
    ) -> list[MediaPart]:
        """The result's media parts within `max_tool_result_bytes` (the rest dropped, with a
        marker in the text the model reads and a trace record)."""
        limit = self.plan.max_tool_result_bytes
        if limit is None:
            return parts
        kept: list[MediaPart] = []
        total = 0
        dropped: list[str] = []
        for part in parts:
            size = media_size(part)
            if total + size > limit:
                dropped.append(
                    f"{part.get('name') or part['type']} ({part['media_type']}, {size:,} bytes)"
                )
                continue
            total += size
            kept.append(part)
        if dropped:
            ev["output"] += (
                f"\n\n[tether: left out {', '.join(dropped)}: this result may carry "
                f"{limit:,} bytes of media]"
            )
            if self.tracer is not None:
                events.append(
                    self.tracer.record(
                        "tool",
                        "result:media_dropped",
                        {"id": cid, "name": name, "dropped": dropped, "limit": limit},
                    )
                )
        return kept

    # -- finish ------------------------------------------------------------------------------

    async def finish(
        self,
        out: list[AgentEvent],
        stop_reason: str | None,
        reason: FinishReason,
        final: RoundResult | None = None,
    ) -> list[AgentEvent]:
        """Output guardrails on the `final` round's text, queued memory, then `done` (appended to
        `out`). Without a final round (a bound ended the turn) there is no text to guard."""
        text = "" if final is None else final.text
        thinking, kept = ([], []) if final is None else _final_parts(final.content)
        denied = False
        if final is not None and self.plan.output_guards:
            guards = run_output_guards(self.plan.output_guards, text, self.ctx)
            if self.span is None:
                outcome = await self.wait(guards)
            else:
                with self.span:
                    outcome = await self.wait(guards)
            out.extend(outcome.events)
            if outcome.denied:
                denied = True
                text, thinking, stop_reason, reason = "", [], "guardrail_denied", "guardrail_denied"
            else:
                text = outcome.text
            if outcome.decided:  # a rewrite or a deny: the UI replaces what it streamed
                replace: TextEvent = {"type": "text", "text": "", "snapshot": text}
                out.append(replace)
        tracer = self.tracer
        if tracer is not None:
            out.extend(tracer.drain())
        if self.ctx._pending:
            self.memory_writes(out)
        if tracer is not None:
            out.append(tracer.record("usage", "turn", dict(self.usage)))
        out.append(_progress("done"))
        done: DoneEvent = {
            "type": "done",
            "text": text,
            "usage": self.usage,
            "stop_reason": stop_reason,
            "finish_reason": reason,
        }
        if thinking:
            done["thinking"] = thinking
        if self.answered_by is not None:
            done["model"] = self.answered_by
        if self.plan.agent is not None:
            done["agent"] = self.plan.agent
        if kept and not denied:
            _keep_parts(done, kept)
        fold(self.messages, self.memory_view, done)
        out.append(done)
        if self.span is not None:
            self.end_spans({"stop_reason": stop_reason, "finish_reason": reason, "text": text})
        return out

    def aborted(self, exc: AbortedError) -> list[AgentEvent]:
        """Every call the model made gets a result, so the transcript stays a valid request."""
        out: list[AgentEvent] = [
            _result(c["id"], c["name"], "The turn was aborted before this call finished.")
            for c in [*self.pending, *self.open_calls[self.closed :]]
        ]
        self.end_trace(out, "turn:aborted")
        self.end_spans({"error_type": type(exc).__name__})
        out.append({"type": "error", "error": exc})
        return out


class _Call:
    """The model call of a round: its request, its attempts (stream retries), and the state of
    the attempt that streams (text so far, tool-input snapshots, partial output, the finish)."""

    __slots__ = (
        "attempt",
        "attempts_left",
        "error",
        "finish",
        "guarded",
        "partial",
        "request",
        "stream",
        "text",
        "tool_snaps",
        "turn",
    )

    def __init__(self, turn: _Turn) -> None:
        self.turn = turn
        self.request: ChatRequest | None = None
        self.attempts_left = 0
        self.attempt = 0
        self.partial: PartialOutput | None = None
        self.text = _NO_TEXT
        self.tool_snaps: dict[str, str] = {}
        self.finish: FinishChunk | None = None
        self.error: Exception | None = None
        self.stream: Any = None
        self.guarded: AsyncGenerator[StreamChunk, None] | None = None
        """The stream as the abort scope iterates it (None without a scope)."""

    def retry(self) -> bool:
        """After a failed attempt: True when a rerun of the dropped stream is due (and counted)."""
        if not self.retrying():
            return False
        self.attempts_left -= 1
        self.attempt += 1
        return True

    def retrying(self) -> bool:
        error = self.error
        return (
            error is not None
            and self.attempts_left > 0
            and isinstance(error, LLMStreamError)
            and error.retryable
        )

    def open(self) -> AsyncIterator[StreamChunk]:
        """Start the attempt: fresh per-attempt state, then the provider call."""
        if self.text.parts or self.text is _NO_TEXT:  # an empty one no event refers to is kept
            self.text = TextBuffer()
        if self.tool_snaps:
            self.tool_snaps = {}
        self.finish = None
        self.error = None
        plan = self.turn.plan
        if plan.response_format is not None:
            self.partial = PartialOutput()
        assert self.request is not None
        self.stream = plan.client.chat(self.request)
        it: AsyncIterator[StreamChunk] = self.stream.__aiter__()
        scope = self.turn.scope
        if scope is None:  # nothing to interrupt: the provider's stream as it is
            return it
        self.guarded = scope.iterate(it)
        return self.guarded

    def take(self, chunk: StreamChunk) -> AgentEvent | None:
        """A chunk other than text: its event, if it has one (the finish is kept)."""
        if chunk["type"] == "thinking":
            return {"type": "thinking", "text": chunk["text"]}
        if chunk["type"] == "tool_input_delta":
            cid = chunk["id"]
            snap = self.tool_snaps.get(cid, "") + chunk["partial"]
            self.tool_snaps[cid] = snap
            return {
                "type": "tool_input_delta",
                "id": cid,
                "name": chunk["name"],
                "partial": chunk["partial"],
                "snapshot": snap,
            }
        if chunk["type"] == "finish":
            self.finish = chunk
        elif chunk["type"] == "retry":
            tracer = self.turn.tracer
            if tracer is not None:
                data: dict[str, Any] = {"round": self.turn.number}
                data.update(attempt=chunk["attempt"], delay=chunk["delay"], reason=chunk["reason"])
                return tracer.record("request", "retry", data)
        elif chunk["type"] == "fallback":
            tracer = self.turn.tracer
            if tracer is not None:
                switch: dict[str, Any] = {"round": self.turn.number, "model": chunk["model"]}
                switch.update(after=chunk["after"], reason=chunk["reason"])
                return tracer.record("request", "fallback", switch)
        return None

    def outcome(self) -> list[AgentEvent]:
        """After an attempt that failed (or a stream that ended without its finish): an abort is
        raised in the turn; when a retry is due,
        the event that replaces the dropped attempt's text; else the `error` that ends the turn
        (a client's non-LLMError wrapped in an LLMError; a `ContentError`, a part the provider
        cannot take found while building the request, is the caller's and kept as it is)."""
        exc = self.error
        if exc is None:  # the stream ended without finishing the response
            exc = self.error = LLMStreamError(
                "the provider stream ended without finishing the response", retryable=True
            )
        self.finish = None
        if isinstance(exc, AbortedError):
            raise exc
        if not isinstance(exc, (LLMError, ContentError)):
            wrapped = LLMError(
                f"the model client raised {type(exc).__name__}: {exc}",
                provider=getattr(self.turn.plan.client, "provider", None),
            )
            wrapped.__cause__ = exc
            self.error = exc = wrapped
        if self.turn.chat_span is not None:
            self.turn.end_chat_span({"error_type": type(exc).__name__})
        if self.retrying():
            if self.text.parts:  # the dropped attempt's text is replaced, not kept
                return [{"type": "text", "text": "", "snapshot": ""}]
            return []
        return self.turn.call_failed(exc)

    async def close(self) -> None:
        """After the attempt: close its stream (the scope's iteration of it first)."""
        stream, self.stream = self.stream, None
        guarded, self.guarded = self.guarded, None
        if guarded is not None and not _ended(guarded):
            await guarded.aclose()
        if not _ended(stream):
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()


def _ended(stream: object) -> bool:
    """True for an async generator that ran to its end (nothing to close)."""
    return getattr(stream, "ag_frame", True) is None


_NO_TEXT = TextBuffer()
_DROPPED: dict[str, Any] = {"error_type": "_OTHER", "dropped": True}
"""How spans end when the turn's consumer stopped iterating before the turn ended."""


def _is_pending(value: ToolResultEvent | PendingCall) -> TypeGuard[PendingCall]:
    return "kind" in value


def _input_pending(cid: str, name: str, value: Any, asked: InputRequest) -> PendingCall:
    """The pending call of a tool call that stopped to ask a person for input: what is asked
    (schema, message) and what the tool needs to go on, kept in the session or the run."""
    return {
        "id": cid,
        "name": name,
        "input": value,
        "kind": "input",
        "schema": asked.schema,
        "message": asked.message,
        "source": asked.source,
        "state": asked.state,
    }


def _call_part(p: PendingCall) -> ToolCallPart:
    return {"type": "tool_call", "id": p["id"], "name": p["name"], "input": p["input"]}


def _final_parts(content: list[Any]) -> tuple[list[ThinkingPart], list[Any]]:
    """The final round's thinking, and its parts beside text and thinking (for `_keep_parts`),
    in one pass: most final rounds are one text part."""
    thinking: list[ThinkingPart] = []
    kept: list[Any] = []
    for p in content:
        kind = p["type"]
        if kind == "thinking":
            thinking.append(p)
        elif kind != "text" and kind != "tool_call":
            kept.append(p)
    return thinking, kept


def _keep_parts(done: DoneEvent, content: list[Any]) -> None:
    """The final round's parts beside its text and thinking (`content`) that the transcript
    keeps: the provider-hosted tools' blocks (with text; for the next request,
    `tether.llm.builtin`) and the images the model made (Gemini, Responses image generation)."""
    if done["text"]:
        hosted = [p for p in content if p["type"] == "provider"]
        if hosted:
            done["blocks"] = hosted
    made = [p for p in content if p["type"] in _MEDIA]
    if made:
        done["media"] = made


def _result(cid: str, name: str, output: str, is_error: bool = True) -> ToolResultEvent:
    ev: ToolResultEvent = {"type": "tool_result", "id": cid, "name": name, "output": output}
    if is_error:
        ev["is_error"] = True
    return ev


def _truncate(output: str, limit: int) -> str:
    return (
        output[:limit]
        + f"\n\n[tether: this result was truncated to its first {limit:,} of {len(output):,} "
        "characters]"
    )
