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
stdio. It speaks the stateless revision (2026-07-28) and falls back to the `initialize`
handshake (2025-11-25 and earlier) for a server that does not; over HTTP it logs in with
`auth=OAuth(...)` or `auth=ClientCredentials(...)`, and a server's questions for the user go to
`on_elicitation=`. Its tools run through the agent's normal path; failures follow the seed's
table:
connecting fails loudly (`McpConnectionError`), a call fails as an `is_error` tool result
(`McpCallError`'s message), an attached resource that cannot be read raises `McpCallError` out
of `send()`.
"""

from ..integrations import MAX_INTEGRATIONS
from ._auth import (
    DEFAULT_REDIRECT_URI,
    DEFAULT_TOKEN_FILE,
    Authorize,
    ClientCredentials,
    FileTokenStore,
    MemoryTokenStore,
    OAuth,
    TokenStore,
)
from ._elicitation import Elicitation, ElicitationHandler
from ._protocol import (
    DEFAULT_MCP_TIMEOUT_MS,
    HANDSHAKE_VERSIONS,
    LATEST_PROTOCOL_VERSION,
    MODERN_VERSION,
    PROTOCOL_VERSIONS,
)
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
    "DEFAULT_REDIRECT_URI",
    "DEFAULT_STARTUP_TIMEOUT_MS",
    "DEFAULT_TOKEN_FILE",
    "HANDSHAKE_VERSIONS",
    "LATEST_PROTOCOL_VERSION",
    "MAX_INTEGRATIONS",
    "MODERN_VERSION",
    "PROTOCOL_VERSIONS",
    "Authorize",
    "ClientCredentials",
    "Elicitation",
    "ElicitationHandler",
    "FileTokenStore",
    "McpServerSource",
    "McpSource",
    "McpStdioSource",
    "MemoryTokenStore",
    "OAuth",
    "TokenStore",
    "mcp_server",
    "mcp_stdio",
]
