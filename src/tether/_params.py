"""Checks of the agent's parameters: a wrong value is a ConfigError naming the parameter, what it
got and what it takes. Shared by the harness agent and the lab, so both say the same thing."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final, TypeVar, cast

from .errors import ConfigError, ModelSettingError
from .llm import LLMClient
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

SETTINGS_KEYS: Final = (
    "temperature",
    "max_tokens",
    "top_p",
    "stop",
    "seed",
    "tool_choice",
    "parallel_tool_calls",
    "reasoning",
)


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
        return {"model": value}
    if isinstance(value, Mapping):
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


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


_REASONING = "{'effort': 'low'|'medium'|'high'} or {'budget_tokens': int >= 0}"


def _reasoning(param: str, value: Any) -> None:
    if isinstance(value, Mapping) and len(value) == 1:
        ((key, inner),) = value.items()
        if key == "effort" and inner in ("low", "medium", "high"):
            return
        if key == "budget_tokens" and _int(inner) and inner >= 0:
            return
    raise ModelSettingError(
        f"{param}['reasoning'] takes {_REASONING}; got {_got(value)}", key="reasoning"
    )


_CHECKS: dict[str, tuple[Any, str]] = {
    "temperature": (lambda v: _number(v) and v >= 0, "a number >= 0"),
    "max_tokens": (lambda v: _int(v) and v > 0, "an integer >= 1"),
    "top_p": (lambda v: _number(v) and v >= 0, "a number >= 0"),
    "stop": (
        lambda v: (
            isinstance(v, list | tuple) and bool(v) and all(isinstance(s, str) and s for s in v)
        ),
        "a non-empty list of non-empty strings",
    ),
    "seed": (_int, "an integer"),
    "tool_choice": (
        lambda v: isinstance(v, str) and bool(v),
        "'auto', 'none', 'required' or a tool's name",
    ),
    "parallel_tool_calls": (lambda v: isinstance(v, bool), "True or False"),
}


def check_settings(param: str, value: Any) -> ModelSettings:
    """Model settings checked key by key (an unknown key or a wrong type is a
    ModelSettingError, a ConfigError, naming the parameter and the key); returns a copy."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise bad(param, value, f"a dict of model settings ({', '.join(SETTINGS_KEYS)})")
    out: dict[str, Any] = {}
    for key, item in value.items():
        if key == "reasoning":
            _reasoning(param, item)
            out[key] = dict(item)
            continue
        check = _CHECKS.get(key)
        if check is None:
            raise ModelSettingError(
                f"{param}= has an unknown setting {key!r}; the settings are "
                f"{', '.join(SETTINGS_KEYS)} (use the model config's extra_body for anything "
                "provider-specific)",
                key=str(key),
            )
        if not check[0](item):
            raise ModelSettingError(
                f"{param}['{key}'] takes {check[1]}; got {_got(item)}", key=str(key)
            )
        out[key] = list(item) if key == "stop" else item
    return cast(ModelSettings, out)


def merge_settings(*layers: ModelSettings | None) -> ModelSettings:
    """Settings overlaid key by key, later layers winning (runtime < agent < run)."""
    out: dict[str, Any] = {}
    for layer in layers:
        if layer:
            out.update(layer)
    return cast(ModelSettings, out)
