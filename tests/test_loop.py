from __future__ import annotations

import asyncio
import copy
import json
from typing import Any

import pytest
from tests.helpers import ADD_SCHEMA, add_tool

from tether import (
    AbortController,
    AbortedError,
    RunContext,
    Session,
    create_agent,
    define_tool,
    has_tool_call,
    prompt_layer,
    reduce,
    step_count_is,
)
from tether.errors import LLMError
from tether.testing import collect, script_client
from tether.tools import ToolResult


def kinds(events: list[Any]) -> list[str]:
    return [e["type"] if e["type"] != "progress" else f"progress:{e['stage']}" for e in events]


async def test_a_turn_without_tools_streams_text_and_ends_with_done() -> None:
    client = script_client(
        [{"text": ["Hel", "lo"], "usage": {"input_tokens": 3, "output_tokens": 2}}]
    )
    agent = create_agent(llm=client, prompt=["You are terse."])
    session = agent.create_session()
    events = await collect(agent, session, "hi")
    assert kinds(events) == ["message", "progress:sent", "text", "text", "progress:done", "done"]
    assert [e["snapshot"] for e in events if e["type"] == "text"] == ["Hel", "Hello"]
    assert events[-1] == {
        "type": "done",
        "text": "Hello",
        "usage": {"input_tokens": 3, "output_tokens": 2},
        "stop_reason": "end_turn",
        "finish_reason": "stop",
    }


async def test_folding_a_turn_gives_exactly_the_transcript_sent_on_the_next_round() -> None:
    # Multi-round: thinking with signatures, preamble text, parallel calls, then a final answer
    # with its own thinking; then a second turn that must see the whole first one.
    client = script_client(
        [
            {
                "thinking": {"text": "need sums", "signature": "sig-1"},
                "text": "Let me add.",
                "tool_use": [
                    {"name": "add", "input": {"a": 1, "b": 2}},
                    {"name": "add", "input": {"a": 3, "b": 4}},
                ],
            },
            {
                "thinking": {"text": "one more", "signature": "sig-2"},
                "tool_use": [{"name": "add", "input": {"a": 3, "b": 7}}],
            },
            {"thinking": {"text": "done", "signature": "sig-3"}, "text": ["It is ", "10."]},
            {"text": "Still 10."},
        ]
    )
    agent = create_agent(llm=client, prompt=["sys"], tools=[add_tool()])
    session = Session()
    sent_views: list[Any] = []
    for text in ("sum things", "again?"):
        async for event in agent.send(session, text):
            if event["type"] == "progress" and event["stage"] == "sent":
                sent_views.append(copy.deepcopy(session.messages))
            reduce(session, event)
    assert len(client.calls) == 4
    for view, call in zip(sent_views, client.calls, strict=True):
        assert call["messages"] == view
    # The fold of turn 1 is what turn 2 sent, plus turn 2's user message.
    assert sent_views[2][-1] == {
        "role": "tool",
        "content": [
            {
                "type": "tool_result",
                "id": "call_3",
                "name": "add",
                "output": "10",
                "is_error": False,
            }
        ],
    }
    assert client.calls[3]["messages"][:-1] == sent_views[2] + [
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "text": "done", "signature": "sig-3"},
                {"type": "text", "text": "It is 10."},
            ],
        },
    ]
    round1 = client.calls[1]["messages"]
    assert round1[1] == {
        "role": "assistant",
        "content": [
            {"type": "thinking", "text": "need sums", "signature": "sig-1"},
            {"type": "text", "text": "Let me add."},
            {"type": "tool_call", "id": "call_1", "name": "add", "input": {"a": 1, "b": 2}},
            {"type": "tool_call", "id": "call_2", "name": "add", "input": {"a": 3, "b": 4}},
        ],
    }
    assert [p["output"] for p in round1[2]["content"]] == ["3", "7"]


async def test_progress_stages_are_emitted_exactly_where_the_seed_says() -> None:
    client = script_client(
        [
            {
                "tool_use": [
                    {"name": "add", "input": {"a": 1, "b": 1}},
                    {"name": "add", "input": {"a": 2, "b": 2}},
                ]
            },
            {"text": "4"},
        ]
    )
    agent = create_agent(llm=client, tools=[add_tool()])
    events = await collect(agent, Session(), "go")
    assert [k for k in kinds(events) if k != "text"] == [
        "message",
        "progress:sent",
        "tool_use",
        "tool_use",
        "progress:tool",
        "tool_result",
        "progress:tool",
        "tool_result",
        "progress:retry",
        "progress:sent",
        "progress:done",
        "done",
    ]


async def test_usage_is_summed_over_the_turn() -> None:
    client = script_client(
        [
            {
                "tool_use": [{"name": "add", "input": {"a": 1, "b": 1}}],
                "usage": {"input_tokens": 10, "output_tokens": 5, "cache_read_tokens": 7},
            },
            {"text": "2", "usage": {"input_tokens": 20, "output_tokens": 1}},
        ]
    )
    agent = create_agent(llm=client, tools=[add_tool()])
    events = await collect(agent, Session(), "go")
    assert events[-1]["usage"] == {"input_tokens": 30, "output_tokens": 6, "cache_read_tokens": 7}


async def test_max_tool_rounds_stops_with_the_synthetic_stop_reason() -> None:
    client = script_client([{"tool_use": [{"name": "add", "input": {"a": 1, "b": 1}}]}] * 5)
    agent = create_agent(llm=client, tools=[add_tool()], max_tool_rounds=3)
    session = Session()
    events = await collect(agent, session, "loop forever")
    assert len(client.calls) == 3
    assert events[-1]["stop_reason"] == "max_tool_rounds"
    assert events[-1]["text"] == ""
    assert session.messages[-1]["role"] == "tool"  # every call has its result


@pytest.mark.parametrize(
    ("condition", "expected_calls"),
    [
        (step_count_is(2), 2),
        (has_tool_call("finish"), 3),
        (lambda steps: any("stop now" in s.text for s in steps), 1),
    ],
)
async def test_stop_when_conditions_end_the_loop_after_a_tool_step(
    condition: Any, expected_calls: int
) -> None:
    finish = define_tool(name="finish", execute=lambda i: "ok")
    client = script_client(
        [
            {"text": "stop now", "tool_use": [{"name": "add", "input": {"a": 1, "b": 1}}]}
            if expected_calls == 1
            else {"tool_use": [{"name": "add", "input": {"a": 1, "b": 1}}]},
            {"tool_use": [{"name": "add", "input": {"a": 1, "b": 1}}]},
            {"tool_use": [{"name": "finish", "input": {}}]},
            {"text": "never reached"},
        ]
    )
    agent = create_agent(llm=client, tools=[add_tool(), finish], stop_when=condition)
    events = await collect(agent, Session(), "go")
    assert len(client.calls) == expected_calls
    assert events[-1]["type"] == "done"
    assert events[-1]["stop_reason"] == "tool_use"


async def test_stop_when_given_per_send_overrides_the_agent() -> None:
    client = script_client([{"tool_use": [{"name": "add", "input": {"a": 1, "b": 1}}]}] * 3)
    agent = create_agent(llm=client, tools=[add_tool()], stop_when=step_count_is(3))
    await collect(agent, Session(), "go", stop_when=[step_count_is(1)])
    assert len(client.calls) == 1


async def test_a_tool_that_remembers_yields_memory_right_after_its_result() -> None:
    async def note(value: dict[str, Any], ctx: RunContext) -> str:
        ctx.remember({"last": value["x"]})
        return "noted"

    client = script_client(
        [
            {
                "tool_use": [
                    {"name": "note", "input": {"x": 1}},
                    {"name": "add", "input": {"a": 1, "b": 1}},
                ]
            },
            {"text": "ok"},
        ]
    )
    agent = create_agent(llm=client, tools=[define_tool(name="note", execute=note), add_tool()])
    session = Session()
    events = await collect(agent, session, "go")
    ks = kinds(events)
    first_result = ks.index("tool_result")
    assert ks[first_result + 1] == "memory"
    assert events[first_result + 1]["patch"] == {"last": 1}
    assert session.memory == {"last": 1}


async def test_a_final_round_tool_write_is_drained_before_done() -> None:
    async def note(value: Any, ctx: RunContext) -> str:
        ctx.remember({"k": "v"})
        return "ok"

    client = script_client([{"tool_use": [{"name": "note", "input": {}}]}])
    agent = create_agent(
        llm=client, tools=[define_tool(name="note", execute=note)], max_tool_rounds=1
    )
    session = Session()
    events = await collect(agent, session, "go")
    assert kinds(events)[-4:] == ["tool_result", "memory", "progress:done", "done"]
    assert session.memory == {"k": "v"}


async def test_a_provider_error_is_an_error_event_and_ends_the_turn() -> None:
    client = script_client([{"text": "par", "error": LLMError("provider exploded")}])
    agent = create_agent(llm=client)
    session = Session()
    events = await collect(agent, session, "go")
    assert events[-1]["type"] == "error"
    assert str(events[-1]["error"]) == "provider exploded"
    # the partial text was render-only: the transcript holds only the user's message
    assert session.messages == [{"role": "user", "content": [{"type": "text", "text": "go"}]}]


async def test_a_turn_with_text_none_runs_on_the_transcript_as_it_is() -> None:
    client = script_client([{"text": "yes"}])
    agent = create_agent(llm=client)
    session = Session(messages=[{"role": "user", "content": [{"type": "text", "text": "q"}]}])
    events = await collect(agent, session, None)
    assert kinds(events)[0] == "progress:sent"
    assert client.calls[0]["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "q"}]}
    ]


async def test_script_client_records_every_request() -> None:
    client = script_client(
        [{"tool_use": [{"name": "add", "input": {"a": 1, "b": 1}}]}, {"text": "2"}]
    )
    agent = create_agent(
        llm=client, prompt=[prompt_layer("id", "sys", cache=True)], tools=[add_tool()]
    )
    await collect(agent, Session(), "go")
    assert len(client.calls) == 2
    assert client.calls[0]["tools"] == [
        {"name": "add", "description": "Add two integers", "input_schema": ADD_SCHEMA}
    ]
    assert len(client.calls[1]["messages"]) == 3


async def test_script_client_out_of_turns_is_an_error_event() -> None:
    agent = create_agent(llm=script_client([]))
    events = await collect(agent, Session(), "hi")
    assert events[-1]["type"] == "error"
    assert "ran out of turns" in str(events[-1]["error"])


# -- cancellation ------------------------------------------------------------------------------


class HangingClient:
    """A provider whose stream sends one chunk and then waits forever; records its cleanup."""

    model = "hang"

    def __init__(self) -> None:
        self.closed = False
        self.started = asyncio.Event()

    async def chat(self, request: Any) -> Any:
        try:
            yield {"type": "text", "text": "partial"}
            self.started.set()
            await asyncio.Event().wait()
        finally:
            self.closed = True

    async def aclose(self) -> None:
        pass


async def test_abort_signal_stops_an_in_flight_provider_stream_and_closes_it() -> None:
    client = HangingClient()
    agent = create_agent(llm=client)
    controller = AbortController()
    session = Session()

    async def abort_soon() -> None:
        await client.started.wait()
        controller.abort("user pressed stop")

    aborter = asyncio.create_task(abort_soon())
    events = await asyncio.wait_for(collect(agent, session, "hi", signal=controller.signal), 5)
    await aborter
    assert events[-1]["type"] == "error"
    assert isinstance(events[-1]["error"], AbortedError)
    assert events[-1]["error"].reason == "user pressed stop"
    assert client.closed
    assert asyncio.current_task() is not None and not asyncio.current_task().cancelling()  # type: ignore[union-attr]
    assert {t for t in asyncio.all_tasks() if not t.done()} == {asyncio.current_task()}


async def test_cancelling_the_consuming_task_closes_the_provider_stream() -> None:
    client = HangingClient()
    agent = create_agent(llm=client)
    task = asyncio.create_task(collect(agent, Session(), "hi"))
    await client.started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert client.closed
    assert {t for t in asyncio.all_tasks() if not t.done()} == {asyncio.current_task()}


async def test_abort_during_a_tool_cancels_it_and_every_call_gets_a_result() -> None:
    started = asyncio.Event()
    cancelled = asyncio.Event()

    async def slow(value: Any, ctx: RunContext) -> str:
        started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    client = script_client(
        [{"tool_use": [{"name": "slow", "input": {}}, {"name": "add", "input": {"a": 1, "b": 1}}]}]
    )
    agent = create_agent(llm=client, tools=[define_tool(name="slow", execute=slow), add_tool()])
    controller = AbortController()
    session = Session()

    async def abort_soon() -> None:
        await started.wait()
        controller.abort()

    aborter = asyncio.create_task(abort_soon())
    events = await asyncio.wait_for(collect(agent, session, "go", signal=controller.signal), 5)
    await aborter
    assert cancelled.is_set()
    results = [e for e in events if e["type"] == "tool_result"]
    assert [(r["id"], r["is_error"]) for r in results] == [("call_1", True), ("call_2", True)]
    assert isinstance(events[-1]["error"], AbortedError)
    # the session is still a valid request: every tool call has a result
    calls = [p["id"] for m in session.messages for p in m["content"] if p["type"] == "tool_call"]
    done = [p["id"] for m in session.messages for p in m["content"] if p["type"] == "tool_result"]
    assert calls == done


async def test_a_signal_aborted_before_the_turn_stops_before_the_provider() -> None:
    client = script_client([{"text": "no"}])
    agent = create_agent(llm=client)
    controller = AbortController()
    controller.abort()
    events = await collect(agent, Session(), "hi", signal=controller.signal)
    assert isinstance(events[-1]["error"], AbortedError)
    assert client.calls == []


async def test_an_abort_while_the_consumer_handles_an_event_does_not_cancel_the_consumer() -> None:
    client = script_client([{"text": ["a", "b"]}, {"text": "x"}])
    agent = create_agent(llm=client)
    controller = AbortController()
    seen: list[str] = []
    async for event in agent.send(Session(), "hi", signal=controller.signal):
        seen.append(event["type"])
        if event["type"] == "text":
            controller.abort()
            await asyncio.sleep(0)  # the consumer's own await must not be cancelled
    assert seen[-1] == "error"


def test_requests_are_json_serializable_without_a_signal() -> None:
    client = script_client([{"text": "x"}])
    agent = create_agent(llm=client, prompt=["p"])
    asyncio.run(collect(agent, Session(), "hi"))
    json.dumps(client.calls[0])


async def test_tool_input_deltas_carry_the_raw_json_snapshot_per_call() -> None:
    client = script_client(
        [
            {
                "tool_use": [
                    {
                        "name": "add",
                        "input": {"a": 1, "b": 2},
                        "id": "x",
                        "partials": ['{"a"', ": 1, ", '"b": 2}'],
                    },
                    {
                        "name": "add",
                        "input": {"a": 5, "b": 5},
                        "id": "y",
                        "partials": ['{"a": 5, "b": 5}'],
                    },
                ]
            },
            {"text": "ok"},
        ]
    )
    agent = create_agent(llm=client, tools=[add_tool()])
    events = await collect(agent, Session(), "go")
    deltas = [
        (e["id"], e["partial"], e["snapshot"]) for e in events if e["type"] == "tool_input_delta"
    ]
    assert deltas == [
        ("x", '{"a"', '{"a"'),
        ("x", ": 1, ", '{"a": 1, '),
        ("x", '"b": 2}', '{"a": 1, "b": 2}'),
        ("y", '{"a": 5, "b": 5}', '{"a": 5, "b": 5}'),
    ]
    # execution happens only on tool_use, after every delta
    assert kinds(events).index("tool_use") > max(
        i for i, e in enumerate(events) if e["type"] == "tool_input_delta"
    )


async def test_a_tool_remembering_something_not_json_safe_gets_an_error_result() -> None:
    import datetime as dt

    async def bad(value: Any, ctx: RunContext) -> str:
        ctx.remember({"when": dt.date(2026, 1, 1)})
        return "unreachable"

    client = script_client([{"tool_use": [{"name": "bad", "input": {}}]}, {"text": "ok"}])
    agent = create_agent(llm=client, tools=[define_tool(name="bad", execute=bad)])
    session = Session()
    events = await collect(agent, session, "go")
    result = next(e for e in events if e["type"] == "tool_result")
    assert result["is_error"]
    assert (
        result["output"] == "Tool bad failed: NotJSONSafeError: memory.when: date is not JSON-safe"
    )
    assert session.memory == {}


async def test_a_tool_mutating_ctx_services_does_not_change_the_agent() -> None:
    async def mutate(value: Any, ctx: RunContext) -> str:
        ctx.services["leak"] = True
        return "ok"

    client = script_client([{"tool_use": [{"name": "m", "input": {}}]}, {"text": "ok"}])
    agent = create_agent(
        llm=client, tools=[define_tool(name="m", execute=mutate)], services={"db": 1}
    )
    await collect(agent, Session(), "go")
    assert agent.services == {"db": 1}


def test_a_bad_trace_option_is_refused_at_create_agent() -> None:
    from tether import ConfigError

    with pytest.raises(ConfigError, match="trace= takes True, False or a sink"):
        create_agent(llm=script_client([]), trace="yes")  # type: ignore[arg-type]


async def test_records_traced_before_a_fault_still_reach_the_stream() -> None:
    def broken(ctx: RunContext) -> str:
        ctx.trace("layer:reading", {"source": "db"})
        raise OSError("db gone")

    records: list[Any] = []
    agent = create_agent(
        llm=script_client([{"text": "x"}]),
        prompt=[prompt_layer("ctx", broken)],
        trace=records.append,
    )
    events: list[Any] = []
    with pytest.raises(OSError, match="db gone"):
        async for event in agent.send(Session(), "hi"):
            events.append(event)
    streamed = [e["record"]["name"] for e in events if e["type"] == "trace"]
    assert streamed == ["layer:reading", "turn:failed"]
    assert [r["name"] for r in records] == streamed


@pytest.mark.parametrize(
    ("turns", "kind"),
    [
        ([{"tool_use": [{"name": "add", "input": {"a": 1, "b": 1}}]}, {"text": "2"}], "tool_use"),
        ([{"text": "x"}], "done"),
        ([{"text": "par", "error": LLMError("provider exploded")}], "error"),
    ],
    ids=["tool_use", "done", "error"],
)
async def test_an_abort_while_the_consumer_handles_any_event_does_not_cancel_the_consumer(
    turns: list[Any], kind: str
) -> None:
    # The loop is between its own awaits while the consumer handles an event, whatever the
    # event: an abort then only marks the turn, and the consumer's own awaits run undisturbed.
    agent = create_agent(llm=script_client(turns), tools=[add_tool()])
    controller = AbortController()
    seen: list[str] = []
    async for event in agent.send(Session(), "hi", signal=controller.signal):
        seen.append(event["type"])
        if event["type"] == kind:
            controller.abort()
            await asyncio.sleep(0)
    assert kind in seen
    assert not asyncio.current_task().cancelling()  # type: ignore[union-attr]


async def test_an_abort_during_an_output_guardrail_cancels_it_and_ends_the_turn() -> None:
    from tether import define_guardrail

    started = asyncio.Event()
    cancelled = asyncio.Event()

    async def slow_check(text: str) -> Any:
        started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return None

    agent = create_agent(
        llm=script_client([{"text": "hi"}]),
        guardrails=[define_guardrail(name="slow", output=slow_check)],
    )
    controller = AbortController()
    session = Session()

    async def abort_soon() -> None:
        await started.wait()
        controller.abort("stop")

    aborter = asyncio.create_task(abort_soon())
    events = await asyncio.wait_for(collect(agent, session, "go", signal=controller.signal), 5)
    await aborter
    assert cancelled.is_set()
    assert isinstance(events[-1]["error"], AbortedError)
    assert "done" not in kinds(events)
    assert [m["role"] for m in session.messages] == ["user"]
    assert not asyncio.current_task().cancelling()  # type: ignore[union-attr]


async def test_a_tool_that_swallows_the_abort_still_ends_the_turn_and_leaves_no_cancellation() -> (
    None
):
    started = asyncio.Event()

    async def stubborn(value: Any, ctx: RunContext) -> str:
        started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            return "swallowed"
        return "never"

    client = script_client([{"tool_use": [{"name": "stubborn", "input": {}}]}, {"text": "x"}])
    agent = create_agent(llm=client, tools=[define_tool(name="stubborn", execute=stubborn)])
    controller = AbortController()

    async def abort_soon() -> None:
        await started.wait()
        controller.abort()

    aborter = asyncio.create_task(abort_soon())
    events = await asyncio.wait_for(collect(agent, Session(), "go", signal=controller.signal), 5)
    await aborter
    assert isinstance(events[-1]["error"], AbortedError)
    assert len(client.calls) == 1
    [result] = [e for e in events if e["type"] == "tool_result"]
    assert result["is_error"] is True
    # the cancellation the abort asked for was taken back, so later awaits are not disturbed
    assert not asyncio.current_task().cancelling()  # type: ignore[union-attr]
    await asyncio.sleep(0)


async def test_cancelling_the_consumer_while_an_abort_is_absorbed_still_cancels_it() -> None:
    # An abort and an outside cancellation at once: the outside one is not swallowed.
    client = HangingClient()
    agent = create_agent(llm=client)
    controller = AbortController()
    task = asyncio.create_task(collect(agent, Session(), "hi", signal=controller.signal))
    await client.started.wait()
    task.cancel()
    controller.abort()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert client.closed


class ListClient:
    """Plays one list of raw stream chunks per request."""

    model = "list"

    def __init__(self, *streams: list[Any], stream_retries: int = 0) -> None:
        self.streams = list(streams)
        self.stream_retries = stream_retries

    async def chat(self, request: Any) -> Any:
        for chunk in self.streams.pop(0):
            yield chunk

    async def aclose(self) -> None:
        pass


FINISH = {
    "type": "finish",
    "content": [{"type": "text", "text": "hi"}],
    "stop_reason": "end_turn",
    "usage": {"output_tokens": 1},
}


async def test_a_stream_that_ends_without_finishing_is_an_error_and_changes_nothing() -> None:
    from tether.errors import LLMStreamError

    agent = create_agent(llm=ListClient([{"type": "text", "text": "par"}]))
    session = Session()
    events = await collect(agent, session, "go")
    assert isinstance(events[-1]["error"], LLMStreamError)
    assert "without finishing" in str(events[-1]["error"])
    assert [m["role"] for m in session.messages] == ["user"]


async def test_a_stream_that_ends_without_finishing_is_rerun_with_stream_retries() -> None:
    client = ListClient([{"type": "text", "text": "par"}], [FINISH], stream_retries=1)
    agent = create_agent(llm=client)
    session = Session()
    events = await collect(agent, session, "go")
    texts = [(e["text"], e["snapshot"]) for e in events if e["type"] == "text"]
    assert texts == [("par", "par"), ("", "")]  # the dropped attempt's text is replaced
    assert events[-1]["text"] == "hi"
    assert session.messages[-1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "hi"}],
    }


async def test_unknown_stream_chunk_kinds_are_skipped() -> None:
    agent = create_agent(llm=ListClient([{"type": "ping"}, {"type": "text", "text": "hi"}, FINISH]))
    events = await collect(agent, Session(), "go")
    assert kinds(events) == ["message", "progress:sent", "text", "progress:done", "done"]


async def test_concurrent_turns_of_one_agent_share_no_turn_state() -> None:
    # Two sessions, interleaved at every await: each turn keeps its own services, memory
    # writes, trace records and tool results.
    both_running = asyncio.Barrier(2)

    async def who(value: Any, ctx: RunContext) -> str:
        ctx.remember({"seen_by": ctx.session_id})
        ctx.trace("who", {"tenant": ctx.services["tenant"]})
        await both_running.wait()
        return f"{ctx.session_id}:{ctx.services['tenant']}"

    def call(request: Any) -> Any:
        return {"tool_use": [{"name": "who", "input": {}}]}

    agent = create_agent(
        llm=script_client([call, call, {"text": "a"}, {"text": "b"}]),
        tools=[define_tool(name="who", execute=who)],
        trace=lambda record: None,
        services={"tenant": "default"},
    )
    one, two = Session(id="one"), Session(id="two")
    events_one, events_two = await asyncio.gather(
        collect(agent, one, "go", services={"tenant": "t1"}),
        collect(agent, two, "go", services={"tenant": "t2"}),
    )
    for session, events, tenant in ((one, events_one, "t1"), (two, events_two, "t2")):
        [result] = [e for e in events if e["type"] == "tool_result"]
        assert result["output"] == f"{session.id}:{tenant}"
        assert session.memory == {"seen_by": session.id}
        records = [e["record"] for e in events if e["type"] == "trace"]
        assert {r["session_id"] for r in records} == {session.id}
        assert [r["data"] for r in records if r["phase"] == "workflow"] == [{"tenant": tenant}]
        assert events[-1]["type"] == "done"
    assert agent.services == {"tenant": "default"}


async def test_a_tool_or_guardrail_mutating_its_input_does_not_change_the_transcript() -> None:
    # The session is written only through reduce(): what the model called stays what it called,
    # in the caller's session and in what the next round sends.
    from tether import define_guardrail

    def meddle(call: Any) -> None:
        call["input"]["by_guardrail"] = True

    def t(value: dict[str, Any]) -> str:
        value["q"] = value["q"].upper()
        value["nested"]["k"].append(2)
        return f"ran with {sorted(value)}"

    client = script_client(
        [{"tool_use": [{"name": "t", "input": {"q": "x", "nested": {"k": [1]}}}]}, {"text": "ok"}]
    )
    agent = create_agent(
        llm=client,
        tools=[define_tool(name="t", execute=t)],
        guardrails=[define_guardrail(name="meddle", tool_call=meddle)],
    )
    session = Session()
    events = await collect(agent, session, "go")
    asked = {"q": "x", "nested": {"k": [1]}}
    assert session.messages[1]["content"][0]["input"] == asked
    assert client.calls[1]["messages"][1]["content"][0]["input"] == asked
    assert next(e for e in events if e["type"] == "tool_use")["input"] == asked
    assert next(e for e in events if e["type"] == "tool_result")["output"] == (
        "ran with ['by_guardrail', 'nested', 'q']"
    )


async def test_a_tool_changing_what_it_remembered_afterwards_does_not_change_the_memory() -> None:
    import datetime as dt

    async def note(value: Any, ctx: RunContext) -> str:
        seen: list[Any] = ["first"]
        ctx.remember({"seen": seen})
        seen.append(dt.date(2026, 1, 1))  # after the write: neither stored nor JSON-checked
        return "ok"

    client = script_client([{"tool_use": [{"name": "note", "input": {}}]}, {"text": "ok"}])
    agent = create_agent(llm=client, tools=[define_tool(name="note", execute=note)])
    session = Session()
    events = await collect(agent, session, "go")
    assert [e["patch"] for e in events if e["type"] == "memory"] == [{"seen": ["first"]}]
    assert session.memory == {"seen": ["first"]}
    Session.from_json(session.to_json())


async def test_ctx_memory_is_a_live_read_only_view_of_the_session_memory() -> None:
    seen: list[Any] = []

    async def peek(value: Any, ctx: RunContext) -> str:
        seen.append(dict(ctx.memory))
        ctx.memory["sneaky"] = True  # type: ignore[index]
        return "unreachable"

    client = script_client(
        [
            {"tool_use": [{"name": "note", "input": {}}, {"name": "peek", "input": {}}]},
            {"text": "ok"},
        ]
    )

    async def note(value: Any, ctx: RunContext) -> str:
        ctx.remember({"noted": 1})
        return "ok"

    agent = create_agent(
        llm=client,
        tools=[define_tool(name="note", execute=note), define_tool(name="peek", execute=peek)],
    )
    session = Session(memory={"tone": "brief"})
    events = await collect(agent, session, "go")
    assert seen == [{"tone": "brief", "noted": 1}]  # the caller folded the write in between
    result = [e for e in events if e["type"] == "tool_result"][1]
    assert result["is_error"] and "TypeError" in result["output"]
    assert session.memory == {"tone": "brief", "noted": 1}


async def test_an_abort_from_inside_the_turn_ends_it_without_cancelling_the_consumer() -> None:
    # A tool wired to the controller (a "stop" tool) aborts from the turn's own task: the turn
    # ends after that call, and nothing is left to cancel the consumer's next await.
    controller = AbortController()

    def stop(value: Any) -> str:
        controller.abort("asked to stop")
        return "stopping"

    client = script_client([{"tool_use": [{"name": "stop", "input": {}}]}, {"text": "never"}])
    agent = create_agent(llm=client, tools=[define_tool(name="stop", execute=stop)])
    events: list[Any] = []
    async for event in agent.send(Session(), "go", signal=controller.signal):
        events.append(event)
        await asyncio.sleep(0)
    assert [e["output"] for e in events if e["type"] == "tool_result"] == ["stopping"]
    assert isinstance(events[-1]["error"], AbortedError)
    assert events[-1]["error"].reason == "asked to stop"
    assert len(client.calls) == 1
    assert not asyncio.current_task().cancelling()  # type: ignore[union-attr]


async def test_the_tool_index_is_built_once_for_an_agent_without_integrations() -> None:
    client = script_client([{"text": "a"}, {"text": "b"}])
    agent = create_agent(llm=client, tools=[add_tool()])
    await collect(agent, Session(), "one")
    first = await agent.toolbox.toolset()
    await collect(agent, Session(), "two")
    assert await agent.toolbox.toolset() is first
    assert await agent.toolbox.toolset(override=[add_tool()]) is not first


def every_kind_of_call() -> tuple[list[Any], list[Any]]:
    """Tools and a script whose calls take each way a call can end: a plain answer, a number, a
    `ToolResult` error, an async tool, a tool that reads its ctx and remembers, an answer over
    `max_tool_result_chars`, an unknown tool and arguments that are not JSON."""

    async def slow(value: Any) -> str:
        await asyncio.sleep(0)
        return f"slow {value['q']}"

    def note(value: Any, ctx: RunContext) -> str:
        ctx.remember({"noted": value["q"]})
        return f"noted in {ctx.tool_call_id}"

    tools = [
        add_tool(),
        define_tool(name="echo", execute=lambda v: v["q"]),
        define_tool(name="fail", execute=lambda v: ToolResult("nope", is_error=True)),
        define_tool(name="slow", execute=slow),
        define_tool(name="note", execute=note),
        define_tool(name="long", execute=lambda v: "x" * 50),
    ]
    calls = [
        {"name": "add", "input": {"a": 1, "b": 2}},
        {"name": "echo", "input": {"q": "hi"}},
        {"name": "fail", "input": {}},
        {"name": "slow", "input": {"q": "s"}},
        {"name": "note", "input": {"q": "n"}},
        {"name": "long", "input": {}},
        {"name": "missing", "input": {}},
        {"name": "echo", "input": '{"q": '},
    ]
    turns = [{"text": "Calling.", "tool_use": calls}, {"tool_use": calls[:2]}, {"text": "done"}]
    return tools, turns


async def test_calls_run_in_the_turns_frame_end_as_the_guarded_path_ends_them() -> None:
    # stream_turn runs a call itself when nothing stands before it; a tool-call guardrail (one
    # that allows everything) sends every call through run_tool. Same events, same session.
    tools, turns = every_kind_of_call()
    runs = []
    for guard in (None, lambda call, ctx: None):
        agent = create_agent(
            llm=script_client(turns), tools=tools, on_tool_call=guard, max_tool_result_chars=20
        )
        session = Session(id="s")
        runs.append(([dict(e) for e in await collect(agent, session, "go")], session))
    (plain, plain_session), (guarded, guarded_session) = runs
    assert plain == guarded
    assert plain_session == guarded_session
    results = [(e["name"], e.get("is_error", False)) for e in plain if e["type"] == "tool_result"]
    assert results[:8] == [
        ("add", False),
        ("echo", False),
        ("fail", True),
        ("slow", False),
        ("note", False),
        ("long", False),
        ("missing", True),
        ("echo", True),
    ]
    assert [e["patch"] for e in plain if e["type"] == "memory"] == [{"noted": "n"}]
    assert plain_session["memory"] == {"noted": "n"}
    assert "truncated" in [e for e in plain if e["type"] == "tool_result"][5]["output"]


async def test_a_traced_turn_has_the_events_of_a_plain_one_beside_its_trace_records() -> None:
    tools, turns = every_kind_of_call()
    runs = []
    for trace in (False, True):
        agent = create_agent(
            llm=script_client(turns), tools=tools, trace=trace, max_tool_result_chars=20
        )
        session = Session(id="s")
        events = await collect(agent, session, "go")
        runs.append(([dict(e) for e in events if e["type"] != "trace"], session))
    assert runs[0] == runs[1]
