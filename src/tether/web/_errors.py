"""Errors as the API answers them: `{"error": {"type", "message"}}` with the status that fits
(and `call_id` for a `DecisionError`, naming the pending call it is about).

`type` is the tether exception's class name when one of ours says what went wrong (a client can
match on `ScopeBusyError`, `WorkflowRunBusyError`, `ConfigError` ...), else a snake_case kind
for what the HTTP layer found (`bad_request`, `not_found`, `payload_too_large` ...).
"""

from __future__ import annotations

from ..errors import (
    ClientMessageError,
    ConfigError,
    DataError,
    StoreError,
    TetherError,
    WorkflowError,
    WorkflowInputError,
)
from ._responses import JSONResponse, api_error

__all__ = ["ApiError", "error_response"]


class ApiError(Exception):
    """Raised by a handler (or a request helper) to answer with an error."""

    def __init__(self, status: int, kind: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind
        self.message = message


def _status_of(exc: TetherError) -> int:
    name = type(exc).__name__
    if name in (
        "ScopeBusyError",
        "WorkflowRunBusyError",
        "WorkflowNotWaitingError",
        "NotPausedError",
        "RunNotPausedError",
    ):
        return 409
    if name == "DecisionError":
        return 422
    if name == "RunNotFoundError":
        return 404
    if isinstance(exc, ConfigError | DataError | ClientMessageError | WorkflowInputError):
        return 400
    if isinstance(exc, WorkflowError):
        return 400
    if isinstance(exc, StoreError):
        return 503
    return 500


def error_response(exc: BaseException) -> JSONResponse:
    """The answer for an exception a handler let through (ours by class; anything else is
    a 500 whose details stay in the server's log)."""
    if isinstance(exc, ApiError):
        return api_error(exc.status, exc.kind, exc.message)
    if isinstance(exc, TetherError):
        call_id = getattr(exc, "call_id", None)
        if not isinstance(call_id, str):
            return api_error(_status_of(exc), type(exc).__name__, str(exc))
        # A DecisionError names its call: a page shows the error under that call.
        error = {"type": type(exc).__name__, "message": str(exc), "call_id": call_id}
        return JSONResponse({"error": error}, status_code=_status_of(exc))
    return api_error(500, "internal_error", "the server failed; its log says why")
