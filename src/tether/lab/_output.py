"""Structured output: an `output_schema` turned into a response format, and the final answer
parsed back into it.

Only a JSON *object* that parsed completely counts. pydantic fills defaults after that, never
before: prose, an empty answer or a JSON array is a failure, not an all-defaults object.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast

import pydantic

from ..errors import ConfigError
from ..tools import _schema_checker

__all__ = ["JSON_REQUEST", "OutputSpec", "jsonable"]

T = TypeVar("T")

JSON_REQUEST = (
    "Now reply with only the final answer as a JSON object that matches the required schema: "
    "no prose and no code fences."
)
"""The user message stored ahead of the structured-output follow-up request."""


class NoMatch(Exception):
    """The text is not a JSON object matching the schema (why is the message)."""


@dataclass(slots=True, eq=False)
class OutputSpec(Generic[T]):
    """A compiled output schema: validator and response format, built once per schema."""

    schema: Any
    adapter: pydantic.TypeAdapter[T] | None
    """None for a JSON Schema given as a dict (then `check` validates)."""
    response_format: dict[str, Any]
    check: Callable[[Any], str | None] | None = None
    """The JSON Schema's checker: None when the value matches, else where and why not."""

    @classmethod
    def of(cls, schema: Any) -> OutputSpec[Any]:
        if isinstance(schema, Mapping):
            return cls._of_json_schema(dict(schema))
        try:
            adapter: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(schema)
            json_schema = adapter.json_schema()
        except (
            pydantic.PydanticUserError,
            pydantic.PydanticSchemaGenerationError,
            TypeError,
        ) as exc:
            raise ConfigError(
                f"output_schema {schema!r} is not a type pydantic can validate: {exc}"
            ) from exc
        if json_schema.get("type") != "object":
            raise ConfigError(
                f"output_schema {schema!r} must describe a JSON object "
                "(a pydantic model, dataclass or TypedDict)"
            )
        name = str(json_schema.get("title") or getattr(schema, "__name__", "output"))
        return cls(schema, adapter, {"name": name, "schema": json_schema})

    @classmethod
    def _of_json_schema(cls, schema: dict[str, Any]) -> OutputSpec[Any]:
        """A JSON Schema as the docs allow: the answer is the dict it describes."""
        if schema.get("type") != "object":
            raise ConfigError(
                "output_schema must describe a JSON object: a JSON Schema given as a dict "
                f'needs "type": "object" (it has {schema.get("type")!r})'
            )
        try:
            check = _schema_checker("output_schema", schema)
        except ConfigError as exc:
            raise ConfigError(
                str(exc).replace("tool 'output_schema': input_schema", "output_schema")
            ) from exc
        name = str(schema.get("title") or "output")
        return cls(schema, None, {"name": name, "schema": schema}, check)

    def parse(self, text: str) -> T:
        """The object `text` holds, defaults filled in.

        Raises:
            NoMatch: `text` is not one JSON object, or the object does not match the schema.
        """
        try:
            value = json.loads(text)
        except ValueError as exc:
            raise NoMatch(f"the answer is not JSON ({exc})") from None
        if not isinstance(value, dict):
            raise NoMatch(f"the answer is JSON but not an object ({type(value).__name__})")
        if self.adapter is None:
            assert self.check is not None
            why = self.check(value)
            if why is not None:
                raise NoMatch(f"the JSON object does not match the schema: {why}")
            return cast(T, value)  # a JSON Schema output is the checked dict
        try:
            return self.adapter.validate_json(text)
        except pydantic.ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(x) for x in first["loc"]) or "(root)"
            raise NoMatch(
                f"the JSON object does not match the schema: {where}: {first['msg']}"
            ) from None


def jsonable(value: Any) -> Any:
    """A JSON-safe form of an agent output (a pydantic object becomes its JSON dict)."""
    if isinstance(value, pydantic.BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    try:
        return pydantic.TypeAdapter(type(value)).dump_python(value, mode="json")
    except (pydantic.PydanticSchemaGenerationError, TypeError):
        return repr(value)
