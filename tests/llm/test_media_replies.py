"""Images a model makes are kept as image parts of its message: Gemini ``inlineData`` parts and
Responses ``image_generation_call`` items, in streams written by hand in the shape of the
recorded ones (tests/llm/wire/gemini/text_three_chunks.sse, openai_responses/text.sse); and an
assistant image is not sent back to Anthropic, which takes none in assistant turns."""

from __future__ import annotations

import base64
import json
from typing import Any

from tether import Session, create_agent
from tether.session import reduce

from .conftest import OWN_FIXTURES, Reply, WireServer

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(40))
B64_PNG = base64.b64encode(PNG).decode()


def _sse(payloads: list[dict[str, Any]], named: bool = False) -> bytes:
    out = []
    for p in payloads:
        head = f"event: {p['type']}\n" if named else ""
        out.append(f"{head}data: {json.dumps(p)}\n\n")
    return "".join(out).encode()


GEMINI_IMAGE = _sse(
    [
        {"candidates": [{"content": {"parts": [{"text": "Here it is:"}], "role": "model"}}]},
        {
            "candidates": [
                {
                    "content": {
                        "parts": [{"inlineData": {"mimeType": "image/png", "data": B64_PNG}}],
                        "role": "model",
                    },
                    "finishReason": "STOP",
                }
            ],
            "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 9},
            "responseId": "r1",
        },
    ]
)

RESPONSES_IMAGE = _sse(
    [
        {"type": "response.created", "response": {"id": "resp_1", "status": "in_progress"}},
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {"id": "ig_1", "type": "image_generation_call", "status": "in_progress"},
        },
        {
            "type": "response.output_item.done",
            "output_index": 0,
            "item": {
                "id": "ig_1",
                "type": "image_generation_call",
                "status": "completed",
                "output_format": "png",
                "result": B64_PNG,
            },
        },
        {
            "type": "response.output_item.added",
            "output_index": 1,
            "item": {"id": "msg_1", "type": "message", "role": "assistant", "content": []},
        },
        {
            "type": "response.output_text.delta",
            "item_id": "msg_1",
            "output_index": 1,
            "delta": "A square.",
        },
        {
            "type": "response.completed",
            "response": {
                "id": "resp_1",
                "status": "completed",
                "usage": {"input_tokens": 5, "output_tokens": 9},
            },
        },
    ],
    named=True,
)


async def _session(wire: WireServer, model: str, prefix: str, body: bytes) -> Session:
    wire.reply(Reply(body=body))
    agent = create_agent(llm={"model": model, "base_url": f"{wire.url}{prefix}", "api_key": "k"})
    session = Session(id="s")
    async with agent:
        async for event in agent.send(session, "Draw a square."):
            reduce(session, event)
    return session


async def test_gemini_inline_images_are_image_parts(wire: WireServer) -> None:
    session = await _session(wire, "gemini:gemini-test", "/v1beta", GEMINI_IMAGE)
    assert session.messages[-1] == {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Here it is:"},
            {"type": "image", "media_type": "image/png", "data": B64_PNG},
        ],
    }


async def test_responses_image_generation_is_an_image_part(wire: WireServer) -> None:
    session = await _session(wire, "openai-responses:gpt-test", "/v1", RESPONSES_IMAGE)
    assert session.messages[-1]["content"] == [
        {"type": "text", "text": "A square."},
        {"type": "image", "media_type": "image/png", "data": B64_PNG},
    ]


async def test_an_assistant_image_is_not_sent_back_to_anthropic(wire: WireServer) -> None:
    wire.reply(Reply(body=(OWN_FIXTURES / "anthropic/text_with_ping.sse").read_bytes()))
    agent = create_agent(
        llm={"model": "anthropic:claude-test", "base_url": wire.url, "api_key": "k"}
    )
    session = Session(id="s")
    session.messages = [
        {"role": "user", "content": [{"type": "text", "text": "Draw."}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Here:"},
                {"type": "image", "media_type": "image/png", "data": B64_PNG},
            ],
        },
    ]
    async with agent:
        async for event in agent.send(session, "Thanks."):
            reduce(session, event)
    body = wire.requests[-1].json()
    assert body["messages"][1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "Here:"}],
    }
