"""Tool sets that depend on the call (`ToolProvider`), and resolving what an episode may use."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol, TypeAlias, TypeGuard, runtime_checkable

from .._params import bad, sequence_of, where_prefix
from ..errors import ToolDefinitionError
from ..tools import Tool

__all__ = [
    "ToolProvider",
    "ToolSet",
    "ToolsSpec",
    "check_tool_set",
    "is_provider",
    "resolve_tools",
    "tool_provider",
]

ToolSet: TypeAlias = Sequence[Tool]


@runtime_checkable
class ToolProvider(Protocol):
    """Builds an episode's tools from the call's `tool_provider_context` (a sandbox root,
    credentials ...). The framework passes the raw value through, unvalidated, and None when
    the caller gave none."""

    def get_tools(self, context: Any) -> ToolSet | Awaitable[ToolSet]: ...


ToolsSpec: TypeAlias = ToolSet | Mapping[str, Tool] | ToolProvider
"""An agent's tools: a list, a dict (the key names the tool), or a ToolProvider."""


def is_provider(value: object) -> TypeGuard[ToolProvider]:
    """True for a ToolProvider (a list that happens to have `get_tools` is still a list)."""
    return not isinstance(value, Sequence | Mapping) and isinstance(value, ToolProvider)


class _FunctionProvider:
    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[Any], ToolSet | Awaitable[ToolSet]]) -> None:
        self.fn = fn

    def get_tools(self, context: Any) -> ToolSet | Awaitable[ToolSet]:
        return self.fn(context)

    def __repr__(self) -> str:
        return f"tool_provider({getattr(self.fn, '__name__', self.fn)!r})"


def tool_provider(fn: Callable[[Any], ToolSet | Awaitable[ToolSet]]) -> ToolProvider:
    """A ToolProvider from a function `(context) -> tools` (sync or async)."""
    return _FunctionProvider(fn)


def check_tool_set(tools: Any, where: str, param: str = "tools") -> list[Tool]:
    """A list of Tools with unique names, or a ConfigError saying what is wrong."""
    if isinstance(tools, str | bytes | Mapping) or not isinstance(tools, Sequence):
        raise bad(param, tools, "a list of tools, a dict of them or a ToolProvider", where)
    out = sequence_of(param, tools, Tool, "a Tool (define_tool or @tool)", where)
    seen: set[str] = set()
    for t in out:
        if t.name in seen:
            raise ToolDefinitionError(
                f"{where_prefix(where)}{param}: two tools are named {t.name!r}"
            )
        seen.add(t.name)
    return out


async def resolve_tools(provider: ToolProvider, context: Any, where: str) -> list[Tool]:
    """The tools a ToolProvider builds for one episode, asked with `context`."""
    tools = provider.get_tools(context)
    if inspect.isawaitable(tools):
        tools = await tools
    return check_tool_set(
        tools, f"{where} (from its ToolProvider)" if where else "its ToolProvider"
    )
