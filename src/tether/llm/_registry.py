"""Which client a model string's provider prefix names: the built-in adapters, then any installed
distribution's ``tether.providers`` entry points.

A third-party package adds a provider without editing tether by declaring, in its own
``pyproject.toml``::

    [project.entry-points."tether.providers"]
    acme = "acme_tether:AcmeClient"

after which ``"acme:some-model"`` (or ``{"model": "acme:some-model", ...}``) builds
``AcmeClient(model="some-model", **options)``, where the options are the model config's other
keys. The object an entry point names is any callable taking those keywords and returning an
`LLMClient` — usually an `HTTPAdapter` subclass with its own `Credentials`, or an existing
adapter's subclass that only changes the credentials (a cloud that speaks a known wire format).

The built-in names (`PROVIDERS`) always win: an entry point that reuses one is ignored, so an
installed package cannot redirect ``openai:`` calls. Entry points are read when a prefix is not
built in, never at import, so ``import tether`` stays as fast with plugins installed.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError, UnknownProviderError
from .base import LLMClient

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

__all__ = ["ENTRY_POINT_GROUP", "PROVIDERS", "client_factory", "provider_names"]

ENTRY_POINT_GROUP = "tether.providers"

PROVIDERS: dict[str, str] = {
    "anthropic": "tether.llm.anthropic:AnthropicClient",
    "azure": "tether.llm.azure:AzureChatClient",
    "azure-responses": "tether.llm.azure:AzureResponsesClient",
    "bedrock": "tether.llm.bedrock:BedrockClient",
    "vertex": "tether.llm.vertex:vertex",
    "openai": "tether.llm.openai_chat:OpenAIChatClient",
    "openai-responses": "tether.llm.openai_responses:OpenAIResponsesClient",
    "gemini": "tether.llm.gemini:GeminiClient",
    "test": "tether.llm.test:TestModel",
}
"""The built-in providers: prefix → ``"module:Class"`` of its adapter, imported on first use."""

ClientFactory = Callable[..., LLMClient]
"""Builds a client: ``factory(model=<name after the prefix>, **options)``."""


def _plugins() -> dict[str, list[EntryPoint]]:
    """The group's entry points by name, each distribution counted once (the first on sys.path,
    as imports find it). Read per distribution: `entry_points()` would keep only one of two
    packages that declare the same name, hiding the conflict."""
    from importlib.metadata import distributions

    found: dict[str, list[EntryPoint]] = {}
    seen: set[str] = set()
    for dist in distributions():
        mine = [e for e in dist.entry_points if e.group == ENTRY_POINT_GROUP]
        if not mine:
            continue  # most distributions: their metadata is never parsed
        name = re.sub(r"[-_.]+", "-", dist.metadata["Name"] or "").lower()
        if name in seen:
            continue
        seen.add(name)
        for ep in mine:
            if ep.name not in PROVIDERS:
                found.setdefault(ep.name, []).append(ep)
    return found


def provider_names() -> list[str]:
    """Every prefix a model string may use: the built-in ones, then the installed plugins'."""
    return [*PROVIDERS, *sorted(_plugins())]


def _origin(ep: EntryPoint) -> str:
    dist = ep.dist
    where = f"distribution {dist.name} {dist.version}" if dist is not None else "an entry point"
    return f"{where} ({ENTRY_POINT_GROUP}: {ep.name} = {ep.value})"


def client_factory(provider: str, model: str) -> ClientFactory:
    """The callable that builds `provider`'s client; `model` is the whole model string, for
    messages. Raises `UnknownProviderError` for a prefix nothing provides, and `ConfigError` for
    a plugin that does not load or names something that is not callable."""
    target = PROVIDERS.get(provider)
    if target is not None:
        module_name, attr = target.split(":")
        factory: ClientFactory = getattr(importlib.import_module(module_name), attr)
        return factory
    plugins = _plugins()
    candidates = plugins.get(provider)
    if not candidates:
        raise UnknownProviderError(
            f"unknown provider {provider!r} in {model!r}; known: "
            f"{', '.join([*PROVIDERS, *sorted(plugins)])} (a package adds one with a "
            f"{ENTRY_POINT_GROUP!r} entry point)"
        )
    if len(candidates) > 1:
        raise ConfigError(
            f"provider {provider!r} is declared by more than one installed package: "
            f"{'; '.join(_origin(ep) for ep in candidates)}; uninstall all but one"
        )
    ep = candidates[0]
    try:
        loaded: Any = ep.load()
    except Exception as exc:
        raise ConfigError(
            f"provider {provider!r} from {_origin(ep)} failed to load: {type(exc).__name__}: {exc}"
        ) from exc
    if not callable(loaded):
        raise ConfigError(
            f"provider {provider!r} from {_origin(ep)} names {loaded!r:.80}, which is not a "
            "callable that builds a client"
        )
    factory = loaded
    return factory
