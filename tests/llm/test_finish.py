"""The normalized `finish_reason` every adapter puts on its finish chunk, beside the raw
`stop_reason`: each provider's documented stop reasons, and a response cut by the output-token
limit in the middle of a tool call's arguments (the call stays visible, the reason is `length`)."""

from __future__ import annotations

from typing import Any

import pytest

from tether.llm._adapter import StreamParser
from tether.llm.anthropic import AnthropicStream
from tether.llm.gemini import GeminiStream
from tether.llm.openai_chat import OpenAIChatStream
from tether.llm.openai_responses import OpenAIResponsesStream

from .conftest import Outcome, parse_pieces, sse


def anthropic(stop_reason: str | None, *blocks: tuple[str, Any]) -> bytes:
    events: list[tuple[str | None, Any]] = [
        ("message_start", {"type": "message_start", "message": {"usage": {"input_tokens": 3}}})
    ]
    for index, (kind, value) in enumerate(blocks):
        start: dict[str, Any]
        delta: dict[str, Any]
        if kind == "text":
            start = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": value}
        else:
            start = {"type": "tool_use", "id": "toolu_1", "name": "write", "input": {}}
            delta = {"type": "input_json_delta", "partial_json": value}
        events.append(
            (
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": start},
            )
        )
        events.append(
            (
                "content_block_delta",
                {"type": "content_block_delta", "index": index, "delta": delta},
            )
        )
    events.append(
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop_reason}})
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return sse(*events)


def chat(finish: str | None, delta: dict[str, Any] | None = None) -> bytes:
    chunks: list[tuple[str | None, Any]] = []
    if delta is not None:
        chunks.append((None, {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]}))
    chunks.append((None, {"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}))
    chunks.append((None, "[DONE]"))
    return sse(*chunks)


def responses(status: str, reason: str | None = None, *events: dict[str, Any]) -> bytes:
    response: dict[str, Any] = {"status": status}
    if reason is not None:
        response["incomplete_details"] = {"reason": reason}
    kind = "response.completed" if status == "completed" else "response.incomplete"
    return sse(*[(e["type"], e) for e in events], (kind, {"type": kind, "response": response}))


def gemini(reason: str | None, *parts: dict[str, Any], block: str | None = None) -> bytes:
    payload: dict[str, Any] = {}
    if block is not None:
        payload["promptFeedback"] = {"blockReason": block}
    else:
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": list(parts)}}
        if reason is not None:
            candidate["finishReason"] = reason
        payload["candidates"] = [candidate]
    return sse((None, payload))


TEXT = ("text", "Hi.")

CASES: list[tuple[str, type[Any], bytes, str]] = [
    ("anthropic", AnthropicStream, anthropic("end_turn", TEXT), "stop"),
    ("anthropic", AnthropicStream, anthropic("stop_sequence", TEXT), "stop"),
    ("anthropic", AnthropicStream, anthropic("pause_turn", TEXT), "stop"),
    ("anthropic", AnthropicStream, anthropic("max_tokens", TEXT), "length"),
    ("anthropic", AnthropicStream, anthropic("model_context_window_exceeded", TEXT), "length"),
    ("anthropic", AnthropicStream, anthropic("tool_use", ("tool", "{}")), "tool_calls"),
    ("anthropic", AnthropicStream, anthropic("refusal", TEXT), "refusal"),
    ("anthropic", AnthropicStream, anthropic("something_new", TEXT), "error"),
    ("openai", OpenAIChatStream, chat("stop", {"content": "Hi."}), "stop"),
    ("openai", OpenAIChatStream, chat("length", {"content": "Hi."}), "length"),
    ("openai", OpenAIChatStream, chat("content_filter", {"content": "Hi."}), "content_filter"),
    ("openai", OpenAIChatStream, chat("function_call", {"content": "Hi."}), "tool_calls"),
    ("openai", OpenAIChatStream, chat("stop", {"refusal": "I can't."}), "refusal"),
    (
        # Some compatible servers say "stop" when the model called tools.
        "openai",
        OpenAIChatStream,
        chat(
            "stop",
            {
                "tool_calls": [
                    {"index": 0, "id": "c1", "function": {"name": "f", "arguments": "{}"}}
                ]
            },
        ),
        "tool_calls",
    ),
    ("openai", OpenAIChatStream, chat("eos", {"content": "Hi."}), "stop"),
    ("openai", OpenAIChatStream, chat("abort", {"content": "Hi."}), "error"),
    ("openai", OpenAIChatStream, chat(None, {"content": "Hi."}), "stop"),
    ("openai-responses", OpenAIResponsesStream, responses("completed"), "stop"),
    (
        "openai-responses",
        OpenAIResponsesStream,
        responses("incomplete", "max_output_tokens"),
        "length",
    ),
    (
        "openai-responses",
        OpenAIResponsesStream,
        responses("incomplete", "content_filter"),
        "content_filter",
    ),
    (
        "openai-responses",
        OpenAIResponsesStream,
        responses(
            "completed",
            None,
            {
                "type": "response.refusal.delta",
                "item_id": "msg_1",
                "output_index": 0,
                "content_index": 0,
                "delta": "I can't help with that.",
            },
        ),
        "refusal",
    ),
    ("gemini", GeminiStream, gemini("STOP", {"text": "Hi."}), "stop"),
    ("gemini", GeminiStream, gemini("MAX_TOKENS", {"text": "Hi."}), "length"),
    ("gemini", GeminiStream, gemini("SAFETY", {"text": "Hi."}), "content_filter"),
    ("gemini", GeminiStream, gemini("RECITATION", {"text": "Hi."}), "content_filter"),
    ("gemini", GeminiStream, gemini("PROHIBITED_CONTENT"), "content_filter"),
    ("gemini", GeminiStream, gemini("MALFORMED_FUNCTION_CALL"), "error"),
    ("gemini", GeminiStream, gemini("OTHER", {"text": "Hi."}), "error"),
    (
        "gemini",
        GeminiStream,
        gemini("STOP", {"functionCall": {"name": "f", "args": {}}}),
        "tool_calls",
    ),
    ("gemini", GeminiStream, gemini(None, block="OTHER"), "content_filter"),
]


@pytest.mark.parametrize(
    ("provider", "parser", "body", "expected"),
    CASES,
    ids=[f"{c[0]}-{i}-{c[3]}" for i, c in enumerate(CASES)],
)
def test_each_raw_stop_reason_is_normalized(
    provider: str, parser: type[StreamParser], body: bytes, expected: str
) -> None:
    out = parse_pieces(provider, parser(), [body])
    assert out.error is None and out.finish is not None
    assert out.finish["finish_reason"] == expected


# -- cut by the output-token limit inside a tool call's arguments --------------------------------

PARTIAL = '{"filename": "taxes.txt", "lines": ["# A GUIDE'


def check_cut_call(out: Outcome, call_id: str) -> None:
    assert out.error is None and out.finish is not None
    assert out.finish["finish_reason"] == "length"
    # The partial call stays visible: as deltas while it streamed, and in the content with its
    # raw (unparseable) arguments, so the loop can tell it apart from a call to execute.
    assert out.partials() == {call_id: PARTIAL}
    (call,) = out.parts("tool_call")
    assert (call["id"], call["input"]) == (call_id, PARTIAL)


def test_anthropic_max_tokens_mid_arguments() -> None:
    body = anthropic("max_tokens", ("text", "Writing it."), ("tool", PARTIAL))
    out = parse_pieces("anthropic", AnthropicStream(), [body])
    check_cut_call(out, "toolu_1")
    assert out.finish is not None and out.finish["stop_reason"] == "max_tokens"


def test_openai_chat_length_mid_arguments() -> None:
    body = sse(
        (
            None,
            {
                "choices": [
                    {
                        "index": 0,
                        "delta": {
                            "tool_calls": [
                                {
                                    "index": 0,
                                    "id": "call_1",
                                    "type": "function",
                                    "function": {"name": "write", "arguments": PARTIAL[:10]},
                                }
                            ]
                        },
                        "finish_reason": None,
                    }
                ]
            },
        ),
        (
            None,
            {
                "choices": [
                    {
                        "index": 0,
                        "delta": {
                            "tool_calls": [{"index": 0, "function": {"arguments": PARTIAL[10:]}}]
                        },
                        "finish_reason": "length",
                    }
                ]
            },
        ),
        (None, "[DONE]"),
    )
    out = parse_pieces("openai", OpenAIChatStream(), [body])
    check_cut_call(out, "call_1")
    assert out.finish is not None and out.finish["stop_reason"] == "length"


def test_openai_responses_incomplete_mid_arguments() -> None:
    item = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "write"}
    body = responses(
        "incomplete",
        "max_output_tokens",
        {"type": "response.output_item.added", "output_index": 0, "item": item},
        {
            "type": "response.function_call_arguments.delta",
            "item_id": "fc_1",
            "output_index": 0,
            "delta": PARTIAL[:7],
        },
        {
            "type": "response.function_call_arguments.delta",
            "item_id": "fc_1",
            "output_index": 0,
            "delta": PARTIAL[7:],
        },
    )
    out = parse_pieces("openai-responses", OpenAIResponsesStream(), [body])
    check_cut_call(out, "call_1")
    assert out.finish is not None and out.finish["stop_reason"] == "max_output_tokens"


def test_gemini_max_tokens() -> None:
    # Gemini sends whole calls, never a fragment of one: a reply cut by the limit ends with
    # MAX_TOKENS and whatever complete parts it had.
    out = parse_pieces("gemini", GeminiStream(), [gemini("MAX_TOKENS", {"text": "Writing"})])
    assert out.finish is not None and out.finish["finish_reason"] == "length"
    assert out.finish["stop_reason"] == "MAX_TOKENS"
