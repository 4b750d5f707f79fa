"""Reading a request's JSON body, with its nesting bounded before any parser recurses."""

from __future__ import annotations

import json
import re
from typing import Any

from starlette.requests import Request

from ._errors import ApiError

__all__ = ["MAX_JSON_DEPTH", "json_body", "json_depth"]

MAX_JSON_DEPTH = 64
"""How deep arrays and objects may nest in a request body (400 deeper): far beyond any run
input, state or client message, far below where a recursive parser or encoder fails."""

_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKETS = re.compile(rb"[\[\]{}]")


def json_depth(raw: bytes, limit: int = MAX_JSON_DEPTH) -> int:
    """How deep the arrays and objects of JSON text `raw` nest, counted up to `limit + 1`
    (strings skipped; the text need not be valid)."""
    depth = deepest = 0
    for match in _BRACKETS.finditer(_STRING.sub(b"", raw)):
        if match.group() in (b"[", b"{"):
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > limit:
                    break
        else:
            depth -= 1
    return deepest


async def json_body(request: Request) -> dict[str, Any]:
    """The request's JSON object ({} for an empty body).

    Raises:
        ApiError: 415 for a body that is not `application/json`, 400 for one nested deeper
            than `MAX_JSON_DEPTH`, that is not a JSON object, or that holds NUL in a string.
    """
    raw = await request.body()
    if not raw.strip():
        return {}
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/json":
        raise ApiError(
            415, "unsupported_media_type", f"send JSON (application/json), not {kind or 'none'!r}"
        )
    if json_depth(raw) > MAX_JSON_DEPTH:
        raise ApiError(
            400, "bad_request", f"the body nests deeper than {MAX_JSON_DEPTH} arrays or objects"
        )
    try:
        value = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApiError(400, "bad_request", f"the body is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ApiError(400, "bad_request", "the body must be a JSON object")
    # JSON carries NUL only as the \u0000 escape: look for it in the text first (cheap).
    if b"\\u0000" in raw and _holds_nul(value):
        raise ApiError(
            400,
            "bad_request",
            "the body holds NUL (\\u0000) in a string: no stored text may hold it (PostgreSQL "
            "cannot), so no store takes it",
        )
    return value


def _holds_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any("\x00" in k or _holds_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_holds_nul(v) for v in value)
    return False
