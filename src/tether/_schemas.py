"""JSON Schema as the harness reads it: a tool's `input_schema` and a workflow wait's `schema`
are checked by one function, in one wording, and read in the same dialect.

`jsonschema` is imported on first use: it costs more to import than the rest of the harness.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

__all__ = ["checked_schema", "validator_class"]


def validator_class(schema: dict[str, Any]) -> type[Validator]:
    """The validator of the dialect `schema` names in `$schema` (2020-12 when it names none)."""
    import jsonschema

    return jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)


def checked_schema(schema: Any, what: str, error: Callable[[str], Exception]) -> type[Validator]:
    """The validator class for `schema`, once `schema` is a valid JSON Schema object.

    Raises:
        `error(message)`, the message starting with `what` (the thing the caller gave, as
        "tool 'x': input_schema"): `schema` is not a dict, or not a valid schema.
    """
    if not isinstance(schema, dict):
        raise error(f"{what} must be a JSON Schema object")
    import jsonschema

    cls = validator_class(schema)
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise error(f"{what} is not a valid JSON Schema: {exc.message}") from exc
    return cls
