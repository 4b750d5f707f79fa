"""Checks of the agent's parameters: a wrong value is a ConfigError naming the parameter, what it
got and what it takes. Shared by the harness agent and the lab, so both say the same thing."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final, TypeVar, cast

from .errors import ConfigError, ModelSettingError
from .llm import REASONING_TAKES, SETTING_KEYS, LLMClient, model_problem, setting_problem
from .llm.base import ModelSettings
from .prompt import PromptLayer, prompt_layer

__all__ = [
    "SETTINGS_KEYS",
    "bad",
    "check_limit",
    "check_max_tool_rounds",
    "check_settings",
    "merge_settings",
    "model_client_spec",
    "one_of",
    "prompt_layers",
    "sequence_of",
]

T = TypeVar("T")

SETTINGS_KEYS: Final = SETTING_KEYS
"""Every key of `ModelSettings` (`tether.llm.SETTING_KEYS`)."""


def _got(value: object) -> str:
    if isinstance(value, str | int | float | bool) or value is None:
        return f"{type(value).__name__} {value!r:.60}"
    return type(value).__name__


def bad(param: str, value: object, takes: str) -> ConfigError:
    """``ConfigError("model= takes …; got int 3")``."""
    return ConfigError(f"{param}= takes {takes}; got {_got(value)}")


def one_of(name: str, value: T | None, alias: str, alias_value: T | None) -> T | None:
    """The value of a parameter that has an alias; giving both is a ConfigError."""
    if alias_value is None:
        return value
    if value is not None:
        raise ConfigError(
            f"{alias}= is another name for {name}=; give one of them, not both (use {name}=)"
        )
    return alias_value


def sequence_of(param: str, value: Any, cls: type[T] | tuple[type, ...], takes: str) -> list[T]:
    """`value` as a list whose items are all `cls`; a bare item is refused (say `[item]`)."""
    if value is None:
        return []
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Sequence):
        raise bad(param, value, f"a list of {takes}")
    for i, item in enumerate(value):
        if not isinstance(item, cls):
            raise ConfigError(f"{param}[{i}] must be {takes}; got {_got(item)}")
    return list(value)


def prompt_layers(param: str, value: Any) -> list[PromptLayer]:
    """A system prompt as layers: a string is one layer, a PromptLayer is one, a sequence of
    strings and layers is one layer each."""
    takes = "a string, a PromptLayer, or a list of strings and PromptLayers"
    if value is None:
        return []
    if isinstance(value, str):
        return [prompt_layer("layer0", value)]
    if isinstance(value, PromptLayer):
        return [value]
    if isinstance(value, bytes | Mapping) or not isinstance(value, Sequence):
        raise bad(param, value, takes)
    layers: list[PromptLayer] = []
    for i, item in enumerate(value):
        if isinstance(item, str):
            layers.append(prompt_layer(f"layer{i}", item))
        elif isinstance(item, PromptLayer):
            layers.append(item)
        else:
            raise ConfigError(f"{param}[{i}] must be a string or a PromptLayer; got {_got(item)}")
    return layers


def model_client_spec(param: str, value: Any) -> dict[str, Any] | LLMClient:
    """A model as `client_from_config` takes it: a ``"provider:model"`` string becomes
    ``{"model": value}``; a config dict is copied; a client is itself."""
    if isinstance(value, str):
        problem = model_problem(value)
        if problem is not None:
            raise ConfigError(f"{param}= {problem}")
        return {"model": value}
    if isinstance(value, Mapping):
        problem = model_problem(value.get("model"))
        if problem is not None:
            raise ConfigError(f"{param}['model'] {problem}")
        return dict(value)
    if isinstance(value, LLMClient):
        return value
    raise bad(param, value, "a 'provider:model' string, a model config dict or an LLMClient")


def check_max_tool_rounds(value: Any, param: str = "max_tool_rounds") -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise bad(param, value, "an integer >= 1, or None for no bound")
    return value


def check_limit(param: str, value: Any) -> int | None:
    """A size limit: a positive integer, or None for none."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise bad(param, value, "an integer >= 1, or None for no limit")
    return value


def check_settings(param: str, value: Any) -> ModelSettings:
    """Model settings checked key by key by `tether.llm`'s rules (an unknown key or a wrong type
    is a ModelSettingError, a ConfigError, naming the parameter and the key); returns a copy."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise bad(param, value, f"a dict of model settings ({', '.join(SETTINGS_KEYS)})")
    out: dict[str, Any] = {}
    for key, item in value.items():
        if key not in SETTINGS_KEYS:
            raise ModelSettingError(
                f"{param}= has an unknown setting {key!r}; the settings are "
                f"{', '.join(SETTINGS_KEYS)} (use the model config's extra_body for anything "
                "provider-specific)",
                key=str(key),
            )
        problem = setting_problem(key, item)
        if problem is not None:
            takes = REASONING_TAKES if key == "reasoning" else problem[1]
            raise ModelSettingError(f"{param}['{key}'] takes {takes}; got {_got(item)}", key=key)
        out[key] = list(item) if key == "stop" else dict(item) if key == "reasoning" else item
    return cast(ModelSettings, out)


def merge_settings(*layers: ModelSettings | None) -> ModelSettings:
    """Settings overlaid key by key, later layers winning (runtime < agent < run)."""
    out: dict[str, Any] = {}
    for layer in layers:
        if layer:
            out.update(layer)
    return cast(ModelSettings, out)
