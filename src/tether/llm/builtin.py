"""Provider-hosted tools: `web_search()`, `code_execution()`, `file_search()`, given to a model
as ``builtin_tools=[...]`` in its model config (or adapter keyword). The provider runs them inside
its own response; tether only declares them and keeps their blocks.

Each maps to the provider's own tool:

- `web_search()`: Anthropic ``web_search_20250305`` (also ``vertex:claude-…``), the Responses
  API's ``web_search`` (also ``azure-responses:``), Gemini's ``google_search`` (also
  ``vertex:gemini-…``);
- `code_execution()`: Anthropic ``code_execution_20250825`` (with its beta header), the
  Responses API's ``code_interpreter`` (an automatic container), Gemini's ``code_execution``;
- `file_search(vector_store_ids)`: the Responses API's ``file_search`` only.

A tool a provider does not host (any of them on Chat Completions or Bedrock) is a `ConfigError`
naming the provider and the tool when the client is built, so at the agent's definition.

Their call and result blocks (Anthropic's ``server_tool_use`` and ``*_tool_result`` blocks, the
Responses API's ``web_search_call`` / ``file_search_call`` / ``code_interpreter_call`` items,
Gemini's ``executableCode`` / ``codeExecutionResult`` parts) come back in the transcript as
`ProviderPart`s ``{"type": "provider", "wire", "block"}``, the block exactly as the provider sent
it, and go back unchanged on the next request to the same wire (another wire leaves them out).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, NotRequired, TypedDict, cast

from ..errors import ConfigError

__all__ = ["BuiltinTool", "code_execution", "file_search", "web_search", "wire_tools"]

Kind = Literal["web_search", "code_execution", "file_search"]


class BuiltinTool(TypedDict):
    type: Literal["builtin_tool"]
    kind: Kind
    max_uses: NotRequired[int]
    allowed_domains: NotRequired[list[str]]
    vector_store_ids: NotRequired[list[str]]


def web_search(
    *, max_uses: int | None = None, allowed_domains: Sequence[str] | None = None
) -> BuiltinTool:
    """The provider's web search (`max_uses`: Anthropic only; `allowed_domains`: Anthropic and
    the Responses API)."""
    tool: BuiltinTool = {"type": "builtin_tool", "kind": "web_search"}
    if max_uses is not None:
        if not isinstance(max_uses, int) or isinstance(max_uses, bool) or max_uses < 1:
            raise ConfigError(f"web_search(max_uses=...) takes an int >= 1, got {max_uses!r}")
        tool["max_uses"] = max_uses
    if allowed_domains is not None:
        tool["allowed_domains"] = [str(d) for d in allowed_domains]
    return tool


def code_execution() -> BuiltinTool:
    """The provider's sandboxed code execution."""
    return {"type": "builtin_tool", "kind": "code_execution"}


def file_search(vector_store_ids: Sequence[str]) -> BuiltinTool:
    """Search over the provider's stored files (the Responses API's vector stores)."""
    ids = [str(i) for i in vector_store_ids]
    if not ids:
        raise ConfigError("file_search() takes at least one vector store id")
    return {"type": "builtin_tool", "kind": "file_search", "vector_store_ids": ids}


def _refuse(provider: str, tool: BuiltinTool, why: str) -> ConfigError:
    return ConfigError(f"{provider} does not host the built-in tool {tool['kind']!r}: {why}")


def _anthropic(provider: str, tool: BuiltinTool) -> dict[str, Any]:
    kind = tool["kind"]
    if kind == "web_search":
        out: dict[str, Any] = {"type": "web_search_20250305", "name": "web_search"}
        if "max_uses" in tool:
            out["max_uses"] = tool["max_uses"]
        if "allowed_domains" in tool:
            out["allowed_domains"] = tool["allowed_domains"]
        return out
    if kind == "code_execution":
        return {"type": "code_execution_20250825", "name": "code_execution"}
    raise _refuse(provider, tool, "Anthropic's server tools are web_search and code_execution")


def _responses(provider: str, tool: BuiltinTool) -> dict[str, Any]:
    kind = tool["kind"]
    if "max_uses" in tool:
        raise _refuse(provider, tool, "the Responses API has no max_uses; leave it out")
    if kind == "web_search":
        out: dict[str, Any] = {"type": "web_search"}
        if "allowed_domains" in tool:
            out["filters"] = {"allowed_domains": tool["allowed_domains"]}
        return out
    if kind == "code_execution":
        return {"type": "code_interpreter", "container": {"type": "auto"}}
    return {"type": "file_search", "vector_store_ids": tool["vector_store_ids"]}


def _gemini(provider: str, tool: BuiltinTool) -> dict[str, Any]:
    kind = tool["kind"]
    if "max_uses" in tool or "allowed_domains" in tool:
        raise _refuse(provider, tool, "Gemini's google_search takes no max_uses or domains")
    if kind == "web_search":
        return {"google_search": {}}
    if kind == "code_execution":
        return {"code_execution": {}}
    raise _refuse(provider, tool, "Gemini hosts google_search and code_execution")


_WIRES = {"anthropic": _anthropic, "openai-responses": _responses, "gemini": _gemini}


def wire_tools(wire: str | None, provider: str, tools: Sequence[Any]) -> list[dict[str, Any]]:
    """`tools` as `wire`'s tool declarations; a ConfigError naming `provider` and the tool for
    one it does not host (every one when `wire` hosts none)."""
    out: list[dict[str, Any]] = []
    for tool in tools:
        if not isinstance(tool, dict) or tool.get("type") != "builtin_tool":
            raise ConfigError(
                f"{provider}: builtin_tools takes web_search(), code_execution() or "
                f"file_search(...), got {tool!r:.80}"
            )
        spec = cast(BuiltinTool, tool)
        mapper = _WIRES.get(wire or "")
        if mapper is None:
            raise _refuse(provider, spec, "it hosts no tools (declare your own with tools=)")
        out.append(mapper(provider, spec))
    return out
