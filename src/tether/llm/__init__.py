"""Providers behind one LLMClient protocol, and `client_from_config()` for model strings.

A model string's prefix names the provider: a built-in adapter (`PROVIDERS`) or one an installed
package declares under the ``tether.providers`` entry point group (`ENTRY_POINT_GROUP`, see
`tether.llm._registry`). An adapter maps one wire format (`anthropic`, `openai_chat`,
`openai_responses`, `gemini`); where its requests go and what authenticates them is its
`tether.llm.credentials.Credentials`.
"""

from __future__ import annotations

from collections.abc import Mapping as _Mapping
from collections.abc import Sequence as _Sequence
from typing import Any as _Any
from typing import Protocol as _Protocol
from typing import cast as _cast

from ..errors import ConfigError as _ConfigError
from ..errors import UnknownProviderError as _UnknownProviderError
from . import _registry
from ._registry import ENTRY_POINT_GROUP, PROVIDERS, provider_names
from ._settings import REASONING_TAKES, SETTING_KEYS, check_settings, setting_problem
from .base import (
    ChatRequest,
    FallbackChunk,
    FinishChunk,
    LLMClient,
    ModelSettings,
    ReasoningSetting,
    RetryChunk,
    StreamChunk,
    SystemBlock,
    TextChunk,
    ThinkingChunk,
    ToolInputDeltaChunk,
    ToolSpec,
)
from .builtin import BuiltinTool, code_execution, file_search, web_search
from .fallback import FallbackClient

__all__ = [
    "CLOUD_KEYS",
    "CONFIG_KEYS",
    "ENTRY_POINT_GROUP",
    "PROVIDERS",
    "REASONING_TAKES",
    "SETTING_KEYS",
    "BuiltinTool",
    "ChatRequest",
    "FallbackChunk",
    "FallbackClient",
    "FinishChunk",
    "LLMClient",
    "ModelSettings",
    "ReasoningSetting",
    "RetryChunk",
    "StreamChunk",
    "SystemBlock",
    "TextChunk",
    "ThinkingChunk",
    "ToolInputDeltaChunk",
    "ToolSpec",
    "check_settings",
    "client_from_config",
    "code_execution",
    "fallback",
    "file_search",
    "model_problem",
    "provider_names",
    "setting_problem",
    "web_search",
]

CONFIG_KEYS = (
    "model",
    "base_url",
    "api_key",
    "headers",
    "max_retries",
    "stream_retries",
    "connect_timeout",
    "first_byte_timeout",
    "idle_timeout",
    "total_timeout",
    "max_connections",
    "extra_body",
    "builtin_tools",
    "pricing",
    "context_window",
)
"""The keys of a model config dict (``model`` required)."""

CLOUD_KEYS: dict[str, tuple[str, ...]] = {
    "bedrock": ("region", "profile", "aws_credentials"),
    "vertex": ("project", "location", "google_credentials"),
    "azure": ("api_version", "azure_credential"),
    "azure-responses": ("api_version", "azure_credential"),
}
"""The further model config keys a cloud provider takes (where and as whom it calls)."""


def model_problem(model: object) -> str | None:
    """What is wrong with `model` as a model string, worded to follow the parameter's name
    ("must be 'provider:model' ..."), or None when it names a known provider. The keyless test
    model is ``"test"`` (or ``"test:echo"``, ``"test:tools"``)."""
    if model == "test":
        return None
    if not isinstance(model, str) or ":" not in model:
        return (
            "must be 'provider:model' (a provider of "
            f"{', '.join(p for p in provider_names() if p != 'test')}) or 'test', "
            f"got {model!r}"
        )
    provider = model.split(":", 1)[0]
    if provider in PROVIDERS:
        return None
    known = provider_names()  # the installed plugins' too: read only for a prefix not built in
    if provider not in known:
        return (
            f"names an unknown provider {provider!r} in {model!r}; known: {', '.join(known)} (a "
            f"package adds one with a {ENTRY_POINT_GROUP!r} entry point)"
        )
    return None


def client_from_config(
    config: str | _Mapping[str, _Any] | LLMClient | _Sequence[_Any],
) -> LLMClient:
    """The adapter for a model: a ``"provider:model"`` string, or a model config dict
    ``{"model": "provider:model", "base_url"?, "api_key"?, "headers"?, "max_retries"?,
    "stream_retries"?, "connect_timeout"?, "first_byte_timeout"?, "idle_timeout"?,
    "total_timeout"?, "max_connections"?, "extra_body"?, "pricing"?, "context_window"?}`` (see
    `CONFIG_KEYS`; `context_window` is the model's input-token window, for history policies); an
    `LLMClient` is returned as is. A key that is not one of these, or a value of the wrong type,
    is a `ConfigError` naming it. ``pricing=False`` is for the run records (no call of the
    client is priced), never sent. A list of any of these is a fallback chain
    (`tether.llm.fallback`)."""
    if isinstance(config, list | tuple):
        return fallback(*config)
    if isinstance(config, str):
        config = {"model": config}
    elif not isinstance(config, _Mapping):
        assert isinstance(config, LLMClient)
        return config
    model = config.get("model")
    own = CLOUD_KEYS.get(model.split(":", 1)[0], ()) if isinstance(model, str) else ()
    unknown = [k for k in config if k not in CONFIG_KEYS and k not in own]
    if unknown:
        raise _ConfigError(
            f"unknown key {unknown[0]!r} in the model config; the keys are "
            f"{', '.join(CONFIG_KEYS)} (model settings such as temperature go in settings=)"
        )
    problem = model_problem(model)
    if problem is not None:
        raise _UnknownProviderError(f"llm.model {problem}")
    assert isinstance(model, str)
    if model == "test":
        model = "test:"
    for key in (
        "base_url",
        "api_key",
        *[k for k in own if not k.endswith(("credentials", "credential"))],
    ):
        value = config.get(key)
        if value is not None and not isinstance(value, str):
            raise _ConfigError(f"the model config's {key} must be a string, got {value!r:.80}")
    for key in ("headers", "extra_body"):
        value = config.get(key)
        if value is not None and not isinstance(value, _Mapping):
            raise _ConfigError(f"the model config's {key} must be a dict, got {value!r:.80}")
    pricing = config.get("pricing", True)
    if not isinstance(pricing, bool):
        raise _ConfigError(
            f"the model config's pricing must be True or False, got {pricing!r:.80} (False "
            "leaves its calls unpriced: a self-hosted server that reuses a known model name)"
        )
    window = _context_window(config.get("context_window"))
    headers = config.get("headers") or {}
    bad = [k for k, v in headers.items() if not isinstance(k, str) or not isinstance(v, str)]
    if bad:
        raise _ConfigError(f"the model config's headers must map strings to strings: {bad[0]!r}")
    provider, name = model.split(":", 1)
    factory = _registry.client_factory(provider, model)
    options = {k: v for k, v in config.items() if k not in ("model", "context_window")}
    client = factory(model=name, **options)
    if not isinstance(client, LLMClient):
        raise _ConfigError(
            f"the {provider!r} provider built {client!r:.80}, which is not an LLMClient "
            "(it has no chat(request) method)"
        )
    if window is not None:
        _set_window(client, provider, window)
    return client


def fallback(*models: _Any) -> FallbackClient:
    """A client that tries `models` in order (each an `LLMClient`, a ``"provider:model"``
    string or a model config dict) when one fails before answering (see the module)."""
    built = [m if isinstance(m, LLMClient) else client_from_config(m) for m in models]
    return FallbackClient(built, owned=[not isinstance(m, LLMClient) for m in models])


def _context_window(window: object) -> int | None:
    """A model config's `context_window`: an integer >= 1 (input tokens), or None."""
    if window is None:
        return None
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        raise _ConfigError(
            f"the model config's context_window must be an integer >= 1 (input tokens), got "
            f"{window!r:.80}"
        )
    return window


class _Windowed(_Protocol):
    """A client that carries its model's input-token window (read by `context_window_of`)."""

    context_window: int


def _set_window(client: LLMClient, provider: str, window: int) -> None:
    try:  # any client whose class does not refuse the attribute (no __slots__ without it)
        _cast(_Windowed, client).context_window = window
    except AttributeError:
        raise _ConfigError(
            f"the {provider!r} provider's client cannot take context_window= (its class has "
            "no such attribute)"
        ) from None
