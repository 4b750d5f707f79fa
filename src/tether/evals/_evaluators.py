"""Evaluators: what scores a case's result.

In a dataset an evaluator is a spec, `{"type": ..., ...}`:

- `equals`: the output equals the case's `expected` (two strings are compared without their
  surrounding whitespace; a JSON answer is parsed when `expected` is not a string);
- `contains` (`value`, `case_sensitive`?): the text holds `value` (a list output: has it as an
  item; an object: has the key, or every key and value of an object `value`);
- `regex` (`pattern`): the pattern matches somewhere in the text;
- `json_schema` (`schema`): the output (a JSON string is parsed first) is valid;
- `tool_called` (`name`, `arguments`?): that tool was called (with `arguments` a subset of
  its input, when given); the evaluator's own name goes in `evaluator_name`;
- `max_latency_ms` (`value`): the case ran within that many milliseconds;
- `max_cost_usd` (`value`): it cost at most that many dollars (undecided, and said so, when
  the run records carry no cost);
- `judge` (`agent`, `rubric`): the runtime's agent of that id answers, through structured
  output, that the answer meets the rubric (`{"passed", "reason"}`).

Every spec may carry a `name` (default: its type). In Python, any callable
`(case, result) -> bool | float | {"score", "reason", "passed"?}` (sync or async) is an evaluator;
a number passes at `threshold` (0.5 unless the callable is wrapped in `FunctionEvaluator`).
An evaluator that raises scores the case as an error, with its message; the experiment goes on.
"""

from __future__ import annotations

import abc
import functools
import inspect
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError, DatasetError

if TYPE_CHECKING:
    from ..lab import Runtime

__all__ = [
    "Case",
    "CaseResult",
    "Declared",
    "EvaluationResult",
    "Evaluator",
    "EvaluatorContext",
    "EvaluatorSpec",
    "FunctionEvaluator",
    "SpecError",
    "evaluator_from_spec",
    "parse_spec",
    "run_evaluator",
    "to_evaluator",
    "unique_names",
]

EvaluatorSpec = dict[str, Any]
"""`{"type": ..., "name"?: ..., ...}` as written in a dataset."""


@dataclass(slots=True)
class EvaluationResult:
    """One evaluator's verdict on one run of a case."""

    passed: bool | None
    """True / False; None when it cannot be decided (a cost that is unknown)."""
    score: float | None = None
    """1.0 / 0.0 for a pass / fail, or the number a scoring evaluator returned."""
    reason: str | None = None
    error: bool = False
    """The evaluator raised (the reason holds its message)."""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"passed": self.passed, "score": self.score, "reason": self.reason}
        if self.error:
            out["error"] = True
        return out


@dataclass(slots=True)
class CaseResult:
    """What running a case produced: what evaluators receive as `result`."""

    output: Any
    """The agent's output (its parsed object with an output schema) or the workflow's output;
    None when the run failed."""
    text: str
    """The output as text: a string as it is, anything else as JSON."""
    run_id: str
    kind: str
    """``"agent"`` or ``"workflow"``."""
    latency_ms: float
    usage: dict[str, int] = field(default_factory=dict)
    """Tokens over every model request of the case (a workflow's episodes summed)."""
    cost_usd: float | None = None
    """What the case cost, from the run records; None when they carry no cost."""
    cost_note: str | None = None
    """Why the cost is unknown, when it is."""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    """`{"name", "arguments"}` of every tool call, in order (nested episodes included)."""
    error: str | None = None
    """Why the run failed, or None."""
    memory_scope: str | None = None
    recovered: bool = False
    """The run had finished before (an earlier, interrupted attempt); it was read back from the
    run records instead of run again."""


@dataclass(slots=True, frozen=True)
class Case:
    """One case of a dataset."""

    id: str
    input: Any
    """A string, or an object (run options for an agent, the input of a workflow)."""
    expected: Any = None
    """What `equals` compares with (None when the case has none)."""
    metadata: dict[str, Any] = field(default_factory=dict)
    evaluators: tuple[Evaluator, ...] = ()
    """This case's own evaluators (the dataset's header ones come first when it runs)."""
    line: int | None = None
    """Where the case starts in its file (1-based), for error messages."""
    has_expected: bool = False
    """Whether `expected` was given (null is a value too)."""
    decisions: dict[str, Any] | None = None
    """How an agent case decides the calls its run pauses on (the case's `decisions`): by
    tool name or call id, each the JSON of `approve()` / `deny(reason)` / `result(output)`.
    None: a case whose run pauses is an error case (experiments never pause)."""

    def to_json(self) -> dict[str, Any]:
        """The case as it is stored and shipped (its evaluators by spec)."""
        out: dict[str, Any] = {"id": self.id, "input": self.input}
        if self.has_expected:
            out["expected"] = self.expected
        if self.decisions is not None:
            out["decisions"] = self.decisions
        if self.metadata:
            out["metadata"] = self.metadata
        if self.evaluators:
            out["evaluators"] = [e.spec() for e in self.evaluators]
        return out


@dataclass(slots=True)
class EvaluatorContext:
    """What an evaluator may use beside the case and its result (the judge runs an agent)."""

    runtime: Runtime
    tags: list[str]
    """The case's tags (`experiment:`, `case:`, provenance) for runs an evaluator starts."""
    scope: str
    """A memory-scope prefix private to this run of the case."""


class Evaluator(abc.ABC):
    """Scores one run of a case. Subclass it, or pass a plain callable."""

    name: str

    @abc.abstractmethod
    async def evaluate(
        self, case: Case, result: CaseResult, ctx: EvaluatorContext
    ) -> EvaluationResult:
        """The verdict (raise to score the case as an error)."""

    def spec(self) -> EvaluatorSpec:
        """The JSON form: what a dataset would say (hashed into the dataset's identity)."""
        return {"type": type(self).__name__, "name": self.name}

    def renamed(self, name: str) -> Evaluator:
        clone = _copy(self)
        clone.name = name
        return clone


def _copy(evaluator: Evaluator) -> Evaluator:
    clone = object.__new__(type(evaluator))
    clone.__dict__.update(evaluator.__dict__)
    return clone


class SpecError(Exception):
    """An evaluator spec is wrong; `key` names the key inside the spec, if one is at fault."""

    def __init__(self, message: str, key: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.key = key


# -- the built-in evaluators -----------------------------------------------------------------


class Declared(Evaluator):
    """An evaluator built from a dataset spec; `spec()` returns it as written."""

    type: str = ""
    name_key: str = "name"
    """The spec key that names the evaluator (`tool_called` uses `name` for the tool)."""

    def __init__(self, spec: Mapping[str, Any]) -> None:
        self._spec = dict(spec)
        self.name = str(spec.get(self.name_key) or self.type)

    def spec(self) -> EvaluatorSpec:
        return {**self._spec, self.name_key: self.name}


def _parsed(output: Any) -> Any:
    """A string that holds JSON, parsed; anything else as it is."""
    if isinstance(output, str):
        try:
            return json.loads(output)
        except ValueError:
            return output
    return output


class Equals(Declared):
    """``{"type": "equals"}``: the output equals the case's ``expected``.

    Strings are compared with surrounding whitespace stripped; any other ``expected`` (a number,
    a list, an object) is compared with the output read as JSON. A dataset where this evaluator
    applies to a case without ``expected`` is refused when it loads.

    Spec keys:
        name: The evaluator's name in the report (default ``equals``).
    """

    type = "equals"

    async def evaluate(
        self, case: Case, result: CaseResult, ctx: EvaluatorContext
    ) -> EvaluationResult:
        if not case.has_expected:
            raise ConfigError(f"case {case.id!r} has no 'expected' for the equals evaluator")
        expected = case.expected
        got = result.output
        if isinstance(expected, str) and isinstance(got, str):
            ok = got.strip() == expected.strip()
        else:
            got = _parsed(got) if not isinstance(expected, str) else got
            ok = got == expected
        reason = None if ok else f"expected {_short(expected)}, got {_short(result.output)}"
        return _verdict(ok, reason)


class Contains(Declared):
    """``{"type": "contains", "value": ...}``: the output contains ``value``.

    On text output, ``value`` (a string, or any JSON value as its JSON text) is a substring of
    the answer; on a list output, one of its items; on an object output, a key of it (or, for
    an object ``value``, a subset of its key-value pairs).

    Spec keys:
        value: What the output must contain (required).
        case_sensitive: False compares text case-insensitively (default true).
        name: The evaluator's name in the report (default ``contains``).
    """

    type = "contains"

    def __init__(self, spec: Mapping[str, Any]) -> None:
        super().__init__(spec)
        _require(spec, "value")
        self.value = spec["value"]
        sensitive = spec.get("case_sensitive", True)
        if not isinstance(sensitive, bool):
            raise SpecError("must be true or false", "case_sensitive")
        self.case_sensitive = sensitive

    async def evaluate(
        self, case: Case, result: CaseResult, ctx: EvaluatorContext
    ) -> EvaluationResult:
        value, output = self.value, result.output
        if isinstance(output, list):
            ok = value in output
        elif isinstance(output, dict):
            if isinstance(value, dict):
                ok = all(k in output and output[k] == v for k, v in value.items())
            else:
                ok = value in output
        else:
            needle = value if isinstance(value, str) else json.dumps(value)
            hay = result.text
            if not self.case_sensitive:
                needle, hay = needle.lower(), hay.lower()
            ok = needle in hay
        return _verdict(ok, None if ok else f"{_short(value)} not in {_short(result.output)}")


class Regex(Declared):
    """``{"type": "regex", "pattern": ...}``: the answer's text matches ``pattern`` somewhere
    (Python `re.search`; write ``(?i)`` for case-insensitive, anchor with ``^``/``$``).

    Spec keys:
        pattern: A Python regular expression (required; checked when the dataset loads).
        name: The evaluator's name in the report (default ``regex``).
    """

    type = "regex"

    def __init__(self, spec: Mapping[str, Any]) -> None:
        super().__init__(spec)
        _require(spec, "pattern", str)
        try:
            self.pattern = re.compile(spec["pattern"])
        except re.error as exc:
            raise SpecError(f"not a valid regular expression: {exc}", "pattern") from None

    async def evaluate(
        self, case: Case, result: CaseResult, ctx: EvaluatorContext
    ) -> EvaluationResult:
        ok = self.pattern.search(result.text) is not None
        return _verdict(ok, None if ok else f"/{self.pattern.pattern}/ does not match")


class JsonSchema(Declared):
    """``{"type": "json_schema", "schema": {...}}``: the output (text read as JSON) is valid
    against ``schema``; a failure names the path and the first problem.

    Spec keys:
        schema: A JSON Schema (required; checked when the dataset loads).
        name: The evaluator's name in the report (default ``json_schema``).
    """

    type = "json_schema"

    def __init__(self, spec: Mapping[str, Any]) -> None:
        super().__init__(spec)
        _require(spec, "schema", dict)
        import jsonschema  # here: a Ray worker or a driver without this evaluator needs none

        cls = jsonschema.validators.validator_for(spec["schema"])
        try:
            cls.check_schema(spec["schema"])
        except jsonschema.SchemaError as exc:
            raise SpecError(f"not a valid JSON Schema: {exc.message}", "schema") from None
        self.validator = cls(spec["schema"])  # compiled once, used for every case

    async def evaluate(
        self, case: Case, result: CaseResult, ctx: EvaluatorContext
    ) -> EvaluationResult:
        import jsonschema  # loaded by __init__ already

        value = _parsed(result.output)
        error = jsonschema.exceptions.best_match(self.validator.iter_errors(value))
        if error is None:
            return _verdict(True, None)
        where = "/".join(str(p) for p in error.absolute_path)
        return _verdict(False, f"{where or '(root)'}: {error.message}")


class ToolCalled(Declared):
    """``{"type": "tool_called", "name": ...}``: the run called tool ``name`` (with
    ``arguments`` given: at least once with input containing them).

    Spec keys:
        name: The tool's name (required).
        arguments: An object the call's input must contain (its keys with equal values).
        evaluator_name: The evaluator's name in the report (``name`` is the tool's; default
            ``tool_called``).
    """

    type = "tool_called"
    name_key = "evaluator_name"

    def __init__(self, spec: Mapping[str, Any]) -> None:
        super().__init__(spec)
        _require(spec, "name", str)
        self.tool = spec["name"]
        arguments = spec.get("arguments")
        if arguments is not None and not isinstance(arguments, dict):
            raise SpecError("must be an object (a subset of the call's input)", "arguments")
        self.arguments = arguments

    async def evaluate(
        self, case: Case, result: CaseResult, ctx: EvaluatorContext
    ) -> EvaluationResult:
        calls = [c for c in result.tool_calls if c.get("name") == self.tool]
        if not calls:
            called = sorted({str(c.get("name")) for c in result.tool_calls}) or ["none"]
            return _verdict(False, f"{self.tool} was not called (called: {', '.join(called)})")
        if self.arguments is None:
            return _verdict(True, None)
        for call in calls:
            args = call.get("arguments")
            if isinstance(args, dict) and _subset(self.arguments, args):
                return _verdict(True, None)
        return _verdict(
            False,
            f"{self.tool} was called, never with {_short(self.arguments)} "
            f"(got {_short(calls[-1].get('arguments'))})",
        )


class _Limit(Declared):
    """An evaluator whose spec's ``value`` is a limit (a number >= 0, required)."""

    def __init__(self, spec: Mapping[str, Any]) -> None:
        super().__init__(spec)
        self.limit = _number(spec)


class MaxLatencyMs(_Limit):
    """``{"type": "max_latency_ms", "value": N}``: the run took at most ``value``
    milliseconds, from its start to its end.

    Spec keys:
        value: The limit in milliseconds (a number >= 0, required).
        name: The evaluator's name in the report (default ``max_latency_ms``).
    """

    type = "max_latency_ms"

    async def evaluate(
        self, case: Case, result: CaseResult, ctx: EvaluatorContext
    ) -> EvaluationResult:
        ok = result.latency_ms <= self.limit
        return _verdict(ok, f"{result.latency_ms:.0f} ms (limit {self.limit:g} ms)")


class MaxCostUsd(_Limit):
    """``{"type": "max_cost_usd", "value": X}``: the run cost at most ``value`` US dollars
    (its model calls' priced cost); a run without a known cost scores neither pass nor fail,
    saying why.

    Spec keys:
        value: The limit in US dollars (a number >= 0, required).
        name: The evaluator's name in the report (default ``max_cost_usd``).
    """

    type = "max_cost_usd"

    async def evaluate(
        self, case: Case, result: CaseResult, ctx: EvaluatorContext
    ) -> EvaluationResult:
        if result.cost_usd is None:
            note = result.cost_note or "the run records carry no cost_usd"
            return EvaluationResult(None, None, f"cost unknown: {note}")
        ok = result.cost_usd <= self.limit
        return _verdict(ok, f"${result.cost_usd:.6f} (limit ${self.limit:g})")


@functools.cache
def verdict_model() -> type[Any]:
    """What a judge agent answers with (its structured output): a pydantic model, built on
    the first judge's first case, not on import (building one costs tens of milliseconds of
    pydantic's own imports, which every Ray worker would pay before its first case)."""
    import pydantic

    class Verdict(pydantic.BaseModel):
        passed: bool
        reason: str

    return Verdict


JUDGE_PROMPT = """\
You are grading one answer against a rubric. Reply with a JSON object \
{{"passed": true|false, "reason": "<one sentence>"}}.

Rubric:
{rubric}

Input:
{input}
{expected}
Answer:
{answer}"""


class Judge(Declared):
    """``{"type": "judge", "agent": ID, "rubric": ...}``: another agent of the project grades
    the answer against ``rubric`` (given the case's input and its ``expected``, if any),
    answering through structured output ``{"passed", "reason"}``; its episode is recorded with
    the case's tags and ``judge:NAME``.

    Spec keys:
        agent: The id of the grading agent, one of the runtime's (required).
        rubric: What a passing answer does (required).
        name: The evaluator's name in the report (default ``judge``).
    """

    type = "judge"

    def __init__(self, spec: Mapping[str, Any]) -> None:
        super().__init__(spec)
        _require(spec, "agent", str)
        _require(spec, "rubric", str)
        self.agent_id: str = spec["agent"]
        self.rubric: str = spec["rubric"]

    async def evaluate(
        self, case: Case, result: CaseResult, ctx: EvaluatorContext
    ) -> EvaluationResult:
        agent = ctx.runtime.agents.get(self.agent_id)
        if agent is None:
            known = ", ".join(sorted(ctx.runtime.agents)) or "none"
            raise ConfigError(f"judge: no agent {self.agent_id!r} in the runtime (known: {known})")
        expected = f"\nExpected:\n{_text(case.expected)}\n" if case.has_expected else ""
        prompt = JUDGE_PROMPT.format(
            rubric=self.rubric,
            input=_text(case.input),
            expected=expected,
            answer=result.text,
        )
        handle = agent.run(
            memory_scope=f"{ctx.scope}/judge:{self.name}",
            user=prompt,
            output_schema=verdict_model(),
            tags=[*ctx.tags, f"judge:{self.name}"],
        )
        verdict = (await handle.result).output
        return _verdict(verdict.passed, verdict.reason)


_TYPES: dict[str, type[Declared]] = {
    cls.type: cls
    for cls in (Equals, Contains, Regex, JsonSchema, ToolCalled, MaxLatencyMs, MaxCostUsd, Judge)
}
_KEYS: dict[str, set[str]] = {
    "equals": set(),
    "contains": {"value", "case_sensitive"},
    "regex": {"pattern"},
    "json_schema": {"schema"},
    "tool_called": {"name", "arguments", "evaluator_name"},
    "max_latency_ms": {"value"},
    "max_cost_usd": {"value"},
    "judge": {"agent", "rubric"},
}


def parse_spec(spec: Any) -> Evaluator:
    """An evaluator from its dataset spec.

    Raises:
        SpecError: naming the key at fault.
    """
    if not isinstance(spec, Mapping):
        raise SpecError(f"an evaluator is an object with a 'type', got {type(spec).__name__}")
    kind = spec.get("type")
    if kind not in _TYPES:
        raise SpecError(
            f"unknown evaluator type {kind!r}; known: {', '.join(sorted(_TYPES))}", "type"
        )
    allowed = {"type", _TYPES[kind].name_key} | _KEYS[kind]
    for key in spec:
        if key not in allowed:
            raise SpecError(
                f"{kind} takes {', '.join(sorted(allowed - {'type'}))}, not {key!r}", str(key)
            )
    key = _TYPES[kind].name_key
    name = spec.get(key)
    if name is not None and (not isinstance(name, str) or not name):
        raise SpecError("must be a non-empty string", key)
    return _TYPES[kind](spec)


def evaluator_from_spec(spec: Any, where: str = "evaluator") -> Evaluator:
    """`parse_spec`, its error as a DatasetError naming `where` and the key.

    Raises:
        DatasetError
    """
    try:
        return parse_spec(spec)
    except SpecError as exc:
        name = f"{where}.{exc.key}" if exc.key else where
        raise DatasetError(exc.message, field=name) from None


# -- Python callables ------------------------------------------------------------------------

EvaluatorFunction = Callable[..., Any]
"""`(case, result) -> bool | float | {"score", "reason", "passed"?}`, sync or async."""


class FunctionEvaluator(Evaluator):
    """A Python callable as an evaluator.

    Args:
        fn: `(case, result)`; returns a bool (pass / fail), a number (a score that passes at
            `threshold`), a mapping `{"score", "reason", "passed"?}`, or an EvaluationResult.
        name: Its column in reports (default: the function's name).
        threshold: The score at and above which a number passes.
    """

    def __init__(
        self, fn: EvaluatorFunction, *, name: str | None = None, threshold: float = 0.5
    ) -> None:
        if not callable(fn):
            raise ConfigError(f"an evaluator must be callable, got {fn!r:.80}")
        self.fn = fn
        self.name = name or getattr(fn, "__name__", None) or type(fn).__name__
        self.threshold = threshold

    def spec(self) -> EvaluatorSpec:
        fn = self.fn
        where = f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', self.name)}"
        return {"type": "python", "name": self.name, "function": where}

    async def evaluate(
        self, case: Case, result: CaseResult, ctx: EvaluatorContext
    ) -> EvaluationResult:
        value = self.fn(case, result)
        if inspect.isawaitable(value):
            value = await value
        return coerce(value, self.threshold)


def coerce(value: Any, threshold: float = 0.5) -> EvaluationResult:
    """What an evaluator returned, as an EvaluationResult.

    Raises:
        TypeError: a value that is none of the accepted shapes.
    """
    if isinstance(value, EvaluationResult):
        return value
    if isinstance(value, bool):
        return _verdict(value, None)
    if isinstance(value, (int, float)):
        return EvaluationResult(float(value) >= threshold, float(value), None)
    if isinstance(value, Mapping):
        unknown = set(value) - {"score", "reason", "passed"}
        if unknown or not value:
            raise TypeError(
                f"an evaluator's mapping holds score, reason and passed, got {sorted(value)}"
            )
        score = value.get("score")
        if score is not None and (isinstance(score, bool) or not isinstance(score, (int, float))):
            raise TypeError(f"score must be a number, got {score!r:.80}")
        passed = value.get("passed")
        if passed is None:
            passed = float(score) >= threshold if score is not None else None
        elif not isinstance(passed, bool):
            raise TypeError(f"passed must be true or false, got {passed!r:.80}")
        if score is None and passed is not None:
            score = 1.0 if passed else 0.0
        reason = value.get("reason")
        return EvaluationResult(
            passed,
            float(score) if score is not None else None,
            str(reason) if reason is not None else None,
        )
    raise TypeError(
        "an evaluator returns a bool, a number or {'score', 'reason'}, "
        f"got {type(value).__name__}"
    )


def to_evaluator(value: Any, where: str = "evaluators") -> Evaluator:
    """An Evaluator, a spec dict or a callable, as an Evaluator.

    Raises:
        ConfigError: anything else (a DatasetError for a bad spec).
    """
    if isinstance(value, Evaluator):
        return value
    if isinstance(value, Mapping):
        return evaluator_from_spec(value, where)
    if callable(value):
        return FunctionEvaluator(value)
    raise ConfigError(
        f"{where}: an evaluator is a spec dict, an Evaluator or a callable (case, result), "
        f"got {value!r:.80}"
    )


def unique_names(evaluators: Sequence[Evaluator]) -> list[Evaluator]:
    """The evaluators, a repeated name made unique with `#2`, `#3`..."""
    seen: dict[str, int] = {}
    out = []
    for e in evaluators:
        n = seen.get(e.name, 0) + 1
        seen[e.name] = n
        out.append(e if n == 1 else e.renamed(f"{e.name}#{n}"))
    return out


async def run_evaluator(
    evaluator: Evaluator, case: Case, result: CaseResult, ctx: EvaluatorContext
) -> EvaluationResult:
    """Run one evaluator; one that raises is an error result carrying its message."""
    try:
        return await evaluator.evaluate(case, result, ctx)
    except Exception as exc:
        return EvaluationResult(False, None, f"{type(exc).__name__}: {exc}", error=True)


# -- helpers ---------------------------------------------------------------------------------


def _verdict(ok: bool, reason: str | None) -> EvaluationResult:
    return EvaluationResult(ok, 1.0 if ok else 0.0, reason)


def _require(spec: Mapping[str, Any], key: str, kind: type | None = None) -> None:
    if key not in spec:
        raise SpecError(f"{spec.get('type')} needs {key!r}", key)
    if kind is not None and not isinstance(spec[key], kind):
        raise SpecError(f"must be a {_KIND_NAMES.get(kind, kind.__name__)}", key)


_KIND_NAMES: dict[type, str] = {str: "string", dict: "object", list: "list"}


def _number(spec: Mapping[str, Any]) -> float:
    _require(spec, "value")
    value = spec["value"]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise SpecError(f"must be a number >= 0, got {value!r:.40}", "value")
    return float(value)


def _subset(want: Mapping[str, Any], got: Mapping[str, Any]) -> bool:
    for key, value in want.items():
        if key not in got:
            return False
        if isinstance(value, Mapping) and isinstance(got[key], Mapping):
            if not _subset(value, got[key]):
                return False
        elif got[key] != value:
            return False
    return True


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _short(value: Any, width: int = 120) -> str:
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else repr(value)
    return text if len(text) <= width else text[: width - 1] + "…"
