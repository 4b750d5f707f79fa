"""What a turn leaves behind when something fails, the bounds on what a tool may send back, and
the loop's own stream contract: finish reasons, progress before every call, partial output."""

from __future__ import annotations

import copy
import itertools
import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest

from tether import (
    LLMError,
    Session,
    TraceRecord,
    create_agent,
    define_resource,
    define_tool,
    prompt_layer,
    reduce,
    step_count_is,
)
from tether.errors import LLMStreamError, McpConnectionError
from tether.integrations import SourceConnection
from tether.llm.base import ChatRequest, StreamChunk
from tether.loop import finish_reason_of
from tether.signals import AbortSignal
from tether.testing import collect, script_client

ECHO = define_tool(name="echo", execute=lambda i: "echoed")


class Client:
    """A custom LLMClient driven by a function of the request: no finish_reason of its own."""

    model = "custom"

    def __init__(self, *turns: Sequence[StreamChunk | BaseException] | BaseException) -> None:
        self.turns = list(turns)
        self.calls: list[ChatRequest] = []

    async def chat(self, request: ChatRequest) -> AsyncIterator[StreamChunk]:
        self.calls.append(request)
        turn = self.turns.pop(0)
        if isinstance(turn, BaseException):
            raise turn
        for chunk in turn:
            if isinstance(chunk, BaseException):
                raise chunk
            yield chunk

    async def aclose(self) -> None:
        return None


def finish(content: list[Any], stop: str | None, **extra: Any) -> StreamChunk:
    chunk: Any = {"type": "finish", "content": content, "stop_reason": stop, "usage": {}}
    chunk.update(extra)
    return chunk  # type: ignore[no-any-return]


# -- a failed turn changes nothing -----------------------------------------------------------


class Unreachable:
    label = "http://127.0.0.1:9/mcp"

    async def connect(self, signal: AbortSignal | None) -> SourceConnection:
        raise McpConnectionError("could not reach http://127.0.0.1:9/mcp")


def boom() -> str:
    raise RuntimeError("the layer broke")


async def read_fails(value: Any, ctx: Any) -> str:
    raise RuntimeError("the resource broke")


@pytest.mark.parametrize(
    ("parts", "error"),
    [
        ({"integrations": [Unreachable()]}, McpConnectionError),
        ({"system_prompt": ["ok", prompt_layer("now", boom)]}, RuntimeError),
        ({"resources": [define_resource(name="notes", get=read_fails)]}, RuntimeError),
    ],
    ids=["mcp-unreachable", "layer-raises", "attach-read-fails"],
)
async def test_a_turn_that_fails_before_the_model_call_leaves_the_session_as_it_was(
    parts: dict[str, Any], error: type[BaseException]
) -> None:
    client = script_client([{"text": "never"}])
    agent = create_agent(model=client, trace=lambda r: None, **parts)
    session = Session(messages=[{"role": "user", "content": [{"type": "text", "text": "before"}]}])
    before = copy.deepcopy(session)
    seen: list[str] = []
    with pytest.raises(error):
        async for event in agent.send(session, "hello?"):
            reduce(session, event)
            seen.append(event["type"])
    assert session == before  # retrying sends the question once, not twice
    assert "message" not in seen and set(seen) <= {"trace"}
    assert client.calls == []


async def test_a_client_raising_something_else_than_an_llm_error_ends_the_turn_with_error() -> None:
    agent = create_agent(model=Client(KeyError("oops")))
    session = Session()
    events = await collect(agent, session, "hi")
    error = events[-1]
    assert error["type"] == "error"
    assert isinstance(error["error"], LLMError)
    assert isinstance(error["error"].__cause__, KeyError)
    assert "KeyError" in str(error["error"])
    assert [m["role"] for m in session.messages] == ["user"]  # valid for the next turn


async def test_a_client_failing_mid_stream_with_a_bug_is_wrapped_too() -> None:
    agent = create_agent(model=Client([{"type": "text", "text": "par"}, ValueError("bad")]))
    events = await collect(agent, Session(), "hi")
    assert events[-1]["type"] == "error" and isinstance(events[-1]["error"], LLMError)


@pytest.mark.parametrize(
    ("stop", "reason"),
    [("length", None), ("MAX_TOKENS", None), ("incomplete", None), ("whatever", "length")],
)
async def test_a_call_cut_by_the_output_limit_is_never_executed(
    stop: str, reason: str | None
) -> None:
    cut = {"type": "tool_call", "id": "c1", "name": "echo", "input": '{"text": "hal'}
    extra = {} if reason is None else {"finish_reason": reason}
    client = Client(
        [
            {"type": "text", "text": "Writing it."},
            {"type": "tool_input_delta", "id": "c1", "name": "echo", "partial": '{"text": "hal'},
            finish([{"type": "text", "text": "Writing it."}, cut], stop, **extra),
        ]
    )
    ran: list[Any] = []
    agent = create_agent(model=client, tools=[define_tool(name="echo", execute=ran.append)])
    session = Session()
    events = await collect(agent, session, "go")
    assert ran == [] and len(client.calls) == 1
    assert [e["snapshot"] for e in events if e["type"] == "tool_input_delta"] == ['{"text": "hal']
    done = events[-1]
    assert done["type"] == "done" and done["stop_reason"] == stop
    assert done["finish_reason"] == "length" and done["text"] == "Writing it."
    assert session.messages[-1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "Writing it."}],
    }


# -- finish reasons ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("stop", "calls", "expected"),
    [
        ("end_turn", False, "stop"),
        ("stop", False, "stop"),
        ("STOP", False, "stop"),
        ("completed", False, "stop"),
        (None, False, "stop"),
        (None, True, "tool_calls"),
        ("tool_use", True, "tool_calls"),
        ("tool_calls", True, "tool_calls"),
        ("max_tokens", False, "length"),
        ("length", False, "length"),
        ("MAX_TOKENS", False, "length"),
        ("incomplete", False, "length"),
        ("content_filter", False, "content_filter"),
        ("SAFETY", False, "content_filter"),
        ("RECITATION", False, "content_filter"),
        ("refusal", False, "refusal"),
        ("something-new", False, "error"),
    ],
)
def test_the_raw_stop_reason_is_read_when_a_client_gives_no_finish_reason(
    stop: str | None, calls: bool, expected: str
) -> None:
    content: list[Any] = (
        [{"type": "tool_call", "id": "c", "name": "t", "input": {}}] if calls else []
    )
    chunk: Any = finish(content, stop)
    assert finish_reason_of(chunk) == expected
    chunk["finish_reason"] = "content_filter"
    assert finish_reason_of(chunk) == "content_filter"  # the adapter's own reading wins


async def test_every_done_carries_a_finish_reason_synthetic_ones_included() -> None:
    async def done_of(**config: Any) -> Any:
        events = await collect(create_agent(**config), Session(), "go")
        return events[-1]

    calls = [{"tool_use": [{"name": "echo", "input": {}}]}] * 3 + [{"text": "end"}]
    bounded = await done_of(model=script_client(calls), tools=[ECHO], max_tool_rounds=2)
    assert (bounded["stop_reason"], bounded["finish_reason"]) == (
        "max_tool_rounds",
        "max_tool_rounds",
    )
    stopped = await done_of(model=script_client(calls), tools=[ECHO], stop_when=step_count_is(1))
    assert (stopped["stop_reason"], stopped["finish_reason"]) == ("tool_use", "tool_calls")
    from tether import define_guardrail

    denied = await done_of(
        model=script_client([{"text": "secret"}]),
        guardrails=[define_guardrail(name="g", output=lambda t: {"action": "deny"})],
    )
    assert (denied["stop_reason"], denied["finish_reason"]) == (
        "guardrail_denied",
        "guardrail_denied",
    )
    custom = await done_of(model=Client([finish([{"type": "text", "text": "hi"}], "end_turn")]))
    assert custom["finish_reason"] == "stop"


# -- size bounds -------------------------------------------------------------------------


async def test_a_tool_result_over_the_limit_is_truncated_with_a_marker_and_a_record() -> None:
    records: list[TraceRecord] = []
    big = define_tool(name="big", execute=lambda i: "x" * 250)
    client = script_client([{"tool_use": [{"name": "big", "input": {}}]}, {"text": "ok"}])
    agent = create_agent(model=client, tools=[big], max_tool_result_chars=100, trace=records.append)
    session = Session()
    events = await collect(agent, session, "go")
    result = next(e for e in events if e["type"] == "tool_result")
    assert result["output"].startswith("x" * 100 + "\n\n[tether: this result was truncated")
    assert "first 100 of 250 characters" in result["output"]
    sent = client.calls[1]["messages"][-1]["content"][0]
    assert sent["output"] == result["output"]  # the model reads the marker, never the whole
    [record] = [r for r in records if r["name"] == "result:truncated"]
    assert record["phase"] == "tool"
    assert record.get("data") == {"id": result["id"], "name": "big", "chars": 250, "limit": 100}


async def test_the_default_result_limit_is_100_000_and_none_lifts_it() -> None:
    huge = define_tool(name="huge", execute=lambda i: "y" * 100_001)
    turns: list[dict[str, Any]] = [{"tool_use": [{"name": "huge", "input": {}}]}, {"text": "ok"}]
    events = await collect(create_agent(model=script_client(turns), tools=[huge]), Session(), "go")
    out = next(e for e in events if e["type"] == "tool_result")["output"]
    assert out.startswith("y" * 100_000 + "\n\n[tether:") and "y" * 100_001 not in out
    unbounded = create_agent(model=script_client(turns), tools=[huge], max_tool_result_chars=None)
    events = await collect(unbounded, Session(), "go")
    assert next(e for e in events if e["type"] == "tool_result")["output"] == "y" * 100_001


# -- progress and retries ----------------------------------------------------------------


async def test_sent_comes_before_every_provider_call_stream_retries_included() -> None:
    dropped = LLMStreamError("connection dropped", retryable=True)
    client = Client(
        [{"type": "text", "text": "par"}, dropped],
        [
            {"type": "text", "text": "whole"},
            finish([{"type": "text", "text": "whole"}], "end_turn"),
        ],
    )
    agent = create_agent(model=client)
    events = await collect(agent, Session(), "go", stream_retries=1)
    stages = [e["type"] if e["type"] != "progress" else e["stage"] for e in events]
    assert stages == ["message", "sent", "text", "text", "sent", "text", "done", "done"]
    assert len(client.calls) == 2


async def test_an_adapters_retry_chunk_becomes_a_trace_record_not_an_event() -> None:
    records: list[TraceRecord] = []
    client = Client(
        [
            {"type": "retry", "attempt": 2, "delay": 0.5, "reason": "HTTP 529 overloaded"},
            finish([{"type": "text", "text": "ok"}], "end_turn"),
        ]
    )
    events = await collect(create_agent(model=client, trace=records.append), Session(), "go")
    assert "retry" not in {e["type"] for e in events}
    [retry] = [r for r in records if r["name"] == "retry"]
    assert retry["phase"] == "request"
    assert retry.get("data") == {
        "round": 1,
        "attempt": 2,
        "delay": 0.5,
        "reason": "HTTP 529 overloaded",
    }
    # without tracing the chunk is dropped
    quiet = Client(
        [
            {"type": "retry", "attempt": 2, "delay": 0.5, "reason": "x"},
            finish([{"type": "text", "text": "ok"}], "end_turn"),
        ]
    )
    events = await collect(create_agent(model=quiet), Session(), "go")
    assert "retry" not in {e["type"] for e in events} and events[-1]["type"] == "done"


# -- partial structured output -----------------------------------------------------------


async def test_partial_output_streams_the_object_parsed_so_far_and_reduce_ignores_it() -> None:
    answer = '{"title": "Oslo", "facts": ["cold", "north"]}'
    chunks = [answer[i : i + 6] for i in range(0, len(answer), 6)]
    client = script_client([{"text": chunks}])
    agent = create_agent(model=client)
    session = Session()
    fmt = {"name": "city", "schema": {"type": "object"}}
    events = await collect(agent, session, "a city", response_format=fmt)
    partials = [e["output"] for e in events if e["type"] == "partial_output"]
    assert partials[-1] == json.loads(answer)
    assert partials[0] == {} or partials[0] == {"title": "Osl"}
    assert all(a != b for a, b in itertools.pairwise(partials))  # only on change
    assert {"title": "Oslo", "facts": ["cold"]} in partials  # fields as they arrive
    # render-only: the transcript is the same as without them
    assert session.messages[-1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": answer}],
    }
    fresh = Session()
    assert reduce(fresh, {"type": "partial_output", "output": {"a": 1}}) is fresh
    assert fresh.messages == [] and fresh.memory == {}


async def test_no_partial_output_without_a_response_format_or_for_prose() -> None:
    events = await collect(
        create_agent(model=script_client([{"text": ['{"a"', ": 1}"]}])), Session(), "x"
    )
    assert "partial_output" not in {e["type"] for e in events}
    prose = script_client([{"text": ["Sure, ", "here it is"]}])
    events = await collect(
        create_agent(model=prose), Session(), "x", response_format={"name": "n", "schema": {}}
    )
    assert "partial_output" not in {e["type"] for e in events}
