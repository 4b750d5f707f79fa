"""An MCP server on the official SDK whose tools return media (image, audio, an embedded PDF
and text resource, resource links), run as a child over stdio by tests/mcp/test_mcp_media.py."""

from __future__ import annotations

import base64
import sys
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.types import (
    AudioContent,
    BlobResourceContents,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)

COMMAND = (sys.executable, [str(Path(__file__).resolve())])

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(40))
WAV = b"RIFF\x00\x00\x00\x00WAVEfmt " + bytes(range(24))
PDF = b"%PDF-1.7\n" + bytes(range(40))


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def build_app() -> MCPServer:
    app = MCPServer("media", version="1.0.0", log_level="WARNING")

    @app.tool(description="A chart.")
    def chart() -> list[TextContent | ImageContent]:
        return [
            TextContent(type="text", text="the chart:"),
            ImageContent(type="image", data=b64(PNG), mime_type="image/png"),
        ]

    @app.tool(description="A sound.")
    def sound() -> list[AudioContent]:
        return [AudioContent(type="audio", data=b64(WAV), mime_type="audio/wav")]

    @app.tool(description="Embedded resources.")
    def files() -> list[EmbeddedResource]:
        return [
            EmbeddedResource(
                type="resource",
                resource=BlobResourceContents(
                    uri="file:///docs/contract.pdf", mime_type="application/pdf", blob=b64(PDF)
                ),
            ),
            EmbeddedResource(
                type="resource",
                resource=TextResourceContents(
                    uri="mem://notes", mime_type="text/plain", text="some notes"
                ),
            ),
        ]

    @app.tool(description="Links.")
    def links() -> list[ResourceLink]:
        return [
            ResourceLink(
                type="resource_link",
                uri="https://example.com/cat.png",
                name="cat",
                mime_type="image/png",
            ),
            ResourceLink(type="resource_link", uri="mem://units", name="units"),
        ]

    @app.tool(description="An image of a type no provider takes.")
    def vector() -> list[ImageContent]:
        return [ImageContent(type="image", data=b64(b"<svg/>"), mime_type="image/svg+xml")]

    return app


if __name__ == "__main__":
    build_app().run("stdio")
