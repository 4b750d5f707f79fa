"""Checking portable `ModelSettings` before an adapter maps them to its wire.

`check_settings` refuses an unknown key or a value of the wrong type, naming the key and what it
takes; each adapter then maps every key it can honour and raises `unsupported()` for the others,
so a setting is never silently dropped. `extra_body` in the model config stays the escape hatch
for anything provider-specific (it is merged after the settings, so it wins).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import ModelSettingError
from .base import ChatRequest

__all__ = ["EFFORTS", "SETTING_KEYS", "check_settings", "forced_tool", "unsupported"]

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


def _bad(key: str, value: Any, takes: str) -> ModelSettingError:
    return ModelSettingError(
        f"settings[{key!r}] takes {takes}, got {value!r:.80}", key=key, provider=None
    )


def check_settings(settings: Mapping[str, Any]) -> None:
    """Raise `ModelSettingError` for an unknown key or a value of the wrong type."""
    for key, value in settings.items():
        if key not in SETTING_KEYS:
            raise ModelSettingError(
                f"unknown model setting {key!r}; the settings are {', '.join(SETTING_KEYS)} "
                "(anything provider-specific goes in the model config's extra_body)",
                key=str(key),
            )
        if key in ("temperature", "top_p"):
            if not _number(value) or value < 0:
                raise _bad(key, value, "a number >= 0")
        elif key in ("max_tokens", "seed"):
            if not _int(value) or (key == "max_tokens" and value < 1):
                raise _bad(key, value, "a positive int" if key == "max_tokens" else "an int")
        elif key == "stop":
            if (
                not isinstance(value, list | tuple)
                or not value
                or not all(isinstance(s, str) and s for s in value)
            ):
                raise _bad(key, value, "a non-empty list of non-empty strings")
        elif key == "tool_choice":
            if not isinstance(value, str) or not value:
                raise _bad(key, value, "'auto', 'none', 'required' or a tool's name")
        elif key == "parallel_tool_calls":
            if not isinstance(value, bool):
                raise _bad(key, value, "a bool")
        else:
            _check_reasoning(value)


def _check_reasoning(value: Any) -> None:
    takes = "{'effort': 'low' | 'medium' | 'high'} or {'budget_tokens': int >= 0}"
    if not isinstance(value, Mapping) or len(value) != 1:
        raise _bad("reasoning", value, f"exactly one of {takes}")
    ((key, inner),) = value.items()
    if key == "effort":
        if inner not in EFFORTS:
            raise ModelSettingError(
                f"settings['reasoning']['effort'] takes one of {', '.join(EFFORTS)}, got "
                f"{inner!r:.40} (a provider's other levels go in extra_body)",
                key="reasoning.effort",
            )
    elif key == "budget_tokens":
        if not _int(inner) or inner < 0:
            raise ModelSettingError(
                f"settings['reasoning']['budget_tokens'] takes an int >= 0, got {inner!r:.40}",
                key="reasoning.budget_tokens",
            )
    else:
        raise _bad("reasoning", value, takes)


def unsupported(provider: str, key: str, why: str) -> ModelSettingError:
    """The error for a setting `provider` cannot honour; `why` says what to do instead."""
    return ModelSettingError(
        f"{provider} cannot honour the model setting {key!r}: {why}", key=key, provider=provider
    )


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
