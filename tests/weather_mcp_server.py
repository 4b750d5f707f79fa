"""A small MCP server on the official SDK, run as a child over stdio (`python
weather_mcp_server.py`): the lab, CLI and UI tests give it to a lab agent as an integration."""

from __future__ import annotations

import sys
from pathlib import Path

from mcp.server.mcpserver import MCPServer

SCRIPT = Path(__file__).resolve()
COMMAND = (sys.executable, [str(SCRIPT)])
"""`mcp_stdio(*COMMAND)` runs this server."""


def build_app() -> MCPServer:
    app = MCPServer("weather", version="1.0.0", log_level="WARNING")

    @app.tool(description="The forecast for a city.")
    def forecast(city: str) -> str:
        return f"{city}: sunny, 21 C"

    @app.tool(description="Delete a city's records (the guardrail says no).")
    def purge(city: str) -> str:
        return f"purged {city}"

    @app.resource("mem://units", name="units", description="The units the service uses.")
    def units() -> str:
        return "Temperatures are in Celsius."

    return app


if __name__ == "__main__":
    build_app().run("stdio")
