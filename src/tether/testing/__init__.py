"""Keyless test fixtures: the scripted client (and, with the MCP work, an in-process MCP server)."""

from .mcp_server import (
    DropConnection,
    McpRpcError,
    TestMcpCall,
    TestMcpResource,
    TestMcpServer,
    TestMcpTool,
    create_test_mcp_server,
)
from .paced_client import PacedClient, paced_client
from .script_client import ScriptClient, ScriptTurn, script_client
from .turns import collect

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
