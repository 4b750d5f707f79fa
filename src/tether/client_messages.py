"""Framed client messages: a surface action, a function result or a validation rejection
re-enters the agent as a worded turn, never as a raw data blob."""

from __future__ import annotations

import json
from typing import Any, Literal, NotRequired, TypeAlias, TypedDict

from .errors import ClientMessageError

__all__ = [
    "ClientMessage",
    "FunctionResult",
    "SurfaceAction",
    "ValidationRejection",
    "frame_client_message",
    "should_run_turn",
]


class SurfaceAction(TypedDict):
    kind: Literal["surface_action"]
    surface_id: str
    action: str
    context: NotRequired[Any]


class FunctionResult(TypedDict):
    kind: Literal["function_result"]
    call: str
    value: Any


class ValidationRejection(TypedDict):
    kind: Literal["validation_rejection"]
    code: str
    message: str


class DataModelUpdate(TypedDict):
    kind: Literal["data_model_update"]
    surface_id: NotRequired[str]
    patch: NotRequired[Any]


class Ack(TypedDict):
    kind: Literal["ack"]
    id: NotRequired[str]


ClientMessage: TypeAlias = (
    SurfaceAction | FunctionResult | ValidationRejection | DataModelUpdate | Ack
)

_TURN_KINDS = frozenset({"surface_action", "function_result", "validation_rejection"})
_SILENT_KINDS = frozenset({"data_model_update", "ack"})


def _json(msg: Any, key: str) -> str:
    # JSON.stringify's shape: compact, non-ASCII kept; undefined context reads as null. What is
    # not JSON (NaN, a date, a set) is refused rather than framed as something that is not.
    try:
        return json.dumps(msg.get(key), ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ClientMessageError(f"{msg['kind']} {key} is not JSON: {exc}") from None


def should_run_turn(msg: ClientMessage) -> bool:
    """True for the kinds that become a turn; False for silent-apply kinds."""
    kind = msg.get("kind") if isinstance(msg, dict) else None
    if kind in _TURN_KINDS:
        return True
    if kind in _SILENT_KINDS:
        return False
    raise ClientMessageError(f"unknown client message kind {kind!r}")


def frame_client_message(msg: ClientMessage) -> str:
    """The user-turn wording for a message; raises ClientMessageError for silent-apply kinds."""
    kind = msg.get("kind") if isinstance(msg, dict) else None
    try:
        if kind == "surface_action":
            return (
                f"The user triggered the {msg['action']} action on surface {msg['surface_id']} "  # type: ignore[typeddict-item]
                f"with context {_json(msg, 'context')}."
            )
        if kind == "function_result":
            call, _ = msg["call"], msg["value"]  # type: ignore[typeddict-item]  # both required
            return f"The function {call} returned: {_json(msg, 'value')}."
        if kind == "validation_rejection":
            return (
                f"The previous surface was rejected ({msg['code']}): {msg['message']}. "  # type: ignore[typeddict-item]
                "Emit a corrected surface."
            )
    except KeyError as exc:
        raise ClientMessageError(f"{kind} message lacks {exc.args[0]!r}") from None
    if kind in _SILENT_KINDS:
        raise ClientMessageError(
            f"{kind} is applied silently and never framed as a turn; check should_run_turn() first"
        )
    raise ClientMessageError(f"unknown client message kind {kind!r}")
