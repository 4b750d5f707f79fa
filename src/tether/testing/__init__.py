"""Keyless test fixtures: the scripted client (and, with the MCP work, an in-process MCP server).

The in-process MCP server (and httpx under it) and `collect` (the harness) are imported when
first used: a project whose app imports `script_client` loads neither. The scripted clients
are imported at once, since their modules share their names (`script_client`, `paced_client`):
imported later, the submodule would shadow the function.
"""

import typing as _typing

from .._lazy import lazy_attributes as _lazy_attributes

if _typing.TYPE_CHECKING:
    from .mcp_server import (
        DropConnection,
        McpRpcError,
        TestMcpCall,
        TestMcpResource,
        TestMcpServer,
        TestMcpTool,
        create_test_mcp_server,
    )
    from .turns import collect

from .paced_client import PacedClient, paced_client
from .script_client import ScriptClient, ScriptTurn, script_client

_LAZY: dict[str, str] = {
    "DropConnection": ".mcp_server",
    "McpRpcError": ".mcp_server",
    "TestMcpCall": ".mcp_server",
    "TestMcpResource": ".mcp_server",
    "TestMcpServer": ".mcp_server",
    "TestMcpTool": ".mcp_server",
    "create_test_mcp_server": ".mcp_server",
    "collect": ".turns",
}
"""Each public name and the module it lives in, imported on first use."""


__getattr__, __dir__ = _lazy_attributes(__name__, _LAZY, globals())


__all__ = [
    "DropConnection",
    "McpRpcError",
    "PacedClient",
    "ScriptClient",
    "ScriptTurn",
    "TestMcpCall",
    "TestMcpResource",
    "TestMcpServer",
    "TestMcpTool",
    "collect",
    "create_test_mcp_server",
    "paced_client",
    "script_client",
]
