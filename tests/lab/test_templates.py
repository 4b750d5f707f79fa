"""System-prompt templates: Jinja2 with StrictUndefined, typed input, errors that name things."""

from __future__ import annotations

import os
from pathlib import Path

import pydantic
import pytest

from tether.errors import TemplateError
from tether.lab import Runtime, create_template


class Inputs(pydantic.BaseModel):
    topic: str
    tone: str = "neutral"


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_a_file_next_to_the_module_renders_with_typed_input(tmp_path: Path) -> None:
    write(tmp_path / "researcher.md", "Research {{ topic }} in a {{ tone }} tone.")
    template = create_template(
        path="researcher.md", relative_to=str(tmp_path / "agents.py"), input_data=Inputs
    )
    assert template.render({"topic": "CRISPR"}) == "Research CRISPR in a neutral tone."
    assert template.render(Inputs(topic="RNA", tone="dry")) == "Research RNA in a dry tone."


def test_a_missing_variable_names_the_template_and_the_variable(tmp_path: Path) -> None:
    write(tmp_path / "p.md", "Hello {{ name }}, about {{ subject }}.")
    template = create_template(path="p.md", relative_to=tmp_path)
    with pytest.raises(TemplateError) as info:
        template.render({"name": "Ada"})
    assert info.value.template == "p.md"
    assert info.value.variable == "subject"
    assert "p.md" in str(info.value) and "subject" in str(info.value)


def test_a_missing_attribute_names_it_too() -> None:
    template = create_template(source="{{ user.name }}")
    with pytest.raises(TemplateError) as info:
        template.render({"user": {}})
    assert info.value.variable == "name"


def test_input_that_does_not_match_input_data_is_a_template_error(tmp_path: Path) -> None:
    write(tmp_path / "p.md", "{{ topic }}")
    template = create_template(path="p.md", relative_to=tmp_path, input_data=Inputs)
    with pytest.raises(TemplateError, match=r"p\.md.*topic") as info:
        template.render({"tone": "dry"})
    assert info.value.variable == "topic"


def test_a_missing_file_and_a_syntax_error_name_the_template(tmp_path: Path) -> None:
    with pytest.raises(TemplateError, match="no such file"):
        create_template(path="absent.md", relative_to=tmp_path).render()
    write(tmp_path / "bad.md", "{% if %}")
    with pytest.raises(TemplateError, match=r"bad\.md: syntax error on line 1"):
        create_template(path="bad.md", relative_to=tmp_path).render()


def test_bound_input_and_an_edited_file(tmp_path: Path) -> None:
    path = write(tmp_path / "p.md", "v1 {{ topic }}")
    bound = create_template(path="p.md", relative_to=tmp_path, input_data=Inputs).with_input(
        {"topic": "genes"}
    )
    assert bound.render() == "v1 genes"
    write(path, "v2 {{ topic }} ({{ tone }})")
    # Make the edit visible to the mtime check whatever the filesystem's timestamp resolution.
    stat = path.stat()
    os.utime(path, (stat.st_atime, stat.st_mtime + 10))
    assert bound.render() == "v2 genes (neutral)"


def test_with_input_checks_the_input_at_once() -> None:
    template = create_template(source="{{ topic }}", input_data=Inputs)
    with pytest.raises(TemplateError, match="topic"):
        template.with_input({})


def test_exactly_one_of_path_or_source() -> None:
    with pytest.raises(TemplateError, match="exactly one"):
        create_template()
    with pytest.raises(TemplateError, match="exactly one"):
        create_template(path="a.md", source="b")


def test_inspect_reports_instead_of_raising() -> None:
    ok = create_template(source="Hi {{ x }}", data={"x": 1}).inspect()
    assert (ok.text, ok.is_err) == ("Hi 1", False)
    bad = create_template(source="Hi {{ x }}").inspect()
    assert bad.text is None and bad.is_err and "x" in (bad.error or "")


async def test_runtime_templates_resolve_paths_against_the_runtime_root(tmp_path: Path) -> None:
    write(tmp_path / "prompt.md", "Rooted.")
    lab = Runtime(store="memory", version=False, root=tmp_path)
    assert lab.create_template(path="prompt.md").render() == "Rooted."
    await lab.aclose()
