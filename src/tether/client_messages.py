"""Framed client messages: a surface action, a function result or a validation rejection
re-enters the agent as a worded turn, never as a raw data blob.

The kinds and fields are accepted in the seed's spelling (``surfaceAction``, ``functionResult``,
``validationRejection``, ``dataModelUpdate``, ``ack``; ``surfaceId``) and in snake_case
(``surface_action``, ``surface_id``…). The JSON framed into the text is what JavaScript's
``JSON.stringify`` gives for the same values: compact, ``1`` for the number one whether it came
as an int or a float, numbers spelled as JavaScript spells them (``1e+21``, ``1e-7``), non-ASCII
kept, the same escapes, and ``null`` for NaN and the infinities.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any, Literal, NotRequired, TypeAlias, TypedDict

from .errors import ClientMessageError

__all__ = [
    "Ack",
    "ClientMessage",
    "DataModelUpdate",
    "FunctionResult",
    "SurfaceAction",
    "ValidationRejection",
    "frame_client_message",
    "js_stringify",
    "should_run_turn",
]


class SurfaceAction(TypedDict):
    kind: Literal["surface_action", "surfaceAction"]
    surface_id: NotRequired[str]
    surfaceId: NotRequired[str]
    """The seed's spelling of `surface_id`; one of the two is required."""
    action: str
    context: NotRequired[Any]


class FunctionResult(TypedDict):
    kind: Literal["function_result", "functionResult"]
    call: str
    value: Any


class ValidationRejection(TypedDict):
    kind: Literal["validation_rejection", "validationRejection"]
    code: str
    message: str


class DataModelUpdate(TypedDict):
    kind: Literal["data_model_update", "dataModelUpdate"]
    surface_id: NotRequired[str]
    surfaceId: NotRequired[str]
    patch: NotRequired[Any]


class Ack(TypedDict):
    kind: Literal["ack"]
    id: NotRequired[str]


ClientMessage: TypeAlias = (
    SurfaceAction | FunctionResult | ValidationRejection | DataModelUpdate | Ack
)

_KINDS = {
    "surface_action": "surface_action",
    "surfaceAction": "surface_action",
    "function_result": "function_result",
    "functionResult": "function_result",
    "validation_rejection": "validation_rejection",
    "validationRejection": "validation_rejection",
    "data_model_update": "data_model_update",
    "dataModelUpdate": "data_model_update",
    "ack": "ack",
}
"""Either spelling → the snake_case kind."""
_TURN_KINDS = frozenset({"surface_action", "function_result", "validation_rejection"})


def _kind(msg: Any) -> str:
    raw = msg.get("kind") if isinstance(msg, Mapping) else None
    kind = _KINDS.get(raw) if isinstance(raw, str) else None
    if kind is None:
        raise ClientMessageError(
            f"unknown client message kind {raw!r}; the kinds are surfaceAction, functionResult, "
            "validationRejection, dataModelUpdate and ack (or their snake_case spellings)"
        )
    return kind


def should_run_turn(msg: ClientMessage) -> bool:
    """True for the kinds that become a turn; False for silent-apply kinds."""
    return _kind(msg) in _TURN_KINDS


def frame_client_message(msg: ClientMessage) -> str:
    """The user-turn wording for a message; raises ClientMessageError for silent-apply kinds."""
    kind = _kind(msg)
    m: Mapping[str, Any] = msg
    try:
        if kind == "surface_action":
            surface = m["surfaceId"] if "surfaceId" in m else m["surface_id"]
            return (
                f"The user triggered the {m['action']} action on surface {surface} "
                f"with context {_json(m, 'context')}."
            )
        if kind == "function_result":
            call, _ = m["call"], m["value"]  # both required
            return f"The function {call} returned: {_json(m, 'value')}."
        if kind == "validation_rejection":
            return (
                f"The previous surface was rejected ({m['code']}): {m['message']}. "
                "Emit a corrected surface."
            )
    except KeyError as exc:
        missing = "surfaceId" if exc.args[0] == "surface_id" else exc.args[0]
        raise ClientMessageError(f"{m['kind']} message lacks {missing!r}") from None
    raise ClientMessageError(
        f"{m['kind']} is applied silently and never framed as a turn; check should_run_turn() first"
    )


def _json(msg: Mapping[str, Any], key: str) -> str:
    # An absent context reads as null. What is not JSON (a date, a set) is refused rather
    # than framed as something it is not.
    try:
        return js_stringify(msg.get(key))
    except (TypeError, ValueError) as exc:
        raise ClientMessageError(f"{msg['kind']} {key} is not JSON: {exc}") from None


# -- JSON.stringify -------------------------------------------------------------------------------

_LONE_SURROGATE = re.compile(
    r"[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]"
)


def js_stringify(value: Any) -> str:
    """`value` as JavaScript's ``JSON.stringify(value)`` writes it (no indentation).

    Raises TypeError for a value JSON has no place for (a date, a set, bytes, an object).
    """
    out: list[str] = []
    _write(value, out, set())
    return "".join(out)


def _write(value: Any, out: list[str], seen: set[int]) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, str):
        out.append(_string(value))
    elif isinstance(value, int | float):
        out.append(_number(value))
    elif isinstance(value, Mapping | list | tuple):
        if id(value) in seen:
            raise ValueError("a circular structure")
        seen.add(id(value))
        if isinstance(value, Mapping):
            out.append("{")
            for i, (key, item) in enumerate(value.items()):
                if i:
                    out.append(",")
                out.append(_string(_key(key)))
                out.append(":")
                _write(item, out, seen)
            out.append("}")
        else:
            out.append("[")
            for i, item in enumerate(value):
                if i:
                    out.append(",")
                _write(item, out, seen)
            out.append("]")
        seen.discard(id(value))
    else:
        raise TypeError(f"{type(value).__name__} {value!r:.60} has no JSON form")


def _key(key: Any) -> str:
    # A JavaScript object's keys are strings: numbers and the literals become their text.
    if isinstance(key, str):
        return key
    if isinstance(key, float) and not math.isfinite(key):
        return "NaN" if math.isnan(key) else "Infinity" if key > 0 else "-Infinity"
    if key is None or isinstance(key, bool | int | float):
        return js_stringify(key)
    raise TypeError(f"a {type(key).__name__} key {key!r:.40} has no JSON form")


def _string(text: str) -> str:
    # json.dumps with ensure_ascii=False escapes exactly what JSON.stringify does (", \, the
    # control characters, \u00xx in lowercase); a lone surrogate is escaped as JavaScript does.
    encoded = json.dumps(text, ensure_ascii=False)
    if _LONE_SURROGATE.search(encoded):
        encoded = _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", encoded)
    return encoded


def _number(value: int | float) -> str:
    """ECMAScript's Number::toString: JSON.stringify's spelling of a number."""
    if isinstance(value, int):
        if -(2**53) <= value <= 2**53:
            return str(value)
        value = float(value)  # a JavaScript number is a double
    if not math.isfinite(value):
        return "null"
    if value == 0:
        return "0"  # -0 too
    sign = "-" if value < 0 else ""
    mantissa, _, exp = repr(abs(value)).partition("e")
    whole, _, frac = mantissa.partition(".")
    digits = (whole + frac).lstrip("0")
    # n: where the decimal point falls relative to the digits (value = 0.digits × 10^n).
    n = len(whole) + int(exp or 0) - (len(whole + frac) - len((whole + frac).lstrip("0")))
    digits = digits.rstrip("0")
    k = len(digits)
    if k <= n <= 21:
        return sign + digits + "0" * (n - k)
    if 0 < n <= 21:
        return sign + digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return sign + "0." + "0" * -n + digits
    e = n - 1
    exponent = f"e{'+' if e >= 0 else '-'}{abs(e)}"
    if k == 1:
        return sign + digits + exponent
    return sign + digits[0] + "." + digits[1:] + exponent
