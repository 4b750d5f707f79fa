"""The tool-call loop: the only one in tether.

One turn = the user's message, then rounds of (model request -> tools) until the model answers
without calling a tool, a bound is hit, or the turn is aborted. `stream_turn()` runs a turn from a
`TurnPlan` (made by `Agent.plan_turn()`), in named phases:

1. **prepare** (`_Turn.prepare`): connect the integration sources and assemble the system
   prompt. A failure here raises out of the iteration before any event that changes the session;
2. per round: **the request** (`_Turn.begin_round`); **one model call streamed** (`_Call`, streamed
   by `stream_turn` itself: the per-chunk hot path, with its stream retries); **the round
   settled** (`_Turn.settle`: usage, the round's result, tool round or final); **the tools run**
   (`_Turn.run_tool`: guardrails, the tool, its result, the memory it asked for);
3. **finish** (`_Turn.finish`): output guardrails, queued memory, `done`.

`_Turn.drive()` runs the phases in order and hands its events out in batches; after a batch that
makes the round's `_Call` due, `stream_turn` streams the call. So every event passes through one
generator, and the phases cost nothing per streamed chunk.

The loop keeps its own view of the transcript by folding its own events with the same rules as
`reduce()`, so what it sends on the next round is exactly what a caller's reduced Session holds.

Per streamed event the loop does constant work: a `text` event's `snapshot` is built only when
read (see `tether._text`), and nothing is copied per chunk.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable
from typing import Any, TypeVar

from ._json import copy_json
from ._partial import PartialOutput
from ._text import TextBuffer
from .errors import AbortedError, ContentError, ContextLengthError, LLMError, LLMStreamError
from .events import (
    AgentEvent,
    DoneEvent,
    FinishReason,
    MemoryEvent,
    MessageEvent,
    Part,
    ProgressEvent,
    ProgressStage,
    TextEvent,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultEvent,
    ToolUseEvent,
    Usage,
)
from .guardrails import run_output_guards, run_tool_call_guards
from .history import TurnHistory
from .llm._finish import finish_reason_of
from .llm.base import ChatRequest, FinishChunk, StreamChunk, SystemBlock
from .session import Message, Session, fold
from .signals import AbortScope
from .stop import RoundResult, should_stop
from .tracing import Span
from .turn import Toolset, TurnPlan

__all__ = ["finish_reason_of", "stream_turn"]

T = TypeVar("T")
E = TypeVar("E", bound=AgentEvent)


def _progress(stage: ProgressStage) -> ProgressEvent:
    # A fresh dict each time: a consumer may keep or annotate the events it is given.
    return {"type": "progress", "stage": stage}


def _add_usage(total: Usage, usage: Usage) -> None:
    # Usage's values are all ints; a TypedDict's items() reads them as objects.
    counts: Any = total
    for key, value in usage.items():
        counts[key] = counts.get(key, 0) + value


# C901 allowed: the turn loop, per-chunk hot path inline (bench/loop_overhead.py).
async def stream_turn(  # noqa: C901
    plan: TurnPlan, session: Session, text: str | list[Part] | None
) -> AsyncGenerator[AgentEvent, None]:
    """Run one turn of `plan` on `session` (which it reads, never writes), yielding its events.

    `text=None` runs a turn on the transcript as it stands. The `message` event comes only once
    the turn could start (sources connected, prompt assembled): what fails before that raises
    out of the iteration and leaves the session as it was. Every later failure is an `error`
    event, after which the session is still a valid transcript.

    The phases run in `_Turn.drive()`; this frame yields their events and streams each model
    call that comes due: the per-chunk path is one loop, in the generator the caller iterates
    (with an abort signal, the abort scope's arm/disarm spelled out around each wait, since a
    coroutine frame per chunk is measurable here; without one, a plain `async for`). Whatever
    ends an attempt is left on the call for the driver to judge.
    """
    turn = _Turn(plan, session)
    scope = turn.scope
    call = turn.call
    driver = turn.drive(text)
    try:
        async for batch in driver:
            for event in batch:
                yield event
            if not call.due:
                continue
            call.due = False
            try:
                it = call.open()
                add_text = call.text.add
                partial = call.partial
                if scope is None:  # nothing to interrupt: the plain loop is the fastest
                    async for chunk in it:
                        if chunk["type"] == "text":
                            yield add_text(chunk["text"])
                            if (
                                partial is not None
                                and call.text.size >= partial.next
                                and (parsed := partial.feed(call.text))
                            ):
                                yield parsed
                        elif (other := call.take(chunk)) is not None:
                            yield other
                    if partial is not None and (parsed := partial.flush(call.text)):
                        yield parsed
                    continue
                while True:  # the same loop, each wait armed so an abort interrupts it
                    scope.arm()
                    try:
                        chunk = await it.__anext__()
                    except StopAsyncIteration:
                        break
                    except asyncio.CancelledError:
                        if scope.absorb():
                            raise scope.error() from None
                        raise
                    finally:
                        scope.disarm()
                    if chunk["type"] == "text":
                        yield add_text(chunk["text"])
                        if (
                            partial is not None
                            and call.text.size >= partial.next
                            and (parsed := partial.feed(call.text))
                        ):
                            yield parsed
                    elif (other := call.take(chunk)) is not None:
                        yield other
                if partial is not None and (parsed := partial.flush(call.text)):
                    yield parsed
            except Exception as exc:  # an LLMError, an abort, or a client that raised
                call.error = exc
            finally:
                await call.close()
    finally:
        await driver.aclose()
        turn.close()


class _Turn:
    """One turn's state: the plan, the loop's own view of the transcript, the usage so far, the
    model call of the round, the calls of the running tool round, and the abort scope."""

    __slots__ = (
        "answered_by",
        "call",
        "chat_span",
        "ctx",
        "history",
        "memory_view",
        "messages",
        "number",
        "open_calls",
        "plan",
        "scope",
        "span",
        "started",
        "tracer",
        "usage",
    )

    def __init__(self, plan: TurnPlan, session: Session) -> None:
        self.plan = plan
        self.ctx = plan.ctx
        self.tracer = plan.ctx.tracer
        signal = plan.ctx.signal
        self.scope = AbortScope(signal) if signal is not None else None
        self.messages: list[Message] = list(session.messages)
        self.memory_view: dict[str, Any] = {}
        self.usage: Usage = {}
        self.open_calls: list[ToolCallPart] = []
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

    async def drive(self, text: str | list[Part] | None) -> AsyncGenerator[list[AgentEvent], None]:
        """The turn's phases in order: prepare; then per round the request, the model call
        (after a batch with `self.call.due` set, `stream_turn` streams it), the round settled
        and its tools run; finish. Events go out in batches (lists)."""
        call = self.call
        if self.tracer is not None and self.tracer.spans is not None:
            self.open_turn_span()
        started = False
        try:
            span = self.span
            if span is None:
                toolset, system = await self.prepare()
            else:
                with span:  # attached reads, prompt layers and MCP connects inside the turn
                    toolset, system = await self.prepare()
            started = True
            events = self.started_turn(text, system)
            while True:
                events += self.begin_round(system, toolset, await self.kept(system, toolset))
                yield events  # then `stream_turn` streams the call
                while call.finish is None:  # the attempt failed
                    events, again = await self.failed(call)
                    yield events
                    if not again:
                        return
                step = self.settle(call.finish)
                if not step.tool_calls:
                    events = self.round_events(step) if self.tracer is not None else []
                    reason = step.finish_reason or "stop"
                    yield await self.finish(events, step.stop_reason, reason, step)
                    return
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
                ending = self.bound_reached(step)
                if ending is not None:
                    yield await self.finish(events, *ending)
                    return
        except AbortedError as exc:
            if started:
                yield self.aborted(exc)
                return
            # Aborted while connecting or assembling the prompt: the turn never started, and
            # send() raises it like every other failure there (the session stays as it was).
            self.end_spans({"error_type": type(exc).__name__})
            yield self.end_trace([], "turn:failed")
            raise
        except Exception as exc:
            # A fault the turn cannot degrade into (an MCP source that will not connect, an
            # attach read or a prompt layer that fails): what was traced reaches the stream.
            self.end_spans({"error_type": type(exc).__name__})
            yield self.end_trace([], "turn:failed")
            raise

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
        return toolset, system

    def started_turn(
        self, text: str | list[Part] | None, system: list[SystemBlock]
    ) -> list[AgentEvent]:
        """The user's message (only now: the turn could start), then what the sources, layers
        and attached reads traced, and the prompt's record."""
        out: list[AgentEvent] = []
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

    # -- the request -------------------------------------------------------------------------

    def begin_round(
        self, system: list[SystemBlock], toolset: Toolset, sent: list[Message] | None = None
    ) -> list[AgentEvent]:
        """The next round's request (optional keys absent, never empty: the baseline) on the
        round's call, and what comes before the call. `sent`: what the history policy keeps."""
        plan = self.plan
        self.number += 1
        request: ChatRequest = {
            "model": plan.client.model,
            "system": system,
            "messages": self.messages if sent is None else sent,
        }
        specs = toolset.specs
        if specs:
            request["tools"] = specs
        if plan.response_format is not None:
            request["response_format"] = plan.response_format
        if plan.settings:
            request["settings"] = plan.settings
        if plan.ctx.signal is not None:
            request["signal"] = plan.ctx.signal
        if plan.blobs is not None:
            request["blobs"] = plan.blobs
        call = self.call
        call.request = request
        call.tools = len(specs)
        call.attempts_left = plan.stream_retries
        call.attempt = 1
        call.finish = None
        call.due = True
        if self.tracer is not None:
            self.started = time.perf_counter()
            return self.call_started(call)
        if self.number == 1:
            return [_progress("sent")]
        return [_progress("retry"), _progress("sent")]

    def call_started(self, call: _Call) -> list[AgentEvent]:
        """Before every provider call, stream retries included (`retry` first when the round
        repeats the model call after tool feedback)."""
        call.due = True
        out: list[AgentEvent] = []
        if call.attempt == 1 and self.number > 1:
            out.append(_progress("retry"))
        out.append(_progress("sent"))
        if self.tracer is not None:
            data: dict[str, Any] = {"round": self.number, "model": self.plan.client.model}
            data["tools"] = call.tools
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
        _add_usage(self.usage, finish["usage"])
        if self.history is not None:
            self.history.counted(finish["usage"])
        content: list[Any] = finish["content"]
        calls: list[ToolCallPart] = [p for p in content if p["type"] == "tool_call"]
        reason = finish_reason_of(finish)
        if calls and reason == "length" and any(isinstance(c["input"], str) for c in calls):
            # The partial call was on the stream (tool_input_delta); the transcript keeps the
            # round's text and thinking only, and the turn ends with the provider's reason.
            content = [p for p in content if p["type"] != "tool_call"]
            calls = []
        text = "".join([p["text"] for p in content if p["type"] == "text"])
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
        preamble: list[TextPart | ThinkingPart] = [
            p for p in step.content if p["type"] != "tool_call"
        ]
        first = True
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
            fold(self.messages, self.memory_view, use)
            out.append(use)
        self.open_calls = list(step.tool_calls)
        return out

    async def run_tool(
        self, call: ToolCallPart, step: RoundResult, toolset: Toolset
    ) -> list[AgentEvent]:
        """One call: guardrails, the tool, its record, its result and the memory it asked for."""
        started = time.perf_counter() if self.tracer is not None else 0.0
        scope = self.scope
        span = None
        if self.span is not None:
            assert self.tracer is not None
            opened = {"id": call["id"], "input": call["input"]}
            span = self.tracer.open_span("tool", call["name"], opened, self.span)
        if span is None:
            if scope is None:
                events, result = await self.call_tool(call, toolset)
            else:
                events, result = await scope.wait(self.call_tool(call, toolset))
        else:
            try:
                with span:  # current inside the guardrails and the tool
                    if scope is None:
                        events, result = await self.call_tool(call, toolset)
                    else:
                        events, result = await scope.wait(self.call_tool(call, toolset))
            except BaseException as exc:
                assert self.tracer is not None
                self.tracer.end_span(span, {"error_type": type(exc).__name__})
                raise
            assert self.tracer is not None
            ended = {"is_error": result.get("is_error", False), "output": result["output"]}
            self.tracer.end_span(span, ended)
        if self.tracer is not None:
            self.drain(events)
            data = {"id": call["id"], "ms": round((time.perf_counter() - started) * 1000, 3)}
            data["is_error"] = result.get("is_error", False)
            events.append(self.tracer.record("tool", call["name"], data))
        fold(self.messages, self.memory_view, result)
        self.open_calls.pop(0)
        part = self.messages[-1]["content"][-1]  # what fold() just appended: this call's result
        if part["type"] == "tool_result":
            step.tool_results.append(part)
        events.append(result)
        if self.ctx.has_memory_writes:
            for patch in self.ctx.take_memory_writes():
                events.append({"type": "memory", "patch": patch})
        return events

    async def run_tool_live(
        self,
        call: ToolCallPart,
        step: RoundResult,
        toolset: Toolset,
        reports: list[list[AgentEvent]],
    ) -> AsyncGenerator[list[AgentEvent], None]:
        """`run_tool` in a task of its own, so that the progress it reports (`ctx.progress`)
        goes out while it runs: each report is yielded as a batch (with `reports` non-empty),
        then the call's own events (with `reports` empty)."""
        queue: asyncio.Queue[AgentEvent] = asyncio.Queue()
        ctx = self.ctx
        ctx._live = queue.put_nowait  # type: ignore[assignment]
        task = asyncio.ensure_future(self.run_tool(call, step, toolset))
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
        self, call: ToolCallPart, toolset: Toolset
    ) -> tuple[list[AgentEvent], ToolResultEvent]:
        """Guardrails, then the tool. Every failure is a result; nothing tool-shaped raises."""
        name, cid = call["name"], call["id"]
        tool = toolset.index.get(name)
        if tool is None:
            known = ", ".join(sorted(toolset.index)) or "none"
            return [], _result(cid, name, f"Unknown tool {name!r}. Available tools: {known}.")
        if isinstance(call["input"], str):  # the model's arguments were not JSON
            bad = f"Invalid arguments for tool {name}: not valid JSON: {call['input'][:200]!r}"
            return [], _result(cid, name, bad)
        guards = self.plan.tool_guards
        # The call's own context only where something reads it (a tool that takes `ctx`, an
        # endpoint, a guardrail): a plain function tool never sees it.
        call_ctx = (
            self.ctx.for_call(cid)
            if guards or tool._takes_ctx or tool.endpoint is not None
            else self.ctx
        )
        # Guardrails and the tool get their own copy: the call's input is also the transcript's,
        # and the transcript is written only through reduce().
        value = copy_json(call["input"])
        events: list[AgentEvent] = []
        if guards:
            events, value, denied = await run_tool_call_guards(guards, cid, name, value, call_ctx)
            if denied is not None:
                return events, _result(cid, name, denied)
        result = await tool.call(value, call_ctx)
        output = result.output
        limit = self.plan.max_tool_result_chars
        if limit is not None and len(output) > limit:
            output = _truncate(output, limit)
            if self.tracer is not None:
                events.append(
                    self.tracer.record(
                        "tool",
                        "result:truncated",
                        {"id": cid, "name": name, "chars": len(result.output), "limit": limit},
                    )
                )
        return events, _result(cid, name, output, result.is_error)

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
        thinking: list[ThinkingPart] = (
            [] if final is None else [p for p in final.content if p["type"] == "thinking"]
        )
        guard = final is not None
        if guard and self.plan.output_guards:
            guards = run_output_guards(self.plan.output_guards, text, self.ctx)
            if self.span is None:
                outcome = await self.wait(guards)
            else:
                with self.span:
                    outcome = await self.wait(guards)
            out.extend(outcome.events)
            if outcome.denied:
                text, thinking, stop_reason, reason = "", [], "guardrail_denied", "guardrail_denied"
            else:
                text = outcome.text
            if outcome.decided:  # a rewrite or a deny: the UI replaces what it streamed
                replace: TextEvent = {"type": "text", "text": "", "snapshot": text}
                out.append(replace)
        tracer = self.tracer
        if tracer is not None:
            out.extend(tracer.drain())
        if self.ctx.has_memory_writes:
            for patch in self.ctx.take_memory_writes():
                mem: MemoryEvent = {"type": "memory", "patch": patch}
                out.append(mem)
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
        fold(self.messages, self.memory_view, done)
        out.append(done)
        if self.span is not None:
            self.end_spans({"stop_reason": stop_reason, "finish_reason": reason, "text": text})
        return out

    def aborted(self, exc: AbortedError) -> list[AgentEvent]:
        """Every call the model made gets a result, so the transcript stays a valid request."""
        out: list[AgentEvent] = [
            _result(c["id"], c["name"], "The turn was aborted before this call finished.")
            for c in self.open_calls
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
        "due",
        "error",
        "finish",
        "partial",
        "request",
        "stream",
        "text",
        "tool_snaps",
        "tools",
        "turn",
    )

    def __init__(self, turn: _Turn) -> None:
        self.turn = turn
        self.request: ChatRequest | None = None
        self.tools = 0
        self.attempts_left = 0
        self.attempt = 0
        self.due = False
        """Set when the call is to be streamed after the batch that goes out."""
        self.partial: PartialOutput | None = None
        self.text = _NO_TEXT
        self.tool_snaps: dict[str, str] = {}
        self.finish: FinishChunk | None = None
        self.error: Exception | None = None
        self.stream: Any = None

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
        return it

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
        stream, self.stream = self.stream, None
        aclose = getattr(stream, "aclose", None)
        if aclose is not None:
            await aclose()


_NO_TEXT = TextBuffer()
_DROPPED: dict[str, Any] = {"error_type": "_OTHER", "dropped": True}
"""How spans end when the turn's consumer stopped iterating before the turn ended."""


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
