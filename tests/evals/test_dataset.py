"""Datasets: JSONL and YAML cases, a YAML header of evaluators, and errors that name the file,
the line and the field."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tether.errors import DatasetError
from tether.evals import Dataset, load_dataset, load_evaluators


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def test_jsonl_cases_load_with_their_fields(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "qa.jsonl",
        """
        {"id": "q1", "input": "2+2?", "expected": "4", "evaluators": [{"type": "equals"}]}

        {"id": 7, "input": {"user": "hi"}, "metadata": {"topic": "greeting"}}
        """,
    )
    data = load_dataset(path)
    assert data.name == "qa" and data.path == str(path)
    first, second = data.cases
    assert (first.id, first.input, first.expected, first.line) == ("q1", "2+2?", "4", 1)
    assert [e.name for e in first.evaluators] == ["equals"]
    assert (second.id, second.input, second.metadata, second.line) == (
        "7",
        {"user": "hi"},
        {"topic": "greeting"},
        3,
    )
    assert second.has_expected is False


def test_a_yaml_header_applies_its_evaluators_to_every_case(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "qa.yaml",
        """
        evaluators:
          - type: contains
            value: Paris
        cases:
          - id: capital
            input: Capital of France?
            evaluators:
              - {type: regex, pattern: "^[A-Z]"}
              - {type: contains, value: France, name: mentions}
          - id: again
            input: And of Italy?
        """,
    )
    data = load_dataset(path)
    assert [c.line for c in data.cases] == [5, 10]
    assert [e.name for e in data.evaluators_for(data.cases[0])] == [
        "contains",
        "regex",
        "mentions",
    ]
    assert [e.name for e in data.evaluators_for(data.cases[1])] == ["contains"]


def test_a_yaml_list_and_the_same_jsonl_hash_the_same(tmp_path: Path) -> None:
    yaml_path = write(
        tmp_path,
        "a.yml",
        """
        - {id: a, input: x, expected: {k: 1}}
        - {input: y, id: b}
        """,
    )
    jsonl = write(
        tmp_path,
        "b.jsonl",
        '{"id": "a", "expected": {"k": 1}, "input": "x"}\n{"id": "b", "input": "y"}\n',
    )
    assert load_dataset(yaml_path).content_hash() == load_dataset(jsonl).content_hash()
    changed = write(tmp_path, "c.jsonl", '{"id": "a", "input": "x"}\n{"id": "b", "input": "y"}\n')
    assert load_dataset(changed).content_hash() != load_dataset(jsonl).content_hash()


def test_an_evaluators_file_goes_before_the_dataset_header(tmp_path: Path) -> None:
    specs = write(tmp_path, "ev.yaml", "- {type: max_latency_ms, value: 500}\n")
    data = write(tmp_path, "d.jsonl", '{"id": "a", "input": "x"}\n')
    loaded = load_dataset(data, evaluators=specs)
    assert [e.name for e in loaded.evaluators] == ["max_latency_ms"]
    json_specs = write(tmp_path, "ev.json", '{"evaluators": [{"type": "equals"}]}')
    assert [e.name for e in load_evaluators(json_specs)] == ["equals"]


@pytest.mark.parametrize(
    ("text", "line", "field", "words"),
    [
        ('{"id": "a", "input": "x"}\n{"id": "b", "input": }\n', 2, None, "not valid JSON"),
        ('{"id": "a", "input": "x"}\n\n{"input": "y"}\n', 3, "id", "needs an 'id'"),
        ('{"id": "a"}\n', 1, "input", "needs an 'input'"),
        ('{"id": "a", "input": 3}\n', 1, "input", "string or an object, got a number"),
        ('{"id": "a", "input": "x", "expect": 1}\n', 1, "expect", "unknown field"),
        ('{"id": "", "input": "x"}\n', 1, "id", "must not be empty"),
        ('{"id": true, "input": "x"}\n', 1, "id", "got a boolean"),
        ('{"id": "a", "input": "x", "metadata": []}\n', 1, "metadata", "must be an object"),
        ('{"id": "a", "input": "x"}\n{"id": "a", "input": "y"}\n', 2, "id", "also at line 1"),
        ("[1, 2]\n", 1, None, "a case is an object"),
        (
            '{"id": "a", "input": "x", "evaluators": [{"type": "nope"}]}\n',
            1,
            "evaluators[0].type",
            "unknown evaluator type 'nope'",
        ),
        (
            '{"id": "a", "input": "x", "evaluators": [{"type": "regex", "pattern": "("}]}\n',
            1,
            "evaluators[0].pattern",
            "not a valid regular expression",
        ),
        (
            '{"id": "a", "input": "x", "evaluators": [{"type": "contains"}]}\n',
            1,
            "evaluators[0].value",
            "contains needs 'value'",
        ),
        (
            '{"id": "a", "input": "x", "evaluators": [{"type": "equals", "value": 1}]}\n',
            1,
            "evaluators[0].value",
            "not 'value'",
        ),
        (
            '{"id": "a", "input": "x", "evaluators": [{"type": "json_schema", "schema": {"type": 5}}]}\n',
            1,
            "evaluators[0].schema",
            "not a valid JSON Schema",
        ),
        (
            '{"id": "a", "input": "x", "evaluators": [{"type": "max_cost_usd", "value": -1}]}\n',
            1,
            "evaluators[0].value",
            "number >= 0",
        ),
    ],
)
def test_jsonl_errors_name_the_file_the_line_and_the_field(
    tmp_path: Path, text: str, line: int, field: str | None, words: str
) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(DatasetError) as caught:
        load_dataset(path)
    error = caught.value
    assert (error.path, error.line, error.field) == (str(path), line, field)
    assert words in str(error)
    assert str(error).startswith(f"{path}, line {line}")


def test_yaml_errors_point_at_the_line_of_the_field(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "bad.yaml",
        """
        cases:
          - id: ok
            input: fine
          - id: broken
            input: fine
            evaluators:
              - type: regex
                pattern: "(unclosed"
        """,
    )
    with pytest.raises(DatasetError) as caught:
        load_dataset(path)
    assert (caught.value.line, caught.value.field) == (8, "evaluators[0].pattern")
    syntax = write(tmp_path, "syntax.yaml", "cases:\n  - id: a\n    input: [unclosed\n")
    with pytest.raises(DatasetError, match="not valid YAML") as caught:
        load_dataset(syntax)
    assert caught.value.line is not None and caught.value.line >= 3
    header = write(tmp_path, "header.yaml", "cases: []\nevaluator: []\n")
    with pytest.raises(DatasetError) as caught:
        load_dataset(header)
    assert (caught.value.line, caught.value.field) == (2, "evaluator")
    missing = write(tmp_path, "missing.yaml", "- id: a\n- id: b\n  input: x\n")
    with pytest.raises(DatasetError) as caught:
        load_dataset(missing)
    assert (caught.value.line, caught.value.field) == (1, "input")


def test_files_that_cannot_be_read(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="no such file"):
        load_dataset(tmp_path / "absent.jsonl")
    (tmp_path / "latin1.jsonl").write_bytes(b'{"id": "\xe9"}\n')
    with pytest.raises(DatasetError, match="not UTF-8"):
        load_dataset(tmp_path / "latin1.jsonl")
    (tmp_path / "empty.jsonl").write_text("\n\n", encoding="utf-8")
    with pytest.raises(DatasetError, match="no cases"):
        load_dataset(tmp_path / "empty.jsonl")
    (tmp_path / "empty.yaml").write_text("", encoding="utf-8")
    with pytest.raises(DatasetError, match="empty"):
        load_dataset(tmp_path / "empty.yaml")


def test_cases_from_python_are_checked_the_same_way() -> None:
    data = Dataset.of([{"id": "a", "input": "x"}, {"id": "b", "input": {"k": 1}}])
    assert [c.id for c in data.cases] == ["a", "b"]
    with pytest.raises(DatasetError) as caught:
        Dataset.of([{"id": "a", "input": "x"}, {"id": "b"}])
    assert caught.value.field == "cases[1].input" and caught.value.path is None
    with pytest.raises(DatasetError, match="a path or a list of cases"):
        Dataset.of("cases.jsonl")  # type: ignore[arg-type]
