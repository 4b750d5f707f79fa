"""The body of `POST /api/runs/{run_id}/decisions`: each pending call's decision, as JSON.

```json
{"decisions": {"call_1": {"action": "approve"},
               "call_2": {"action": "approve", "input": {"to": "ann@example.com"}},
               "call_3": {"action": "deny", "reason": "not today"},
               "call_4": {"action": "result", "output": "blue", "is_error": false}},
 "decided_by": "ann"}
```

Read here into the `tether.approve()` / `deny()` / `result()` values the lab resumes with; a
shape that is none of them is a 400 here, an id that is not pending a 422 from the resume.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..approvals import Decision, approve, deny, result
from ..web import ApiError, client_id

__all__ = ["decided_by_of", "decisions_of"]

_FIELDS: dict[str, frozenset[str]] = {
    "approve": frozenset({"action", "input"}),
    "deny": frozenset({"action", "reason"}),
    "result": frozenset({"action", "output", "is_error"}),
}
_SHAPE = (
    'decisions must map each pending call id to {"action": "approve", "input"?: ...}, '
    '{"action": "deny", "reason"?: str} or {"action": "result", "output": ..., "is_error"?: bool}'
)


def decisions_of(value: Any) -> dict[str, Decision]:
    """The decisions a request body gives, by call id.

    Raises:
        ApiError: 400 for anything but a non-empty object of decision objects.
    """
    if not isinstance(value, Mapping) or not value:
        raise ApiError(400, "bad_request", _SHAPE)
    return {
        client_id(call_id, "a call id"): _decision(call_id, spec) for call_id, spec in value.items()
    }


def _decision(call_id: str, spec: Any) -> Decision:
    action = spec.get("action") if isinstance(spec, Mapping) else None
    fields = _FIELDS.get(action) if isinstance(action, str) else None
    if fields is None:
        raise ApiError(400, "bad_request", f"call {call_id!r}: {_SHAPE}")
    unknown = sorted(set(spec) - fields)
    if unknown:
        raise ApiError(
            400,
            "bad_request",
            f"call {call_id!r}: unknown field(s) {unknown} for action {action!r}; its fields "
            f"are {sorted(fields)}",
        )
    if action == "approve":
        return approve(input=spec["input"]) if "input" in spec else approve()
    if action == "deny":
        reason = spec.get("reason", "denied")
        if not isinstance(reason, str):
            raise ApiError(400, "bad_request", f"call {call_id!r}: reason must be a string")
        return deny(reason)
    if "output" not in spec:
        raise ApiError(400, "bad_request", f"call {call_id!r}: a result needs its output")
    is_error = spec.get("is_error", False)
    if not isinstance(is_error, bool):
        raise ApiError(400, "bad_request", f"call {call_id!r}: is_error must be true or false")
    return result(spec["output"], is_error=is_error)


def decided_by_of(value: Any) -> str | None:
    """Who decided (`decided_by`, recorded with each decision), when the body says."""
    return None if value is None else client_id(value, "decided_by", separators=True)
