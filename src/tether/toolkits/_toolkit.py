"""`Toolkit`: a few tools that go together, usable as a list and as a lab `ToolProvider`."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeAlias, TypeVar

from ..context import RunContext
from ..errors import ConfigError
from ..tools import Tool

__all__ = ["FromRun", "PathSpec", "Toolkit", "from_run", "trace"]

T = TypeVar("T")

FromRun: TypeAlias = Callable[[RunContext], T]
"""A value read from the run at each call: ``lambda ctx: ctx.services["workspace"]``. In the
lab, ``ctx.session_id`` is the memory scope and ``ctx.context`` the run's ``context=``."""

PathSpec: TypeAlias = "str | os.PathLike[str] | FromRun[str | os.PathLike[str]]"
"""A root directory: a path, or a function of the call's `RunContext` that returns one."""


class Toolkit:
    """Tools that belong together (``file_tools``, ``shell_tool``, ``fetch_tool`` make one).

    Iterate it for the tools (``create_agent(tools=[*file_tools(root)])``), or hand it to a lab
    agent as its ``tools=``: it is a `ToolProvider` (its `get_tools` returns the same tools for
    every call; what depends on the call is read from each call's ``ctx``). Two toolkits add up
    to one: ``file_tools(root, write=True) + shell_tool(root, approval=False)``.
    """

    __slots__ = ("_tools",)

    def __init__(self, tools: Sequence[Tool]) -> None:
        names = [t.name for t in tools]
        if len(set(names)) != len(names):
            raise ConfigError(f"a toolkit cannot hold two tools of one name: {names}")
        self._tools = tuple(tools)

    def get_tools(self, context: Any = None) -> list[Tool]:
        """The tools (the lab's `ToolProvider` protocol; `context` is not needed)."""
        return list(self._tools)

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools)

    def __len__(self) -> int:
        return len(self._tools)

    def __getitem__(self, name: str) -> Tool:
        for t in self._tools:
            if t.name == name:
                return t
        raise KeyError(name)

    def __add__(self, other: Toolkit) -> Toolkit:
        if not isinstance(other, Toolkit):
            return NotImplemented
        return Toolkit([*self._tools, *other._tools])

    def __repr__(self) -> str:
        return f"Toolkit({[t.name for t in self._tools]})"


def one_string_input(name: str, description: str) -> dict[str, Any]:
    """The input schema of a tool that takes one required string, `name`."""
    return {
        "type": "object",
        "properties": {name: {"type": "string", "description": description}},
        "required": [name],
        "additionalProperties": False,
    }


def from_run(value: T | FromRun[T], ctx: RunContext) -> T:
    """`value`, or what it returns for this call when it is a function of the context."""
    if callable(value) and not isinstance(value, (str, os.PathLike, Mapping)):
        return value(ctx)
    return value


def trace(ctx: RunContext, name: str, data: dict[str, Any]) -> None:
    """A ``tool``-phase trace record of what a toolkit did (a no-op when tracing is off)."""
    tracer = ctx.tracer
    if tracer is not None:
        tracer.record("tool", name, data, buffer=True)
