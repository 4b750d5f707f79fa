"""Checking portable `ModelSettings` before an adapter maps them to its wire.

`check_settings` refuses an unknown key or a value of the wrong type, naming the key and what it
takes; each adapter then maps every key it can honour and raises `unsupported()` for the others,
so a setting is never silently dropped. `extra_body` in the model config stays the escape hatch
for anything provider-specific (it is merged after the settings, so it wins).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..errors import ModelSettingError
from .base import ChatRequest

__all__ = [
    "EFFORTS",
    "REASONING_TAKES",
    "SETTING_KEYS",
    "check_settings",
    "forced_tool",
    "reasoning_effort",
    "setting_problem",
    "tool_settings",
    "unsupported",
]

SETTING_KEYS = (
    "temperature",
    "max_tokens",
    "top_p",
    "stop",
    "seed",
    "tool_choice",
    "parallel_tool_calls",
    "reasoning",
)
"""Every key of `ModelSettings`, in the order adapters write them."""

EFFORTS = ("low", "medium", "high")
_CHOICES = ("auto", "none", "required")


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


_Rule = tuple[Callable[[Any], bool], str]

_RULES: dict[str, _Rule] = {
    "temperature": (lambda v: _number(v) and v >= 0, "a number >= 0"),
    "max_tokens": (lambda v: _int(v) and v >= 1, "a positive int"),
    "top_p": (lambda v: _number(v) and v >= 0, "a number >= 0"),
    "stop": (
        lambda v: (
            isinstance(v, list | tuple) and bool(v) and all(isinstance(s, str) and s for s in v)
        ),
        "a non-empty list of non-empty strings",
    ),
    "seed": (_int, "an int"),
    "tool_choice": (
        lambda v: isinstance(v, str) and bool(v),
        "'auto', 'none', 'required' or a tool's name",
    ),
    "parallel_tool_calls": (lambda v: isinstance(v, bool), "a bool"),
}

REASONING_TAKES = "{'effort': 'low' | 'medium' | 'high'} or {'budget_tokens': int >= 0}"
"""What the `reasoning` setting takes, for error messages."""


def setting_problem(key: str, value: Any) -> tuple[str, str, Any] | None:
    """What is wrong with `value` for the known setting `key`: the key it concerns (dotted for a
    nested one, ``reasoning.effort``), what that takes, and the offending value; None when it is
    right. The one source of the settings' rules: callers word the error for their parameter."""
    if key == "reasoning":
        return _reasoning_problem(value)
    test, takes = _RULES[key]
    return None if test(value) else (key, takes, value)


def _reasoning_problem(value: Any) -> tuple[str, str, Any] | None:
    if not isinstance(value, Mapping) or len(value) != 1:
        return ("reasoning", f"exactly one of {REASONING_TAKES}", value)
    ((key, inner),) = value.items()
    if key == "effort":
        return (
            None
            if inner in EFFORTS
            else ("reasoning.effort", f"one of {', '.join(EFFORTS)}", inner)
        )
    if key == "budget_tokens":
        ok = _int(inner) and inner >= 0
        return None if ok else ("reasoning.budget_tokens", "an int >= 0", inner)
    return ("reasoning", REASONING_TAKES, value)


def check_settings(settings: Mapping[str, Any]) -> None:
    """Raise `ModelSettingError` for an unknown key or a value of the wrong type."""
    for key, value in settings.items():
        if key not in SETTING_KEYS:
            raise ModelSettingError(
                f"unknown model setting {key!r}; the settings are {', '.join(SETTING_KEYS)} "
                "(anything provider-specific goes in the model config's extra_body)",
                key=str(key),
            )
        problem = setting_problem(key, value)
        if problem is None:
            continue
        path, takes, got = problem
        if "." not in path:
            raise ModelSettingError(
                f"settings[{key!r}] takes {takes}, got {got!r:.80}", key=key, provider=None
            )
        outer, inner = path.split(".")
        hint = " (a provider's other levels go in extra_body)" if inner == "effort" else ""
        raise ModelSettingError(
            f"settings[{outer!r}][{inner!r}] takes {takes}, got {got!r:.40}{hint}", key=path
        )


def copy_settings(
    body: dict[str, Any], settings: Mapping[str, Any], fields: Mapping[str, str]
) -> None:
    """Copy the settings a provider takes as they are into `body`, each under the field
    `fields` names for it (``stop`` as a list); the rest are the adapter's to translate."""
    for key, field in fields.items():
        if key in settings:
            value = settings[key]
            body[field] = list(value) if key == "stop" else value


def unsupported(provider: str, key: str, why: str) -> ModelSettingError:
    """The error for a setting `provider` cannot honour; `why` says what to do instead."""
    return ModelSettingError(
        f"{provider} cannot honour the model setting {key!r}: {why}", key=key, provider=provider
    )


def reasoning_effort(provider: str, settings: Mapping[str, Any], why: str) -> str | None:
    """The `reasoning` setting's effort, for a wire that takes an effort and no token budget
    (None: no reasoning setting). A `budget_tokens` is `unsupported`; `why` says what to do."""
    reasoning = settings.get("reasoning")
    if reasoning is None:
        return None
    if "budget_tokens" in reasoning:
        raise unsupported(provider, "reasoning.budget_tokens", why)
    effort: str = reasoning["effort"]
    return effort


def tool_settings(
    provider: str,
    body: dict[str, Any],
    settings: Mapping[str, Any],
    request: ChatRequest,
    force: Callable[[str], dict[str, Any]],
) -> None:
    """`tool_choice` and `parallel_tool_calls` into `body` under their own names, as the two
    OpenAI wires take them; `force(name)` is the wire's choice that forces one tool. Without
    tools in the request there is nothing to choose or parallelize."""
    if "tools" not in request:
        return
    choice = settings.get("tool_choice")
    if choice is not None:
        forced = forced_tool(provider, choice, request)
        body["tool_choice"] = choice if forced is None else force(forced)
    if "parallel_tool_calls" in settings:
        body["parallel_tool_calls"] = settings["parallel_tool_calls"]


def forced_tool(provider: str, choice: str, request: ChatRequest) -> str | None:
    """The tool a `tool_choice` forces (None for auto / none / required), checked against the
    request's tools: forcing a tool the request does not declare is a caller mistake."""
    if choice in _CHOICES:
        return None
    names = [t["name"] for t in request.get("tools") or ()]
    if choice not in names:
        raise ModelSettingError(
            f"{provider}: settings['tool_choice'] is {choice!r}, which is neither 'auto', "
            f"'none', 'required' nor one of the request's tools ({', '.join(names)})",
            key="tool_choice",
            provider=provider,
        )
    return choice
