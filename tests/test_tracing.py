from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import pytest
from tests.helpers import add_tool

from tether import (
    TRACE_PHASES,
    AbortController,
    AbortedError,
    ConfigError,
    RunContext,
    Session,
    create_agent,
    define_guardrail,
    define_tool,
    is_trace_phase,
    prompt_layer,
    reduce,
)
from tether.errors import LLMStreamError
from tether.testing import collect, script_client
from tether.tracing import Tracer, console_sink, logging_sink


def records_of(events: list[Any]) -> list[Any]:
    return [e["record"] for e in events if e["type"] == "trace"]


def by_phase(records: list[Any], phase: str) -> list[Any]:
    return [r for r in records if r["phase"] == phase]


def two_rounds() -> Any:
    return script_client(
        [
            {
                "tool_use": [
                    {"name": "add", "input": {"a": 1, "b": 2}},
                    {"name": "add", "input": {"a": "x", "b": 2}},
                ],
                "usage": {"input_tokens": 10, "output_tokens": 4},
            },
            {
                "text": "3",
                "usage": {"input_tokens": 20, "output_tokens": 1, "cache_read_tokens": 8},
            },
        ],
        model="m-1",
    )


async def test_tracing_is_off_by_default() -> None:
    seen: list[Any] = []

    def tool_fn(value: Any, ctx: RunContext) -> str:
        ctx.trace("inside", {"x": 1})  # a no-op when tracing is off
        seen.append(ctx._tracer)
        return "ok"

    agent = create_agent(
        llm=script_client([{"tool_use": [{"name": "t", "input": {}}]}, {"text": "hi"}]),
        tools=[define_tool(name="t", execute=tool_fn)],
    )
    events = await collect(agent, Session(), "go")
    assert records_of(events) == []
    assert seen == [None]


async def test_trace_true_prints_every_record_to_stderr(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The seed: "trace: true uses the console sink".
    agent = create_agent(llm=script_client([{"text": "hi"}]), trace=True)
    events = await collect(agent, Session(), "go")
    out = capsys.readouterr()
    assert out.out == ""
    lines = out.err.splitlines()
    assert [line.split(" ")[:3] for line in lines] == [
        ["[tether]", "prompt", "assembled"],
        ["[tether]", "request", "chat"],
        ["[tether]", "response", "chat"],
        ["[tether]", "usage", "turn"],
    ]
    records = records_of(events)
    assert [json.loads(line.split(" ", 3)[3]) for line in lines] == [r["data"] for r in records]


async def test_the_logging_sink_logs_every_record_on_the_tether_trace_logger(
    caplog: pytest.LogCaptureFixture,
) -> None:
    agent = create_agent(llm=script_client([{"text": "hi"}]), trace=logging_sink)
    with caplog.at_level(logging.INFO, logger="tether.trace"):
        events = await collect(agent, Session(), "go")
    logged = [r for r in caplog.records if r.name == "tether.trace"]
    assert [r.tether_trace for r in logged] == records_of(events)  # type: ignore[attr-defined]
    assert [r.getMessage().split(" ")[:2] for r in logged] == [
        ["prompt", "assembled"],
        ["request", "chat"],
        ["response", "chat"],
        ["usage", "turn"],
    ]
    assert all(r.levelno == logging.INFO for r in logged)


async def test_a_callable_is_the_sink_and_gets_every_record_the_stream_carries() -> None:
    received: list[Any] = []
    agent = create_agent(llm=two_rounds(), tools=[add_tool()], trace=received.append)
    events = await collect(agent, Session(), "go")
    assert received == records_of(events)
    # one prompt, two rounds of request/response, two tools, usage
    assert len(received) == 1 + 2 * 2 + 2 + 1


async def test_every_record_is_phase_name_at_session_id_and_data() -> None:
    received: list[Any] = []
    agent = create_agent(llm=two_rounds(), tools=[add_tool()], trace=received.append)
    session = Session()
    await collect(agent, session, "go")
    assert received
    for record in received:
        assert set(record) == {"phase", "name", "at", "session_id", "data"}
        assert isinstance(record["name"], str)
        assert isinstance(record["at"], float) and record["at"] > 0  # Unix seconds
        assert record["session_id"] == session.id
        assert isinstance(record["data"], dict)


def test_a_record_without_session_or_data_leaves_those_keys_out() -> None:
    got: list[Any] = []
    event = Tracer(got.append).record("mcp", "connect")
    assert set(event["record"]) == {"phase", "name", "at"}
    assert got == [event["record"]]


async def test_every_phase_is_from_the_closed_vocabulary() -> None:
    assert TRACE_PHASES == (
        "prompt",
        "request",
        "response",
        "tool",
        "workflow",
        "guardrail",
        "usage",
        "mcp",
    )
    assert all(is_trace_phase(p) for p in TRACE_PHASES)
    for bad in ("turn", "PROMPT", "", None, 3, "tool "):
        assert not is_trace_phase(bad)
    received: list[Any] = []
    agent = create_agent(llm=two_rounds(), tools=[add_tool()], trace=received.append)
    await collect(agent, Session(), "go")
    assert all(is_trace_phase(r["phase"]) for r in received)


async def test_one_prompt_record_per_turn_carries_layer_count_cached_blocks_and_chars() -> None:
    received: list[Any] = []
    agent = create_agent(
        llm=two_rounds(),
        tools=[add_tool()],
        prompt=[
            prompt_layer("identity", "You are terse.", cache=True),
            prompt_layer("rules", "No jokes."),
            prompt_layer("now", lambda: "It is noon."),
        ],
        trace=received.append,
    )
    await collect(agent, Session(), "go")
    # assembled once per turn, however many rounds the turn has
    assert [r["data"] for r in by_phase(received, "prompt")] == [
        {"layers": 3, "cached_blocks": 1, "chars": 14 + 9 + 11}
    ]
    assert {r["name"] for r in by_phase(received, "prompt")} == {"assembled"}


async def test_request_and_response_records_carry_round_model_tools_stop_reason_usage_and_ms() -> (
    None
):
    received: list[Any] = []
    agent = create_agent(llm=two_rounds(), tools=[add_tool()], trace=received.append)
    await collect(agent, Session(), "go")
    assert [(r["name"], r["data"]) for r in by_phase(received, "request")] == [
        ("chat", {"round": 1, "model": "m-1", "tools": 1}),
        ("chat", {"round": 2, "model": "m-1", "tools": 1}),
    ]
    responses = by_phase(received, "response")
    for r in responses:
        assert r["name"] == "chat"
        assert isinstance(r["data"].pop("ms"), float)
    assert [r["data"] for r in responses] == [
        {
            "round": 1,
            "model": "m-1",
            "stop_reason": "tool_use",
            "finish_reason": "tool_calls",
            "tool_calls": 2,
            "usage": {"input_tokens": 10, "output_tokens": 4},
        },
        {
            "round": 2,
            "model": "m-1",
            "stop_reason": "end_turn",
            "finish_reason": "stop",
            "tool_calls": 0,
            "usage": {"input_tokens": 20, "output_tokens": 1, "cache_read_tokens": 8},
        },
    ]


async def test_tool_records_carry_name_id_ms_and_is_error() -> None:
    received: list[Any] = []
    agent = create_agent(llm=two_rounds(), tools=[add_tool()], trace=received.append)
    events = await collect(agent, Session(), "go")
    tools = by_phase(received, "tool")
    spent = [r["data"].pop("ms") for r in tools]
    assert all(isinstance(ms, float) and ms >= 0 for ms in spent), spent
    assert [(r["name"], r["data"]) for r in tools] == [
        ("add", {"id": "call_1", "is_error": False}),
        ("add", {"id": "call_2", "is_error": True}),
    ]
    # each tool record reaches the stream right before that tool's result
    for result in [e for e in events if e["type"] == "tool_result"]:
        before = events[events.index(result) - 1]
        assert before["type"] == "trace"
        assert before["record"]["data"]["id"] == result["id"]


async def test_a_tool_records_ms_is_the_time_the_tool_took() -> None:
    async def slow(value: Any, ctx: RunContext) -> str:
        await asyncio.sleep(0.05)
        return "done"

    received: list[Any] = []
    tool = define_tool(name="slow", input_schema={"type": "object"}, execute=slow)
    client = script_client([{"tool_use": [{"name": "slow", "input": {}}]}, {"text": "ok"}])
    agent = create_agent(llm=client, tools=[tool], trace=received.append)
    await collect(agent, Session(), "go")
    [record] = by_phase(received, "tool")
    assert record["data"]["ms"] >= 50  # the 50 ms the tool slept, at the least


async def test_guardrail_records_carry_target_action_reason_and_the_call() -> None:
    received: list[Any] = []
    agent = create_agent(
        llm=two_rounds(),
        tools=[add_tool()],
        trace=received.append,
        guardrails=[
            define_guardrail(
                name="no-strings",
                tool_call=lambda c: (
                    {"action": "deny", "reason": "strings"}
                    if isinstance(c["input"]["a"], str)
                    else None
                ),
                output=lambda t: {"action": "rewrite", "text": t + "."},
            )
        ],
    )
    await collect(agent, Session(), "go")
    assert [(r["name"], r["data"]) for r in by_phase(received, "guardrail")] == [
        (
            "no-strings",
            {
                "target": "tool_call",
                "action": "deny",
                "reason": "strings",
                "tool": "add",
                "tool_use_id": "call_2",
            },
        ),
        ("no-strings", {"target": "output", "action": "rewrite", "reason": None}),
    ]


async def test_the_usage_record_carries_the_turns_token_totals_last() -> None:
    received: list[Any] = []
    agent = create_agent(llm=two_rounds(), tools=[add_tool()], trace=received.append)
    events = await collect(agent, Session(), "go")
    last = received[-1]
    assert (last["phase"], last["name"]) == ("usage", "turn")
    assert last["data"] == {"input_tokens": 30, "output_tokens": 5, "cache_read_tokens": 8}
    assert last["data"] == events[-1]["usage"]
    assert by_phase(received, "usage") == [last]


async def test_ctx_trace_records_a_workflow_phase_record_on_the_stream_after_that_tool() -> None:
    def step(value: Any, ctx: RunContext) -> str:
        ctx.trace("step:start", {"step": "zettel"})
        ctx.trace("step:verdict", {"step": "zettel", "reason": "no-emission"})
        return "ok"

    received: list[Any] = []
    agent = create_agent(
        llm=script_client([{"tool_use": [{"name": "step", "input": {}}]}, {"text": "done"}]),
        tools=[define_tool(name="step", execute=step)],
        trace=received.append,
    )
    events = await collect(agent, Session(), "go")
    workflow = by_phase(received, "workflow")
    assert [(r["name"], r["data"]) for r in workflow] == [
        ("step:start", {"step": "zettel"}),
        ("step:verdict", {"step": "zettel", "reason": "no-emission"}),
    ]
    ks = [e["type"] if e["type"] != "trace" else e["record"]["phase"] for e in events]
    result = ks.index("tool_result")
    assert ks[result - 3 : result] == ["workflow", "workflow", "tool"]
    assert records_of(events) == received


async def test_ctx_trace_in_a_prompt_layer_reaches_the_stream_before_done() -> None:
    def layer(ctx: RunContext) -> str:
        ctx.trace("layer:rendered")
        return "dynamic"

    received: list[Any] = []
    agent = create_agent(
        llm=script_client([{"text": "hi"}]),
        prompt=[prompt_layer("dyn", layer)],
        trace=received.append,
    )
    events = await collect(agent, Session(), "go")
    assert records_of(events) == received
    assert ("workflow", "layer:rendered") in [(r["phase"], r["name"]) for r in received]


async def test_a_sink_that_raises_warns_once_and_the_turn_goes_on() -> None:
    calls: list[Any] = []

    def broken(record: Any) -> None:
        calls.append(record)
        raise OSError("disk full")

    agent = create_agent(llm=two_rounds(), tools=[add_tool()], trace=broken)
    session = Session()
    with pytest.warns(RuntimeWarning, match="disk full") as caught:
        events = await collect(agent, session, "go")
    assert len(caught) == 1
    assert "the turn goes on" in str(caught[0].message)
    assert events[-1]["type"] == "done"
    assert events[-1]["text"] == "3"
    assert len(calls) == len(records_of(events)) == 8  # it was still called for every record
    assert session.messages[-1]["content"] == [{"type": "text", "text": "3"}]


async def test_a_failed_provider_call_is_traced_and_still_ends_with_a_usage_record() -> None:
    received: list[Any] = []
    client = script_client(
        [
            {"tool_use": [{"name": "add", "input": {"a": 1, "b": 1}}]},
            {"text": "par", "error": LLMStreamError("connection reset")},
        ]
    )
    agent = create_agent(llm=client, tools=[add_tool()], trace=received.append)
    events = await collect(agent, Session(), "go")
    assert events[-1]["type"] == "error"
    failed = received[-2]
    assert (failed["phase"], failed["name"]) == ("response", "chat:failed")
    assert failed["data"] == {
        "round": 2,
        "model": "script",
        "error": "LLMStreamError('connection reset')",
        "error_type": "LLMStreamError",
    }
    assert (received[-1]["phase"], received[-1]["name"]) == ("usage", "turn:failed")
    assert received[-1]["data"] == {"input_tokens": 1, "output_tokens": 1}
    assert records_of(events) == received


async def test_an_aborted_turn_still_ends_with_a_usage_record() -> None:
    started = asyncio.Event()

    async def slow(value: Any, ctx: RunContext) -> str:
        ctx.trace("slow:start")
        started.set()
        await asyncio.sleep(30)
        return "never"

    received: list[Any] = []
    agent = create_agent(
        llm=script_client([{"tool_use": [{"name": "slow", "input": {}}]}]),
        tools=[define_tool(name="slow", execute=slow)],
        trace=received.append,
    )
    controller = AbortController()

    async def abort_soon() -> None:
        await started.wait()
        controller.abort()

    aborter = asyncio.create_task(abort_soon())
    events = await asyncio.wait_for(collect(agent, Session(), "go", signal=controller.signal), 5)
    await aborter
    assert isinstance(events[-1]["error"], AbortedError)
    assert [(r["phase"], r["name"]) for r in received[-2:]] == [
        ("workflow", "slow:start"),
        ("usage", "turn:aborted"),
    ]
    assert received[-1]["data"] == {"input_tokens": 1, "output_tokens": 1}
    assert records_of(events) == received


async def test_trace_events_are_render_only() -> None:
    agent = create_agent(llm=two_rounds(), tools=[add_tool()], trace=lambda r: None)
    events = await collect(agent, Session(), "go")
    session = Session()
    for event in records_of(events):
        assert reduce(session, {"type": "trace", "record": event}) is session
    assert session == Session(id=session.id)


def test_a_trace_option_that_is_not_a_sink_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="trace= must be True, False or a callable sink"):
        Tracer.from_option("yes", None)  # type: ignore[arg-type]
    assert Tracer.from_option(False, "s") is None
    assert Tracer.from_option(None, "s") is None
    tracer = Tracer.from_option(True, "s")
    assert tracer is not None and tracer.sink is console_sink and tracer.session_id == "s"


async def test_records_made_inside_guardrails_reach_the_stream_in_the_order_the_sink_got_them() -> (
    None
):
    def check_call(call: Any, ctx: RunContext) -> Any:
        ctx.trace("policy:looked-up", {"tool": call["name"]})
        return {"action": "deny", "reason": "no"}

    def check_output(text: str, ctx: RunContext) -> Any:
        ctx.trace("policy:scanned")
        return {"action": "rewrite", "text": "clean"}

    received: list[Any] = []
    agent = create_agent(
        llm=two_rounds(),
        tools=[add_tool()],
        trace=received.append,
        guardrails=[define_guardrail(name="policy", tool_call=check_call, output=check_output)],
    )
    events = await collect(agent, Session(), "go")
    assert records_of(events) == received
    names = [(r["phase"], r["name"]) for r in received]
    assert names.count(("workflow", "policy:looked-up")) == 2
    assert names.index(("workflow", "policy:scanned")) < names.index(("usage", "turn"))


def test_an_async_sink_is_refused_at_create_agent() -> None:
    # A sink is called as each record is made, from synchronous code (ctx.trace); the coroutine
    # of an async sink would never run and its records would be lost without a word.
    async def sink(record: Any) -> None:
        pass

    class AsyncSink:
        async def __call__(self, record: Any) -> None:
            pass

    for option in (sink, AsyncSink()):
        with pytest.raises(ConfigError, match="async"):
            create_agent(llm=script_client([]), trace=option)
        with pytest.raises(ConfigError, match="async"):
            Tracer.from_option(option, None)


async def test_a_sink_that_returns_an_awaitable_warns_once_and_leaves_no_coroutine_behind() -> None:
    got: list[Any] = []

    async def deliver(record: Any) -> None:
        got.append(record)

    agent = create_agent(llm=two_rounds(), tools=[add_tool()], trace=lambda r: deliver(r))
    with pytest.warns(RuntimeWarning, match="returned an awaitable") as caught:
        events = await collect(agent, Session(), "go")
    assert len(caught) == 1
    assert events[-1]["type"] == "done"
    assert got == []  # nothing ran; and no "coroutine was never awaited" (warnings are errors)
