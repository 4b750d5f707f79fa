"""Tools: declared from a JSON Schema (`define_tool`) or from a typed function (`@tool`).

The input is checked at the call boundary by a validator compiled once, when the tool is
declared. Everything that can go wrong in a call — arguments that are not JSON, a schema
violation, an exception, an endpoint error, a timeout — comes back as an error result the model
can react to; `Tool.call()` never raises for a tool-shaped failure.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import math
import re
import sys
import warnings
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal, get_type_hints, overload

from ._schemas import checked_schema
from .context import RunContext
from .errors import ContentError, ToolDefinitionError, ToolError
from .events import MediaPart
from .llm.base import ToolSpec
from .media import MEDIA_TYPES, check_media_part

__all__ = ["Approval", "Endpoint", "InputRequest", "Tool", "ToolResult", "define_tool", "tool"]

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


@dataclass(slots=True, frozen=True)
class InputRequest:
    """What a call waits for when its tool asked a person for input mid-call (an MCP server's
    elicitation in the 2026-07-28 revision, with `elicitation="pause"`): the call can pause
    (a pending call of kind `"input"`) instead of needing a live callback. All JSON-safe, so a
    stored session or run keeps it; `Tool.resume_input(state, answer, ctx)` goes on with the
    person's answer, in any process."""

    message: str
    """Why the tool asks, in its words (show it to the person)."""
    schema: dict[str, Any]
    """The JSON Schema of what is asked for (a flat object of primitive properties)."""
    source: str
    """Who asks: the MCP server's URL or command line."""
    state: dict[str, Any]
    """What the tool needs to go on (for MCP: the request, the server's `requestState`): give
    it back to `resume_input` unchanged."""

    def to_json(self) -> dict[str, Any]:
        return {
            "message": self.message,
            "schema": self.schema,
            "source": self.source,
            "state": self.state,
        }


@dataclass(slots=True, frozen=True)
class ToolResult:
    output: str
    is_error: bool = False
    parts: list[MediaPart] | None = None
    """Images, documents or audio for the model beside `output` (`tether.media`)."""
    input_request: InputRequest | None = None
    """Set when the call stopped to ask a person for input (see `InputRequest`): `output` says
    so, as an error the model reads where the turn cannot pause."""


ResumeInput = Callable[[dict[str, Any], dict[str, Any], RunContext], Awaitable[ToolResult]]
"""`resume_input(state, answer, ctx)`: go on with a call that asked for input; `answer` is
`{"action": "accept", "content": {...}}`, `{"action": "decline"}` or `{"action": "cancel"}`."""


@dataclass(slots=True, frozen=True)
class Endpoint:
    """An HTTP endpoint a tool calls: POST sends the input as JSON, GET as query parameters."""

    url: str
    method: str = "POST"
    headers: dict[str, str] = field(default_factory=dict)
    timeout: float = 30.0


Execute = Callable[[Any, RunContext], Awaitable[Any] | Any]
Approval = bool | Callable[[Any, RunContext], Awaitable[bool] | bool]
"""`approval=`: True asks a human before every call; a function ``(input, ctx) -> bool`` (sync
or async) asks when it says True; False (the default) runs every call."""


@dataclass(slots=True, eq=False)
class Tool:
    """A tool the model can call. Build one with `define_tool` or `@tool`."""

    name: str
    description: str
    input_schema: dict[str, Any]
    execute: Execute | None = None
    endpoint: Endpoint | None = None
    timeout: float | None = None
    """Seconds a call may take before it becomes an error result; None waits."""
    validation: Literal["local", "remote"] = "local"
    """'local': we check input against the schema. 'remote': the server that owns the tool is
    the authoritative validator; we still check, at the boundary, what a local check can
    enforce without second-guessing it (required properties and types)."""
    unchecked: str | None = None
    """Why no input check runs at the boundary (a 'remote' schema that cannot be compiled),
    else None."""
    resume_input: ResumeInput | None = None
    """For a tool whose calls may ask for input (`ToolResult.input_request`): goes on with a
    person's answer. None for every other tool."""
    approval: Approval = False
    """Whether a call waits for a human's decision first (see `Approval`)."""
    external: bool = False
    """True: the caller (or the front end) runs the tool; a call pauses the turn until its
    result is given (`result()`)."""
    approval_timeout: float | None = None
    """Seconds a paused lab run waits for a decision on a call of this tool before it is
    denied with reason "expired" (None: the agent's, else no limit)."""
    _check: Callable[[Any], str | None] | None = field(default=None, repr=False)
    _takes_ctx: bool = field(default=True, repr=False)

    @property
    def decides(self) -> bool:
        """True when a call may need a decision (approval or external)."""
        return self.external or self.approval is not False

    async def needs_decision(self, value: Any, ctx: RunContext) -> tuple[bool, str | None]:
        """Whether this call waits for a decision, and why (when the approval check says).
        An approval function that raises asks (fails closed)."""
        approval = self.approval
        if self.external or approval is True:
            return True, None
        if approval is False:
            return False, None
        try:
            answer: Any = approval(value, ctx)
            if inspect.isawaitable(answer):
                answer = await answer
        except Exception as exc:
            return True, f"the approval check raised {type(exc).__name__}: {exc}"
        return bool(answer), None

    @property
    def spec(self) -> ToolSpec:
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": self.input_schema,
        }

    def check_input(self, value: Any) -> str | None:
        """None when `value` is acceptable input, else what is wrong with it."""
        if self._check is None:
            return None
        return self._check(value)

    async def call(self, raw_input: Any, ctx: RunContext) -> ToolResult:
        """Check the input, run the tool, and turn any failure into an error result."""
        result = self._start(raw_input, ctx)
        if isinstance(result, str):
            return ToolResult(result)
        return result if isinstance(result, ToolResult) else await result

    def _start(self, raw_input: Any, ctx: RunContext) -> str | ToolResult | Awaitable[ToolResult]:
        """`call()` as far as it goes without awaiting: when the input is refused or a sync
        function answered, the result (a plain text answer as its `output` alone), else what to
        await for it (an async function, a timeout, an endpoint). The tool loop calls this, so
        that a sync tool costs no coroutine and a plain answer no `ToolResult`."""
        if isinstance(raw_input, str):
            return ToolResult(
                f"Invalid arguments for tool {self.name}: not valid JSON: {raw_input[:200]!r}", True
            )
        check = self._check
        problem = None if check is None else check(raw_input)
        if problem is not None:
            return ToolResult(f"Invalid input for tool {self.name}: {problem}", True)
        fn: Any = self.execute
        if self.timeout is not None or self.endpoint is not None or fn is None:
            return self._finish(None, raw_input, ctx)
        try:  # `_run`'s common case inline: a function's answer, awaited only if it must be
            value = fn(raw_input, ctx) if self._takes_ctx else fn(raw_input)
        except Exception as exc:
            return self._failed(exc)
        kind = type(value)
        if kind is str:  # the answers most tools give, without `_result`'s other cases
            text: str = value
            return text
        if kind is int:  # `output_text`'s first case, without the call
            return repr(value)
        if kind is float or kind is bool or value is None:
            return output_text(value)
        if kind not in _PLAIN and inspect.isawaitable(value):
            return self._finish(value, raw_input, ctx)
        return self._result(value)

    async def _finish(
        self, pending: Awaitable[Any] | None, value: Any, ctx: RunContext
    ) -> ToolResult:
        """The rest of a call that awaits: `pending` (what a function returned), else the whole
        run of the tool (under its timeout)."""
        try:
            if pending is not None:
                answer = await pending
            elif self.timeout is not None:
                async with asyncio.timeout(self.timeout):
                    answer = await self._run(value, ctx)
            else:
                answer = await self._run(value, ctx)
        except Exception as exc:
            return self._failed(exc)
        result = self._result(answer)
        return ToolResult(result) if isinstance(result, str) else result

    def _failed(self, exc: Exception) -> ToolResult:
        """The error result of a call that raised."""
        if isinstance(exc, TimeoutError) and self.timeout is not None:
            return ToolResult(f"Tool {self.name} timed out after {self.timeout:g}s", True)
        if isinstance(exc, ToolError):
            return ToolResult(str(exc), True)
        return ToolResult(f"Tool {self.name} failed: {type(exc).__name__}: {exc}", True)

    def _result(self, value: Any) -> str | ToolResult:
        """What the tool returned, as the result the model reads: a plain answer's text (the
        `output` of a result that is no error and has no media), else the result."""
        kind = type(value)
        if kind is str:
            text: str = value
            return text
        if kind is int or kind is float or kind is bool or value is None:
            return output_text(value)
        if isinstance(value, ToolResult):
            return value
        if isinstance(value, str):
            return str(value)
        if isinstance(value, list) and any(_is_media(v) for v in value):
            return _parts_result(self.name, value)
        if _is_media(value):
            return _parts_result(self.name, [value])
        try:
            return output_text(value)
        except (TypeError, ValueError) as exc:
            return ToolResult(
                f"Tool {self.name} returned a value that is not JSON-serializable: {exc}", True
            )

    async def _run(self, value: Any, ctx: RunContext) -> Any:
        if self.endpoint is not None:
            return await _call_endpoint(self, value, ctx)
        if self.execute is None:  # an external tool: only its caller runs it
            raise ToolError(f"Tool {self.name} is external: its caller runs it")
        fn: Any = self.execute
        result = fn(value, ctx) if self._takes_ctx else fn(value)
        if type(result) in _PLAIN:  # a sync tool's usual answers, without the Awaitable ABC check
            return result
        if inspect.isawaitable(result):  # an async execute, or a sync one returning an awaitable
            return await result
        return result


def _is_media(value: Any) -> bool:
    return isinstance(value, dict) and value.get("type") in MEDIA_TYPES


def _parts_result(name: str, items: list[Any]) -> ToolResult:
    """A tool's list of strings, text parts and media parts: the text joined as `output`, the
    media (checked) as `parts`."""
    texts: list[str] = []
    media: list[MediaPart] = []
    try:
        for i, item in enumerate(items):
            if isinstance(item, str):
                texts.append(item)
            elif isinstance(item, dict) and item.get("type") == "text":
                texts.append(str(item.get("text", "")))
            elif _is_media(item):
                media.append(check_media_part(item, f"{name} result[{i}]"))
            else:
                texts.append(output_text(item))
    except (ContentError, TypeError, ValueError) as exc:
        return ToolResult(f"Tool {name} returned a part that cannot be sent: {exc}", True)
    return ToolResult("\n".join(texts), parts=media)


_PLAIN = frozenset({str, int, float, bool, dict, list, type(None), ToolResult})


def output_text(value: Any) -> str:
    """A non-string tool or resource result as the model reads it: compact JSON, with pydantic
    models (anywhere in it) dumped in their JSON mode. Raises TypeError for anything else JSON
    cannot hold."""
    # The scalars a tool most often returns, spelled as json spells them, without the
    # encoder json builds on every call.
    kind = type(value)
    if kind is int:
        return repr(value)  # exactly an int: its repr is its JSON
    if kind is bool:
        return "true" if value else "false"
    if value is None:
        return "null"
    if kind is float and math.isfinite(value):
        return float.__repr__(value)
    return _ENCODER.encode(value)


def _model_json(value: Any) -> Any:
    # pydantic is imported on first use (it costs more than the rest of the harness to
    # import): a value can only be one of its models once something has imported it.
    pydantic = sys.modules.get("pydantic")
    if pydantic is not None and isinstance(value, pydantic.BaseModel):
        return value.model_dump(mode="json")
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


# One encoder for every result: json.dumps with options builds a new one per call.
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=_model_json)


async def _call_endpoint(t: Tool, value: Any, ctx: RunContext) -> str:
    import httpx

    ep = t.endpoint
    assert ep is not None
    client = ctx.http
    if client is None:
        raise ToolError(f"Tool {t.name}: no HTTP client available for its endpoint")
    method = ep.method.upper()
    try:
        if method in ("GET", "DELETE"):
            resp = await client.request(
                method, ep.url, params=value, headers=ep.headers, timeout=ep.timeout
            )
        else:
            resp = await client.request(
                method, ep.url, json=value, headers=ep.headers, timeout=ep.timeout
            )
    except httpx.TimeoutException as exc:
        raise ToolError(
            f"Tool {t.name}: endpoint {ep.url} timed out after {ep.timeout:g}s"
        ) from exc
    except httpx.HTTPError as exc:
        raise ToolError(f"Tool {t.name}: endpoint {ep.url} failed: {exc!r}") from exc
    if resp.status_code >= 400:
        raise ToolError(
            f"Tool {t.name}: endpoint {ep.url} answered {resp.status_code}: {resp.text[:500]}"
        )
    return resp.text


def _arity_takes_ctx(fn: Callable[..., Any]) -> bool:
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return True
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2 or any(p.kind is p.VAR_POSITIONAL for p in params)


def _schema_checker(name: str, schema: dict[str, Any]) -> Callable[[Any], str | None]:
    cls = checked_schema(schema, f"tool {name!r}: input_schema", ToolDefinitionError)
    import jsonschema  # imported by checked_schema already

    # Built once per tool; a call costs one is_valid (the error is looked for only on failure).
    validator = _ecma_patterns(cls)(schema)
    is_valid = validator.is_valid
    best_match = jsonschema.exceptions.best_match

    def check(value: Any) -> str | None:
        if is_valid(value):
            return None
        err = best_match(validator.iter_errors(value))
        if err is None:  # pragma: no cover - is_valid said no, so there is an error
            return "does not match the schema"
        where = "/".join(str(p) for p in err.absolute_path)
        return f"{where}: {err.message}" if where else err.message

    # The common flat schema is checked without the interpreting validator.
    return _plain_object_check(schema, check) or check


_PLAIN_TYPES: dict[str, frozenset[type]] = {
    "string": frozenset({str}),
    "boolean": frozenset({bool}),
    "integer": frozenset({int}),
    "number": frozenset({int, float}),
    "null": frozenset({type(None)}),
    "object": frozenset({dict}),
    "array": frozenset({list}),
}
"""The exact types a plain property of each JSON type surely accepts (a bool is no integer)."""
_ANNOTATION_KEYS = frozenset({"description", "title", "default", "examples", "$comment"})
_TOP_KEYS = _ANNOTATION_KEYS | {"type", "properties", "required", "additionalProperties", "$schema"}


def _plain_object_check(
    schema: dict[str, Any], full: Callable[[Any], str | None]
) -> Callable[[Any], str | None] | None:
    """For the schema most tools have (an object of typed properties, some required, maybe no
    others allowed), a check that passes the input the schema surely accepts at once and hands
    anything else to `full`, the full validator, which has the last word (None for a schema
    outside that shape). What it passes is a subset of what the validator accepts (a 1.0 for
    an integer, for one, is left to it)."""
    if schema.get("type") != "object" or not _TOP_KEYS.issuperset(schema):
        return None
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    extra = schema.get("additionalProperties", True)
    if (
        not isinstance(properties, dict)
        or not isinstance(required, list)
        or type(extra) is not bool
    ):
        return None
    checks: dict[str, frozenset[type]] = {}
    for key, sub in properties.items():
        kind = sub.get("type") if isinstance(sub, dict) else None
        if not isinstance(kind, str) or kind not in _PLAIN_TYPES:
            return None
        if not _ANNOTATION_KEYS.issuperset(k for k in sub if k != "type"):
            return None
        checks[key] = _PLAIN_TYPES[kind]
    needed = tuple(required)

    def check(value: Any) -> str | None:
        if type(value) is not dict:
            return full(value)
        for key in needed:
            if key not in value:
                return full(value)
        for key, item in value.items():
            kinds = checks.get(key)
            if kinds is None:
                if not extra:
                    return full(value)
            elif type(item) not in kinds:
                return full(value)
        return None

    return check


_ECMA_CLASSES: dict[Any, Any] = {}


def _ecma_patterns(cls: Any) -> Any:
    """`cls` reading ``pattern`` as JSON Schema says, as an ECMA-262 regular expression, whose
    ``$`` matches only at the very end (Python's also matches before a final newline, which
    would let ``"abc\\n"`` through ``^[a-z]+$``)."""
    extended = _ECMA_CLASSES.get(cls)
    if extended is None:
        import jsonschema

        extend: Any = jsonschema.validators.extend  # untyped in types-jsonschema
        extended = extend(cls, {"pattern": _pattern_keyword})
        _ECMA_CLASSES[cls] = extended
    return extended


def _pattern_keyword(validator: Any, pattern: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if isinstance(instance, str) and isinstance(pattern, str):
        regex = _ecma_regex(pattern)
        if regex is not None and regex.search(instance) is None:
            from jsonschema import ValidationError

            yield ValidationError(f"{instance!r} does not match {pattern!r}")


@functools.lru_cache(maxsize=512)
def _ecma_regex(pattern: str) -> re.Pattern[str] | None:
    """`pattern` compiled with every unescaped ``$`` outside a character class read as ``\\Z``;
    None when Python cannot compile it (the schema check refuses most such patterns)."""
    out: list[str] = []
    escaped = in_class = False
    for char in pattern:
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
        elif char == "$":
            out.append(r"\Z")
            continue
        out.append(char)
    try:
        return re.compile("".join(out))
    except re.error:
        return None


def _boundary_checker(
    name: str, schema: Any
) -> tuple[Callable[[Any], str | None] | None, str | None]:
    """The check of a tool another party validates (`validation="remote"`): its schema's
    required properties and types, which mean the same to every validator, and nothing that
    one could read differently (formats, patterns, bounds, combinators, references). Returns
    the check (None when there is nothing to check) or, when the schema cannot be compiled,
    None and why."""
    if not isinstance(schema, dict):
        return None, "its input schema is not a JSON Schema object"
    import jsonschema

    try:
        with warnings.catch_warnings():  # an unknown $schema warns, then reads as 2020-12
            warnings.simplefilter("ignore", DeprecationWarning)
            cls = jsonschema.validators.validator_for(
                schema, default=jsonschema.Draft202012Validator
            )
        cls.check_schema(schema)
    except jsonschema.SchemaError as exc:
        return None, f"its input schema is not a valid JSON Schema: {exc.message}"
    except Exception as exc:  # a schema the meta-schema check itself chokes on
        return None, f"its input schema cannot be compiled: {type(exc).__name__}: {exc}"
    shape = _shape(schema)
    if not isinstance(shape, dict):
        return None, None
    try:
        return _schema_checker(name, shape), None
    except ToolDefinitionError as exc:  # pragma: no cover - a shape of a valid schema is valid
        return None, f"its input schema cannot be compiled: {exc}"


def _shape(node: Any) -> Any:
    """`node` reduced to `type`, `required`, `properties` and `items`: a weaker schema (every
    keyword of a schema object must hold, so dropping some keeps only necessary conditions).
    True when nothing is left."""
    if not isinstance(node, dict):
        return True
    out: dict[str, Any] = {}
    if "type" in node:
        out["type"] = node["type"]
    required = node.get("required")
    if isinstance(required, list) and required:
        out["required"] = required
    properties = node.get("properties")
    if isinstance(properties, dict):
        needed = set(required) if isinstance(required, list) else set()
        shaped = {
            key: _shape(value) if key in needed else _nullable(_shape(value))
            for key, value in properties.items()
        }
        kept = {key: value for key, value in shaped.items() if value is not True}
        if kept:
            out["properties"] = kept
    items = node.get("items")
    # With prefixItems (2020-12) `items` covers only the rest; earlier drafts' array form is
    # positional: neither is kept.
    if isinstance(items, dict) and "prefixItems" not in node:
        shaped_items = _shape(items)
        if shaped_items is not True:
            out["items"] = shaped_items
    return out or True


def _nullable(shape: Any) -> Any:
    """An optional property may also be null here: many servers read null as "not given", and
    whether this one does is the server's to say (the values SEP-2243 mirrors into headers are
    sent as null to mean absent, too)."""
    if not isinstance(shape, dict) or "type" not in shape:
        return shape
    kinds = shape["type"] if isinstance(shape["type"], list) else [shape["type"]]
    return shape if "null" in kinds else {**shape, "type": [*kinds, "null"]}


def _check_name(name: str) -> None:
    if not isinstance(name, str) or not _NAME.match(name):
        raise ToolDefinitionError(
            f"tool name {name!r} must be 1-64 characters of letters, digits, '_' or '-'"
        )


def define_tool(
    *,
    name: str,
    description: str = "",
    input_schema: dict[str, Any] | None = None,
    execute: Callable[..., Any] | None = None,
    endpoint: Endpoint | dict[str, Any] | None = None,
    timeout: float | None = None,
    validation: Literal["local", "remote"] = "local",
    approval: Approval = False,
    external: bool = False,
    approval_timeout: float | None = None,
) -> Tool:
    """Declare a tool from a JSON Schema. `execute(input, ctx)` (or `execute(input)`) may be sync
    or async; `endpoint={"url", "method"}` calls an HTTP endpoint instead.

    `approval=True` (or a function ``(input, ctx) -> bool`` saying when) makes a call wait for a
    human's decision: the turn pauses (`done.finish_reason == "paused"`) and `Agent.resume()`
    continues it. `external=True` declares a tool the caller runs (no `execute`): its calls
    pause the turn until `result()` gives their output. `approval_timeout` is how long a paused
    lab run waits for a decision on it before the call is denied as "expired"."""
    _check_name(name)
    if external:
        if execute is not None or endpoint is not None:
            raise ToolDefinitionError(
                f"tool {name!r}: an external tool is run by its caller; give no execute= or "
                "endpoint="
            )
        if approval is not False:
            raise ToolDefinitionError(
                f"tool {name!r}: an external tool already waits for its caller; approval= "
                "does not apply"
            )
    elif (execute is None) == (endpoint is None):
        raise ToolDefinitionError(
            f"tool {name!r}: give exactly one of execute= or endpoint= (or external=True for a "
            "tool the caller runs)"
        )
    _check_approval(name, approval, approval_timeout)
    schema = input_schema if input_schema is not None else {"type": "object", "properties": {}}
    unchecked: str | None = None
    if validation == "local":
        check: Callable[[Any], str | None] | None = _schema_checker(name, schema)
    else:
        check, unchecked = _boundary_checker(name, schema)
    ep = Endpoint(**endpoint) if isinstance(endpoint, dict) else endpoint
    return Tool(
        name=name,
        description=description,
        input_schema=schema,
        execute=execute,
        endpoint=ep,
        timeout=timeout,
        validation=validation,
        unchecked=unchecked,
        approval=approval,
        external=external,
        approval_timeout=approval_timeout,
        _check=check,
        _takes_ctx=_arity_takes_ctx(execute) if execute is not None else True,
    )


def _check_approval(name: str, approval: Any, timeout: Any) -> None:
    if not (isinstance(approval, bool) or callable(approval)):
        raise ToolDefinitionError(
            f"tool {name!r}: approval= must be True, False or a function (input, ctx) -> bool, "
            f"got {type(approval).__name__}"
        )
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0
    ):
        raise ToolDefinitionError(
            f"tool {name!r}: approval_timeout= must be a positive number of seconds or None, "
            f"got {timeout!r}"
        )


def _unsupported_parameter(tool_name: str, fields: dict[str, Any]) -> ToolDefinitionError:
    """The error for a typed function whose parameters have no JSON schema, naming the first
    parameter that has none and its type."""
    import pydantic

    for param, (ann, _default) in fields.items():
        try:
            pydantic.TypeAdapter(ann).json_schema()
        except (pydantic.PydanticSchemaGenerationError, pydantic.PydanticInvalidForJsonSchema):
            type_name = getattr(ann, "__qualname__", None) or repr(ann)
            return ToolDefinitionError(
                f"tool {tool_name!r}: parameter {param!r} has type {type_name}, which has no "
                "JSON schema; annotate it with a JSON type (str, int, float, bool, list, dict), "
                "a pydantic model, a dataclass or a TypedDict"
            )
    return ToolDefinitionError(f"tool {tool_name!r}: its parameters have no JSON schema")


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...
@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float | None = None,
    approval: Approval = False,
    approval_timeout: float | None = None,
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float | None = None,
    approval: Approval = False,
    approval_timeout: float | None = None,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Declare a tool from a typed function; its schema comes from the signature (pydantic).

    A parameter annotated `RunContext` receives the context and is not part of the schema. The
    description defaults to the docstring. `approval=` and `approval_timeout=` are
    `define_tool`'s.
    """

    def build(f: Callable[..., Any]) -> Tool:
        import pydantic  # on first use: most agents declare no typed-function tool

        tool_name = name or f.__name__
        _check_name(tool_name)
        _check_approval(tool_name, approval, approval_timeout)
        try:
            hints = get_type_hints(f, include_extras=True)
        except NameError as exc:  # an annotation naming something not importable from f's module
            raise ToolDefinitionError(
                f"tool {tool_name!r}: its annotations do not resolve ({exc}); import the type in "
                f"the module of {getattr(f, '__qualname__', tool_name)}"
            ) from None
        fields: dict[str, Any] = {}
        ctx_param: str | None = None
        for p in inspect.signature(f).parameters.values():
            ann = hints.get(p.name, Any)
            if ann is RunContext:
                ctx_param = p.name
                continue
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                raise ToolDefinitionError(f"tool {tool_name!r}: *args/**kwargs cannot be described")
            default = ... if p.default is inspect.Parameter.empty else p.default
            fields[p.name] = (ann, default)
        try:
            model = pydantic.create_model(
                f"{tool_name}_input", __config__=pydantic.ConfigDict(extra="forbid"), **fields
            )
            schema = model.model_json_schema()
        except (pydantic.PydanticSchemaGenerationError, pydantic.PydanticInvalidForJsonSchema):
            raise _unsupported_parameter(tool_name, fields) from None
        schema.pop("title", None)
        is_async = inspect.iscoroutinefunction(f)
        validate = model.model_validate

        async def execute(value: dict[str, Any], ctx: RunContext) -> Any:
            # Validated once, here: the same model checks the input and converts it.
            try:
                args = validate(value)
            except pydantic.ValidationError as exc:
                problems = "; ".join(
                    f"{'/'.join(str(x) for x in e['loc']) or '(root)'}: {e['msg']}"
                    for e in exc.errors()
                )
                raise ToolError(f"Invalid input for tool {tool_name}: {problems}") from None
            kwargs = {k: getattr(args, k) for k in fields}
            if ctx_param is not None:
                kwargs[ctx_param] = ctx
            result = f(**kwargs)
            return await result if is_async else result

        doc = inspect.getdoc(f) or ""
        return Tool(
            name=tool_name,
            description=description if description is not None else doc,
            input_schema=schema,
            execute=execute,
            timeout=timeout,
            approval=approval,
            approval_timeout=approval_timeout,
            _takes_ctx=True,
        )

    if fn is not None:
        return build(fn)
    return build
