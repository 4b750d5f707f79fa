"""The request headers of the stateless revision (SEP-2243): `Mcp-Method`, `Mcp-Name`, and the
`Mcp-Param-{Name}` headers a tool designates with `x-mcp-header` in its input schema."""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

__all__ = ["ParamHeader", "encode_header_value", "param_headers", "read_param_headers"]

_TOKEN: Final = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
"""RFC 9110 field-name token (`1*tchar`)."""
_PLAIN: Final = re.compile(r"^[\x21-\x7e]([\x20-\x7e]*[\x21-\x7e])?$")
"""A value that travels as is: visible ASCII, inner spaces, no edge whitespace."""
_HEADER_TYPES: Final = frozenset({"string", "integer", "boolean"})
_SAFE_INTEGER: Final = 2**53 - 1


@dataclass(frozen=True, slots=True)
class ParamHeader:
    """One argument a tool mirrors into a header."""

    path: tuple[str, ...]
    """The chain of `properties` keys leading to the argument."""
    header: str
    """The full header name, `Mcp-Param-{name}`."""


def encode_header_value(value: str) -> str:
    """A value as it may travel in a header: itself when it is plain visible ASCII, else the
    base64 sentinel form (so is any value that already looks like the sentinel)."""
    if value == "" or (
        _PLAIN.match(value) and not (value.startswith("=?base64?") and value.endswith("?="))
    ):
        return value
    return "=?base64?" + base64.b64encode(value.encode("utf-8")).decode("ascii") + "?="


def read_param_headers(schema: Any) -> tuple[list[ParamHeader], str | None]:
    """The `x-mcp-header` annotations of a tool's input schema, or the reason they make the
    tool invalid (in which case a client over HTTP must leave the tool out)."""
    found: list[tuple[tuple[str, ...], bool, Any, Any]] = []
    _collect(schema, (), True, found)
    out: list[ParamHeader] = []
    seen: set[str] = set()
    for path, reachable, name, node in found:
        where = "/".join(path) or "(root)"
        if not reachable or not path:
            return [], (
                f"x-mcp-header on {where} is not reached through properties alone "
                "(items, combinators, conditionals and $ref are not allowed on the way)"
            )
        if not isinstance(name, str) or not name:
            return [], f"x-mcp-header of {where} is empty or not a string"
        if not _TOKEN.match(name):
            return [], f"x-mcp-header {name!r} of {where} is not an HTTP header-name token"
        if name.lower() in seen:
            return [], f"x-mcp-header {name!r} is used twice (names are case-insensitive)"
        seen.add(name.lower())
        kind = node.get("type")
        kinds = kind if isinstance(kind, list) else [kind]
        primitive = [k for k in kinds if k != "null"]
        if not primitive or not all(isinstance(k, str) and k in _HEADER_TYPES for k in primitive):
            return [], (
                f"x-mcp-header {name!r} is on {where} of type {kind!r}; only string, integer "
                "and boolean arguments may be mirrored into headers"
            )
        out.append(ParamHeader(path, f"Mcp-Param-{name}"))
    return out, None


def _collect(
    node: Any,
    path: tuple[str, ...],
    reachable: bool,
    found: list[tuple[tuple[str, ...], bool, Any, Any]],
) -> None:
    if isinstance(node, list):
        for item in node:
            _collect(item, path, False, found)
        return
    if not isinstance(node, dict):
        return
    if "x-mcp-header" in node:
        found.append((path, reachable, node["x-mcp-header"], node))
    for key, value in node.items():
        if key == "properties" and isinstance(value, dict):
            for name, sub in value.items():
                _collect(sub, (*path, str(name)), reachable, found)
        elif key != "x-mcp-header":
            _collect(value, path, False, found)


def param_headers(annotations: list[ParamHeader], arguments: Any) -> dict[str, str]:
    """The `Mcp-Param-*` headers for one call: a header per annotated argument present (not
    null) in `arguments`. Raises ValueError for a value no header can carry."""
    headers: dict[str, str] = {}
    for note in annotations:
        value: Any = arguments
        for key in note.path:
            value = value.get(key) if isinstance(value, Mapping) else None
            if value is None:
                break
        if value is None:
            continue
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, int):
            if abs(value) > _SAFE_INTEGER:
                raise ValueError(
                    f"{'/'.join(note.path)} = {value} is outside the integer range a header "
                    "may carry (±2^53-1)"
                )
            text = str(value)
        elif isinstance(value, str):
            text = value
        else:
            raise ValueError(
                f"{'/'.join(note.path)} must be a string, integer or boolean to travel in "
                f"{note.header}, got {type(value).__name__}"
            )
        headers[note.header] = encode_header_value(text)
    return headers
