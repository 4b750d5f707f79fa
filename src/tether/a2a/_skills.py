"""Skills an agent's A2A card lists, when its author declares them (`declare_skills`)."""

from __future__ import annotations

import weakref
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import ConfigError

__all__ = ["declare_skills", "declared_skills"]

_DECLARED: weakref.WeakKeyDictionary[Any, list[dict[str, Any]]] = weakref.WeakKeyDictionary()
_KEYS = {"id", "name", "description", "tags", "examples", "inputModes", "outputModes"}


def declare_skills(agent: Any, skills: Sequence[Mapping[str, Any]]) -> Any:
    """Say which skills `agent`'s A2A card lists (`tether serve` serves it at
    ``/a2a/{agent_id}``), instead of one per tool. Each skill is a dict with `id`, `name` and
    `description` (strings), and optional `tags` and `examples` (lists of strings). Returns
    `agent`.

    Raises:
        ConfigError: a skill that is not such a dict.
    """
    checked: list[dict[str, Any]] = []
    for i, skill in enumerate(skills):
        where = f"declare_skills: skills[{i}]"
        if not isinstance(skill, Mapping):
            raise ConfigError(f"{where} must be a dict with id, name and description")
        unknown = sorted(set(skill) - _KEYS)
        if unknown:
            raise ConfigError(f"{where} has unknown keys {unknown}; the keys are {sorted(_KEYS)}")
        for key in ("id", "name", "description"):
            if not isinstance(skill.get(key), str) or not skill[key]:
                raise ConfigError(f"{where}.{key} must be a non-empty string")
        for key in ("tags", "examples", "inputModes", "outputModes"):
            value = skill.get(key, [])
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ConfigError(f"{where}.{key} must be a list of strings")
        checked.append({"tags": [], **skill})
    _DECLARED[agent] = checked
    return agent


def declared_skills(agent: Any) -> list[dict[str, Any]] | None:
    """The skills declared for `agent`, or None."""
    try:
        found = _DECLARED.get(agent)
    except TypeError:  # not weakly referenceable: nothing was declared for it
        return None
    return [dict(s) for s in found] if found is not None else None
