"""MCP-client mode: an MCP server as a source of tools and resources.

```python
from tether import create_agent
from tether.mcp import mcp_server, mcp_stdio

agent = create_agent(
    llm=...,
    integrations=[
        mcp_server(url="https://mcp.example.com/mcp", prefix="wiki_", attach=["style-guide"]),
        mcp_stdio("uvx", ["some-mcp-server"]),
    ],
)
report = await agent.connect()  # optional: the first turn connects otherwise
```

The client is hand-rolled JSON-RPC (no MCP SDK at runtime) over streamable HTTP or a child's
stdio. Its tools run through the agent's normal path; failures follow the seed's table:
connecting fails loudly (`McpConnectionError`), a call fails as an `is_error` tool result
(`McpCallError`'s message), an attached resource that cannot be read raises `McpCallError` out
of `send()`.
"""

from ..integrations import MAX_INTEGRATIONS
from ._protocol import DEFAULT_MCP_TIMEOUT_MS, LATEST_PROTOCOL_VERSION, PROTOCOL_VERSIONS
from ._source import (
    DEFAULT_STARTUP_TIMEOUT_MS,
    McpServerSource,
    McpSource,
    McpStdioSource,
    mcp_server,
    mcp_stdio,
)

__all__ = [
    "DEFAULT_MCP_TIMEOUT_MS",
    "DEFAULT_STARTUP_TIMEOUT_MS",
    "LATEST_PROTOCOL_VERSION",
    "MAX_INTEGRATIONS",
    "PROTOCOL_VERSIONS",
    "McpServerSource",
    "McpSource",
    "McpStdioSource",
    "mcp_server",
    "mcp_stdio",
]
