"""Request values both apps read: event numbers (`after`, `Last-Event-ID` ...), counts, and the
ids a client chooses."""

from __future__ import annotations

import unicodedata

from starlette.requests import Request

from ._errors import ApiError

__all__ = ["MAX_ID", "MAX_SEQ", "client_id", "count_param", "last_event_id", "seq_param"]

MAX_SEQ = 2**63 - 1
"""The largest event number a store can be asked about (a signed 64-bit integer in SQL)."""


def count_param(request: Request, name: str) -> int | None:
    """A whole-number parameter from 0 to `MAX_SEQ` (a record index, a count), or None when
    absent or empty.

    Raises:
        ApiError: 400 naming the parameter.
    """
    raw = request.query_params.get(name)
    return None if raw is None or not raw.strip() else _number(raw, name)


def seq_param(request: Request, name: str) -> int:
    """An event number parameter (`after`, `open`, `running`): 0 when absent.

    Raises:
        ApiError: 400, not an integer from 0 to `MAX_SEQ`.
    """
    return count_param(request, name) or 0


def last_event_id(request: Request) -> int:
    """Where a stream resumes: `Last-Event-ID` (what a reconnecting EventSource sends), else
    `?after=N`, else 0."""
    raw = request.headers.get("last-event-id")
    if raw is None or not raw.strip():
        return seq_param(request, "after")
    return _number(raw, "Last-Event-ID")


def _number(raw: str, name: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if not 0 <= value <= MAX_SEQ:
        raise ApiError(
            400, "bad_request", f"{name} must be an integer from 0 to {MAX_SEQ}, got {raw[:100]!r}"
        )
    return value


MAX_ID = 200
"""The longest id a client may choose (a memory scope, a workflow run id, a tag)."""
_REFUSED_CATEGORIES = frozenset({"Cc", "Cs", "Zl", "Zp"})


def client_id(value: object, name: str, *, separators: bool = False) -> str:
    """An id a client chose (a scope, a run id, a tag), checked before anything stores it.

    Args:
        value: What the request gave.
        name: The field, for the message.
        separators: Whether `/` and `\\` may appear (a tag may; an id that goes in a path may
            not).

    Raises:
        ApiError: 400 for anything but a string of 1 to `MAX_ID` characters without control
            characters (NUL included: PostgreSQL text cannot hold it), line separators, lone
            surrogates or (unless allowed) path separators.
    """
    if not isinstance(value, str) or not value:
        raise ApiError(400, "bad_request", f"{name} must be a non-empty string")
    if len(value) > MAX_ID:
        raise ApiError(
            400, "bad_request", f"{name} must be at most {MAX_ID} characters, got {len(value)}"
        )
    for char in value:
        if unicodedata.category(char) in _REFUSED_CATEGORIES or (not separators and char in "/\\"):
            raise ApiError(
                400,
                "bad_request",
                f"{name} may not hold {char!r}: no control characters, line separators or lone "
                "surrogates" + ("" if separators else ", and no path separators (/ \\)"),
            )
    return value
