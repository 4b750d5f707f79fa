"""The tool-call loop: the only one in tether.

One turn = the user's message, then rounds of (model request -> tools) until the model answers
without calling a tool, a bound is hit, or the turn is aborted. The loop keeps its own view of
the transcript by folding its own events with the same rules as `reduce()`, so what it sends on
the next round is exactly what a caller's reduced Session holds.

Per streamed event the loop does constant work, with one exception the event contract asks
for: a `text` event carries the whole `snapshot` so far, and building that string costs its
length. For replies of ordinary size (tens of kilobytes) that is well under a microsecond a
chunk; a reply of megabytes streamed in tiny chunks pays for it quadratically.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Coroutine, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypeVar

from ._json import copy_json
from .context import RunContext
from .errors import AbortedError, LLMError, LLMStreamError
from .events import (
    AgentEvent,
    DoneEvent,
    GuardrailEvent,
    MemoryEvent,
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
from .guardrails import decide
from .llm.base import ChatRequest, FinishChunk, SystemBlock
from .prompt import PromptLayer, assemble_system
from .resources import Resource, attach_envelope
from .session import Message, Session, fold
from .stop import StepResult, StopCondition, should_stop
from .tracing import Tracer

if TYPE_CHECKING:
    from .agent import Agent
    from .signals import AbortSignal
    from .tools import Tool

__all__ = ["TurnOptions", "run_turn"]

T = TypeVar("T")


def _progress(stage: ProgressStage) -> ProgressEvent:
    # A fresh dict each time: a consumer may keep or annotate the events it is given.
    return {"type": "progress", "stage": stage}


@dataclass(slots=True)
class TurnOptions:
    """Per-turn overrides; None means the agent's own setting."""

    signal: AbortSignal | None = None
    services: dict[str, Any] | None = None
    context: Any = None
    prompt: Sequence[PromptLayer] | None = None
    tools: Sequence[Tool] | None = None
    stop_when: Sequence[StopCondition] | None = None
    response_format: dict[str, Any] | None = None
    stream_retries: int | None = None
    steps: list[StepResult] = field(default_factory=list)
    """Filled as the turn runs: one entry per model request (the lab's `turns`)."""


class _Interrupt:
    """Turns an abort signal into cancellation of the task running the turn, but only while the
    loop itself is waiting (armed), never while the consumer is handling an event.

    Every armed await has the same shape: `arm()`, the await, `absorb()` on CancelledError, and
    `disarm()` in a `finally`. The cancellation we asked for is always taken back (`uncancel`), so
    the consuming task is left as it was: whether what we awaited let it through (absorb) or
    swallowed it and returned (disarm, which then ends the turn all the same).
    """

    __slots__ = ("armed", "cancelled", "fired", "remove", "signal", "task")

    def __init__(self, signal: AbortSignal) -> None:
        self.signal = signal
        self.task = asyncio.current_task()
        self.armed = False
        self.fired = False
        self.cancelled = False
        self.remove = signal.add_callback(self._on_abort)

    def _on_abort(self) -> None:
        self.fired = True
        # From inside the turn's own task (a tool wired to the controller) there is nothing to
        # interrupt: the call finishes, and the next arm() ends the turn.
        if self.armed and self.task is not None and self.task is not _running_task():
            self.cancelled = True
            self.task.cancel()

    def error(self) -> AbortedError:
        return AbortedError(self.signal.reason)

    def arm(self) -> None:
        if self.fired:
            raise self.error()
        self.task = asyncio.current_task()
        self.armed = True

    def absorb(self) -> bool:
        """After a CancelledError: True when it was ours alone (and is swallowed); a cancellation
        from outside that arrived as well still propagates."""
        self.armed = False
        if self.cancelled and self.task is not None:
            self.cancelled = False
            return self.task.uncancel() == 0
        return False

    def disarm(self) -> None:
        """After the await, however it ended; raises AbortedError when what we awaited swallowed
        the cancellation we asked for."""
        self.armed = False
        if self.cancelled and self.task is not None:
            self.cancelled = False
            self.task.uncancel()
            raise self.error()


async def _interruptible(intr: _Interrupt | None, step: Coroutine[Any, Any, T]) -> T:
    """Await `step` so that the turn's abort signal can interrupt it (AbortedError).

    The per-chunk await of the provider stream spells this out inline instead: it is the one
    hot path, and an extra coroutine frame per chunk is measurable there.
    """
    if intr is None:
        return await step
    try:
        intr.arm()
    except AbortedError:
        step.close()  # never started: close it rather than leave it unawaited
        raise
    try:
        return await step
    except asyncio.CancelledError:
        if intr.absorb():
            raise intr.error() from None
        raise
    finally:
        intr.disarm()


async def _assemble(
    static: list[SystemBlock],
    dynamic: Sequence[PromptLayer],
    attach: Sequence[Resource],
    ctx: RunContext,
) -> list[SystemBlock]:
    extra = [await _attach_body(r, ctx) for r in attach] if attach else ()
    return await assemble_system(static, dynamic, extra, ctx)


def _running_task() -> asyncio.Task[Any] | None:
    try:
        return asyncio.current_task()
    except RuntimeError:  # no event loop running here
        return None


def _add_usage(total: Usage, usage: Usage) -> None:
    acc: dict[str, int] = total  # type: ignore[assignment]
    for key, value in usage.items():
        acc[key] = acc.get(key, 0) + int(value)  # type: ignore[call-overload]


async def run_turn(
    agent: Agent, session: Session, text: str | None, opts: TurnOptions
) -> AsyncIterator[AgentEvent]:
    signal = opts.signal
    tracer = Tracer.from_option(agent.trace, session.id)
    # A fresh dict per turn: a tool that mutates ctx.services cannot change the agent's.
    services = {**agent.services, **opts.services} if opts.services else dict(agent.services)
    ctx = RunContext(
        session_id=session.id,
        signal=signal,
        services=services,
        memory=MappingProxyType(session.memory),  # read-only: reduce() is the writer
        context=opts.context,
        _tracer=tracer,
        _http=agent._http,
    )
    messages: list[Message] = list(session.messages)
    memory_view: dict[str, Any] = {}
    intr = _Interrupt(signal) if signal is not None else None
    client = agent.client
    pending = ctx._pending
    steps = opts.steps
    usage: Usage = {}
    open_calls: list[ToolCallPart] = []
    try:
        if text is not None:
            event: AgentEvent = {"type": "message", "role": "user", "text": text}
            fold(messages, memory_view, event)
            yield event
        conns = await _interruptible(intr, agent._integrations.ensure(signal, tracer=tracer))
        index, specs, attach = agent._toolset(conns, opts.tools)
        layers = opts.prompt
        static, dynamic = (agent._static, agent._dynamic) if layers is None else _split(layers)
        stop_when = agent.stop_when if opts.stop_when is None else opts.stop_when
        stream_retries = (
            opts.stream_retries
            if opts.stream_retries is not None
            else getattr(client, "stream_retries", 0) or 0
        )
        # -- the system prompt: assembled once per turn ----------------------------------------
        # Dynamic layers and attached resources are evaluated each turn, not each round: the
        # rounds of one turn answer the same question with the same context.
        system = await _interruptible(intr, _assemble(static, dynamic, attach, ctx))
        if tracer is not None:
            for tev in tracer.drain():  # what layers and attached reads traced, in order
                yield tev
            yield tracer.record("prompt", "assembled", _prompt_data(system))
        rounds = 0
        while True:
            rounds += 1
            request: ChatRequest = {"model": client.model, "system": system, "messages": messages}
            if specs:
                request["tools"] = specs
            if opts.response_format is not None:
                request["response_format"] = opts.response_format
            if signal is not None:
                request["signal"] = signal
            if rounds > 1:
                yield _progress("retry")
            yield _progress("sent")
            if tracer is not None:
                yield tracer.record(
                    "request", "chat", {"round": rounds, "model": client.model, "tools": len(specs)}
                )
            started = time.perf_counter()
            # -- stream one response -----------------------------------------------------------
            attempts_left = stream_retries
            while True:
                snapshot = ""
                tool_snaps: dict[str, str] = {}
                finish: FinishChunk | None = None
                stream = client.chat(request)
                try:
                    it = stream.__aiter__()
                    while True:
                        if intr is not None:
                            intr.arm()
                        try:
                            chunk = await it.__anext__()
                        except StopAsyncIteration:
                            break
                        except asyncio.CancelledError:
                            if intr is not None and intr.absorb():
                                raise intr.error() from None
                            raise
                        finally:
                            if intr is not None:
                                intr.disarm()
                        if chunk["type"] == "text":
                            snapshot += chunk["text"]
                            yield {"type": "text", "text": chunk["text"], "snapshot": snapshot}
                        elif chunk["type"] == "thinking":
                            yield {"type": "thinking", "text": chunk["text"]}
                        elif chunk["type"] == "tool_input_delta":
                            cid = chunk["id"]
                            snap = tool_snaps.get(cid, "") + chunk["partial"]
                            tool_snaps[cid] = snap
                            yield {
                                "type": "tool_input_delta",
                                "id": cid,
                                "name": chunk["name"],
                                "partial": chunk["partial"],
                                "snapshot": snap,
                            }
                        elif chunk["type"] == "finish":
                            finish = chunk
                    if finish is None:
                        raise LLMStreamError(
                            "the provider stream ended without finishing the response",
                            retryable=True,
                        )
                    break
                except LLMError as exc:
                    retryable = isinstance(exc, LLMStreamError) and exc.retryable
                    if attempts_left > 0 and retryable:
                        attempts_left -= 1
                        if snapshot:  # the dropped attempt's text is replaced, not kept
                            yield {"type": "text", "text": "", "snapshot": ""}
                        continue
                    if tracer is not None:
                        yield tracer.record(
                            "response",
                            "chat:failed",
                            {
                                "round": rounds,
                                "model": client.model,
                                "error": repr(exc),
                                "error_type": type(exc).__name__,
                            },
                        )
                        for tev in tracer.drain():
                            yield tev
                        yield tracer.record("usage", "turn:failed", dict(usage))
                    yield {"type": "error", "error": exc}
                    return
                finally:
                    aclose = getattr(stream, "aclose", None)
                    if aclose is not None:
                        await aclose()
            # -- the round's outcome -----------------------------------------------------------
            _add_usage(usage, finish["usage"])
            stop_reason = finish["stop_reason"]
            if tracer is not None:
                yield tracer.record(
                    "response",
                    "chat",
                    {
                        "round": rounds,
                        "model": client.model,
                        "stop_reason": stop_reason,
                        "tool_calls": sum(1 for p in finish["content"] if p["type"] == "tool_call"),
                        "usage": dict(finish["usage"]),
                        "ms": round((time.perf_counter() - started) * 1000, 3),
                    },
                )
            content: list[Any] = finish["content"]
            calls: list[ToolCallPart] = [p for p in content if p["type"] == "tool_call"]
            step = StepResult(
                text="".join(p["text"] for p in content if p["type"] == "text"),
                tool_calls=calls,
                stop_reason=stop_reason,
                usage=finish["usage"],
                content=content,
            )
            steps.append(step)
            if not calls:
                async for ev in _finish(
                    agent,
                    ctx,
                    tracer,
                    content,
                    step.text,
                    usage,
                    stop_reason,
                    messages,
                    memory_view,
                    intr,
                ):
                    yield ev
                return
            # -- a tool round ------------------------------------------------------------------
            preamble: list[TextPart | ThinkingPart] = [
                p for p in content if p["type"] != "tool_call"
            ]
            for i, call in enumerate(calls):
                use: ToolUseEvent = {
                    "type": "tool_use",
                    "id": call["id"],
                    "name": call["name"],
                    "input": call["input"],
                }
                if i == 0:
                    use["preamble"] = preamble
                fold(messages, memory_view, use)
                yield use
            open_calls = list(calls)
            for call in calls:
                yield _progress("tool")
                started = time.perf_counter()
                guard_events, result = await _interruptible(intr, _execute(agent, call, index, ctx))
                for gev in guard_events:
                    yield gev
                if tracer is not None:
                    for tev in tracer.drain():
                        yield tev
                    yield tracer.record(
                        "tool",
                        call["name"],
                        {
                            "id": call["id"],
                            "ms": round((time.perf_counter() - started) * 1000, 3),
                            "is_error": result.get("is_error", False),
                        },
                    )
                fold(messages, memory_view, result)
                open_calls.pop(0)
                step.tool_results.append(messages[-1]["content"][-1])  # type: ignore[arg-type]
                yield result
                while pending:
                    mem: MemoryEvent = {"type": "memory", "patch": pending.pop(0)}
                    yield mem
            if rounds >= agent.max_tool_rounds:
                async for ev in _finish(
                    agent,
                    ctx,
                    tracer,
                    [],
                    "",
                    usage,
                    "max_tool_rounds",
                    messages,
                    memory_view,
                    intr,
                    guard=False,
                ):
                    yield ev
                return
            if stop_when and should_stop(stop_when, steps):
                async for ev in _finish(
                    agent,
                    ctx,
                    tracer,
                    [],
                    "",
                    usage,
                    stop_reason,
                    messages,
                    memory_view,
                    intr,
                    guard=False,
                ):
                    yield ev
                return
    except AbortedError as exc:
        # Every call the model made gets a result, so the transcript stays a valid request.
        for call in open_calls:
            res: ToolResultEvent = {
                "type": "tool_result",
                "id": call["id"],
                "name": call["name"],
                "output": "The turn was aborted before this call finished.",
                "is_error": True,
            }
            yield res
        if tracer is not None:
            for tev in tracer.drain():
                yield tev
            yield tracer.record("usage", "turn:aborted", dict(usage))
        yield {"type": "error", "error": exc}
    except Exception:
        # A fault the turn cannot degrade into (an MCP source that will not connect, an attach
        # read or a prompt layer that fails): what was traced still reaches the stream first.
        if tracer is not None:
            for tev in tracer.drain():
                yield tev
            yield tracer.record("usage", "turn:failed", dict(usage))
        raise
    finally:
        if intr is not None:
            intr.remove()


def _split(layers: Sequence[PromptLayer]) -> tuple[list[SystemBlock], list[PromptLayer]]:
    from .prompt import static_blocks

    return static_blocks(layers), [layer for layer in layers if not layer.is_static]


async def _attach_body(resource: Resource, ctx: RunContext) -> str:
    body = await resource.read(None, ctx)
    return attach_envelope(resource.name, body, resource.description)


def _prompt_data(system: list[SystemBlock]) -> dict[str, Any]:
    return {
        "layers": len(system),
        "cached_blocks": sum(1 for b in system if "cache_control" in b),
        "chars": sum(len(b["text"]) for b in system),
    }


async def _execute(
    agent: Agent, call: ToolCallPart, index: dict[str, Tool], ctx: RunContext
) -> tuple[list[AgentEvent], ToolResultEvent]:
    """Guardrails, then the tool. Every failure is a result; nothing tool-shaped raises."""
    name, cid = call["name"], call["id"]
    events: list[AgentEvent] = []
    tool = index.get(name)
    if tool is None:
        known = ", ".join(sorted(index)) or "none"
        return events, _result(cid, name, f"Unknown tool {name!r}. Available tools: {known}.", True)
    # Guardrails and the tool get their own copy: the call's input is also the transcript's, and
    # the transcript is written only through reduce().
    value = copy_json(call["input"])
    if isinstance(value, str):  # the model's arguments were not JSON; nothing to decide on
        return events, _result(
            cid, name, f"Invalid arguments for tool {name}: not valid JSON: {value[:200]!r}", True
        )
    call_ctx = ctx.for_call(cid)
    tracer = ctx._tracer
    if agent.on_tool_call is not None or agent._tool_guards:
        subject = {"id": cid, "name": name, "input": value}
        chain: list[tuple[str, Any]] = []
        if agent.on_tool_call is not None:
            chain.append(("on_tool_call", agent.on_tool_call))
        chain.extend(agent._tool_guards)
        for gname, fn in chain:
            try:
                decision = await decide(fn, subject, call_ctx, target="tool_call")
            except Exception as exc:
                decision = {
                    "action": "deny",
                    "reason": f"guardrail raised {type(exc).__name__}: {exc}",
                }
            if tracer is not None:  # what the guardrail itself traced comes before its record
                events.extend(tracer.drain())
            if decision is None:
                continue
            action = decision["action"]
            reason = decision.get("reason")
            gev: GuardrailEvent = {
                "type": "guardrail",
                "name": gname,
                "target": "tool_call",
                "action": action,
                "tool_name": name,
                "tool_use_id": cid,
            }
            if reason is not None:
                gev["reason"] = str(reason)
            events.append(gev)
            if tracer is not None:
                events.append(
                    tracer.record(
                        "guardrail",
                        gname,
                        {
                            "target": "tool_call",
                            "action": action,
                            "reason": reason,
                            "tool": name,
                            "tool_use_id": cid,
                        },
                    )
                )
            if action == "deny":
                why = f": {reason}" if reason else ""
                if gname == "on_tool_call":
                    text = f"Tool call {name} was denied{why}"
                else:
                    text = f"Guardrail {gname} denied the call to {name}{why}"
                return events, _result(cid, name, text, True)
            value = decision.get("input", value)
            subject = {"id": cid, "name": name, "input": value}
    result = await tool.call(value, call_ctx)
    return events, _result(cid, name, result.output, result.is_error)


def _result(cid: str, name: str, output: str, is_error: bool) -> ToolResultEvent:
    ev: ToolResultEvent = {"type": "tool_result", "id": cid, "name": name, "output": output}
    if is_error:
        ev["is_error"] = True
    return ev


async def _finish(
    agent: Agent,
    ctx: RunContext,
    tracer: Tracer | None,
    content: Sequence[Any],
    text: str,
    usage: Usage,
    stop_reason: str | None,
    messages: list[Message],
    memory_view: dict[str, Any],
    intr: _Interrupt | None,
    *,
    guard: bool = True,
) -> AsyncIterator[AgentEvent]:
    """Output guardrails on the final round's text, queued memory, then `done`."""
    thinking: list[ThinkingPart] = [p for p in content if p["type"] == "thinking"]
    if guard and agent._output_guards:
        decided = False
        for gname, fn in agent._output_guards:
            try:
                decision = await _interruptible(intr, decide(fn, text, ctx, target="output"))
            except AbortedError:
                raise
            except Exception as exc:
                decision = {
                    "action": "deny",
                    "reason": f"guardrail raised {type(exc).__name__}: {exc}",
                }
            if tracer is not None:  # what the guardrail itself traced comes before its record
                for tev in tracer.drain():
                    yield tev
            if decision is None:
                continue
            decided = True
            action, reason = decision["action"], decision.get("reason")
            gev: GuardrailEvent = {
                "type": "guardrail",
                "name": gname,
                "target": "output",
                "action": action,
            }
            if reason is not None:
                gev["reason"] = str(reason)
            yield gev
            if tracer is not None:
                yield tracer.record(
                    "guardrail", gname, {"target": "output", "action": action, "reason": reason}
                )
            if action == "deny":
                text, thinking, stop_reason = "", [], "guardrail_denied"
                break
            text = str(decision.get("text", text))
        if decided:  # any rewrite or deny: the UI replaces what it streamed with the outcome
            replace: TextEvent = {"type": "text", "text": "", "snapshot": text}
            yield replace
    if tracer is not None:
        for tev in tracer.drain():
            yield tev
    while ctx._pending:
        mem: MemoryEvent = {"type": "memory", "patch": ctx._pending.pop(0)}
        yield mem
    if tracer is not None:
        yield tracer.record("usage", "turn", dict(usage))
    yield _progress("done")
    done: DoneEvent = {"type": "done", "text": text, "usage": usage, "stop_reason": stop_reason}
    if thinking:
        done["preamble"] = thinking
    fold(messages, memory_view, done)
    yield done
