"""Prompt layers: the system prompt, assembled from named parts every turn."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from .context import RunContext
from .errors import ToolDefinitionError
from .llm.base import SystemBlock

__all__ = ["PromptLayer", "assemble_system", "prompt_layer"]

LayerSource = str | Callable[..., str | Awaitable[str]]


@dataclass(slots=True, frozen=True)
class PromptLayer:
    name: str
    source: LayerSource
    cache: bool = False
    takes_ctx: bool = False

    @property
    def is_static(self) -> bool:
        return isinstance(self.source, str)

    async def render(self, ctx: RunContext) -> str:
        src = self.source
        if isinstance(src, str):
            return src
        value = src(ctx) if self.takes_ctx else src()
        if inspect.isawaitable(value):
            value = await value
        if not isinstance(value, str):
            raise TypeError(f"prompt layer {self.name!r} returned {type(value).__name__}, not str")
        return value


def prompt_layer(name: str, source: LayerSource, *, cache: bool = False) -> PromptLayer:
    """A named part of the system prompt: a string, or a function (sync or async, optionally
    taking `ctx`) evaluated every turn. Only static layers may be cached."""
    if cache and not isinstance(source, str):
        raise ToolDefinitionError(
            f"prompt layer {name!r}: a dynamic layer is evaluated every turn and cannot be cached"
        )
    takes_ctx = not isinstance(source, str) and bool(inspect.signature(source).parameters)
    return PromptLayer(name, source, cache, takes_ctx)


def static_blocks(layers: Sequence[PromptLayer]) -> list[SystemBlock]:
    """The static layers as blocks, cache_control on the last cached one. Computed once.

    An empty layer is left out (an empty system block is an error on Anthropic), so the cache
    breakpoint lands on the last non-empty cached layer."""
    blocks: list[SystemBlock] = []
    last_cached = -1
    for layer in layers:
        source = layer.source
        if isinstance(source, str) and source:
            if layer.cache:
                last_cached = len(blocks)
            blocks.append({"type": "text", "text": source})
    if last_cached >= 0:
        blocks[last_cached]["cache_control"] = {"type": "ephemeral"}
    return blocks


async def assemble_system(
    static: list[SystemBlock], dynamic: Sequence[PromptLayer], extra: Sequence[str], ctx: RunContext
) -> list[SystemBlock]:
    """Static blocks first, then this turn's dynamic layers, then attached resources."""
    if not dynamic and not extra:
        return static
    blocks = list(static)
    for layer in dynamic:
        text = await layer.render(ctx)
        if text:
            blocks.append({"type": "text", "text": text})
    blocks.extend({"type": "text", "text": t} for t in extra)
    return blocks
