"""OpenAI Responses adapter: recorded streams over a loopback server, split-anywhere parsing,
request mapping and the pinned request of a representative agent."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tether import Session
from tether.errors import LLMStreamError, MissingKeyError
from tether.llm.base import ChatRequest
from tether.llm.openai_responses import (
    OpenAIResponsesClient,
    OpenAIResponsesStream,
    to_responses_input,
)

from .conftest import (
    Outcome,
    Reply,
    WireCase,
    WireServer,
    check_pinned,
    parse_pieces,
    representative_agent,
    run_chat,
    run_turn,
    same_outcome,
    simple_request,
    split_at,
    sse,
)

API = "openai_responses"


def normalized_usage(raw: dict[str, Any] | None) -> dict[str, int]:
    if raw is None:
        return {}
    out = {"input_tokens": raw["input_tokens"], "output_tokens": raw["output_tokens"]}
    cached = (raw.get("input_tokens_details") or {}).get("cached_tokens")
    if cached is not None:
        out["cache_read_tokens"] = cached
    reasoning = (raw.get("output_tokens_details") or {}).get("reasoning_tokens")
    if reasoning is not None:
        out["reasoning_tokens"] = reasoning
    return out


def check_case(case: WireCase, out: Outcome) -> None:
    exp = case.expected
    if exp.get("errors"):
        # response.failed, or an error event: the provider's message, retryable as it says.
        assert isinstance(out.error, LLMStreamError) and out.finish is None
        for err in exp["errors"]:
            assert err["message"] in str(out.error)
        assert out.error.retryable is exp["retryable"]
        assert out.text == exp["text"]
        return
    assert out.error is None and out.finish is not None
    assert out.text == exp["text"]
    assert "".join(p["text"] for p in out.parts("text")) == exp["text"]
    calls = [(p["id"], p["name"], p["input"]) for p in out.parts("tool_call")]
    # The call's id is the call_id the API wants back, not the fc_ item id.
    assert calls == [(c["call_id"], c["name"], c["input"]) for c in exp["tool_calls"]]
    assert out.partials() == {c["call_id"]: c["arguments_raw"] for c in exp["tool_calls"]}
    thinking = [(p["text"], json.loads(p["signature"])) for p in out.parts("thinking")]
    assert thinking == [("\n\n".join(r["summary"]), {"id": r["item_id"]}) for r in exp["reasoning"]]
    assert out.thinking == "".join("\n\n".join(r["summary"]) for r in exp["reasoning"])
    assert out.finish["stop_reason"] == exp["stop_reason"]
    assert out.finish["finish_reason"] == exp.get(
        "finish_reason", "tool_calls" if exp["tool_calls"] else "stop"
    )
    assert out.finish["usage"] == normalized_usage(exp["usage"])


async def test_recorded_stream_over_http(case: WireCase, wire: WireServer) -> None:
    wire.reply(Reply(body=split_at(case.sse, range(0, len(case.sse), 4099))))
    client = OpenAIResponsesClient("gpt-test", base_url=f"{wire.url}/v1", api_key="k")
    try:
        out = await run_chat(client, simple_request("gpt-test"))
    finally:
        await client.aclose()
    check_case(case, out)
    assert (wire.requests[0].method, wire.requests[0].path) == ("POST", "/v1/responses")


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_any_split_gives_the_same_result(case: WireCase, data: st.DataObject) -> None:
    cuts = data.draw(st.lists(st.integers(0, len(case.sse)), max_size=60))
    whole = parse_pieces(API, OpenAIResponsesStream(), [case.sse])
    split = parse_pieces(API, OpenAIResponsesStream(), split_at(case.sse, cuts))
    same_outcome(whole, split)
    check_case(case, split)


def test_byte_by_byte(case: WireCase) -> None:
    # The 500 kB reasoning capture goes in 7-byte pieces to keep the suite fast.
    size = 1 if len(case.sse) < 50_000 else 7
    pieces = [case.sse[i : i + size] for i in range(0, len(case.sse), size)]
    check_case(case, parse_pieces(API, OpenAIResponsesStream(), pieces))


# -- synthetic terminal events (no public capture has them) ---------------------------------


def events(*payloads: dict[str, Any]) -> bytes:
    return sse(*((p["type"], p) for p in payloads))


TEXT_ITEM = {"type": "message", "id": "msg_1", "role": "assistant", "content": []}


def test_incomplete_response_reports_its_reason() -> None:
    body = events(
        {"type": "response.output_item.added", "output_index": 0, "item": TEXT_ITEM},
        {"type": "response.output_text.delta", "item_id": "msg_1", "delta": "Half"},
        {
            "type": "response.incomplete",
            "response": {
                "status": "incomplete",
                "incomplete_details": {"reason": "max_output_tokens"},
                "usage": {"input_tokens": 5, "output_tokens": 16},
            },
        },
    )
    out = parse_pieces("openai-responses", OpenAIResponsesStream(), [body])
    assert out.finish is not None
    assert out.finish["stop_reason"] == "max_output_tokens"
    assert out.finish["content"] == [{"type": "text", "text": "Half"}]
    assert out.finish["usage"] == {"input_tokens": 5, "output_tokens": 16}


def test_failed_and_error_events_raise() -> None:
    failed = events(
        {"type": "response.output_item.added", "output_index": 0, "item": TEXT_ITEM},
        {"type": "response.output_text.delta", "item_id": "msg_1", "delta": "Hi"},
        {
            "type": "response.failed",
            "response": {"status": "failed", "error": {"code": "server_error", "message": "boom"}},
        },
    )
    out = parse_pieces("openai-responses", OpenAIResponsesStream(), [failed])
    assert isinstance(out.error, LLMStreamError) and out.error.retryable
    assert "boom" in str(out.error) and out.text == "Hi"
    error = events({"type": "error", "code": "invalid_prompt", "message": "nope", "param": None})
    out = parse_pieces("openai-responses", OpenAIResponsesStream(), [error])
    assert isinstance(out.error, LLMStreamError) and not out.error.retryable
    assert "nope" in str(out.error) and "invalid_prompt" in str(out.error)
    busy = events({"type": "error", "code": "server_error", "message": "try again", "param": None})
    out = parse_pieces("openai-responses", OpenAIResponsesStream(), [busy])
    assert isinstance(out.error, LLMStreamError) and out.error.retryable
    nested = events({"type": "error", "error": {"type": "rate_limit_exceeded", "message": "slow"}})
    out = parse_pieces("openai-responses", OpenAIResponsesStream(), [nested])
    assert isinstance(out.error, LLMStreamError) and out.error.retryable


def test_stream_without_completed_is_retryable() -> None:
    body = events(
        {"type": "response.output_item.added", "output_index": 0, "item": TEXT_ITEM},
        {"type": "response.output_text.delta", "item_id": "msg_1", "delta": "Hi"},
    )
    out = parse_pieces("openai-responses", OpenAIResponsesStream(), [body])
    assert isinstance(out.error, LLMStreamError) and out.error.retryable


# -- the request ------------------------------------------------------------------------------


def test_input_mapping() -> None:
    signature = json.dumps({"id": "rs_1", "encrypted_content": "gAAA"})
    messages: list[Any] = [
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "text": "Plan.", "signature": signature},
                {"type": "thinking", "text": "anthropic's", "signature": "RXFRQkNn"},
                {"type": "thinking", "text": "", "signature": '{"id":"rs_2"}'},
                {"type": "text", "text": "Calling."},
                {"type": "tool_call", "id": "call_1", "name": "f", "input": {"a": 1}},
            ],
        },
        {
            "role": "tool",
            "content": [
                {
                    "type": "tool_result",
                    "id": "call_1",
                    "name": "f",
                    "output": "2",
                    "is_error": False,
                }
            ],
        },
    ]
    assert to_responses_input(messages) == [
        {"role": "user", "content": "hi"},
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": "Plan."}],
            "encrypted_content": "gAAA",
        },
        {"type": "reasoning", "id": "rs_2", "summary": []},
        {"role": "assistant", "content": "Calling."},
        {"type": "function_call", "call_id": "call_1", "name": "f", "arguments": '{"a":1}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "2"},
    ]


def test_body_options() -> None:
    client = OpenAIResponsesClient("gpt-test", api_key="k")
    request: ChatRequest = {
        **simple_request("gpt-test"),
        "tools": [{"name": "f", "description": "d", "input_schema": {"type": "object"}}],
        "response_format": {"name": "answer", "schema": {"type": "object"}},
        "settings": {"max_tokens": 64},
    }
    assert json.loads(client.encode(request)) == {
        "model": "gpt-test",
        "instructions": "Be brief.",
        "input": [{"role": "user", "content": "hi"}],
        "tools": [
            {"type": "function", "name": "f", "description": "d", "parameters": {"type": "object"}}
        ],
        "max_output_tokens": 64,
        "text": {"format": {"type": "json_schema", "name": "answer", "schema": {"type": "object"}}},
        "stream": True,
    }


def test_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(MissingKeyError, match="OPENAI_API_KEY"):
        OpenAIResponsesClient("gpt-test")
    local = OpenAIResponsesClient("gpt-test", base_url="http://127.0.0.1:1/v1")
    assert "authorization" not in local._headers
    monkeypatch.setenv("OPENAI_API_KEY", "from-env")
    assert OpenAIResponsesClient("gpt-test")._headers["authorization"] == "Bearer from-env"


# -- a representative agent, through the real loop ---------------------------------------------

REASONING = {"type": "reasoning", "id": "rs_1", "summary": []}
CALL = {
    "type": "function_call",
    "id": "fc_1",
    "call_id": "call_1",
    "name": "add",
    "arguments": "",
    "status": "in_progress",
}
ROUND_1 = events(
    {"type": "response.created", "response": {"id": "resp_1", "status": "in_progress"}},
    {"type": "response.output_item.added", "output_index": 0, "item": REASONING},
    {
        "type": "response.reasoning_summary_part.added",
        "item_id": "rs_1",
        "summary_index": 0,
        "part": {"type": "summary_text", "text": ""},
    },
    {
        "type": "response.reasoning_summary_text.delta",
        "item_id": "rs_1",
        "delta": "The user wants a sum.",
    },
    {"type": "response.output_item.done", "output_index": 0, "item": {**REASONING, "summary": []}},
    {"type": "response.output_item.added", "output_index": 1, "item": TEXT_ITEM},
    {"type": "response.output_text.delta", "item_id": "msg_1", "delta": "Let me add those."},
    {"type": "response.output_item.added", "output_index": 2, "item": CALL},
    {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "delta": '{"a": 2,'},
    {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "delta": ' "b": 3}'},
    {
        "type": "response.function_call_arguments.done",
        "item_id": "fc_1",
        "arguments": '{"a": 2, "b": 3}',
    },
    {
        "type": "response.completed",
        "response": {"status": "completed", "usage": {"input_tokens": 40, "output_tokens": 20}},
    },
)
ROUND_2 = events(
    {"type": "response.output_item.added", "output_index": 0, "item": {**TEXT_ITEM, "id": "msg_2"}},
    {"type": "response.output_text.delta", "item_id": "msg_2", "delta": "2 + 3 = 5."},
    {
        "type": "response.completed",
        "response": {"status": "completed", "usage": {"input_tokens": 60, "output_tokens": 5}},
    },
)


async def test_representative_agent_request_is_pinned(wire: WireServer) -> None:
    wire.reply(Reply(body=ROUND_1), Reply(body=ROUND_2))
    agent = representative_agent(
        {"model": "openai-responses:gpt-test", "base_url": f"{wire.url}/v1", "api_key": "k"}
    )
    session = Session(id="s1")
    async with agent:
        events_ = await run_turn(agent, session, "What is 2 + 3?")
    done = events_[-1]
    assert done["type"] == "done" and done["text"] == "2 + 3 = 5."
    assert done["usage"] == {"input_tokens": 100, "output_tokens": 25}
    check_pinned("openai_responses_first_round", wire.requests[0])
    check_pinned("openai_responses_representative", wire.requests[1])
    sent = wire.requests[1].json()["input"]
    assert sent[1] == {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "The user wants a sum."}],
    }
    assert to_responses_input(session.messages[:3]) == sent
