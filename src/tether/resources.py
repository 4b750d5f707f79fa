"""Resources: data the harness attaches to the prompt (`attach`) or the model reads (`tool`)."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from .context import RunContext
from .errors import ToolDefinitionError
from .tools import Tool, define_tool, output_text

__all__ = ["Resource", "attach_envelope", "define_resource"]

_STRUCTURAL = re.compile(r"<(/?resource)", re.IGNORECASE)
_ATTR = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"})


@dataclass(slots=True, eq=False)
class Resource:
    name: str
    mode: Literal["attach", "tool"]
    get: Callable[..., Any]
    description: str = ""
    input_schema: dict[str, Any] | None = None

    async def read(self, value: Any, ctx: RunContext) -> str:
        """Call `get` and return its body; non-string results are JSON-serialized."""
        fn = self.get
        n = _positional_count(fn)
        result = fn(value, ctx) if n >= 2 else fn(value) if n == 1 else fn()
        if inspect.isawaitable(result):
            result = await result
        return result if isinstance(result, str) else output_text(result)

    def as_tool(self) -> Tool:
        """The read-only `read_<name>` tool taking `input_schema`'s arguments."""

        async def execute(value: Any, ctx: RunContext) -> str:
            return await self.read(value, ctx)

        return define_tool(
            name=f"read_{self.name}",
            description=self.description or f"Read the {self.name} resource.",
            input_schema=self.input_schema or {"type": "object", "properties": {}},
            execute=execute,
        )


def _positional_count(fn: Callable[..., Any]) -> int:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return 2
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return 2
    return sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)


def define_resource(
    *,
    name: str,
    get: Callable[..., Any],
    mode: Literal["attach", "tool"] = "attach",
    description: str = "",
    input_schema: dict[str, Any] | None = None,
) -> Resource:
    """`get(input, ctx)` may be sync or async and take fewer arguments; `ctx.signal` is the
    turn's cancellation. `attach` inlines the body every turn; `tool` exposes `read_<name>`."""
    if mode not in ("attach", "tool"):
        raise ToolDefinitionError(f"resource {name!r}: mode must be 'attach' or 'tool'")
    if not name:
        raise ToolDefinitionError("a resource needs a name")
    return Resource(name, mode, get, description, input_schema)


def attach_envelope(name: str, body: str, description: str = "") -> str:
    """Wrap a body so it cannot close its own envelope.

    Only ``<resource`` and ``</resource`` (any case) are escaped in the body; every other byte
    arrives as is. Attribute values escape the five XML specials.
    """
    attrs = f' name="{name.translate(_ATTR)}"'
    if description:
        attrs += f' description="{description.translate(_ATTR)}"'
    safe = _STRUCTURAL.sub(r"&lt;\1", body)
    return f"<resource{attrs}>\n{safe}\n</resource>"
