"""Anthropic Messages adapter: recorded streams over a loopback server, split-anywhere parsing,
the request mapping, and the pinned request of a representative agent."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tether import Session, create_agent, prompt_layer
from tether.errors import LLMStreamError, MissingKeyError
from tether.llm.anthropic import AnthropicClient, AnthropicStream, to_anthropic_messages
from tether.llm.base import ChatRequest
from tether.signals import AbortController

from .conftest import (
    Outcome,
    Reply,
    Sleeps,
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

API = "anthropic"

ANTHROPIC_FINISH = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "refusal": "refusal",
}


def normalized_usage(raw: dict[str, Any] | None) -> dict[str, int]:
    """The normalized usage a recorded Anthropic usage object should become: input counts cache
    reads and writes too; cache fields appear when the provider reported them."""
    if raw is None:
        return {}
    read = raw.get("cache_read_input_tokens")
    write = raw.get("cache_creation_input_tokens")
    out = {
        "input_tokens": raw["input_tokens"] + (read or 0) + (write or 0),
        "output_tokens": raw["output_tokens"],
    }
    if read is not None:
        out["cache_read_tokens"] = read
    if write is not None:
        out["cache_creation_tokens"] = write
    return out


def check_case(case: WireCase, out: Outcome) -> None:
    exp = case.expected
    assert out.text == exp["text"]
    if exp.get("errors"):
        assert isinstance(out.error, LLMStreamError)
        err = exp["errors"][0]
        assert err["message"] in str(out.error) and err["type"] in str(out.error)
        assert out.error.retryable is (err["type"] == "overloaded_error")
        assert out.finish is None
        return
    assert out.error is None and out.finish is not None
    assert "".join(p["text"] for p in out.parts("text")) == exp["text"]
    thinking = [(p["text"], p.get("signature")) for p in out.parts("thinking")]
    assert thinking == [(t["thinking"], t["signature"]) for t in exp["thinking"]]
    assert out.thinking == "".join(t["thinking"] for t in exp["thinking"])
    calls = [(p["id"], p["name"], p["input"]) for p in out.parts("tool_call")]
    assert calls == [
        (c["id"], c["name"], c["input"] if c["complete"] else c["partial_json"])
        for c in exp["tool_calls"]
    ]
    partials = out.partials()
    assert set(partials) == {c["id"] for c in exp["tool_calls"]}
    for c in exp["tool_calls"]:
        if c["complete"]:
            assert json.loads(partials[c["id"]]) == c["input"]
        else:
            assert partials[c["id"]] == c["partial_json"]
    # Parts come in block order: thinking, then text, then the calls.
    kinds = [p["type"] for p in out.content]
    assert kinds == sorted(kinds, key=["thinking", "text", "tool_call"].index)
    assert out.finish["stop_reason"] == exp["stop_reason"]
    assert out.finish["finish_reason"] == ANTHROPIC_FINISH[exp["stop_reason"]]
    assert out.finish["usage"] == normalized_usage(exp["usage"])


async def test_recorded_stream_over_http(case: WireCase, wire: WireServer, sleeps: Sleeps) -> None:
    wire.reply(Reply(body=split_at(case.sse, range(0, len(case.sse), 97))))
    client = AnthropicClient("claude-test", base_url=wire.url, api_key="k", sleep=sleeps)
    try:
        out = await run_chat(client, simple_request("claude-test"))
    finally:
        await client.aclose()
    check_case(case, out)
    seen = wire.requests[0]
    assert (seen.method, seen.path) == ("POST", "/v1/messages")
    assert seen.headers["x-api-key"] == "k"
    assert seen.headers["anthropic-version"] == "2023-06-01"
    assert sleeps.waits == []


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_any_split_gives_the_same_result(case: WireCase, data: st.DataObject) -> None:
    cuts = data.draw(st.lists(st.integers(0, len(case.sse)), max_size=60))
    whole = parse_pieces(API, AnthropicStream(), [case.sse])
    split = parse_pieces(API, AnthropicStream(), split_at(case.sse, cuts))
    same_outcome(whole, split)
    check_case(case, split)


def test_byte_by_byte(case: WireCase) -> None:
    out = parse_pieces(API, AnthropicStream(), [bytes([b]) for b in case.sse])
    check_case(case, out)


# -- the request ------------------------------------------------------------------------------


def test_messages_mapping() -> None:
    messages: list[Any] = [
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "text": "plan", "signature": "sig1"},
                {"type": "thinking", "text": "", "redacted": "opaque"},
                {"type": "thinking", "text": "from another provider"},
                {"type": "text", "text": ""},
                {"type": "text", "text": "calling"},
                {"type": "tool_call", "id": "t1", "name": "f", "input": {"x": 1}},
                {"type": "tool_call", "id": "t2", "name": "f", "input": "{not json"},
            ],
        },
        {
            "role": "tool",
            "content": [
                {"type": "tool_result", "id": "t1", "name": "f", "output": "ok", "is_error": False},
                {"type": "tool_result", "id": "t2", "name": "f", "output": "", "is_error": True},
            ],
        },
        {"role": "user", "content": [{"type": "text", "text": "and now?"}]},
    ]
    assert to_anthropic_messages(messages) == [
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "plan", "signature": "sig1"},
                {"type": "redacted_thinking", "data": "opaque"},
                {"type": "text", "text": "calling"},
                {"type": "tool_use", "id": "t1", "name": "f", "input": {"x": 1}},
                {"type": "tool_use", "id": "t2", "name": "f", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "ok"},
                {"type": "tool_result", "tool_use_id": "t2", "is_error": True},
                {"type": "text", "text": "and now?"},
            ],
        },
    ]


def test_body_options() -> None:
    client = AnthropicClient("claude-test", api_key="k", max_tokens=1000)
    request: ChatRequest = {
        **simple_request("claude-test"),
        "response_format": {"name": "answer", "schema": {"type": "object"}},
        "settings": {"temperature": 0.2},
        "signal": AbortController().signal,
    }
    body = json.loads(client.encode(request))
    assert body == {
        "model": "claude-test",
        "max_tokens": 1000,
        "system": [{"type": "text", "text": "Be brief."}],
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
        "temperature": 0.2,
        "output_config": {"format": {"type": "json_schema", "schema": {"type": "object"}}},
        "stream": True,
    }
    request["settings"] = {"max_tokens": 55}
    assert json.loads(client.encode(request))["max_tokens"] == 55
    default = AnthropicClient("claude-test", api_key="k")
    assert json.loads(default.encode(simple_request()))["max_tokens"] == 4096


OK_TEXT = sse(
    ("message_start", {"type": "message_start", "message": {"usage": {"input_tokens": 1}}}),
    ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"}}),
    ("message_stop", {"type": "message_stop"}),
)
CACHED = {"type": "ephemeral"}


@pytest.mark.parametrize(
    ("layers", "system"),
    [
        # The last cached layer is empty: the breakpoint goes on the last non-empty cached one.
        (
            [("a", "You help.", True), ("b", "", True), ("c", "Be brief.", False)],
            [
                {"type": "text", "text": "You help.", "cache_control": CACHED},
                {"type": "text", "text": "Be brief."},
            ],
        ),
        # The only cached layer is empty: no breakpoint, no empty block.
        (
            [("a", "", True), ("c", "Be brief.", False)],
            [{"type": "text", "text": "Be brief."}],
        ),
        # Nothing but an empty layer: no system at all.
        ([("a", "", False)], None),
    ],
)
async def test_an_empty_static_layer_is_no_system_block(
    layers: list[tuple[str, str, bool]], system: Any, wire: WireServer, sleeps: Sleeps
) -> None:
    wire.reply(Reply(body=OK_TEXT))
    client = AnthropicClient("claude-test", base_url=wire.url, api_key="k", sleep=sleeps)
    agent = create_agent(
        llm=client, prompt=[prompt_layer(name, text, cache=cache) for name, text, cache in layers]
    )
    async with client, agent:
        await run_turn(agent, agent.create_session(), "hi")
    assert wire.requests[0].json().get("system") == system


def test_a_hand_built_request_with_an_empty_block_keeps_its_cached_prefix() -> None:
    client = AnthropicClient("claude-test", api_key="k")
    request: ChatRequest = {
        **simple_request(),
        "system": [
            {"type": "text", "text": "One."},
            {"type": "text", "text": "", "cache_control": CACHED},
            {"type": "text", "text": "Two."},
        ],
    }
    assert json.loads(client.encode(request))["system"] == [
        {"type": "text", "text": "One.", "cache_control": CACHED},
        {"type": "text", "text": "Two."},
    ]


def test_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(MissingKeyError, match="ANTHROPIC_API_KEY"):
        AnthropicClient("claude-test")
    # Behind a proxy of your own (the seed's proxyUrl), the proxy holds the key.
    proxied = AnthropicClient("claude-test", base_url="http://127.0.0.1:1/anthropic")
    assert "x-api-key" not in proxied._headers
    monkeypatch.setenv("ANTHROPIC_API_KEY", "from-env")
    assert AnthropicClient("claude-test")._headers["x-api-key"] == "from-env"
    assert AnthropicClient("claude-test", api_key="given")._headers["x-api-key"] == "given"


def test_extra_body_and_headers_reach_the_wire() -> None:
    client = AnthropicClient(
        "claude-test",
        api_key="k",
        headers={"anthropic-beta": "x-2025"},
        extra_body={"thinking": {"type": "enabled", "budget_tokens": 2048}},
    )
    body = json.loads(client.encode(simple_request()))
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert client._headers["anthropic-beta"] == "x-2025"


# -- a representative agent, through the real loop ---------------------------------------------

ROUND_1 = sse(
    (
        "message_start",
        {
            "type": "message_start",
            "message": {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "content": [],
                "model": "claude-test",
                "stop_reason": None,
                "usage": {
                    "input_tokens": 20,
                    "cache_read_input_tokens": 100,
                    "cache_creation_input_tokens": 0,
                    "output_tokens": 1,
                },
            },
        },
    ),
    (
        "content_block_start",
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "thinking", "thinking": "", "signature": ""},
        },
    ),
    (
        "content_block_delta",
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "thinking_delta", "thinking": "The user wants 2+3. "},
        },
    ),
    (
        "content_block_delta",
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "thinking_delta", "thinking": "I will call add."},
        },
    ),
    (
        "content_block_delta",
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "signature_delta", "signature": "c2lnLW9uZQ=="},
        },
    ),
    ("content_block_stop", {"type": "content_block_stop", "index": 0}),
    (
        "content_block_start",
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {"type": "redacted_thinking", "data": "b3BhcXVl"},
        },
    ),
    ("content_block_stop", {"type": "content_block_stop", "index": 1}),
    (
        "content_block_start",
        {"type": "content_block_start", "index": 2, "content_block": {"type": "text", "text": ""}},
    ),
    ("ping", {"type": "ping"}),
    (
        "content_block_delta",
        {
            "type": "content_block_delta",
            "index": 2,
            "delta": {"type": "text_delta", "text": "Let me add those."},
        },
    ),
    ("content_block_stop", {"type": "content_block_stop", "index": 2}),
    (
        "content_block_start",
        {
            "type": "content_block_start",
            "index": 3,
            "content_block": {"type": "tool_use", "id": "toolu_1", "name": "add", "input": {}},
        },
    ),
    (
        "content_block_delta",
        {
            "type": "content_block_delta",
            "index": 3,
            "delta": {"type": "input_json_delta", "partial_json": '{"a": 2,'},
        },
    ),
    (
        "content_block_delta",
        {
            "type": "content_block_delta",
            "index": 3,
            "delta": {"type": "input_json_delta", "partial_json": ' "b": 3}'},
        },
    ),
    ("content_block_stop", {"type": "content_block_stop", "index": 3}),
    (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use", "stop_sequence": None},
            "usage": {"output_tokens": 42},
        },
    ),
    ("message_stop", {"type": "message_stop"}),
)


def text_reply(text: str, input_tokens: int = 30) -> bytes:
    return sse(
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "msg_2",
                    "type": "message",
                    "role": "assistant",
                    "content": [],
                    "usage": {"input_tokens": input_tokens, "output_tokens": 1},
                },
            },
        ),
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": text},
            },
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn"},
                "usage": {"output_tokens": 9},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    )


async def test_representative_agent_request_is_pinned(wire: WireServer) -> None:
    wire.reply(Reply(body=ROUND_1), Reply(body=text_reply("2 + 3 = 5.")))
    agent = representative_agent(
        {"model": "anthropic:claude-test", "base_url": wire.url, "api_key": "k"}
    )
    session = Session(id="s1")
    async with agent:
        events = await run_turn(agent, session, "What is 2 + 3?")
    done = events[-1]
    assert done["type"] == "done" and done["text"] == "2 + 3 = 5."
    assert done["usage"] == {
        "input_tokens": 150,
        "output_tokens": 51,
        "cache_read_tokens": 100,
        "cache_creation_tokens": 0,
    }
    assert len(wire.requests) == 2
    check_pinned("anthropic_first_round", wire.requests[0])
    check_pinned("anthropic_representative", wire.requests[1])
    # The thinking block, its signature and the redacted block went back unchanged.
    sent = wire.requests[1].json()["messages"][1]["content"]
    assert sent[0] == {
        "type": "thinking",
        "thinking": "The user wants 2+3. I will call add.",
        "signature": "c2lnLW9uZQ==",
    }
    assert sent[1] == {"type": "redacted_thinking", "data": "b3BhcXVl"}
    # What the reduced session holds is what the loop sent on its next round.
    assert to_anthropic_messages(session.messages[:3]) == wire.requests[1].json()["messages"]


def test_a_request_without_tools_over_a_tool_history_declares_them_and_forbids_calls() -> None:
    # The API refuses tool_use/tool_result blocks in a request that defines no tools; the
    # structured-output follow-up is exactly such a request.
    client = AnthropicClient("claude-test", api_key="k")
    request: ChatRequest = {
        "model": "claude-test",
        "system": [],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "weather?"}]},
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_call",
                        "id": "t1",
                        "name": "get_weather",
                        "input": {"city": "Oslo"},
                    },
                    {
                        "type": "tool_call",
                        "id": "t2",
                        "name": "get_weather",
                        "input": {"city": "Rome"},
                    },
                ],
            },
            {
                "role": "tool",
                "content": [
                    {
                        "type": "tool_result",
                        "id": "t1",
                        "name": "get_weather",
                        "output": "4C",
                        "is_error": False,
                    },
                    {
                        "type": "tool_result",
                        "id": "t2",
                        "name": "get_weather",
                        "output": "19C",
                        "is_error": False,
                    },
                ],
            },
            {"role": "user", "content": [{"type": "text", "text": "Answer as JSON."}]},
        ],
        "response_format": {"name": "answer", "schema": {"type": "object"}},
    }
    body = json.loads(client.encode(request))
    assert body["tools"] == [
        {"name": "get_weather", "description": "", "input_schema": {"type": "object"}}
    ]
    assert body["tool_choice"] == {"type": "none"}
    # with no tool history nothing is added
    plain = json.loads(client.encode({**request, "messages": request["messages"][:1]}))
    assert "tools" not in plain and "tool_choice" not in plain
