"""Gemini adapter: recorded streams over a loopback server, split-anywhere parsing, thought
signatures and generated call ids, request mapping and the pinned request of a representative
agent."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tether import Session
from tether.errors import LLMStreamError, MissingKeyError
from tether.llm.base import ChatRequest
from tether.llm.gemini import GENERATED_ID_PREFIX, GeminiClient, GeminiStream, to_gemini_contents

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

API = "gemini"


def normalized_usage(raw: dict[str, Any] | None) -> dict[str, int]:
    """Output counts thought tokens too (they are billed as output, as on the other APIs)."""
    if raw is None:
        return {}
    thoughts = raw.get("thoughtsTokenCount")
    out = {
        "input_tokens": raw["promptTokenCount"],
        "output_tokens": raw.get("candidatesTokenCount", 0) + (thoughts or 0),
    }
    if "cachedContentTokenCount" in raw:
        out["cache_read_tokens"] = raw["cachedContentTokenCount"]
    if thoughts is not None:
        out["reasoning_tokens"] = thoughts
    return out


def check_case(case: WireCase, out: Outcome) -> None:
    exp = case.expected
    assert out.text == exp["text"]
    assert not out.partials(), "Gemini sends whole calls: no tool_input_delta"
    trailing = exp.get("trailing_non_sse_json")
    if trailing is not None:
        assert isinstance(out.error, LLMStreamError) and out.finish is None
        assert trailing["error"]["message"] in str(out.error)
        assert out.error.retryable  # CANCELLED on the server side: worth another attempt
        return
    if exp.get("errors"):
        # An error object framed as an event: the provider's message, retryable as it says.
        assert isinstance(out.error, LLMStreamError) and out.finish is None
        for err in exp["errors"]:
            assert err["message"] in str(out.error)
        assert out.error.retryable is exp["retryable"]
        return
    assert out.error is None and out.finish is not None
    assert "".join(p["text"] for p in out.parts("text")) == exp["text"]
    assert out.thinking == exp["thought_summary"]
    assert "".join(p["text"] for p in out.parts("thinking")) == exp["thought_summary"]
    content = out.content
    calls = [(i, p) for i, p in enumerate(content) if p["type"] == "tool_call"]
    assert [(p["name"], p["input"]) for _, p in calls] == [
        (c["name"], c["input"]) for c in exp["tool_calls"]
    ]
    for n, ((i, part), want) in enumerate(zip(calls, exp["tool_calls"], strict=True)):
        if want["id"] is not None:
            assert part["id"] == want["id"]
        elif exp["response_ids"]:
            assert part["id"] == f"{GENERATED_ID_PREFIX}{exp['response_ids'][0]}_{n}"
        else:
            assert part["id"].startswith(GENERATED_ID_PREFIX)
        # A thoughtSignature rides in a signature-only thinking part right before its call.
        before: Any = content[i - 1] if i else {"type": None}
        signed = before["type"] == "thinking" and not before["text"]
        assert signed is want["has_thought_signature"]
        if signed:
            assert before["signature"]
    assert len({p["id"] for _, p in calls}) == len(calls)
    assert out.finish["stop_reason"] == (exp["stop_reason"] or exp["prompt_block_reason"])
    # STOP with function calls is tool_calls; a blocked prompt is content_filter.
    assert out.finish["finish_reason"] == exp.get(
        "finish_reason",
        "content_filter"
        if exp["prompt_block_reason"]
        else "tool_calls"
        if exp["tool_calls"]
        else "stop",
    )
    assert out.finish["usage"] == normalized_usage(exp["usage"])


def generated_ids_renamed(out: Outcome) -> Outcome:
    """Runs without a responseId generate random ids; name them by order to compare runs."""
    if out.finish is None:
        return out
    names: dict[str, str] = {}
    content = []
    for part in out.finish["content"]:
        if part["type"] == "tool_call" and part["id"].startswith(GENERATED_ID_PREFIX):
            part = {**part, "id": names.setdefault(part["id"], f"generated-{len(names)}")}
        content.append(part)
    return Outcome(out.chunks, {**out.finish, "content": content}, out.error)


async def test_recorded_stream_over_http(case: WireCase, wire: WireServer) -> None:
    wire.reply(Reply(body=split_at(case.sse, range(0, len(case.sse), 89))))
    client = GeminiClient("gemini-test", base_url=f"{wire.url}/v1beta", api_key="k")
    try:
        out = await run_chat(client, simple_request("gemini-test"))
    finally:
        await client.aclose()
    check_case(case, out)
    seen = wire.requests[0]
    assert seen.path == "/v1beta/models/gemini-test:streamGenerateContent?alt=sse"
    assert seen.headers["x-goog-api-key"] == "k"


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_any_split_gives_the_same_result(case: WireCase, data: st.DataObject) -> None:
    cuts = data.draw(st.lists(st.integers(0, len(case.sse)), max_size=60))
    whole = parse_pieces(API, GeminiStream(), [case.sse])
    split = parse_pieces(API, GeminiStream(), split_at(case.sse, cuts))
    same_outcome(generated_ids_renamed(whole), generated_ids_renamed(split))
    check_case(case, split)


def test_byte_by_byte(case: WireCase) -> None:
    check_case(case, parse_pieces(API, GeminiStream(), [bytes([b]) for b in case.sse]))


# -- synthetic streams ------------------------------------------------------------------------


def chunk(*parts: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": list(parts)}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    return {"candidates": [candidate], **extra}


def stream(*chunks: dict[str, Any]) -> bytes:
    return sse(*((None, c) for c in chunks))


def test_data_framed_error_mid_stream() -> None:
    body = stream(
        chunk({"text": "Hel"}),
        {"error": {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}},
    )
    out = parse_pieces("gemini", GeminiStream(), [body])
    assert isinstance(out.error, LLMStreamError) and out.error.retryable
    assert "overloaded" in str(out.error) and out.text == "Hel"
    body = stream({"error": {"code": 400, "message": "bad", "status": "INVALID_ARGUMENT"}})
    out = parse_pieces("gemini", GeminiStream(), [body])
    assert isinstance(out.error, LLMStreamError) and not out.error.retryable


def test_stream_without_finish_reason_is_retryable() -> None:
    out = parse_pieces("gemini", GeminiStream(), [stream(chunk({"text": "par"}))])
    assert isinstance(out.error, LLMStreamError) and out.error.retryable


def test_a_plain_json_body_is_not_a_stream() -> None:
    body = json.dumps({"candidates": []}, indent=2).encode()
    out = parse_pieces("gemini", GeminiStream(), [body])
    assert isinstance(out.error, LLMStreamError) and not out.error.retryable
    assert "not an event stream" in str(out.error)


def test_signatures_on_text_and_thought_parts() -> None:
    body = stream(
        chunk({"text": "plan", "thought": True, "thoughtSignature": "T1"}),
        chunk({"text": "Answer "}),
        chunk({"text": "part two", "thoughtSignature": "S2"}),
        chunk({"text": "", "thoughtSignature": "S3"}, finish="STOP", responseId="r1"),
    )
    out = parse_pieces("gemini", GeminiStream(), [body])
    assert out.content == [
        {"type": "thinking", "text": "plan", "signature": "T1"},
        {"type": "text", "text": "Answer "},
        {"type": "thinking", "text": "", "signature": "S2"},
        {"type": "text", "text": "part two"},
        {"type": "thinking", "text": "", "signature": "S3"},
    ]
    # and back: each signature returns on the part it came with
    assert to_gemini_contents([{"role": "assistant", "content": out.content}]) == [
        {
            "role": "model",
            "parts": [
                {"text": "plan", "thought": True, "thoughtSignature": "T1"},
                {"text": "Answer "},
                {"text": "part two", "thoughtSignature": "S2"},
            ],
        }
    ]


# -- the request ------------------------------------------------------------------------------


def test_contents_mapping() -> None:
    generated = f"{GENERATED_ID_PREFIX}r_0"
    messages: list[Any] = [
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "text": "unsigned summary"},
                {"type": "text", "text": "Calling."},
                {"type": "thinking", "text": "", "signature": "SIG"},
                {"type": "tool_call", "id": generated, "name": "f", "input": {"a": 1}},
                {"type": "tool_call", "id": "g3id", "name": "f", "input": "{raw"},
            ],
        },
        {
            "role": "tool",
            "content": [
                {
                    "type": "tool_result",
                    "id": generated,
                    "name": "f",
                    "output": "2",
                    "is_error": False,
                },
                {
                    "type": "tool_result",
                    "id": "g3id",
                    "name": "f",
                    "output": "bad",
                    "is_error": True,
                },
            ],
        },
        {"role": "user", "content": [{"type": "text", "text": "next"}]},
        {"role": "assistant", "content": [{"type": "thinking", "text": "", "signature": "ONLY"}]},
    ]
    assert to_gemini_contents(messages) == [
        {"role": "user", "parts": [{"text": "hi"}]},
        {
            "role": "model",
            "parts": [
                {"text": "Calling."},
                {"functionCall": {"name": "f", "args": {"a": 1}}, "thoughtSignature": "SIG"},
                {"functionCall": {"name": "f", "args": {}, "id": "g3id"}},
            ],
        },
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"name": "f", "response": {"result": "2"}}},
                {"functionResponse": {"name": "f", "response": {"error": "bad"}, "id": "g3id"}},
                {"text": "next"},
            ],
        },
        {"role": "model", "parts": [{"text": "", "thoughtSignature": "ONLY"}]},
    ]


def test_body_options(monkeypatch: Any) -> None:
    client = GeminiClient(
        "gemini-test",
        api_key="k",
        extra_body={"generationConfig": {"thinkingConfig": {"includeThoughts": True}}},
    )
    request: ChatRequest = {
        **simple_request("gemini-test"),
        "tools": [{"name": "f", "description": "d", "input_schema": {"type": "object"}}],
        "response_format": {"name": "answer", "schema": {"type": "object"}},
        "settings": {"max_tokens": 64, "temperature": 0.5},
    }
    assert json.loads(client.encode(request)) == {
        "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
        "systemInstruction": {"parts": [{"text": "Be brief."}]},
        "tools": [
            {
                "functionDeclarations": [
                    {"name": "f", "description": "d", "parametersJsonSchema": {"type": "object"}}
                ]
            }
        ],
        "generationConfig": {
            "temperature": 0.5,
            "maxOutputTokens": 64,
            "responseMimeType": "application/json",
            "responseJsonSchema": {"type": "object"},
            "thinkingConfig": {"includeThoughts": True},
        },
    }
    try:
        GeminiClient("gemini-test")
    except MissingKeyError as exc:
        assert "GOOGLE_API_KEY or GEMINI_API_KEY" in str(exc)
    else:
        raise AssertionError("no MissingKeyError")
    monkeypatch.setenv("GEMINI_API_KEY", "gem")
    assert GeminiClient("gemini-test")._headers["x-goog-api-key"] == "gem"
    # google-genai's order: GOOGLE_API_KEY wins when both are set.
    monkeypatch.setenv("GOOGLE_API_KEY", "goog")
    assert GeminiClient("gemini-test")._headers["x-goog-api-key"] == "goog"


# -- a representative agent, through the real loop ---------------------------------------------

ROUND_1 = stream(
    chunk({"text": "**Adding**\n\nThe user wants a sum.", "thought": True}, responseId="resp-1"),
    chunk({"text": "Let me add those."}, responseId="resp-1"),
    chunk(
        {"functionCall": {"name": "add", "args": {"a": 2, "b": 3}}, "thoughtSignature": "U0lHLTE="},
        finish="STOP",
        responseId="resp-1",
        usageMetadata={
            "promptTokenCount": 40,
            "candidatesTokenCount": 12,
            "thoughtsTokenCount": 30,
        },
    ),
)
ROUND_2 = stream(
    chunk(
        {"text": "2 + 3 = 5."},
        finish="STOP",
        usageMetadata={"promptTokenCount": 70, "candidatesTokenCount": 6},
    )
)


async def test_representative_agent_request_is_pinned(wire: WireServer) -> None:
    wire.reply(Reply(body=ROUND_1), Reply(body=ROUND_2))
    agent = representative_agent(
        {"model": "gemini:gemini-test", "base_url": f"{wire.url}/v1beta", "api_key": "k"}
    )
    session = Session(id="s1")
    async with agent:
        events = await run_turn(agent, session, "What is 2 + 3?")
    done = events[-1]
    assert done["type"] == "done" and done["text"] == "2 + 3 = 5."
    assert done["usage"] == {"input_tokens": 110, "output_tokens": 48, "reasoning_tokens": 30}
    use = next(e for e in events if e["type"] == "tool_use")
    assert use["id"] == f"{GENERATED_ID_PREFIX}resp-1_0"
    check_pinned("gemini_first_round", wire.requests[0])
    check_pinned("gemini_representative", wire.requests[1])
    contents = wire.requests[1].json()["contents"]
    assert contents[1]["parts"][-1] == {
        "functionCall": {"name": "add", "args": {"a": 2, "b": 3}},
        "thoughtSignature": "U0lHLTE=",
    }
    assert to_gemini_contents(session.messages[:3]) == contents
