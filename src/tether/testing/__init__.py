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
from .script_client import ScriptClient, ScriptTurn, script_client
from .turns import collect

__all__ = [
    "DropConnection",
    "McpRpcError",
    "ScriptClient",
    "ScriptTurn",
    "TestMcpCall",
    "TestMcpResource",
    "TestMcpServer",
    "TestMcpTool",
    "collect",
    "create_test_mcp_server",
    "script_client",
]
