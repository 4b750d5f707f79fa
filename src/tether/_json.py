"""JSON-safety: the one check used for memory patches, step outputs and stored records."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

from .errors import NotJSONSafeError

__all__ = ["check_json_safe", "copy_json", "dumps"]


def check_json_safe(value: Any, path: str) -> None:
    """Raise NotJSONSafeError naming the first path whose value would not round-trip unchanged.

    Accepts exactly what json.dumps -> json.loads gives back equal: None, bool, int, finite
    float, str (encodable as UTF-8), list, and dict with str keys. A tuple comes back a list,
    NaN is not JSON, and a datetime, set, bytes or class instance does not serialize at all.
    """
    # The walk that names the path builds a string per value; most values are fine, so the
    # path is only worked out once the quick walk has found something wrong.
    if not _safe(value):
        _explain(value, path)


def _safe(value: Any) -> bool:
    t = type(value)
    if t is dict:
        for k in value:
            if type(k) is not str:
                return False
        return _all_safe(value.values())
    if t is list:
        return _all_safe(value)
    if t is str:
        return value.isascii() or _utf8(value)
    if t is int or t is bool or value is None:
        return True
    if t is float:
        return math.isfinite(value)
    return False


def _all_safe(items: Iterable[Any]) -> bool:
    # Strings and scalars, most of a transcript, are checked here without a call each.
    for item in items:
        t = type(item)
        if t is str:
            if not (item.isascii() or _utf8(item)):
                return False
        elif not (t is int or t is bool or item is None) and not _safe(item):
            return False
    return True


def _utf8(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _explain(value: Any, path: str) -> None:
    t = type(value)
    if t is str:
        if not _utf8(value):
            # json.loads gives it back, but no UTF-8 file, database or wire can hold it.
            raise NotJSONSafeError(path, "str with a lone surrogate")
        return
    if t is int or t is bool or value is None:
        return
    if t is float:
        if not math.isfinite(value):
            raise NotJSONSafeError(path, f"float {value!r}")
        return
    if t is list:
        for i, item in enumerate(value):
            _explain(item, f"{path}[{i}]")
        return
    if t is dict:
        for k, item in value.items():
            if type(k) is not str:
                raise NotJSONSafeError(f"{path}[{k!r}]", f"{type(k).__name__} key")
            _explain(item, f"{path}.{k}")
        return
    raise NotJSONSafeError(path, type(value).__name__)


class CheckedJSON(dict[str, Any]):
    """A dict whose values were already checked JSON-safe, and that nobody else changes: a
    store writing it (as a run event's data) need not walk it again. Made by code that checked
    what it holds, such as committed messages the message store just checked and encoded."""

    __slots__ = ()


def copy_json(value: Any) -> Any:
    """A deep copy of JSON-shaped data: dicts and lists are copied, everything else is shared
    (strings, numbers and None are immutable). Several times faster than copy.deepcopy."""
    t = type(value)
    if t is dict:
        out = value.copy()  # then only the containers in it copied again (no frame per dict)
        for k, v in value.items():
            if type(v) in _CONTAINERS:
                out[k] = copy_json(v)
        return out
    if t is list:
        return [copy_json(v) if type(v) in _CONTAINERS else v for v in value]
    return value


_CONTAINERS = frozenset({dict, list})


_encode: Callable[[Any], str] | None = None


def dumps(value: Any) -> str:
    """Compact JSON with non-ASCII kept as is (what we send and store): `json.dumps(value,
    ensure_ascii=False, separators=(",", ":"))`, through one encoder made on first use (json
    builds a new one per call for any option that is not its default)."""
    global _encode
    if _encode is None:
        import json

        _encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
    return _encode(value)
