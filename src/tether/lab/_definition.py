"""A lab agent's definition: every harness part under the harness's own name, checked once.

`Runtime.create_agent(...)`, `Runtime(defaults=...)` and the per-run overrides of `run()` /
`stream()` all come through here. A value of the wrong type is a `ConfigError` naming the
parameter, what it got and what it takes; a key that belongs somewhere else (`base_url`,
`temperature`) says where it goes. Precedence is run > agent > runtime defaults; the model
config, the settings and the services merge key by key, every other part is replaced whole.

The keywords are `LabAgentOptions` / `AgentDefaults`, built on the harness's `AgentParts`
(`tether._options`); each value is checked by the harness's own rules (`tether._params`), so
the lab and `tether.create_agent` say the same thing about the same mistake. What is the lab's
alone is here: the keys and where a misplaced one goes, the model merged over layers, the tools
as a dict or a `ToolProvider`, and the system prompt's static (pinned) and dynamic layers.

The two seeds spell two concepts differently. tether has one name for each and accepts the
other seed's spelling as an alias, here and in `tether.create_agent`:

| canonical        | alias     |
|------------------|-----------|
| `model=`         | `llm=`    |
| `system_prompt=` | `prompt=` |
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

from .._options import AgentParts, keys_of
from .._params import (
    MODEL_CONFIG_KEYS,
    SETTINGS_KEYS,
    bad,
    bad_item,
    check_count,
    check_function,
    check_limit,
    check_max_tool_rounds,
    check_model,
    check_services,
    check_settings,
    check_stop_when,
    check_trace,
    merge_settings,
    one_of,
    sequence_of,
    where_prefix,
)
from ..errors import ConfigError
from ..guardrails import Guardrail
from ..history import check_history
from ..integrations import IntegrationSource
from ..llm import LLMClient
from ..llm.base import ModelSettings
from ..prompt import PromptLayer, prompt_layer
from ..resources import Resource
from ..stop import StopCondition
from ..stores.message_store import MessageStore
from ..tools import Tool
from ..tracing import TraceSink
from ..turn import ModelSpec
from ..workflows import Workflow
from ._handoffs import check_handoffs
from ._recorder import RecordingLevel, check_recording
from ._template import Template
from ._tools import ToolProvider, ToolsSpec, check_tool_set, is_provider

__all__ = [
    "AGENT_KEYS",
    "ALIASES",
    "MODEL_CONFIG_KEYS",
    "SETTINGS_KEYS",
    "AgentDefaults",
    "LabAgentOptions",
    "ModelSpec",
    "SystemPrompt",
    "SystemPromptSpec",
    "check_keys",
    "check_tools",
    "merge_models",
    "resolve_aliases",
]

SystemPromptPart: TypeAlias = str | PromptLayer | Template
SystemPromptSpec: TypeAlias = SystemPromptPart | Sequence[SystemPromptPart]
"""A string (one layer), a `PromptLayer` (static or dynamic), a lab `Template`, or a list of
those."""

ALIASES: Final[Mapping[str, str]] = {"llm": "model", "prompt": "system_prompt"}
"""The other seed's spelling -> tether's one name."""


class LabAgentOptions(AgentParts, total=False):
    """The keywords of `Runtime.create_agent` besides `id` and `output_schema`: every harness
    part (`AgentParts`) under its harness name, and what persistence adds."""

    system_prompt: SystemPromptSpec | None
    prompt: SystemPromptSpec | None
    """The harness seed's name for `system_prompt` (give one of the two)."""
    tools: ToolsSpec | None
    title_workflow: Workflow[Any, Any] | None
    max_retries: int | None
    stream_retries: int | None
    memory_store: MessageStore | None
    description: str | None
    recording: RecordingLevel | None
    approval_timeout: float | None
    handoffs: Sequence[Any] | None
    """Lab agents, their ids or `LabHandoff`s this agent may hand the conversation over to
    (`tether.lab.LabHandoff`)."""


class AgentDefaults(LabAgentOptions, total=False):
    """`Runtime(defaults=...)`: the keys of an agent (its `id` aside), used by every agent
    that does not set them."""

    output_schema: Any


AGENT_KEYS: Final = tuple(sorted(keys_of(AgentDefaults) - set(ALIASES)))
"""The keywords of `Runtime.create_agent` besides `id` (aliases aside), and so the keys of
`Runtime(defaults=)`."""


# -- keys ------------------------------------------------------------------------------------


def _where(where: str) -> str:
    return f"{where}: " if where else ""


def check_keys(keys: Sequence[str], allowed: Sequence[str], where: str) -> None:
    """Refuse keys that are not agent keys, saying where each goes instead.

    Raises:
        ConfigError: naming the key and where it belongs (inside `model={...}`, inside
            `settings={...}`, on `create_agent` for `id`) or the closest known key.
    """
    known = set(allowed) | set(ALIASES)
    for key in keys:
        if key in known:
            continue
        raise ConfigError(f"{where_prefix(where)}{misplaced(key, known)}")


def misplaced(key: str, known: set[str]) -> str:
    """What to say about an unknown key `key`."""
    if key in MODEL_CONFIG_KEYS:
        return (
            f"{key!r} is a model-config key: it goes inside model={{...}}, e.g. "
            f"model={{'model': 'openai:gpt-4o', {key!r}: ...}}"
        )
    if key in SETTINGS_KEYS:
        return (
            f"{key!r} is a model setting: it goes inside settings={{...}}, e.g. "
            f"settings={{{key!r}: ...}}"
        )
    if key == "id":
        return "'id' names one agent; give it to create_agent(id=...), not as a default"
    close = difflib.get_close_matches(key, sorted(known), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"unknown key {key!r}{hint}; the keys are {', '.join(sorted(known - set(ALIASES)))}"


def resolve_aliases(values: dict[str, Any], where: str) -> dict[str, Any]:
    """`values` with `llm=` / `prompt=` under their canonical names (given both: an error)."""
    for alias, name in ALIASES.items():
        if alias in values:
            value = one_of(name, values.get(name), alias, values.pop(alias), where)
            if value is not None:
                values[name] = value
    return values


# -- the model -------------------------------------------------------------------------------


_PROVIDER_BOUND = ("base_url", "api_key", "headers", "extra_body", "pricing")
"""Model-config keys that belong to one provider: a layer naming a model of another provider
drops them from the layers below it."""


def _provider(model: Any) -> str | None:
    """The provider part of a model string (None: no model, or a layer that does not name one)."""
    if not isinstance(model, str):
        return None
    return model.split(":", 1)[0] if ":" in model else model


def merge_models(
    layers: Sequence[ModelSpec | list[Any] | None], where: str
) -> dict[str, Any] | LLMClient | list[Any]:
    """The model of one episode from `layers`, lowest precedence first (runtime defaults,
    agent, run). Strings and config dicts merge key by key; a client object replaces what is
    below it, and only a config naming a `model` can replace a client. A layer whose model is
    another provider's drops the provider-bound keys below it (`base_url`, `api_key`,
    `headers`, `extra_body`, `pricing`): they were written for the other provider.

    Raises:
        ConfigError: no layer names a model, or config keys would apply to a client object.
    """
    acc: dict[str, Any] | LLMClient | list[Any] | None = None
    for spec in layers:
        if spec is None:
            continue
        if isinstance(spec, list):  # a fallback chain replaces what is below it
            acc = [{"model": m} if isinstance(m, str) else m for m in spec]
            continue
        if isinstance(acc, list) and isinstance(spec, Mapping) and "model" not in spec:
            raise ConfigError(
                f"{where_prefix(where)}model config {sorted(spec)} cannot apply to a fallback "
                "chain; give each model of the chain its config, or name one model"
            )
        if isinstance(acc, list):
            acc = None  # a model named above a chain replaces it
        if not isinstance(spec, str | Mapping):
            acc = spec  # check_model let only a client through (no Protocol check per turn)
            continue
        config = {"model": spec} if isinstance(spec, str) else dict(spec)
        if isinstance(acc, LLMClient) and "model" not in config:
            raise ConfigError(
                f"{where_prefix(where)}model config {sorted(config)} cannot apply to a client "
                f"object ({type(acc).__name__}); give the model as 'provider:model' or a config "
                "dict with a 'model' key, or set these on the client"
            )
        below = _provider(acc.get("model")) if isinstance(acc, dict) else None
        above = _provider(config.get("model"))
        if isinstance(acc, dict) and below and above and below != above:
            # Another provider's endpoint, key and wire extras would be sent to this one
            # (an OpenAI base_url under -m anthropic:... posts to /v1/v1/messages).
            acc = {k: v for k, v in acc.items() if k not in _PROVIDER_BOUND}
        acc = config if acc is None or isinstance(acc, LLMClient) else {**acc, **config}
    if acc is None or (isinstance(acc, dict) and acc.get("model") is None):
        raise ConfigError(
            f"{where_prefix(where)}no model: pass model='provider:model' to create_agent or run(), "
            "or give the runtime a default with Runtime(defaults={'model': ...})"
        )
    return acc


# -- tools -----------------------------------------------------------------------------------

_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def check_tools(value: Any, where: str) -> list[Tool] | ToolProvider | None:
    """A list of tools, a dict of them (the key names the tool), or a ToolProvider."""
    if value is None:
        return None
    if is_provider(value):
        return value
    if isinstance(value, Mapping):
        tools: list[Tool] = []
        for key, tool in value.items():
            if not isinstance(tool, Tool):
                raise bad_item("tools", key, tool, "a Tool (define_tool or @tool)", where)
            if not isinstance(key, str) or not _TOOL_NAME.match(key):
                raise ConfigError(
                    f"{where_prefix(where)}tools: the key {key!r} names a tool, and a tool name is "
                    "1-64 letters, digits, '_' or '-'"
                )
            tools.append(tool if tool.name == key else dataclasses.replace(tool, name=key))
        return check_tool_set(tools, where)
    return check_tool_set(value, where)


# -- the system prompt -----------------------------------------------------------------------


@dataclass(slots=True, frozen=True)
class StaticLayer:
    """A layer whose text is fixed for a conversation: what a new scope pins."""

    name: str
    source: str | Template
    cache: bool = False

    def render(self) -> str:
        return self.source if isinstance(self.source, str) else self.source.render()


@dataclass(slots=True, frozen=True)
class SystemPrompt:
    """The system prompt in two kinds of layer.

    The static layers (strings, static `PromptLayer`s, templates) are what a new memory scope
    pins: their text, rendered when the scope's first episode runs, is stored as its first
    record and reused by every later episode. The dynamic layers (a `PromptLayer` from a
    function) and attached resources come after it on every turn; they are never stored and
    never compared for conflicts.
    """

    static: tuple[StaticLayer, ...] = ()
    dynamic: tuple[PromptLayer, ...] = ()

    @classmethod
    def of(cls, value: Any, where: str) -> SystemPrompt:
        """From a string, a PromptLayer, a Template, or a list of those."""
        if value is None:
            return cls()
        items = [value] if isinstance(value, str | PromptLayer | Template) else value
        takes = "a string, a PromptLayer, a Template or a list of those"
        if isinstance(items, bytes | Mapping) or not isinstance(items, Sequence):
            raise bad("system_prompt", value, takes, where)
        static: list[StaticLayer] = []
        dynamic: list[PromptLayer] = []
        for i, item in enumerate(items):
            if isinstance(item, str):
                static.append(StaticLayer(f"system{i}" if i else "system", item))
            elif isinstance(item, Template):
                static.append(StaticLayer(item.name, item))
            elif isinstance(item, PromptLayer):
                if isinstance(item.source, str):
                    static.append(StaticLayer(item.name, item.source, item.cache))
                else:
                    dynamic.append(item)
            else:
                raise bad_item("system_prompt", i, item, takes, where)
        return cls(tuple(static), tuple(dynamic))

    @property
    def caches(self) -> bool:
        """True when a static layer asks to be cached."""
        return any(layer.cache for layer in self.static)

    @property
    def templates(self) -> list[Template]:
        return [layer.source for layer in self.static if isinstance(layer.source, Template)]

    def render_static(self) -> list[str]:
        """The text of each non-empty static layer, rendered now.

        Raises:
            TemplateError: a template cannot render (naming it and the variable).
        """
        return [text for text in (layer.render() for layer in self.static) if text]

    def layers(self, texts: Sequence[str]) -> list[PromptLayer]:
        """This turn's prompt: the pinned (or current) static `texts`, then the dynamic layers.
        A pinned prompt is cached whole when this definition caches any static layer: the pin
        never changes for the scope, so it is all a stable prefix."""
        cache = self.caches
        last = len(texts) - 1
        out = [
            prompt_layer(f"pinned{i}" if i else "pinned", text, cache=cache and i == last)
            for i, text in enumerate(texts)
        ]
        out.extend(self.dynamic)
        return out


# -- the whole definition ----------------------------------------------------------------------


@dataclass(slots=True, frozen=True)
class Definition:
    """Checked agent parts; None everywhere means "not set here" (see `over`)."""

    model: ModelSpec | list[Any] | None = None
    system_prompt: SystemPrompt | None = None
    settings: ModelSettings | None = None
    tools: list[Tool] | ToolProvider | None = None
    resources: list[Resource] | None = None
    integrations: list[IntegrationSource] | None = None
    guardrails: list[Guardrail] | None = None
    services: dict[str, Any] | None = None
    trace: bool | TraceSink | None = None
    max_tool_rounds: int | None = None
    max_tool_result_chars: int | None = None
    stop_when: list[StopCondition] | None = None
    on_tool_call: Callable[..., Any] | None = None
    history: list[Any] | None = None
    output_schema: Any = None
    title_workflow: Workflow[Any, Any] | None = None
    max_retries: int | None = None
    stream_retries: int | None = None
    memory_store: MessageStore | None = None
    description: str | None = None
    recording: RecordingLevel | None = None
    """How much of each model request a run records (`tether.lab._recorder`)."""
    approval_timeout: float | None = None
    """Seconds a paused run's calls wait for a decision before they are denied as "expired"
    (a tool's own `approval_timeout` wins for its calls); None: they wait for ever."""
    handoffs: list[Any] | None = None
    """The agent's handoff targets (`LabHandoff`s)."""
    max_handoffs: int | None = None
    """How many times one turn may be handed over (None: the default, 5)."""

    @classmethod
    def check(cls, values: Mapping[str, Any], where: str) -> Definition:
        """Check every value (aliases resolved; unknown keys refused with where they go).

        Raises:
            ConfigError: naming the parameter, what it got and what it takes.
        """
        check_keys(list(values), AGENT_KEYS, where)
        v = resolve_aliases(dict(values), where)
        title = v.get("title_workflow")
        if title is not None and not isinstance(title, Workflow):
            raise bad("title_workflow", title, "a workflow (runtime.create_workflow)", where)
        store = v.get("memory_store")
        if store is not None and not all(hasattr(store, m) for m in ("load", "append")):
            raise bad("memory_store", store, "a MessageStore", where)
        description = v.get("description")
        if description is not None and not isinstance(description, str):
            raise bad("description", description, "a string", where)
        prompt = v.get("system_prompt")
        recording = v.get("recording")
        timeout = v.get("approval_timeout")
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0
        ):
            raise bad("approval_timeout", timeout, "a positive number of seconds", where)
        return cls(
            model=check_model(
                v.get("model"), where, "llm" if values.get("llm") is not None else "model"
            ),
            system_prompt=SystemPrompt.of(prompt, where) if prompt is not None else None,
            settings=check_settings("settings", v.get("settings"), where),
            tools=check_tools(v.get("tools"), where),
            resources=_list("resources", v, Resource, "a Resource (define_resource)", where),
            integrations=_list(
                "integrations",
                v,
                IntegrationSource,
                "an MCP source (mcp_server / mcp_stdio)",
                where,
            ),
            guardrails=_list("guardrails", v, Guardrail, "a Guardrail (define_guardrail)", where),
            services=check_services(v.get("services"), where),
            trace=check_trace(v.get("trace"), where),
            max_tool_rounds=check_max_tool_rounds(v.get("max_tool_rounds"), where),
            max_tool_result_chars=check_limit(
                "max_tool_result_chars", v.get("max_tool_result_chars"), where
            ),
            stop_when=check_stop_when(v.get("stop_when"), where),
            on_tool_call=check_function(
                "on_tool_call",
                v.get("on_tool_call"),
                "a function (call, ctx) -> decision | None",
                where,
            ),
            history=check_history(v.get("history"), where),
            output_schema=v.get("output_schema"),
            title_workflow=title,
            max_retries=check_count("max_retries", v.get("max_retries"), where),
            stream_retries=check_count("stream_retries", v.get("stream_retries"), where),
            memory_store=store,
            description=description,
            recording=(
                check_recording(recording, f"{where_prefix(where)}recording")
                if recording is not None
                else None
            ),
            approval_timeout=float(timeout) if timeout is not None else None,
            handoffs=check_handoffs(v.get("handoffs"), where),
            max_handoffs=check_count("max_handoffs", v.get("max_handoffs"), where),
        )

    def over(self, base: Definition) -> Definition:
        """This definition with `base` filling what it does not set: the model config, the
        settings and the services merge key by key (this one's keys win), the rest is replaced
        whole."""
        values: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            mine, theirs = getattr(self, f.name), getattr(base, f.name)
            values[f.name] = mine if mine is not None else theirs
        values["model"] = fold_models([base.model, self.model])
        values["settings"] = merge_settings(base.settings, self.settings) or None
        if base.services and self.services:
            values["services"] = {**base.services, **self.services}
        return Definition(**values)


def fold_models(layers: Sequence[ModelSpec | list[Any] | None]) -> ModelSpec | list[Any] | None:
    """`merge_models` without its checks: None when no layer names a model (yet)."""
    acc: ModelSpec | list[Any] | None = None
    for spec in layers:
        if spec is None:
            continue
        if acc is None or isinstance(spec, LLMClient | list) or isinstance(acc, LLMClient | list):
            acc = spec
            continue
        below = {"model": acc} if isinstance(acc, str) else dict(acc)
        above = {"model": spec} if isinstance(spec, str) else dict(spec)
        acc = {**below, **above}
    return acc


def model_label(spec: ModelSpec | list[Any] | None) -> str:
    """How a model is shown (CLI listings, the UI): the model string, a config's `model`
    (never its key or headers), or a client's ``provider:model``; "(none)" without one; a
    fallback chain as its models in order, joined by " → "."""
    if spec is None:
        return "(none)"
    if isinstance(spec, list):
        return " → ".join(model_label(s) for s in spec)
    if isinstance(spec, str):
        return spec
    if isinstance(spec, Mapping):
        model = spec.get("model")
        return str(model) if model is not None else "(config without a model)"
    model = getattr(spec, "model", None)
    provider = getattr(spec, "provider", None)
    if isinstance(model, str) and isinstance(provider, str):
        return f"{provider}:{model}"
    if isinstance(model, str):
        return f"{model} ({type(spec).__name__})"
    return type(spec).__name__


def _list(
    name: str, values: Mapping[str, Any], kind: type, takes: str, where: str
) -> list[Any] | None:
    value = values.get(name)
    return None if value is None else sequence_of(name, value, kind, takes, where)
