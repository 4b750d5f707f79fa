"""What `ctx.wait_for` and signals share: the suspension a wait raises, the wait's schema, and
what a signal journals.

A wait is a step of the waiter's journal (`wait:<name>`, numbered like any step). Its output is
written by whoever answers it, never by the waiting run: `{"signal": value}` by a signal,
`{"timed_out": true, "deadline": …}` by the timeout. So a resume replays the answer like any
journaled step, and a run that timed out meets the same `WorkflowWaitTimeoutError` at the same
point on every replay.
"""

from __future__ import annotations

import math
from typing import Any, cast

from .._schemas import checked_schema, validator_class
from ..errors import WorkflowError, WorkflowSignalError
from ._store import WaitRecord

__all__ = [
    "Suspended",
    "check_name",
    "check_timeout",
    "signal_output",
    "timeout_output",
    "wait_schema",
    "wrong_value",
]


class Suspended(BaseException):
    """Raised at a wait to unwind the run tree: each run it passes through is stored as
    waiting for `wait`. A BaseException, so that the workflow's own `except Exception` does not
    swallow it."""

    def __init__(self, wait: WaitRecord) -> None:
        super().__init__(wait.name)
        self.wait = wait


def check_name(name: Any) -> str:
    if not isinstance(name, str) or not name or "#" in name or "/" in name:
        raise WorkflowError(
            f"a wait's name must be a non-empty string without '#' or '/': {name!r}"
        )
    return name


def check_timeout(name: str, timeout: Any) -> float | None:
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, int | float):
        raise WorkflowError(f"wait_for({name!r}): timeout must be a number of seconds or None")
    if not timeout > 0 or math.isinf(timeout) or math.isnan(timeout):
        raise WorkflowError(f"wait_for({name!r}): timeout must be a positive number of seconds")
    return float(timeout)


def wait_schema(name: str, schema: Any) -> dict[str, Any] | None:
    """The wait's JSON Schema, checked (a schema that is not one is the workflow's mistake,
    raised at the wait before the run waits for a value nobody could send)."""
    if schema is None:
        return None
    checked_schema(schema, f"wait_for({name!r}): schema", WorkflowError)
    return cast(dict[str, Any], schema)  # a dict: checked_schema refuses anything else


def wrong_value(run_id: str, wait: WaitRecord, value: Any) -> WorkflowSignalError | None:
    """The error for a signal value the wait's schema refuses, naming where; None when it fits.

    Checked once per signal (a signal is rare: the validator is built for it, not kept)."""
    if wait.schema is None:
        return None
    import jsonschema

    validator = validator_class(wait.schema)(wait.schema)
    error = jsonschema.exceptions.best_match(validator.iter_errors(value))
    if error is None:
        return None
    path = "value" + "".join(f"[{p!r}]" for p in error.absolute_path)
    return WorkflowSignalError(
        f"signal {wait.name!r} to workflow run {run_id!r}: {path}: {error.message} "
        "(nothing was stored; send a value that matches the wait's schema)",
        run_id=run_id,
        name=wait.name,
        path=path,
    )


def signal_output(value: Any) -> dict[str, Any]:
    """What a signal journals as the wait's step."""
    return {"signal": value}


def timeout_output(deadline: float) -> dict[str, Any]:
    """What a timeout journals as the wait's step."""
    return {"timed_out": True, "deadline": deadline}
