"""Blob references are resolved by the adapter, just before the body is encoded: the provider
receives the bytes (base64), the request the loop built and recorded keeps the reference, and
a conversation that carries one image reads it from the store once."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from tests.llm.conftest import Reply, WireServer

from tether import create_agent, reduce
from tether.blobs import BlobResolver
from tether.llm.anthropic import AnthropicClient
from tether.session import Session
from tether.stores import InMemoryBlobStore

WIRE = Path(__file__).parent / "wire" / "anthropic" / "text_with_ping.sse"
IMAGE = b"\x89PNG\r\n\x1a\n" + b"\x01" * 100_000


def session_with(sha: str) -> Session:
    reference = {"type": "image", "media_type": "image/png", "blob": sha, "size": len(IMAGE)}
    messages: list[Any] = [
        {"role": "user", "content": [{"type": "text", "text": "chart please"}]},
        {
            "role": "assistant",
            "content": [{"type": "tool_call", "id": "c1", "name": "chart", "input": {}}],
        },
        {
            "role": "tool",
            "content": [
                {
                    "type": "tool_result",
                    "id": "c1",
                    "name": "chart",
                    "output": "the chart:",
                    "is_error": False,
                    "parts": [reference],
                }
            ],
        },
    ]
    return Session("s", messages)


async def test_the_provider_gets_the_bytes_and_the_session_keeps_the_reference(
    wire: WireServer,
) -> None:
    blobs = InMemoryBlobStore()
    sha = await blobs.put(IMAGE, "image/png")
    resolver = BlobResolver(blobs)
    client = AnthropicClient("claude-test", base_url=wire.url, api_key="k")
    agent = create_agent(model=client, blobs=resolver)
    session = session_with(sha)
    try:
        for text in ("what is it?", "and the colours?"):  # two turns over the same image
            wire.reply(Reply(body=WIRE.read_bytes()))
            async for event in agent.send(session, text):
                session = reduce(session, event)
    finally:
        await agent.aclose()
        await client.aclose()
    encoded = base64.b64encode(IMAGE).decode()
    for seen in wire.requests:
        assert encoded in seen.body.decode()
        assert sha not in seen.body.decode()
    assert resolver.reads == 1 and blobs.reads == 1
    tool_message: Any = session.messages[2]
    assert tool_message["content"][0]["parts"][0]["blob"] == sha
    sent = wire.requests[0].json()["messages"]
    (result,) = [b for m in sent for b in m["content"] if b["type"] == "tool_result"]
    assert result["content"] == [
        {"type": "text", "text": "the chart:"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": encoded}},
    ]


async def test_a_reference_the_store_does_not_hold_fails_before_the_request(
    wire: WireServer,
) -> None:
    client = AnthropicClient("claude-test", base_url=wire.url, api_key="k")
    agent = create_agent(model=client, blobs=InMemoryBlobStore())
    events = []
    try:
        async for event in agent.send(session_with("ab" * 32), "what is it?"):
            events.append(event)
    finally:
        await agent.aclose()
        await client.aclose()
    errors = [e for e in events if e["type"] == "error"]
    assert errors, events
    assert "blob " + "ab" * 32 + " is not in the blob store" in str(errors[-1])
    assert wire.requests == []
