"""Datasets: the cases an experiment runs, loaded from JSONL or YAML (or given as a list).

A case is `{"id", "input", "expected"?, "metadata"?, "evaluators"?, "decisions"?}`. `input`
is a string or an object: for an agent, a string is the user message and an object holds run
options (`user`, `messages`, `context`, `tool_provider_context`); for a workflow it is the
run's input as is.

`decisions` (agent cases): an experiment never pauses, so a case whose run pauses on calls
that wait for a decision is an error case unless it says how to decide them: an object keyed
by tool name (or by call id, which wins), each value ``"approve"``, ``"deny"`` or the JSON of
`approve()` / `approve(input=...)` / `deny(reason)` / `result(output)` (``{"action": ...}``).
Every pause of the run is decided this way, and the run resumed, until it ends.

JSONL: one case per line (blank lines are skipped). YAML: a list of cases, or a mapping with
`cases:` and an `evaluators:` header that applies to every case. Every loading error is a
`DatasetError` naming the file, the line and the field.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Any

from .._json import check_json_safe, copy_json, dumps
from ..errors import DatasetError, NotJSONSafeError
from ._evaluators import Case, Evaluator, SpecError, parse_spec, to_evaluator, unique_names

__all__ = ["AGENT_INPUT_KEYS", "Case", "Dataset", "load_dataset", "load_evaluators"]

_CASE_KEYS = ("id", "input", "expected", "metadata", "evaluators", "decisions")
_ACTIONS = ("approve", "deny", "result")
AGENT_INPUT_KEYS = ("user", "messages", "context", "tool_provider_context")
"""What an object input of an agent case may hold: the run's options."""


@dataclass(slots=True)
class Dataset:
    """Cases, and the evaluators that apply to all of them."""

    cases: list[Case]
    evaluators: list[Evaluator] = field(default_factory=list)
    path: str | None = None
    """The file it came from, or None."""
    name: str = "cases"
    """The file's stem (default experiment names use it)."""

    def evaluators_for(self, case: Case) -> list[Evaluator]:
        """The dataset's evaluators, then the case's own, with unique names."""
        return unique_names([*self.evaluators, *case.evaluators])

    def content_hash(self) -> str:
        """sha256 of the cases and evaluators as canonical JSON: the same data in another
        layout (YAML or JSONL, reordered keys) hashes the same; any change to a case does not."""
        payload = {
            "cases": [c.to_json() for c in self.cases],
            "evaluators": [e.spec() for e in self.evaluators],
        }
        text = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()

    @classmethod
    def of(
        cls,
        cases: Sequence[Case | Mapping[str, Any]],
        *,
        evaluators: Sequence[Any] = (),
        name: str = "cases",
    ) -> Dataset:
        """A dataset from Python: Case objects or case dicts (checked as a file's are, with
        `cases[i]` in place of a line number)."""
        if isinstance(cases, (str, bytes, Mapping)) or not isinstance(cases, Sequence):
            raise DatasetError("a dataset is a path or a list of cases")
        out: list[Case] = []
        for i, raw in enumerate(cases):
            if isinstance(raw, Case):
                out.append(raw)
            else:
                out.append(_case(raw, None, None, f"cases[{i}]", None))
        header = [to_evaluator(e, f"evaluators[{i}]") for i, e in enumerate(evaluators)]
        dataset = cls(out, header, None, name)
        _check_ids(dataset, None)
        check_expected(dataset)
        return dataset


# -- loading ---------------------------------------------------------------------------------


def load_dataset(
    path: str | PathLike[str], *, evaluators: str | PathLike[str] | None = None
) -> Dataset:
    """Load a `.jsonl` (or `.json` lines) or `.yaml`/`.yml` dataset; `evaluators` names a
    YAML/JSON file holding a list of evaluator specs applied to every case.

    Raises:
        DatasetError: the file cannot be read or parsed, or a case or evaluator is wrong
            (naming the file, the line and the field).
    """
    p = Path(path).absolute()
    text = _read(p)
    if p.suffix.lower() in (".yaml", ".yml"):
        dataset = _from_yaml(text, str(p))
    else:
        dataset = _from_jsonl(text, str(p))
    dataset.name = p.stem
    if evaluators is not None:
        dataset.evaluators = [*load_evaluators(evaluators), *dataset.evaluators]
    check_expected(dataset)
    return dataset


def check_expected(dataset: Dataset) -> None:
    """Refuse a dataset whose cases an `equals` evaluator applies to without an `expected`:
    found before any model call, not as one failed case after another.

    Raises:
        DatasetError: naming the first such case (its line in the file) and how many there are.
    """
    lacking = [
        (i, c)
        for i, c in enumerate(dataset.cases)
        if not c.has_expected
        and any(getattr(e, "type", None) == "equals" for e in dataset.evaluators_for(c))
    ]
    if not lacking:
        return
    i, case = lacking[0]
    more = f" (and {len(lacking) - 1} more case(s))" if len(lacking) > 1 else ""
    raise DatasetError(
        f"case {case.id!r} has no 'expected' for the equals evaluator{more}; give each such "
        "case an expected value, or use another evaluator",
        path=dataset.path,
        line=case.line,
        field="expected" if dataset.path is not None else f"cases[{i}].expected",
    )


def load_evaluators(path: str | PathLike[str]) -> list[Evaluator]:
    """A list of evaluator specs from a YAML or JSON file (a list, or `{"evaluators": [...]}`).

    Raises:
        DatasetError: naming the file, the line and the field.
    """
    p = Path(path)
    text = _read(p)
    where = str(p)
    if p.suffix.lower() == ".json":
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise DatasetError(f"not valid JSON: {exc.msg}", path=where, line=exc.lineno) from None
        lines: _Lines = _Lines(None, {})
    else:
        value, lines = _yaml_load(text, where)
    if isinstance(value, Mapping) and set(value) == {"evaluators"}:
        value = value["evaluators"]
        lines = lines.child("evaluators")
    return _evaluators(
        value,
        where,
        lines,
        "an evaluators file holds a list of evaluator specs (or {evaluators: [...]})",
    )


def _evaluators(
    value: Any, where: str, lines: _Lines, not_a_list: str, field: str | None = None
) -> list[Evaluator]:
    """The evaluators of a list of specs (an evaluators file's, a YAML dataset's header);
    `not_a_list` is the error when `value` is not a list, at `lines` (and `field`)."""
    if not isinstance(value, list):
        raise DatasetError(not_a_list, path=where, line=lines.line, field=field)
    return [
        _evaluator(spec, where, lines.child(i), f"evaluators[{i}]") for i, spec in enumerate(value)
    ]


def _read(p: Path) -> str:
    try:
        return p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DatasetError("no such file", path=str(p)) from None
    except UnicodeDecodeError as exc:
        raise DatasetError(f"not UTF-8 text: {exc.reason}", path=str(p)) from None
    except OSError as exc:
        raise DatasetError(f"cannot read it: {exc.strerror or exc}", path=str(p)) from None


def _from_jsonl(text: str, where: str) -> Dataset:
    cases: list[Case] = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DatasetError(
                f"not valid JSON: {exc.msg} (column {exc.colno})", path=where, line=n
            ) from None
        cases.append(_case(raw, where, n, None, None))
    if not cases:
        raise DatasetError("the dataset has no cases", path=where)
    dataset = Dataset(cases, [], where)
    _check_ids(dataset, where)
    return dataset


def _from_yaml(text: str, where: str) -> Dataset:
    value, lines = _yaml_load(text, where)
    header: list[Evaluator] = []
    if isinstance(value, Mapping):
        unknown = sorted(set(map(str, value)) - {"cases", "evaluators"})
        if unknown:
            raise DatasetError(
                "a YAML dataset is a list of cases, or a mapping with 'cases' and "
                "'evaluators' (for every case)",
                path=where,
                line=lines.child(unknown[0]).line,
                field=unknown[0],
            )
        header = _evaluators(
            value.get("evaluators") or [],
            where,
            lines.child("evaluators"),
            "must be a list of evaluator specs",
            "evaluators",
        )
        lines = lines.child("cases")
        value = value.get("cases")
    if not isinstance(value, list):
        raise DatasetError(
            "a YAML dataset is a list of cases (or has one under 'cases')",
            path=where,
            line=lines.line,
        )
    cases = [_case(raw, where, None, None, lines.child(i)) for i, raw in enumerate(value)]
    if not cases:
        raise DatasetError("the dataset has no cases", path=where)
    dataset = Dataset(cases, header, where)
    _check_ids(dataset, where)
    return dataset


def _check_ids(dataset: Dataset, where: str | None) -> None:
    seen: dict[str, Case] = {}
    for i, case in enumerate(dataset.cases):
        first = seen.get(case.id)
        if first is not None:
            at = f"line {first.line}" if first.line is not None else "an earlier case"
            raise DatasetError(
                f"duplicate case id {case.id!r} (also at {at}); ids must be unique",
                path=where,
                line=case.line,
                field="id" if where is not None else f"cases[{i}].id",
            )
        seen[case.id] = case


def _case(
    raw: Any, where: str | None, line: int | None, prefix: str | None, lines: _Lines | None
) -> Case:
    """One case, checked. `line` is the JSONL line; `lines` locates YAML fields."""

    def fail(message: str, name: str | None = None) -> DatasetError:
        at = line
        if lines is not None:
            at = lines.child(name).line if name is not None else lines.line
        shown = name if prefix is None or name is None else f"{prefix}.{name}"
        return DatasetError(message, path=where, line=at, field=shown or prefix)

    if not isinstance(raw, Mapping):
        raise fail(f"a case is an object with 'id' and 'input', got {_kind(raw)}")
    unknown = [k for k in raw if k not in _CASE_KEYS]
    if unknown:
        raise fail(
            f"unknown field (a case has {', '.join(_CASE_KEYS)})",
            str(unknown[0]),
        )
    case_id = _case_id(raw, fail)
    if "input" not in raw:
        raise fail("every case needs an 'input' (a string or an object)", "input")
    value = raw["input"]
    if not isinstance(value, (str, Mapping)):
        raise fail(f"must be a string or an object, got {_kind(value)}", "input")
    for name in ("input", "expected", "metadata"):
        if name in raw:
            try:
                check_json_safe(raw[name], name)
            except NotJSONSafeError as exc:
                raise fail(str(exc), name) from None
    metadata = raw.get("metadata")
    if metadata is None:
        metadata = {}
    if not isinstance(metadata, Mapping):
        raise fail(f"must be an object, got {_kind(metadata)}", "metadata")
    decisions = _decisions(raw.get("decisions"), fail)
    specs = raw.get("evaluators")
    if specs is None:
        specs = []
    if not isinstance(specs, list):
        raise fail(f"must be a list of evaluator specs, got {_kind(specs)}", "evaluators")
    evaluators = _case_evaluators(specs, where, line, prefix, lines)
    return Case(
        id=case_id,
        input=copy_json(value),  # checked JSON-safe above: what a JSON round trip gives
        expected=raw.get("expected"),
        metadata=dict(metadata),
        evaluators=tuple(evaluators),
        line=line if lines is None else lines.line,
        has_expected="expected" in raw,
        decisions=decisions,
    )


def _decisions(decisions: Any, fail: Callable[[str, str], DatasetError]) -> dict[str, Any] | None:
    """A case's `decisions`, checked, each as the JSON of its decision (None: none given)."""
    if decisions is None:
        return None
    problem = _decisions_problem(decisions)
    if problem is not None:
        raise fail(problem, "decisions")
    return {
        str(k): {"action": v} if isinstance(v, str) else json.loads(dumps(v))
        for k, v in decisions.items()
    }


def _decisions_problem(decisions: Any) -> str | None:
    """What is wrong with a case's `decisions`, or None."""
    if not isinstance(decisions, Mapping):
        return f"must be an object keyed by tool name or call id, got {_kind(decisions)}"
    for key, value in decisions.items():
        if value in ("approve", "deny"):
            continue
        action = value.get("action") if isinstance(value, Mapping) else None
        if action not in _ACTIONS:
            return (
                f"{key!r}: a decision is 'approve', 'deny' or an object with action approve, "
                f"deny or result, got {_kind(value)}"
            )
        if action == "result" and not isinstance(value.get("output"), str):
            return f"{key!r}: a result decision needs a string 'output'"
        try:
            check_json_safe(value, f"decisions.{key}")
        except NotJSONSafeError as exc:
            return str(exc)
    return None


def _case_id(raw: Mapping[Any, Any], fail: Callable[[str, str], DatasetError]) -> str:
    """A case's id: a non-empty string (an integer is taken as its string)."""
    if "id" not in raw:
        raise fail("every case needs an 'id' (a string)", "id")
    case_id = raw["id"]
    if isinstance(case_id, bool) or not isinstance(case_id, (str, int)):
        raise fail(f"must be a string (or an integer), got {_kind(case_id)}", "id")
    case_id = str(case_id)
    if not case_id.strip():
        raise fail("must not be empty", "id")
    return case_id


def _case_evaluators(
    specs: list[Any], where: str | None, line: int | None, prefix: str | None, lines: _Lines | None
) -> list[Evaluator]:
    """A case's evaluator specs, each checked where it lies in the file."""
    evaluators = []
    spec_lines = lines.child("evaluators") if lines is not None else None
    for i, spec in enumerate(specs):
        at: _Lines | int | None = spec_lines.child(i) if spec_lines is not None else line
        name = f"evaluators[{i}]" if prefix is None else f"{prefix}.evaluators[{i}]"
        evaluators.append(_evaluator(spec, where, at, name))
    return evaluators


def _evaluator(spec: Any, where: str | None, lines: _Lines | int | None, name: str) -> Evaluator:
    """One spec; an error names the key at fault, on its own line when the file says."""
    try:
        return parse_spec(spec)
    except SpecError as exc:
        if isinstance(lines, _Lines):
            line = lines.child(exc.key).line if exc.key else lines.line
        else:
            line = lines
        field = f"{name}.{exc.key}" if exc.key else name
        raise DatasetError(exc.message, path=where, line=line, field=field) from None


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {
        bool: "a boolean",
        int: "a number",
        float: "a number",
        str: "a string",
        list: "a list",
    }.get(type(value), type(value).__name__)


# -- YAML with line numbers ------------------------------------------------------------------


@dataclass(slots=True)
class _Lines:
    """Where a YAML value and its children start (1-based lines)."""

    line: int | None
    children: dict[Any, _Lines]

    def child(self, key: Any) -> _Lines:
        found = self.children.get(key)
        return found if found is not None else _Lines(self.line, {})


def _yaml_load(text: str, where: str) -> tuple[Any, _Lines]:
    try:
        import yaml
    except ImportError:
        raise DatasetError(
            "YAML datasets need PyYAML: pip install 'tether[evals]' (or use JSONL)", path=where
        ) from None
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        value = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        problem = exc.problem or str(exc)
        raise DatasetError(
            f"not valid YAML: {problem}",
            path=where,
            line=mark.line + 1 if mark is not None else None,
        ) from None
    except yaml.YAMLError as exc:
        raise DatasetError(f"not valid YAML: {exc}", path=where) from None
    if node is None:
        raise DatasetError("the file is empty", path=where)
    return value, _lines_of(node, yaml)


def _lines_of(node: Any, yaml: Any) -> _Lines:
    line = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        children: dict[Any, _Lines] = {}
        for key, value in node.value:
            sub = _lines_of(value, yaml)
            # A field's line is its key's: where the reader sees the name.
            sub.line = key.start_mark.line + 1
            children[key.value] = sub
        return _Lines(line, children)
    if isinstance(node, yaml.SequenceNode):
        return _Lines(line, {i: _lines_of(v, yaml) for i, v in enumerate(node.value)})
    return _Lines(line, {})
