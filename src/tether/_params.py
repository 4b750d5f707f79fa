"""The one validation layer of an agent's parameters.

`create_agent(...)`, `Runtime.create_agent(...)`, `Runtime(defaults=...)` and the per-run
overrides of `send()` / `run()` / `stream()` check their values here, so one rule says one
thing wherever it is broken. A wrong value is a `ConfigError` naming the parameter, what it
got and what it takes:

- a parameter: ``model= takes a 'provider:model' string, …; got int 3``
- an item of one: ``guardrails[0] must be a Guardrail (define_guardrail); got function``
- a key that belongs elsewhere says where it goes (``'base_url' is a model-config key: it goes
  inside model={...}``)

`where` (``"agent 'researcher'"``, ``"Runtime(defaults=...)"``) prefixes a message when the
call site is not obvious from the traceback alone.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, TypeVar, cast

from .blobs import BlobResolver, BlobStore
from .errors import ConfigError, ModelSettingError
from .llm import (
    CONFIG_KEYS,
    REASONING_TAKES,
    SETTING_KEYS,
    LLMClient,
    model_problem,
    setting_problem,
)
from .llm.base import ModelSettings
from .prompt import PromptLayer, prompt_layer
from .stop import StopCondition
from .tracing import Tracer, TraceSink

__all__ = [
    "MODEL_CONFIG_KEYS",
    "SETTINGS_KEYS",
    "bad",
    "bad_item",
    "check_count",
    "check_function",
    "check_limit",
    "check_mapping",
    "check_max_tool_rounds",
    "check_model",
    "check_services",
    "check_settings",
    "check_stop_when",
    "check_trace",
    "got",
    "merge_settings",
    "model_client_spec",
    "one_of",
    "prompt_layers",
    "sequence_of",
    "where_prefix",
]

T = TypeVar("T")

SETTINGS_KEYS: Final = SETTING_KEYS
"""Every key of `ModelSettings` (`tether.llm.SETTING_KEYS`)."""

MODEL_CONFIG_KEYS: Final = frozenset(CONFIG_KEYS)
"""The keys of a model-config dict (an adapter may take more: they are passed on to it)."""

_MODEL_TAKES = "a 'provider:model' string, a model-config dict or an LLMClient"


def where_prefix(where: str) -> str:
    """``"agent 'a': "`` for a message's start, or nothing without a `where`."""
    return f"{where}: " if where else ""


def got(value: object) -> str:
    """What a message says was given: the type, and the value when it is short and plain."""
    if isinstance(value, str | int | float | bool) or value is None:
        return f"{type(value).__name__} {value!r:.60}"
    return type(value).__name__


def bad(param: str, value: object, takes: str, where: str = "") -> ConfigError:
    """``ConfigError("model= takes …; got int 3")``."""
    return ConfigError(f"{where_prefix(where)}{param}= takes {takes}; got {got(value)}")


def bad_item(param: str, index: object, value: object, takes: str, where: str = "") -> ConfigError:
    """``ConfigError("tools[1] must be a Tool (…); got str 'x'")``."""
    return ConfigError(f"{where_prefix(where)}{param}[{index!r}] must be {takes}; got {got(value)}")


def one_of(
    name: str, value: T | None, alias: str, alias_value: T | None, where: str = ""
) -> T | None:
    """The value of a parameter that has an alias; giving both is a ConfigError."""
    if alias_value is None:
        return value
    if value is not None:
        raise ConfigError(
            f"{where_prefix(where)}{alias}= is another name for {name}=; give only one of them "
            f"(use {name}=)"
        )
    return alias_value


def items_of(
    param: str, value: Any, fits: Callable[[Any], bool], takes: str, item: str, where: str = ""
) -> list[Any]:
    """`value` as a list whose every item `fits`: else the ConfigError that `param` takes
    `takes` (a string, bytes or a mapping is no list), or that an item must be `item`."""
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Sequence):
        raise bad(param, value, takes, where)
    for i, one in enumerate(value):
        if not fits(one):
            raise bad_item(param, i, one, item, where)
    return list(value)


def sequence_of(
    param: str, value: Any, cls: type[T] | tuple[type, ...], takes: str, where: str = ""
) -> list[T]:
    """`value` as a list whose items are all `cls`; a bare item is refused (say `[item]`)."""
    if value is None:
        return []
    return items_of(
        param, value, lambda one: isinstance(one, cls), f"a list of {takes}", takes, where
    )


def prompt_layers(param: str, value: Any) -> list[PromptLayer]:
    """A system prompt as layers: a string is one layer, a PromptLayer is one, a sequence of
    strings and layers is one layer each."""
    takes = "a string, a PromptLayer or a list of those"
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
            raise bad_item(param, i, item, "a string or a PromptLayer")
    return layers


# -- the model -------------------------------------------------------------------------------


def check_model(
    value: Any, where: str = "", param: str = "model"
) -> str | dict[str, Any] | LLMClient | list[Any] | None:
    """A model string, a model-config dict (its keys checked, copied) or an LLMClient; or a
    list of two or more of those (a fallback chain, tried in order; chains do not nest)."""
    if isinstance(value, list | tuple):
        return _check_chain(value, where, param)
    if value is None or isinstance(value, str | LLMClient):
        if isinstance(value, str):
            if not value.strip():
                raise bad(param, value, "'provider:model'", where)
            problem = model_problem(value)
            if problem is not None:
                raise ConfigError(f"{where_prefix(where)}{param}= {problem}")
        return value
    if isinstance(value, Mapping):
        for key in value:
            if not isinstance(key, str):
                raise bad_item(param, key, key, "a string key", where)
            if key in SETTINGS_KEYS and key not in MODEL_CONFIG_KEYS:
                raise ConfigError(
                    f"{where_prefix(where)}{param}={{...}}: {key!r} is a model setting, not a "
                    f"model-config key: pass it as settings={{{key!r}: ...}}"
                )
        model = value.get("model")
        if model is not None and not (isinstance(model, str) and model.strip()):
            raise bad(f"{param}['model']", model, "'provider:model'", where)
        problem = model_problem(model) if model is not None else None
        if problem is not None:
            raise ConfigError(f"{where_prefix(where)}{param}['model'] {problem}")
        if not isinstance(value.get("pricing", True), bool):
            raise bad(f"{param}['pricing']", value["pricing"], "True or False", where)
        return dict(value)
    raise bad(param, value, _MODEL_TAKES, where)


def _check_chain(value: Sequence[Any], where: str, param: str) -> list[Any]:
    if len(value) < 2:
        raise ConfigError(
            f"{where_prefix(where)}{param}=[...] is a fallback chain and takes at least two "
            f"models, got {len(value)}"
        )
    chain: list[Any] = []
    for i, item in enumerate(value):
        if isinstance(item, list | tuple):
            raise ConfigError(
                f"{where_prefix(where)}{param}[{i}] is a list: fallback chains do not nest"
            )
        checked = check_model(item, where, f"{param}[{i}]")
        if checked is None:
            raise bad(f"{param}[{i}]", item, _MODEL_TAKES, where)
        chain.append(checked)
    return chain


def model_client_spec(
    param: str, value: Any
) -> dict[str, Any] | LLMClient | list[dict[str, Any] | LLMClient]:
    """A model as `client_from_config` takes it: a ``"provider:model"`` string becomes
    ``{"model": value}``; a config dict is checked and copied; a client is itself; a list of
    them (a fallback chain, tried in order) is a list of those."""
    if isinstance(value, list | tuple):
        if len(value) < 2:
            raise ConfigError(
                f"{param}=[...] is a fallback chain and takes at least two models, got {len(value)}"
            )
        out: list[dict[str, Any] | LLMClient] = []
        for i, item in enumerate(value):
            spec = model_client_spec(f"{param}[{i}]", item)
            if isinstance(spec, list):
                raise ConfigError(f"{param}[{i}] is a list: fallback chains do not nest")
            out.append(spec)
        return out
    one = check_model(value, "", param)
    if one is None:
        raise bad(param, value, _MODEL_TAKES)
    assert not isinstance(one, list)  # lists were handled above
    return {"model": one} if isinstance(one, str) else one


# -- settings --------------------------------------------------------------------------------


def check_settings(param: str, value: Any, where: str = "") -> ModelSettings | None:
    """Model settings checked key by key by `tether.llm`'s rules (an unknown key or a wrong type
    is a ModelSettingError, a ConfigError, naming the parameter and the key); returns a copy,
    or None for None."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise bad(param, value, f"a dict of model settings ({', '.join(SETTINGS_KEYS)})", where)
    out: dict[str, Any] = {}
    for key, item in value.items():
        if key not in SETTINGS_KEYS:
            if key in MODEL_CONFIG_KEYS:
                raise ModelSettingError(
                    f"{where_prefix(where)}{param}={{...}}: {key!r} is a model-config key: it goes "
                    "inside model={...}",
                    key=str(key),
                )
            close = difflib.get_close_matches(str(key), SETTINGS_KEYS, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ModelSettingError(
                f"{where_prefix(where)}{param}= has an unknown setting {key!r}{hint}; the "
                f"settings are {', '.join(SETTINGS_KEYS)} (use the model config's extra_body "
                "for anything provider-specific)",
                key=str(key),
            )
        problem = setting_problem(key, item)
        if problem is not None:
            takes = REASONING_TAKES if key == "reasoning" else problem[1]
            raise ModelSettingError(
                f"{where_prefix(where)}{param}[{key!r}] takes {takes}; got {got(item)}", key=key
            )
        out[key] = list(item) if key == "stop" else dict(item) if key == "reasoning" else item
    return cast(ModelSettings, out)


def merge_settings(*layers: ModelSettings | None) -> ModelSettings:
    """Settings overlaid key by key, later layers winning (runtime < agent < run)."""
    out: dict[str, Any] = {}
    for layer in layers:
        if layer:
            out.update(layer)
    return cast(ModelSettings, out)


# -- limits, functions, services -------------------------------------------------------------


def check_max_tool_rounds(
    value: Any, where: str = "", param: str = "max_tool_rounds"
) -> int | None:
    """The bound on tool rounds: an integer >= 1, or None for no bound."""
    return check_limit(param, value, where, none="no bound")


def check_limit(param: str, value: Any, where: str = "", none: str = "no limit") -> int | None:
    """A size limit: a positive integer, or None for none."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise bad(param, value, f"an integer >= 1, or None for {none}", where)
    return value


def check_count(param: str, value: Any, where: str = "") -> int | None:
    """A count of retries: an integer >= 0 (0 too), or None for not set."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise bad(param, value, "an integer >= 0", where)
    return value


def check_function(param: str, value: Any, takes: str, where: str = "") -> Any:
    """A callable, or None."""
    if value is not None and not callable(value):
        raise bad(param, value, takes, where)
    return value


def check_mapping(param: str, value: Any, takes: str, where: str = "") -> dict[str, Any] | None:
    """A dict with string keys (copied), or None."""
    if value is None:
        return None
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise bad(param, value, takes, where)
    return dict(value)


def check_services(value: Any, where: str = "", param: str = "services") -> dict[str, Any] | None:
    """What tools receive as `ctx.services`: a dict of named services (copied), or None."""
    return check_mapping(param, value, "a dict of named services", where)


def check_blobs(value: Any, where: str = "") -> BlobResolver | None:
    """Where blob references are read from: a `BlobResolver`, a `BlobStore` (given a resolver
    of its own), or None."""
    if value is None or isinstance(value, BlobResolver):
        return value
    if isinstance(value, BlobStore):
        return BlobResolver(value)
    raise bad("blobs", value, "a tether.blobs.BlobResolver or BlobStore", where)


def check_trace(value: Any, where: str = "") -> bool | TraceSink | None:
    """True, False, None or a sink function (an async one is refused now, not at a turn)."""
    if value is None or isinstance(value, bool):
        return value
    if not callable(value):
        raise bad(
            "trace",
            value,
            "True, False or a sink function (record) -> None, e.g. tether.otel.OtelSink()",
            where,
        )
    sink = cast(TraceSink, value)
    Tracer.from_option(sink, None)
    return sink


def check_stop_when(
    value: Any, where: str = "", param: str = "stop_when"
) -> list[StopCondition] | None:
    """A stop condition or a list of them, or None."""
    if value is None:
        return None
    return items_of(
        param,
        [value] if callable(value) else value,
        callable,
        "a stop condition (e.g. step_count_is(5)) or a list of them",
        "a stop condition (a function of the rounds)",
        where,
    )
