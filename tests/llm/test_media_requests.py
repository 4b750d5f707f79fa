"""Images, documents and audio on the wire: each provider's request body for a user message with
media parts, checked as a real local HTTP server received it, and the parts a provider cannot
take refused before any request is sent."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest

from tether import ContentError, Session, audio, create_agent, document, image
from tether.session import reduce

from .conftest import OWN_FIXTURES, Reply, WireServer

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(40))
PDF = b"%PDF-1.7\n" + bytes(range(40))
WAV = b"RIFF\x00\x00\x00\x00WAVEfmt " + bytes(range(24))
OGG = b"OggS" + bytes(range(24))

B64_PNG = base64.b64encode(PNG).decode()
B64_PDF = base64.b64encode(PDF).decode()
B64_WAV = base64.b64encode(WAV).decode()

_REPLIES = {
    "anthropic": ("anthropic:claude-test", "", "anthropic/text_with_ping.sse"),
    "openai": ("openai:gpt-test", "/v1", "openai_chat/text_with_usage_chunk.sse"),
    "openai-responses": ("openai-responses:gpt-test", "/v1", "openai_responses/text.sse"),
    "gemini": ("gemini:gemini-test", "/v1beta", "gemini/text_three_chunks.sse"),
}


async def _sent(wire: WireServer, provider: str, user: Any) -> dict[str, Any]:
    """The JSON body `provider`'s adapter sent for one turn whose user message is `user`."""
    model, prefix, reply = _REPLIES[provider]
    wire.reply(Reply(body=(OWN_FIXTURES / reply).read_bytes()))
    agent = create_agent(llm={"model": model, "base_url": f"{wire.url}{prefix}", "api_key": "k"})
    session = Session(id="s")
    async with agent:
        async for event in agent.send(session, user):
            reduce(session, event)
    assert session.messages[0]["content"][1:] == [p for p in user[1:]]  # stored as given
    body: dict[str, Any] = wire.requests[-1].json()
    return body


async def test_anthropic_image_and_pdf_blocks(wire: WireServer, tmp_path: Path) -> None:
    (tmp_path / "c.pdf").write_bytes(PDF)
    user = [
        "What is this?",
        image(PNG),
        image("https://example.com/cat.jpg"),
        document(tmp_path / "c.pdf"),
        document(b"plain notes", "text/plain", name="notes.txt"),
    ]
    body = await _sent(wire, "anthropic", user)
    assert body["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is this?"},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": B64_PNG},
                },
                {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.jpg"}},
                {
                    "type": "document",
                    "source": {"type": "base64", "media_type": "application/pdf", "data": B64_PDF},
                    "title": "c.pdf",
                },
                {
                    "type": "document",
                    "source": {"type": "text", "media_type": "text/plain", "data": "plain notes"},
                    "title": "notes.txt",
                },
            ],
        }
    ]


async def test_openai_chat_image_url_audio_and_file(wire: WireServer) -> None:
    user = [
        "Describe.",
        image(PNG, detail="low"),
        image("https://example.com/cat.png"),
        audio(WAV),
        document(PDF, name="contract.pdf"),
    ]
    body = await _sent(wire, "openai", user)
    assert body["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Describe."},
                {
                    "type": "image_url",
                    "image_url": {"url": f"data:image/png;base64,{B64_PNG}", "detail": "low"},
                },
                {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
                {"type": "input_audio", "input_audio": {"data": B64_WAV, "format": "wav"}},
                {
                    "type": "file",
                    "file": {
                        "filename": "contract.pdf",
                        "file_data": f"data:application/pdf;base64,{B64_PDF}",
                    },
                },
            ],
        }
    ]


async def test_openai_responses_input_image_and_file(wire: WireServer) -> None:
    user = [
        "Summarize.",
        image(PNG, detail="high"),
        document(PDF),
        document("https://example.com/a.pdf"),
    ]
    body = await _sent(wire, "openai-responses", user)
    assert body["input"] == [
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "Summarize."},
                {
                    "type": "input_image",
                    "image_url": f"data:image/png;base64,{B64_PNG}",
                    "detail": "high",
                },
                {
                    "type": "input_file",
                    "filename": "document.pdf",
                    "file_data": f"data:application/pdf;base64,{B64_PDF}",
                },
                {"type": "input_file", "file_url": "https://example.com/a.pdf"},
            ],
        }
    ]


async def test_gemini_inline_and_file_data(wire: WireServer) -> None:
    user = ["Listen.", audio(WAV), image("https://example.com/x.webp"), document(PDF)]
    body = await _sent(wire, "gemini", user)
    assert body["contents"] == [
        {
            "role": "user",
            "parts": [
                {"text": "Listen."},
                {"inlineData": {"mimeType": "audio/wav", "data": B64_WAV}},
                {"fileData": {"mimeType": "image/webp", "fileUri": "https://example.com/x.webp"}},
                {"inlineData": {"mimeType": "application/pdf", "data": B64_PDF}},
            ],
        }
    ]


@pytest.mark.parametrize(
    ("provider", "part", "message"),
    [
        ("anthropic", audio(WAV), "anthropic cannot take audio parts of type audio/wav"),
        ("openai", audio(OGG), "openai cannot take audio parts of type audio/ogg"),
        ("openai", document("https://example.com/a.pdf"), "openai cannot take document parts"),
        ("openai-responses", audio(WAV), "openai-responses cannot take audio parts"),
        (
            "gemini",
            {"type": "image", "media_type": "image/png", "blob": "ab" * 32},
            "was not read before the gemini request",
        ),
    ],
)
async def test_a_part_the_provider_cannot_take_fails_before_any_request(
    wire: WireServer, provider: str, part: Any, message: str
) -> None:
    model, prefix, _ = _REPLIES[provider]
    agent = create_agent(llm={"model": model, "base_url": f"{wire.url}{prefix}", "api_key": "k"})
    session = Session(id="s")
    error: BaseException | None = None
    async with agent:
        try:
            async for event in agent.send(session, ["look", part]):
                reduce(session, event)
                if event["type"] == "error":
                    error = event["error"]
        except ContentError as exc:
            error = exc
    assert isinstance(error, ContentError), error
    assert message in str(error)
    assert error.provider is not None and error.part_type == part["type"]
    assert wire.requests == []  # nothing went out
