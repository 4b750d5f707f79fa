"""Keyless test fixtures: the scripted client (and, with the MCP work, an in-process MCP server)."""

from .script_client import ScriptClient, ScriptTurn, script_client
from .turns import collect

__all__ = ["ScriptClient", "ScriptTurn", "collect", "script_client"]
