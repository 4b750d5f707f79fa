"""MCP media content from the official SDK's server (stdio child): image, audio, embedded
resources and resource links reach the model as parts, and what no provider takes is described
in the text instead of dropped silently."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from mcp_media_server import COMMAND, PDF, PNG, WAV, b64

from tether import Agent, RunContext, create_agent
from tether.mcp import mcp_stdio
from tether.testing import script_client
from tether.tools import ToolResult


@pytest.fixture
async def agent() -> AsyncIterator[Agent]:
    a = create_agent(llm=script_client([]), integrations=[mcp_stdio(*COMMAND)])
    await a.connect()
    try:
        yield a
    finally:
        await a.aclose()


async def _call(agent: Agent, name: str) -> ToolResult:
    [tool] = [t for t in agent.tools if t.name == name]
    result = await tool.call({}, RunContext("probe"))
    assert not result.is_error, result.output
    return result


async def test_image_content_is_an_image_part(agent: Agent) -> None:
    result = await _call(agent, "chart")
    assert result.output == "the chart:"
    assert result.parts == [{"type": "image", "media_type": "image/png", "data": b64(PNG)}]


async def test_audio_content_is_an_audio_part(agent: Agent) -> None:
    result = await _call(agent, "sound")
    assert result.output == ""
    assert result.parts == [{"type": "audio", "media_type": "audio/wav", "data": b64(WAV)}]


async def test_embedded_resources_blob_and_text(agent: Agent) -> None:
    result = await _call(agent, "files")
    assert result.output == "some notes"
    expected: list[Any] = [
        {
            "type": "document",
            "media_type": "application/pdf",
            "data": b64(PDF),
            "name": "contract.pdf",
        }
    ]
    assert result.parts == expected


async def test_resource_links(agent: Agent) -> None:
    result = await _call(agent, "links")
    assert result.parts == [
        {
            "type": "image",
            "media_type": "image/png",
            "url": "https://example.com/cat.png",
            "name": "cat",
        }
    ]
    assert result.output == "[resource link: units mem://units]"


async def test_an_unsupported_type_is_described(agent: Agent) -> None:
    result = await _call(agent, "vector")
    assert not result.parts
    assert result.output.startswith("[image content: image/svg+xml, 8 base64 characters, left out:")
