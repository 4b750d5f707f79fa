"""OpenAI Chat Completions adapter (and OpenAI-compatible servers): recorded streams over a
loopback server, split-anywhere parsing, request mapping, a pinned request, and an end-to-end
tool turn through `create_agent`."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tether import Session, create_agent, define_tool
from tether.errors import LLMStreamError, MissingKeyError
from tether.llm import client_from_config
from tether.llm.base import ChatRequest
from tether.llm.openai_chat import OpenAIChatClient, OpenAIChatStream, to_chat_messages

from .conftest import (
    Outcome,
    Reply,
    Seen,
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

API = "openai_chat"

CHAT_FINISH = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "content_filter": "content_filter",
}


def normalized_usage(raw: dict[str, Any] | None) -> dict[str, int]:
    if raw is None:
        return {}
    out = {"input_tokens": raw["prompt_tokens"], "output_tokens": raw["completion_tokens"]}
    cached = (raw.get("prompt_tokens_details") or {}).get("cached_tokens")
    if cached is not None:
        out["cache_read_tokens"] = cached
    reasoning = (raw.get("completion_tokens_details") or {}).get("reasoning_tokens")
    if reasoning is not None:
        out["reasoning_tokens"] = reasoning
    return out


def check_case(case: WireCase, out: Outcome) -> None:
    exp = case.expected
    choice = exp["choices"][0]
    # A refusal is what the user gets to read, so it streams as text.
    text = (choice["text"] or "") + (choice["refusal"] or "")
    assert out.error is None and out.finish is not None
    assert out.text == text
    assert "".join(p["text"] for p in out.parts("text")) == text
    calls = [(p["id"], p["name"], p["input"]) for p in out.parts("tool_call")]
    assert calls == [(c["id"], c["name"], c["input"]) for c in choice["tool_calls"]]
    assert out.partials() == {c["id"]: c["arguments_raw"] for c in choice["tool_calls"]}
    assert out.finish["stop_reason"] == choice["stop_reason"]
    # A refusal streams under "stop"; the normalized reason says what happened.
    assert out.finish["finish_reason"] == (
        "refusal" if choice["refusal"] else CHAT_FINISH[choice["stop_reason"]]
    )
    assert out.finish["usage"] == normalized_usage(exp["usage"])


async def test_recorded_stream_over_http(case: WireCase, wire: WireServer) -> None:
    wire.reply(Reply(body=split_at(case.sse, range(0, len(case.sse), 131))))
    client = OpenAIChatClient("gpt-test", base_url=f"{wire.url}/v1", api_key="k")
    try:
        out = await run_chat(client, simple_request("gpt-test"))
    finally:
        await client.aclose()
    check_case(case, out)
    seen = wire.requests[0]
    assert (seen.method, seen.path) == ("POST", "/v1/chat/completions")
    assert seen.headers["authorization"] == "Bearer k"


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_any_split_gives_the_same_result(case: WireCase, data: st.DataObject) -> None:
    cuts = data.draw(st.lists(st.integers(0, len(case.sse)), max_size=60))
    whole = parse_pieces(API, OpenAIChatStream(), [case.sse])
    split = parse_pieces(API, OpenAIChatStream(), split_at(case.sse, cuts))
    same_outcome(whole, split)
    check_case(case, split)


def test_byte_by_byte(case: WireCase) -> None:
    check_case(case, parse_pieces(API, OpenAIChatStream(), [bytes([b]) for b in case.sse]))


# -- streams from compatible servers -----------------------------------------------------------


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "c1",
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}],
    }


def usage_chunk(prompt: int, completion: int) -> dict[str, Any]:
    return {
        "id": "c1",
        "choices": [],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion},
    }


def chat_stream(*chunks: dict[str, Any], done: bool = True) -> bytes:
    events: list[tuple[str | None, Any]] = [(None, c) for c in chunks]
    if done:
        events.append((None, "[DONE]"))
    return sse(*events)


def test_reasoning_content_and_calls_without_ids() -> None:
    body = chat_stream(
        chunk({"role": "assistant", "reasoning_content": "Think"}),
        chunk({"reasoning_content": "ing."}),
        chunk({"content": "Sure."}),
        chunk({"tool_calls": [{"index": 0, "function": {"name": "f", "arguments": '{"a":'}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": "1}"}}]}),
        chunk({"tool_calls": [{"function": {"name": "g", "arguments": {"b": 2}}}]}, "tool_calls"),
    )
    out = parse_pieces("openai", OpenAIChatStream(), [body])
    assert out.thinking == "Thinking."
    assert out.text == "Sure."
    assert out.parts("thinking") == [{"type": "thinking", "text": "Thinking."}]
    calls = out.parts("tool_call")
    assert [(c["name"], c["input"]) for c in calls] == [("f", {"a": 1}), ("g", {"b": 2})]
    assert all(c["id"].startswith("call_") for c in calls) and calls[0]["id"] != calls[1]["id"]
    assert out.partials()[calls[0]["id"]] == '{"a":1}'
    assert out.finish is not None and out.finish["usage"] == {}


def fragment(
    index: int | None, args: str, call_id: str | None = None, name: str | None = None
) -> Any:
    out: dict[str, Any] = {"function": {"arguments": args}}
    if index is not None:
        out["index"] = index
    if call_id is not None:
        out["id"] = call_id
        out["type"] = "function"
    if name is not None:
        out["function"]["name"] = name
    return out


def test_parallel_calls_interleaved_fragment_by_fragment() -> None:
    body = chat_stream(
        chunk(
            {"role": "assistant", "content": None, "tool_calls": [fragment(0, "", "call_a", "f")]}
        ),
        chunk({"tool_calls": [fragment(1, "", "call_b", "g")]}),
        chunk({"tool_calls": [fragment(0, '{"city": '), fragment(1, '{"n": ')]}),
        chunk({"tool_calls": [fragment(1, "2}")]}),
        chunk({"tool_calls": [fragment(0, '"Oslo"}')]}),
        chunk(finish="tool_calls"),
    )
    out = parse_pieces("openai", OpenAIChatStream(), [body])
    assert out.parts("tool_call") == [
        {"type": "tool_call", "id": "call_a", "name": "f", "input": {"city": "Oslo"}},
        {"type": "tool_call", "id": "call_b", "name": "g", "input": {"n": 2}},
    ]
    assert out.partials() == {"call_a": '{"city": "Oslo"}', "call_b": '{"n": 2}'}
    deltas = [(c["id"], c["name"]) for c in out.chunks if c["type"] == "tool_input_delta"]
    assert deltas == [("call_a", "f"), ("call_b", "g"), ("call_b", "g"), ("call_a", "f")]


def test_calls_that_reuse_index_0_stay_apart() -> None:
    # Ollama (and some proxies) give every call of a response index 0; a new id starts a call.
    body = chat_stream(
        chunk({"tool_calls": [fragment(0, '{"path": "a.py"', "call_a", "write")]}),
        chunk({"tool_calls": [fragment(0, "}")]}),
        chunk({"tool_calls": [fragment(0, '{"path": ', "call_b", "write")]}),
        chunk({"tool_calls": [fragment(0, '"b.py"}')]}),
        chunk(finish="tool_calls"),
    )
    out = parse_pieces("openai", OpenAIChatStream(), [body])
    assert out.parts("tool_call") == [
        {"type": "tool_call", "id": "call_a", "name": "write", "input": {"path": "a.py"}},
        {"type": "tool_call", "id": "call_b", "name": "write", "input": {"path": "b.py"}},
    ]
    assert out.partials() == {"call_a": '{"path": "a.py"}', "call_b": '{"path": "b.py"}'}


def test_unparseable_arguments_stay_raw() -> None:
    body = chat_stream(
        chunk(
            {
                "tool_calls": [
                    {"index": 0, "id": "c9", "function": {"name": "f", "arguments": "{oops"}}
                ]
            }
        ),
        chunk(finish="tool_calls"),
    )
    out = parse_pieces("openai", OpenAIChatStream(), [body])
    assert out.parts("tool_call") == [
        {"type": "tool_call", "id": "c9", "name": "f", "input": "{oops"}
    ]


def test_finish_reason_without_done_sentinel_is_accepted() -> None:
    out = parse_pieces(
        "openai", OpenAIChatStream(), [chat_stream(chunk({"content": "ok"}, "stop"), done=False)]
    )
    assert out.error is None and out.finish is not None and out.finish["stop_reason"] == "stop"


def test_stream_that_stops_before_finishing_is_retryable() -> None:
    out = parse_pieces(
        "openai", OpenAIChatStream(), [chat_stream(chunk({"content": "par"}), done=False)]
    )
    assert isinstance(out.error, LLMStreamError) and out.error.retryable
    assert out.text == "par"


def test_error_chunk_mid_stream() -> None:
    body = chat_stream(
        chunk({"content": "Hel"}),
        {"error": {"message": "The server had an error", "type": "server_error", "code": None}},
    )
    out = parse_pieces("openai", OpenAIChatStream(), [body])
    assert isinstance(out.error, LLMStreamError)
    assert out.error.retryable and "The server had an error" in str(out.error)
    bad = chat_stream({"error": {"message": "bad schema", "type": "invalid_request_error"}})
    out = parse_pieces("openai", OpenAIChatStream(), [bad])
    assert isinstance(out.error, LLMStreamError) and not out.error.retryable
    # vLLM's shape: the error object itself in place of a chunk.
    vllm = chat_stream(
        chunk({"content": "Hel"}),
        {"object": "error", "message": "Engine died", "type": "InternalServerError", "code": 500},
    )
    out = parse_pieces("openai", OpenAIChatStream(), [vllm])
    assert isinstance(out.error, LLMStreamError) and out.error.retryable
    assert "Engine died" in str(out.error)


# -- the request ------------------------------------------------------------------------------


def test_messages_mapping() -> None:
    messages: list[Any] = [
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "text": "hmm", "signature": "s"},
                {"type": "text", "text": "calling"},
                {"type": "tool_call", "id": "a", "name": "f", "input": {"x": "é"}},
                {"type": "tool_call", "id": "b", "name": "f", "input": "{raw"},
            ],
        },
        {
            "role": "tool",
            "content": [
                {"type": "tool_result", "id": "a", "name": "f", "output": "1", "is_error": False},
                {"type": "tool_result", "id": "b", "name": "f", "output": "bad", "is_error": True},
            ],
        },
        {"role": "assistant", "content": [{"type": "thinking", "text": "only thoughts"}]},
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
    ]
    assert to_chat_messages("sys", messages) == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": "calling",
            "tool_calls": [
                {
                    "id": "a",
                    "type": "function",
                    "function": {"name": "f", "arguments": '{"x":"é"}'},
                },
                {"id": "b", "type": "function", "function": {"name": "f", "arguments": "{raw"}},
            ],
        },
        {"role": "tool", "tool_call_id": "a", "content": "1"},
        {"role": "tool", "tool_call_id": "b", "content": "bad"},
        {"role": "assistant", "content": ""},
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
    ]
    assert to_chat_messages("", messages[:1]) == [{"role": "user", "content": "hi"}]


def test_body_options() -> None:
    client = OpenAIChatClient("gpt-test", api_key="k")
    request: ChatRequest = {
        **simple_request("gpt-test"),
        "system": [
            {"type": "text", "text": "One.", "cache_control": {"type": "ephemeral"}},
            {"type": "text", "text": "Two."},
        ],
        "tools": [{"name": "f", "description": "d", "input_schema": {"type": "object"}}],
        "response_format": {"name": "answer", "schema": {"type": "object"}, "strict": True},
        "settings": {"max_tokens": 64, "temperature": 0.0},
    }
    assert json.loads(client.encode(request)) == {
        "model": "gpt-test",
        "messages": [
            {"role": "system", "content": "One.\n\nTwo."},
            {"role": "user", "content": "hi"},
        ],
        "tools": [
            {
                "type": "function",
                "function": {"name": "f", "description": "d", "parameters": {"type": "object"}},
            }
        ],
        "temperature": 0.0,
        "max_completion_tokens": 64,
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "answer", "schema": {"type": "object"}, "strict": True},
        },
        "stream": True,
        "stream_options": {"include_usage": True},
    }


def test_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(MissingKeyError, match="OPENAI_API_KEY"):
        OpenAIChatClient("gpt-test")
    # A server of your own (Ollama, vLLM…) usually needs no key: none is sent.
    local = OpenAIChatClient("llama", base_url="http://127.0.0.1:1/v1")
    assert "authorization" not in local._headers
    monkeypatch.setenv("OPENAI_API_KEY", "from-env")
    assert OpenAIChatClient("gpt-test")._headers["authorization"] == "Bearer from-env"
    client = client_from_config(
        {"model": "openai:gpt-test", "api_key": "k", "max_retries": 5, "stream_retries": 3}
    )
    assert isinstance(client, OpenAIChatClient)
    assert (client.model, client.max_retries, client.stream_retries) == ("gpt-test", 5, 3)


# -- through the agent loop --------------------------------------------------------------------


def tool_round(call_id: str, args: str) -> bytes:
    return chat_stream(
        chunk({"role": "assistant", "content": None, "reasoning_content": "Need the tool."}),
        chunk({"content": "Let me add those."}),
        chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": call_id,
                        "type": "function",
                        "function": {"name": "add", "arguments": ""},
                    }
                ]
            }
        ),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": args[:5]}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": args[5:]}}]}),
        chunk(finish="tool_calls"),
        usage_chunk(50, 12),
    )


def text_round(text: str) -> bytes:
    return chat_stream(
        chunk({"role": "assistant", "content": ""}),
        chunk({"content": text[:4]}),
        chunk({"content": text[4:]}),
        chunk(finish="stop"),
        usage_chunk(70, 6),
    )


async def test_create_agent_runs_a_two_round_tool_turn(wire: WireServer) -> None:
    def answer(seen: Seen) -> Reply:
        messages = seen.json()["messages"]
        if messages[-1]["role"] == "tool":
            return Reply(body=text_round(f"The sum is {messages[-1]['content']}."))
        return Reply(body=tool_round("call_1", '{"a": 2, "b": 3}'))

    wire.handler = answer
    calls: list[Any] = []

    def add(args: dict[str, int]) -> str:
        calls.append(args)
        return str(args["a"] + args["b"])

    agent = create_agent(
        llm={"model": "openai:gpt-x", "base_url": f"{wire.url}/v1", "api_key": "k"},
        prompt=["You add numbers."],
        tools=[
            define_tool(
                name="add",
                description="Add.",
                input_schema={
                    "type": "object",
                    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                },
                execute=add,
            )
        ],
    )
    session = agent.create_session()
    async with agent:
        events = await run_turn(agent, session, "2+3?")
    assert calls == [{"a": 2, "b": 3}]
    done = events[-1]
    assert done["type"] == "done"
    assert done["text"] == "The sum is 5."
    assert done["stop_reason"] == "stop"
    assert done["usage"] == {"input_tokens": 120, "output_tokens": 18}
    deltas = [e for e in events if e["type"] == "tool_input_delta"]
    assert deltas[-1]["snapshot"] == '{"a": 2, "b": 3}'
    assert len(wire.requests) == 2
    second = wire.requests[1].json()["messages"]
    assert second[-2:] == [
        {
            "role": "assistant",
            "content": "Let me add those.",
            # The reasoning of a tool-call message goes back (DeepSeek's thinking mode needs it).
            "reasoning_content": "Need the tool.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "add", "arguments": '{"a":2,"b":3}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "5"},
    ]
    assert [m["role"] for m in session.messages] == ["user", "assistant", "tool", "assistant"]
    assert session.messages[-1]["content"] == [{"type": "text", "text": "The sum is 5."}]


async def test_representative_agent_request_is_pinned(wire: WireServer, sleeps: Sleeps) -> None:
    wire.reply(
        Reply(body=tool_round("call_1", '{"a": 2, "b": 3}')), Reply(body=text_round("2 + 3 = 5."))
    )
    agent = representative_agent(
        {"model": "openai:gpt-test", "base_url": f"{wire.url}/v1", "api_key": "k"}
    )
    session = Session(id="s1")
    async with agent:
        events = await run_turn(agent, session, "What is 2 + 3?")
    assert events[-1]["type"] == "done" and events[-1]["text"] == "2 + 3 = 5."
    check_pinned("openai_chat_first_round", wire.requests[0])
    check_pinned("openai_chat_representative", wire.requests[1])
    system = "You are a careful arithmetic assistant.\n\nAnswer in one short sentence.\n\nToday is 2025-01-01."
    assert to_chat_messages(system, session.messages[:3]) == wire.requests[1].json()["messages"]
