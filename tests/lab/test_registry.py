"""The project registry: tether.toml or [tool.tether], loaded by import path, with clear errors."""

from __future__ import annotations

import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tether.errors import ConfigError, RegistryError
from tether.lab import Runtime, find_config, load_registry


@pytest.fixture(autouse=True)
def _restore_imports(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(sys, "path", list(sys.path))
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        del sys.modules[name]


def make_project(tmp_path: Path, config: str, *, pyproject: bool = False) -> tuple[Path, str]:
    """A project with a package `app_<random>` holding a runtime, two agents and a workflow."""
    pkg = f"app_{uuid.uuid4().hex[:8]}"
    root = tmp_path / "project"
    (root / pkg).mkdir(parents=True)
    (root / pkg / "__init__.py").write_text("", encoding="utf-8")
    (root / pkg / "lab.py").write_text(
        textwrap.dedent(
            """
            from tether.lab import Runtime
            from tether.testing import script_client

            lab = Runtime(version=False, defaults={"model": script_client([{"text": "hi"}])})
            other = Runtime(version=False, defaults={"model": script_client([])})
            """
        ),
        encoding="utf-8",
    )
    (root / pkg / "agents.py").write_text(
        textwrap.dedent(
            f"""
            from {pkg}.lab import lab, other

            researcher = lab.create_agent(id="researcher", system_prompt="Research.")
            editor = lab.create_agent(id="editor", system_prompt="Edit.")
            researcher_again = lab.create_agent(id="researcher")
            stranger = other.create_agent(id="stranger")
            not_an_agent = 42

            class Holder:
                inner = editor
            """
        ),
        encoding="utf-8",
    )
    (root / pkg / "workflows.py").write_text(
        textwrap.dedent(
            f"""
            from {pkg}.lab import lab

            async def run(input, ctx):
                return input

            review = lab.create_workflow("review", run)
            review_again = lab.create_workflow("review", run)
            """
        ),
        encoding="utf-8",
    )
    (root / pkg / "broken.py").write_text("import a_dependency_that_is_missing\n", encoding="utf-8")
    text = textwrap.dedent(config).replace("APP", pkg)
    if pyproject:
        (root / "pyproject.toml").write_text(
            '[project]\nname = "x"\nversion = "1"\n\n[tool.tether]\n' + text, encoding="utf-8"
        )
    else:
        (root / "tether.toml").write_text(text, encoding="utf-8")
    return root, pkg


GOOD = """
runtime = "APP.lab:lab"
agents = ["APP.agents:researcher", "APP.agents:Holder.inner"]
workflows = ["APP.workflows:review"]
store = "sqlite:///.tether/project.db"
"""


async def test_a_tether_toml_registry_loads_runtime_agents_workflows_and_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, pkg = make_project(tmp_path, GOOD)
    (root / "sub").mkdir()
    monkeypatch.chdir(root / "sub")
    registry = load_registry()
    assert registry.config_path == root / "tether.toml"
    assert sorted(registry.agents) == ["editor", "researcher"]
    assert list(registry.workflows) == ["review"]
    assert registry.runtime is sys.modules[f"{pkg}.lab"].lab
    assert registry.runtime.store_url == "sqlite:///.tether/project.db"
    result = await registry.agent("researcher").run(user="hi").result
    assert result.text == "hi"
    assert (root / ".tether" / "project.db").is_file()
    await registry.runtime.aclose()
    with pytest.raises(RegistryError, match=r"no agent 'nope'.*editor, researcher"):
        registry.agent("nope")


async def test_without_a_store_the_default_store_is_in_the_project_wherever_it_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, _ = make_project(tmp_path, 'runtime = "APP.lab:lab"\nagents = ["APP.agents:editor"]\n')
    (root / "sub").mkdir()
    monkeypatch.chdir(root / "sub")
    registry = load_registry()
    assert registry.runtime.store_url is None and registry.runtime.root == root
    await registry.agent("editor").run(user="hi").result
    await registry.runtime.aclose()
    assert (root / ".tether" / "tether.db").is_file()
    assert not (root / "sub" / ".tether").exists()


def test_a_runtime_given_a_root_keeps_it(tmp_path: Path) -> None:
    root, pkg = make_project(tmp_path, 'runtime = "APP.lab:lab"\n')
    (root / pkg / "lab.py").write_text(
        f"from tether.lab import Runtime\nlab = Runtime(version=False, root={str(tmp_path)!r})\n",
        encoding="utf-8",
    )
    assert load_registry(root).runtime.root == tmp_path


async def test_tool_tether_in_pyproject_works_the_same(tmp_path: Path) -> None:
    root, _ = make_project(tmp_path, GOOD, pyproject=True)
    registry = load_registry(root)
    assert registry.config_path == root / "pyproject.toml"
    assert sorted(registry.agents) == ["editor", "researcher"]
    assert registry.workflow("review").id == "review"


def test_without_a_runtime_entry_the_agents_runtime_is_used(tmp_path: Path) -> None:
    root, pkg = make_project(tmp_path, 'agents = ["APP.agents:researcher"]\n')
    registry = load_registry(root)
    assert registry.runtime is sys.modules[f"{pkg}.lab"].lab
    assert registry.runtime.store_url is None


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ('agents = ["APP.nowhere:researcher"]', r"agents\[0\] = .*module 'APP\.nowhere' not found"),
        ('agents = ["APP.agents:nobody"]', r"agents\[0\] = .*has no attribute 'nobody'"),
        ('agents = ["APP.agents"]', r"write 'module:attribute'"),
        ('agents = ["APP.agents:not_an_agent"]', r"is a int, not an agent"),
        (
            'agents = ["APP.agents:researcher", "APP.agents:researcher_again"]',
            r"duplicate agent id 'researcher': agents\[0\] .* and agents\[1\]",
        ),
        (
            'workflows = ["APP.workflows:review", "APP.workflows:review_again"]',
            r"duplicate workflow id 'review'",
        ),
        ('workflows = ["APP.agents:researcher"]', r"not a workflow"),
        ('runtime = "APP.agents:researcher"', r"not a tether\.lab\.Runtime"),
        (
            'runtime = "APP.lab:lab"\nagents = ["APP.agents:stranger"]',
            r"belongs to a different runtime",
        ),
        (
            'agents = ["APP.broken:x"]',
            r"importing 'APP\.broken' failed at .*broken\.py, line 1: No module named",
        ),
        ('agents = "APP.agents:researcher"', r"agents must be a list"),
        ('agent = ["APP.agents:researcher"]', r"unknown registry key\(s\) \['agent'\]"),
        ("agents = [", r"not valid TOML"),
    ],
)
def test_registry_errors_name_what_is_wrong(tmp_path: Path, config: str, message: str) -> None:
    root, pkg = make_project(tmp_path, config)
    with pytest.raises(RegistryError, match=message.replace("APP", pkg)):
        load_registry(root)


def test_no_config_anywhere_says_what_to_create(tmp_path: Path) -> None:
    with pytest.raises(RegistryError, match=r"no tether\.toml"):
        find_config(tmp_path)


async def test_a_runtime_given_a_store_keeps_it(tmp_path: Path) -> None:
    lab = Runtime(store="memory", version=False)
    lab.use_store("memory")
    lab.message_store  # noqa: B018 - opens the stores
    with pytest.raises(ConfigError, match="already open"):
        lab.use_store("sqlite:///x.db")
    await lab.aclose()
