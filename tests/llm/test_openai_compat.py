"""The Chat Completions adapter against the recorded streams of OpenAI-compatible servers (vLLM,
Ollama, llama.cpp, DeepSeek, Groq, Mistral, xAI, Alibaba, Azure, OpenRouter, a gateway): each
served over a loopback server, and parsed split at every byte and at random points."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tether.errors import LLMStreamError
from tether.llm.openai_chat import OpenAIChatClient, OpenAIChatStream, to_chat_messages

from .conftest import (
    Outcome,
    Reply,
    WireCase,
    WireServer,
    parse_pieces,
    run_chat,
    same_outcome,
    simple_request,
    split_at,
)

API = "openai_compat"

FINISH = {"stop": "stop", "length": "length", "tool_calls": "tool_calls"}


def normalized_usage(raw: dict[str, Any] | None) -> dict[str, int]:
    if not raw:
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
    assert out.text == exp["text"]
    # reasoning_content, reasoning, reasoning_details and Mistral's thinking parts all stream
    # as thinking.
    assert out.thinking == (exp["reasoning"] or "")
    if exp.get("errors"):
        # OpenRouter: an error object inside a chunk that also has choices ends the turn with
        # the provider's own message.
        assert isinstance(out.error, LLMStreamError) and out.finish is None
        for err in exp["errors"]:
            assert err["message"] in str(out.error)
        # A 400 will not go better the second time; a provider that went away might.
        assert out.error.retryable is exp.get("retryable", False)
        return
    assert out.error is None and out.finish is not None
    calls = out.parts("tool_call")
    assert [(c["name"], c["input"]) for c in calls] == [
        (c["name"], c["input"]) for c in exp["tool_calls"]
    ]
    for got, want in zip(calls, exp["tool_calls"], strict=True):
        if want["id"]:
            assert got["id"] == want["id"]
        assert out.partials()[got["id"]] == want["arguments_raw"]
    assert out.finish["stop_reason"] == exp["stop_reason"]
    assert out.finish["finish_reason"] == FINISH[exp["stop_reason"]]
    assert out.finish["usage"] == normalized_usage(exp["usage"])
    # Reasoning stays in the transcript only beside tool calls, the one place a server
    # (DeepSeek's thinking mode) needs it back.
    thinking = out.parts("thinking")
    if exp["reasoning"] and exp["tool_calls"]:
        assert thinking == [{"type": "thinking", "text": exp["reasoning"]}]
        message = {"role": "assistant", "content": out.content}
        (sent,) = to_chat_messages("", [message])
        assert sent["reasoning_content"] == exp["reasoning"]
    else:
        assert thinking == []


async def test_recorded_stream_over_http(case: WireCase, wire: WireServer) -> None:
    wire.reply(Reply(body=split_at(case.sse, range(0, len(case.sse), 89))))
    client = OpenAIChatClient("m", base_url=f"{wire.url}/v1")
    try:
        out = await run_chat(client, simple_request("m"))
    finally:
        await client.aclose()
    check_case(case, out)
    assert (wire.requests[0].method, wire.requests[0].path) == ("POST", "/v1/chat/completions")


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_any_split_gives_the_same_result(case: WireCase, data: st.DataObject) -> None:
    cuts = data.draw(st.lists(st.integers(0, len(case.sse)), max_size=60))
    whole = parse_pieces("openai", OpenAIChatStream(), [case.sse])
    split = parse_pieces("openai", OpenAIChatStream(), split_at(case.sse, cuts))
    same_outcome(whole, split)
    check_case(case, split)


def test_byte_by_byte(case: WireCase) -> None:
    check_case(case, parse_pieces("openai", OpenAIChatStream(), [bytes([b]) for b in case.sse]))
