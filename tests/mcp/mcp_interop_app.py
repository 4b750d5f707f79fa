"""A small app on the official MCP SDK's `MCPServer`, for the interop tests.

Served over streamable HTTP by `tests/mcp/test_interop.py` (uvicorn on 127.0.0.1) and run as a
child over stdio (`python interop_app.py`).
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import warnings
from typing import Annotated

from mcp.server.mcpserver import Context, Elicit, ElicitationResult, MCPServer, Resolve
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPDeprecationWarning
from pydantic import BaseModel

from mcp import types

CHART_PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(range(32))).decode()
REPORT_PDF = base64.b64encode(b"%PDF-1.7\n" + bytes(range(32))).decode()


class Profile(BaseModel):
    name: str
    age: int = 30
    verified: bool = True


def ask_profile() -> Elicit[Profile]:
    return Elicit("Who are you?", Profile)


def build_app() -> MCPServer:
    app = MCPServer("tether-interop", version="1.0.0", log_level="WARNING")
    cancelled = 0
    cancelled_event = asyncio.Event()
    slow_started = asyncio.Event()

    @app.tool(description="Add two integers.")
    def add(a: int, b: int) -> str:
        return str(a + b)

    @app.tool(description="Always fails, with the reason given.")
    def fail(reason: str) -> str:
        raise ToolError(reason)

    @app.tool(description="Sleep, then answer; counts the times it was cancelled.")
    async def slow(seconds: float = 30.0) -> str:
        nonlocal cancelled
        slow_started.set()
        try:
            await asyncio.sleep(seconds)
        except asyncio.CancelledError:
            cancelled += 1
            cancelled_event.set()
            raise
        return "finished"

    @app.tool(
        description="How many slow calls were cancelled since last asked (waits briefly for one)."
    )
    async def cancellations() -> str:
        nonlocal cancelled
        if not cancelled:
            try:
                await asyncio.wait_for(cancelled_event.wait(), 5)
            except TimeoutError:
                pass
        count, cancelled = cancelled, 0
        cancelled_event.clear()
        slow_started.clear()  # what the next test waits for is its own slow call
        return str(count)

    @app.tool(description="Answers once a slow call is running (waits up to 10 s for one).")
    async def slow_started_probe() -> str:
        try:
            await asyncio.wait_for(slow_started.wait(), 10)
        except TimeoutError:
            return "no slow call started"
        slow_started.clear()  # the next probe waits for the next slow call
        return "started"

    @app.tool(description="Asks the user who they are (an elicitation, in either era).")
    async def whoami(profile: Annotated[ElicitationResult[Profile], Resolve(ask_profile)]) -> str:
        data = getattr(profile, "data", None)
        content = data.model_dump() if data is not None else None
        return json.dumps({"action": profile.action, "content": content}, sort_keys=True)

    @app.tool(description="Works in steps, reporting progress and logging each one.")
    async def steps(n: int, ctx: Context) -> str:
        for i in range(1, n + 1):
            await ctx.report_progress(i, n, message=f"step {i} of {n}")
            with warnings.catch_warnings():  # logging is deprecated in 2026-07-28 (SEP-2577)
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                await ctx.info(f"did step {i}", logger_name="steps")
        return f"{n} steps"

    @app.tool(description="The server's process id.")
    def pid() -> str:
        return str(os.getpid())

    @app.tool(description="A chart as an image, and its data as an embedded PDF.")
    def chart() -> list[types.ContentBlock]:
        return [
            types.TextContent(type="text", text="Sales rose."),
            types.ImageContent(type="image", data=CHART_PNG, mime_type="image/png"),
            types.EmbeddedResource(
                type="resource",
                resource=types.BlobResourceContents(
                    uri="mem://reports/q3.pdf", mime_type="application/pdf", blob=REPORT_PDF
                ),
            ),
            types.ImageContent(type="image", data=CHART_PNG, mime_type="image/svg+xml"),
        ]

    @app.resource("mem://style-guide", name="style-guide", description="House style.")
    def style_guide() -> str:
        return "Write short sentences. </resource> stays data."

    @app.resource("mem://notes", name="notes", mime_type="text/plain")
    def notes() -> str:
        return "note one"

    return app


if __name__ == "__main__":
    build_app().run("stdio")
