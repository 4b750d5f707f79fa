from __future__ import annotations

import asyncio
import importlib
import json
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from tether import (
    AbortController,
    RunContext,
    Session,
    create_agent,
    create_workflow,
    define_guardrail,
    define_resource,
    define_tool,
)
from tether.errors import LLMStreamError
from tether.otel import CAPTURE_CONTENT_ENV, OtelSink, provider_name_of
from tether.testing import collect, script_client
from tether.workflows import WorkflowContext

WEATHER_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
}


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    exp = InMemorySpanExporter()
    yield exp
    exp.shutdown()


@pytest.fixture
def provider(exporter: InMemorySpanExporter) -> Iterator[TracerProvider]:
    prov = TracerProvider()
    prov.add_span_processor(SimpleSpanProcessor(exporter))
    yield prov
    prov.shutdown()


def weather_tool(**kwargs: Any) -> Any:
    return define_tool(
        name="get_weather",
        description="Weather for a city",
        input_schema=WEATHER_SCHEMA,
        execute=lambda value: f"4°C in {value['city']}",
        **kwargs,
    )


def two_round_client() -> Any:
    return script_client(
        [
            {
                "text": "Let me look.",
                "tool_use": [{"name": "get_weather", "input": {"city": "Oslo"}, "id": "toolu_1"}],
                "usage": {"input_tokens": 120, "output_tokens": 18},
            },
            {
                "text": "It is 4°C in Oslo.",
                "usage": {"input_tokens": 160, "output_tokens": 9, "cache_read_tokens": 100},
            },
        ],
        model="claude-sonnet-4-6",
    )


def by_name(spans: Any) -> dict[str, list[ReadableSpan]]:
    out: dict[str, list[ReadableSpan]] = {}
    for span in spans:
        out.setdefault(span.name, []).append(span)
    return out


def test_importing_without_opentelemetry_names_the_extra_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    monkeypatch.delitem(sys.modules, "tether.otel")
    with pytest.raises(ImportError, match=r"pip install 'tether\[otel\]'"):
        importlib.import_module("tether.otel")


async def test_a_two_round_turn_with_one_tool_call_exports_the_genai_span_tree(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    sink = OtelSink(provider, agent_name="forecaster", provider_name="anthropic")
    agent = create_agent(llm=two_round_client(), tools=[weather_tool()], trace=sink)
    session = Session(id="sess-1")
    events = await collect(agent, session, "Weather in Oslo?")
    assert events[-1]["type"] == "done"

    spans = exporter.get_finished_spans()
    assert len(spans) == 4
    named = by_name(spans)
    assert sorted(named) == [
        "chat claude-sonnet-4-6",
        "execute_tool get_weather",
        "invoke_agent forecaster",
    ]
    [turn] = named["invoke_agent forecaster"]
    chat1, chat2 = sorted(named["chat claude-sonnet-4-6"], key=lambda s: s.start_time or 0)
    [tool] = named["execute_tool get_weather"]

    # the tree: one trace, the turn at its root, every other span its child
    assert turn.parent is None
    trace_ids = {s.context.trace_id for s in spans}
    assert trace_ids == {turn.context.trace_id}
    for child in (chat1, tool, chat2):
        assert child.parent is not None
        assert child.parent.span_id == turn.context.span_id
    assert chat1.start_time <= tool.start_time <= chat2.start_time  # type: ignore[operator]

    assert turn.kind is SpanKind.INTERNAL
    assert dict(turn.attributes or {}) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.provider.name": "anthropic",
        "gen_ai.agent.name": "forecaster",
        "gen_ai.conversation.id": "sess-1",
        "gen_ai.request.model": "claude-sonnet-4-6",
        "gen_ai.usage.input_tokens": 280,
        "gen_ai.usage.output_tokens": 27,
        "gen_ai.usage.cache_read.input_tokens": 100,
        "gen_ai.response.finish_reasons": ("stop",),
        "tether.stop_reason": "end_turn",
    }
    assert turn.status.status_code is StatusCode.UNSET

    assert chat1.kind is SpanKind.CLIENT
    assert dict(chat1.attributes or {}) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "anthropic",
        "gen_ai.conversation.id": "sess-1",
        "gen_ai.request.model": "claude-sonnet-4-6",
        "gen_ai.response.finish_reasons": ("tool_calls",),
        "tether.stop_reason": "tool_use",
        "gen_ai.usage.input_tokens": 120,
        "gen_ai.usage.output_tokens": 18,
        "tether.round": 1,
        "tether.attempt": 1,
    }
    assert chat1.status.status_code is StatusCode.UNSET

    assert chat2.kind is SpanKind.CLIENT
    assert dict(chat2.attributes or {}) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "anthropic",
        "gen_ai.conversation.id": "sess-1",
        "gen_ai.request.model": "claude-sonnet-4-6",
        "gen_ai.response.finish_reasons": ("stop",),
        "tether.stop_reason": "end_turn",
        "gen_ai.usage.input_tokens": 160,
        "gen_ai.usage.output_tokens": 9,
        "gen_ai.usage.cache_read.input_tokens": 100,
        "tether.round": 2,
        "tether.attempt": 1,
    }

    assert tool.kind is SpanKind.INTERNAL
    assert dict(tool.attributes or {}) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "get_weather",
        "gen_ai.tool.call.id": "toolu_1",
        "gen_ai.tool.type": "function",
    }
    assert tool.status.status_code is StatusCode.UNSET
    assert "error.type" not in (turn.attributes or {})

    # the turn span carries prompt assembly as events; no message content anywhere
    assert [(e.name, dict(e.attributes or {})) for e in turn.events] == [
        (
            "tether.prompt",
            {
                "tether.name": "assembled",
                "tether.layers": 0,
                "tether.cached_blocks": 0,
                "tether.chars": 0,
            },
        )
    ]
    flat = repr([dict(s.attributes or {}) for s in spans])
    assert "Oslo" not in flat


async def test_the_turn_span_is_a_child_of_the_span_current_when_the_turn_began(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    agent = create_agent(llm=two_round_client(), tools=[weather_tool()], trace=OtelSink(provider))
    app_tracer = provider.get_tracer("app")
    with app_tracer.start_as_current_span("handle_request") as outer:
        await collect(agent, Session(), "Weather in Oslo?")
    named = by_name(exporter.get_finished_spans())
    [turn] = named["invoke_agent"]  # no agent name: the bare operation name
    assert turn.parent is not None
    assert turn.parent.span_id == outer.get_span_context().span_id
    assert "gen_ai.agent.name" not in (turn.attributes or {})
    assert "gen_ai.provider.name" not in (turn.attributes or {})


async def test_a_failed_provider_call_sets_error_type_on_its_chat_span_and_the_turn(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    client = script_client(
        [
            {"tool_use": [{"name": "get_weather", "input": {"city": "Oslo"}}]},
            {"text": "par", "error": LLMStreamError("connection reset")},
        ],
        model="m",
    )
    agent = create_agent(llm=client, tools=[weather_tool()], trace=OtelSink(provider))
    events = await collect(agent, Session(), "go")
    assert events[-1]["type"] == "error"
    named = by_name(exporter.get_finished_spans())
    [turn] = named["invoke_agent"]
    ok, failed = sorted(named["chat m"], key=lambda s: s.start_time or 0)
    assert "error.type" not in (ok.attributes or {})
    assert failed.attributes is not None and failed.attributes["error.type"] == "LLMStreamError"
    assert "gen_ai.response.finish_reasons" not in failed.attributes
    assert failed.status.status_code is StatusCode.ERROR
    assert turn.attributes is not None and turn.attributes["error.type"] == "LLMStreamError"
    assert turn.status.status_code is StatusCode.ERROR
    assert turn.attributes["gen_ai.usage.input_tokens"] == 1  # the round that did finish


async def test_an_aborted_turn_ends_its_span_with_error_type_aborted(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    started = asyncio.Event()

    async def slow(value: Any, ctx: RunContext) -> str:
        started.set()
        await asyncio.sleep(30)
        return "never"

    agent = create_agent(
        llm=script_client([{"tool_use": [{"name": "slow", "input": {}}]}]),
        tools=[define_tool(name="slow", execute=slow)],
        trace=OtelSink(provider),
    )
    controller = AbortController()

    async def abort_soon() -> None:
        await started.wait()
        controller.abort()

    aborter = asyncio.create_task(abort_soon())
    await asyncio.wait_for(collect(agent, Session(), "go", signal=controller.signal), 5)
    await aborter
    named = by_name(exporter.get_finished_spans())
    [turn] = named["invoke_agent"]
    assert turn.attributes is not None and turn.attributes["error.type"] == "AbortedError"
    assert turn.status.status_code is StatusCode.ERROR
    [tool] = named["execute_tool slow"]  # opened when the call started, ended by the abort
    assert tool.attributes is not None and tool.attributes["error.type"] == "AbortedError"
    assert tool.parent is not None and tool.parent.span_id == turn.context.span_id


async def test_a_tool_error_result_sets_error_type_on_the_tool_span(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    client = script_client(
        [{"tool_use": [{"name": "get_weather", "input": {"city": 7}}]}, {"text": "sorry"}]
    )
    agent = create_agent(llm=client, tools=[weather_tool()], trace=OtelSink(provider))
    await collect(agent, Session(), "go")
    [tool] = by_name(exporter.get_finished_spans())["execute_tool get_weather"]
    assert tool.attributes is not None and tool.attributes["error.type"] == "tool_error"
    assert tool.status.status_code is StatusCode.ERROR
    [turn] = by_name(exporter.get_finished_spans())["invoke_agent"]
    assert turn.status.status_code is StatusCode.UNSET  # the model saw the error and answered


async def test_a_guardrail_denied_call_is_an_error_tool_span_carrying_the_decision(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    agent = create_agent(
        llm=two_round_client(),
        tools=[weather_tool()],
        trace=OtelSink(provider),
        guardrails=[
            define_guardrail(
                name="no-oslo", tool_call=lambda c: {"action": "deny", "reason": "not Oslo"}
            )
        ],
    )
    await collect(agent, Session(), "go")
    [tool] = by_name(exporter.get_finished_spans())["execute_tool get_weather"]
    assert tool.attributes is not None and tool.attributes["error.type"] == "guardrail_denied"
    assert [(e.name, dict(e.attributes or {})) for e in tool.events] == [
        (
            "tether.guardrail",
            {
                "tether.name": "no-oslo",
                "tether.target": "tool_call",
                "tether.action": "deny",
                "tether.reason": "not Oslo",
                "tether.tool": "get_weather",
                "tether.tool_use_id": "toolu_1",
            },
        )
    ]


async def test_an_output_guardrail_denial_is_the_turns_finish_reason_and_an_event(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    agent = create_agent(
        llm=script_client([{"text": "secret"}], model="m"),
        trace=OtelSink(provider),
        guardrails=[define_guardrail(name="dlp", output=lambda t: {"action": "deny"})],
    )
    await collect(agent, Session(), "go")
    named = by_name(exporter.get_finished_spans())
    [turn] = named["invoke_agent"]
    [chat] = named["chat m"]
    assert turn.attributes is not None
    assert turn.attributes["gen_ai.response.finish_reasons"] == ("guardrail_denied",)
    assert chat.attributes is not None
    assert chat.attributes["gen_ai.response.finish_reasons"] == ("stop",)  # the model's own
    assert ("tether.guardrail", "dlp") in [
        (e.name, (e.attributes or {}).get("tether.name")) for e in turn.events
    ]


async def test_workflow_records_made_while_a_tool_runs_are_events_on_its_span(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    def step(value: Any, ctx: RunContext) -> str:
        ctx.trace("step:verdict", {"step": "zettel", "accepted": False, "tags": ["a", "b"]})
        return "ok"

    agent = create_agent(
        llm=script_client([{"tool_use": [{"name": "step", "input": {}}]}, {"text": "done"}]),
        tools=[define_tool(name="step", execute=step)],
        trace=OtelSink(provider),
    )
    await collect(agent, Session(), "go")
    [tool] = by_name(exporter.get_finished_spans())["execute_tool step"]
    assert [(e.name, dict(e.attributes or {})) for e in tool.events] == [
        (
            "tether.workflow",
            {
                "tether.name": "step:verdict",
                "tether.step": "zettel",
                "tether.accepted": False,
                "tether.tags": ("a", "b"),
            },
        )
    ]


async def test_each_turn_and_each_session_is_its_own_trace(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    agent = create_agent(
        llm=script_client([{"text": "a"}, {"text": "b"}, {"text": "c"}]), trace=OtelSink(provider)
    )
    one, two = Session(id="one"), Session(id="two")
    await collect(agent, one, "hi")
    await collect(agent, two, "hi")
    await collect(agent, one, "again")
    turns = by_name(exporter.get_finished_spans())["invoke_agent"]
    assert [t.attributes["gen_ai.conversation.id"] for t in turns] == ["one", "two", "one"]  # type: ignore[index]
    assert len({t.context.trace_id for t in turns}) == 3


def test_records_outside_a_turn_become_events_on_the_current_span(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    sink = OtelSink(provider)
    with provider.get_tracer("app").start_as_current_span("startup"):
        sink({"phase": "mcp", "name": "connect", "at": 1.0, "data": {"url": "http://x/mcp"}})
    [startup] = exporter.get_finished_spans()
    assert [(e.name, dict(e.attributes or {})) for e in startup.events] == [
        ("tether.mcp", {"tether.name": "connect", "tether.url": "http://x/mcp"})
    ]
    # no span open: nothing at all, and no turn is opened for it either
    assert trace.get_current_span() is trace.INVALID_SPAN
    sink({"phase": "workflow", "name": "step:start", "at": 2.0})
    sink.end_open_turns()
    assert len(exporter.get_finished_spans()) == 1


async def test_two_concurrent_turns_of_one_agent_export_two_separate_trees(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    # The records of the two turns interleave in one sink; each tree still holds only its own
    # turn's spans, under the span that was current in its own task.
    both_running = asyncio.Barrier(2)

    async def lookup(value: Any, ctx: RunContext) -> str:
        await both_running.wait()
        return ctx.session_id

    def call(request: Any) -> Any:
        return {"tool_use": [{"name": "lookup", "input": {}}]}

    agent = create_agent(
        llm=script_client([call, call, {"text": "a"}, {"text": "b"}]),
        tools=[define_tool(name="lookup", execute=lookup)],
        trace=OtelSink(provider, agent_name="x"),
    )
    app = provider.get_tracer("app")

    async def handle(sid: str) -> None:
        with app.start_as_current_span(f"request {sid}"):
            await collect(agent, Session(id=sid), "go")

    await asyncio.gather(handle("s1"), handle("s2"))
    spans = exporter.get_finished_spans()
    for sid in ("s1", "s2"):
        [outer] = [s for s in spans if s.name == f"request {sid}"]
        [turn] = [
            s
            for s in spans
            if s.name == "invoke_agent x" and s.attributes["gen_ai.conversation.id"] == sid  # type: ignore[index]
        ]
        assert turn.parent is not None and turn.parent.span_id == outer.context.span_id
        children = [s for s in spans if s.parent and s.parent.span_id == turn.context.span_id]
        assert sorted(s.name for s in children) == [
            "chat script",
            "chat script",
            "execute_tool lookup",
        ]
        chats = [s for s in children if s.name.startswith("chat")]
        assert {s.attributes["gen_ai.conversation.id"] for s in chats} == {sid}  # type: ignore[index]
        assert all(s.context.trace_id == outer.context.trace_id for s in [turn, *children])


# -- live spans ------------------------------------------------------------------------------


async def test_spans_are_live_and_a_span_opened_inside_a_tool_or_guardrail_is_its_child(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    app = provider.get_tracer("app")
    seen_while_running: list[list[str]] = []

    def lookup(value: Any) -> str:
        # The turn is still running: its first model call has ended, the turn has not.
        seen_while_running.append([s.name for s in exporter.get_finished_spans()])
        with app.start_as_current_span("database query"):
            return "4°C"

    def audit(call: Any) -> None:
        with app.start_as_current_span("audit check"):
            return None

    def style(value: Any) -> str:
        with app.start_as_current_span("read style guide"):
            return "Be brief."

    agent = create_agent(
        llm=two_round_client(),
        tools=[define_tool(name="get_weather", input_schema=WEATHER_SCHEMA, execute=lookup)],
        resources=[define_resource(name="style", get=style)],
        guardrails=[define_guardrail(name="audit", tool_call=audit)],
        trace=OtelSink(provider, agent_name="forecaster"),
    )
    await collect(agent, Session(), "Weather in Oslo?")
    assert seen_while_running == [["read style guide", "chat claude-sonnet-4-6", "audit check"]]
    named = by_name(exporter.get_finished_spans())
    [turn] = named["invoke_agent forecaster"]
    [tool] = named["execute_tool get_weather"]
    [query] = named["database query"]
    [audit_span] = named["audit check"]
    [read] = named["read style guide"]
    assert query.parent is not None and query.parent.span_id == tool.context.span_id
    assert audit_span.parent is not None and audit_span.parent.span_id == tool.context.span_id
    assert read.parent is not None and read.parent.span_id == turn.context.span_id
    assert tool.parent is not None and tool.parent.span_id == turn.context.span_id
    # nothing leaks: after the turn no tether span is current
    assert trace.get_current_span() is trace.INVALID_SPAN


def test_the_provider_name_comes_from_the_adapter_or_the_model_string() -> None:
    assert provider_name_of("anthropic:claude-sonnet-4-5") == "anthropic"
    assert provider_name_of("gemini:gemini-2.5-flash") == "gcp.gemini"
    assert provider_name_of("openai-responses:gpt-5") == "openai"
    assert provider_name_of("claude-sonnet-4-5", "anthropic") == "anthropic"
    assert provider_name_of("my-model") is None


async def test_the_provider_name_is_inferred_per_call(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    client = script_client([{"text": "hi"}], model="gemini-2.5-flash")
    client.provider = "gemini"  # type: ignore[attr-defined]  # what an adapter class says
    agent = create_agent(llm=client, trace=OtelSink(provider))
    await collect(agent, Session(), "hi")
    for span in exporter.get_finished_spans():
        assert span.attributes is not None
        assert span.attributes["gen_ai.provider.name"] == "gcp.gemini"


async def test_message_content_is_recorded_only_when_the_user_opts_in(
    provider: TracerProvider, exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(CAPTURE_CONTENT_ENV, raising=False)
    agent = create_agent(
        llm=two_round_client(),
        system_prompt="You forecast.",
        tools=[weather_tool()],
        trace=OtelSink(provider),
    )
    await collect(agent, Session(), "Weather in Oslo?")
    assert "Oslo" not in repr([dict(s.attributes or {}) for s in exporter.get_finished_spans()])
    exporter.clear()

    monkeypatch.setenv(CAPTURE_CONTENT_ENV, "true")
    agent = create_agent(
        llm=two_round_client(),
        system_prompt="You forecast.",
        tools=[weather_tool()],
        trace=OtelSink(provider),
    )
    await collect(agent, Session(), "Weather in Oslo?")
    named = by_name(exporter.get_finished_spans())
    chat1, chat2 = sorted(named["chat claude-sonnet-4-6"], key=lambda s: s.start_time or 0)
    [tool] = named["execute_tool get_weather"]
    assert chat1.attributes is not None and chat2.attributes is not None
    assert json.loads(str(chat1.attributes["gen_ai.input.messages"])) == [
        {"role": "user", "parts": [{"type": "text", "content": "Weather in Oslo?"}]}
    ]
    assert json.loads(str(chat1.attributes["gen_ai.system_instructions"])) == [
        {"type": "text", "content": "You forecast."}
    ]
    assert json.loads(str(chat1.attributes["gen_ai.output.messages"])) == [
        {
            "role": "assistant",
            "parts": [
                {"type": "text", "content": "Let me look."},
                {
                    "type": "tool_call",
                    "id": "toolu_1",
                    "name": "get_weather",
                    "arguments": {"city": "Oslo"},
                },
            ],
            "finish_reason": "tool_calls",
        }
    ]
    second_input = json.loads(str(chat2.attributes["gen_ai.input.messages"]))
    assert second_input[-1] == {
        "role": "tool",
        "parts": [{"type": "tool_call_response", "id": "toolu_1", "response": "4°C in Oslo"}],
    }
    assert tool.attributes is not None
    assert json.loads(str(tool.attributes["gen_ai.tool.call.arguments"])) == {"city": "Oslo"}
    assert tool.attributes["gen_ai.tool.call.result"] == "4°C in Oslo"


async def test_a_stream_dropped_early_ends_its_spans(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    client = script_client([{"text": ["one ", "two ", "three"]}], model="m")
    agent = create_agent(llm=client, trace=OtelSink(provider))
    stream = agent.send(Session(), "go")
    async for event in stream:
        if event["type"] == "text":
            break  # mid-answer: the model call and the turn are open
    assert exporter.get_finished_spans() == ()
    await stream.aclose()
    named = by_name(exporter.get_finished_spans())
    [turn] = named["invoke_agent"]
    [chat] = named["chat m"]
    for span in (turn, chat):
        assert span.attributes is not None and span.attributes["error.type"] == "_OTHER"
        assert span.status.status_code is StatusCode.ERROR
    assert chat.parent is not None and chat.parent.span_id == turn.context.span_id


async def test_a_stream_retry_is_a_second_chat_span_of_the_round(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    client = script_client(
        [{"text": "par", "error": LLMStreamError("reset", retryable=True)}, {"text": "whole"}],
        model="m",
    )
    client.stream_retries = 1  # as a model config sets it
    agent = create_agent(llm=client, trace=OtelSink(provider))
    events = await collect(agent, Session(), "go")
    assert events[-1]["type"] == "done"
    first, second = sorted(
        by_name(exporter.get_finished_spans())["chat m"], key=lambda s: s.start_time or 0
    )
    assert first.attributes is not None and first.attributes["error.type"] == "LLMStreamError"
    assert (first.attributes["tether.round"], first.attributes["tether.attempt"]) == (1, 1)
    assert second.attributes is not None and "error.type" not in second.attributes
    assert (second.attributes["tether.round"], second.attributes["tether.attempt"]) == (1, 2)


async def test_a_workflow_run_is_the_parent_of_its_steps_and_their_turns(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    sink = OtelSink(provider, agent_name="writer")
    agent = create_agent(llm=script_client([{"text": "a draft"}], model="m"), trace=sink)

    async def write(input: Any, ctx: WorkflowContext[Any]) -> str:
        async def draft() -> str:
            events = await collect(agent, Session(), str(input))
            return str(events[-1]["text"])

        return await ctx.step("draft", draft)

    workflow = create_workflow("write", write)
    assert await workflow.run("a poem", on_event=sink.workflow_events) == "a draft"
    named = by_name(exporter.get_finished_spans())
    [run] = named["workflow write"]
    [step] = named["step draft"]
    [turn] = named["invoke_agent writer"]
    assert run.parent is None
    assert step.parent is not None and step.parent.span_id == run.context.span_id
    assert turn.parent is not None and turn.parent.span_id == step.context.span_id
    assert run.attributes is not None and run.attributes["tether.workflow.id"] == "write"
    assert trace.get_current_span() is trace.INVALID_SPAN


async def test_a_lab_workflow_run_is_the_parent_of_its_episodes(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    from tether.lab import Runtime

    sink = OtelSink(provider)  # one sink for the runtime: each agent's turns carry its id
    lab = Runtime(defaults={"model": script_client([{"text": "hello"}], model="m"), "trace": sink})
    assistant = lab.create_agent(id="assistant", system_prompt="Be brief.")
    ask = lab.workflow_from_agent(assistant, id="ask")
    try:
        await ask.run("hi")
    finally:
        await lab.aclose()
    named = by_name(exporter.get_finished_spans())
    [run] = named["workflow ask"]
    [turn] = named["invoke_agent assistant"]
    assert turn.attributes is not None and turn.attributes["gen_ai.agent.name"] == "assistant"
    assert sink.agent_name is None  # the runtime's sink itself is left as it was
    ancestors = {s.context.span_id: s for s in exporter.get_finished_spans()}
    parent = turn.parent
    chain = []
    while parent is not None:
        chain.append(ancestors[parent.span_id].name)
        parent = ancestors[parent.span_id].parent
    assert chain[-1] == "workflow ask" and run.context.trace_id == turn.context.trace_id


ANTHROPIC_SSE = "".join(
    f"event: {name}\ndata: {json.dumps(data)}\n\n"
    for name, data in [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
                    "type": "message",
                    "role": "assistant",
                    "model": "claude-sonnet-4-6-20260115",
                    "content": [],
                    "stop_reason": None,
                    "usage": {"input_tokens": 12, "output_tokens": 1},
                },
            },
        ),
        (
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text"}},
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": "4°C."},
            },
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn"},
                "usage": {"output_tokens": 3},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
)
"""One Messages stream as Anthropic sends it: the response's id and dated model come first."""


@pytest.mark.parametrize("definitions", [False, True], ids=["default", "opt-in"])
async def test_a_chat_span_names_the_response_and_its_model_and_tools_on_opt_in(
    provider: TracerProvider, exporter: InMemorySpanExporter, definitions: bool
) -> None:
    import httpx

    from tether.llm.anthropic import AnthropicClient

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, content=ANTHROPIC_SSE.encode(), headers={"content-type": "text/event-stream"}
        )

    http = httpx.AsyncClient(transport=httpx.MockTransport(answer))
    client = AnthropicClient("claude-sonnet-4-6", api_key="k", http_client=http)
    sink = OtelSink(provider, tool_definitions=definitions)
    agent = create_agent(llm=client, tools=[weather_tool()], trace=sink)
    try:
        events = await collect(agent, Session(), "Weather in Oslo?")
    finally:
        await agent.aclose()
        await http.aclose()
    assert events[-1]["type"] == "done"
    [chat] = by_name(exporter.get_finished_spans())["chat claude-sonnet-4-6"]
    attrs = dict(chat.attributes or {})
    assert attrs["gen_ai.response.id"] == "msg_01XFDUDYJgAACzvnptvVoYEL"
    assert attrs["gen_ai.response.model"] == "claude-sonnet-4-6-20260115"
    assert attrs["gen_ai.request.model"] == "claude-sonnet-4-6"
    if not definitions:
        assert "gen_ai.tool.definitions" not in attrs
        return
    assert json.loads(str(attrs["gen_ai.tool.definitions"])) == [
        {
            "type": "function",
            "name": "get_weather",
            "description": "Weather for a city",
            "parameters": WEATHER_SCHEMA,
        }
    ]
