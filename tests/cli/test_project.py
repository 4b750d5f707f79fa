"""Finding and loading the project: --config, [tool.tether], registry errors, --store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tether.cli import EXIT_PROJECT, EXIT_USAGE

from .conftest import CONFIG, LAB, Project, write_project


def test_no_config_says_how_to_create_tether_toml(
    project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.chdir(empty)
    result = project.invoke("agent", "list")
    assert result.exit_code == EXIT_PROJECT
    err = result.stderr
    assert err.startswith(
        f"Error: no tether.toml (or [tool.tether] in pyproject.toml) at or above {empty}\n"
    )
    assert "Create tether.toml in your project directory" in err
    assert 'agents = ["app.agents:researcher"]' in err
    assert "--config PATH" in err


def test_config_names_a_file_or_a_directory_to_search_from(
    project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    by_file = project.invoke("--config", str(project.root / "tether.toml"), "agent", "list")
    (project.root / "deep" / "er").mkdir(parents=True)
    by_dir = project.invoke("--config", str(project.root / "deep" / "er"), "workflow", "list")
    assert by_file.exit_code == by_dir.exit_code == 0, by_file.output + by_dir.output
    assert "sandboxed (tool-context)" in by_file.stdout
    assert "greet" in by_dir.stdout


def test_a_config_path_that_does_not_exist(project: Project) -> None:
    result = project.invoke("--config", "nowhere.toml", "agent", "list")
    assert result.exit_code == EXIT_USAGE
    assert "Invalid value for '--config'" in result.stderr


def test_tool_tether_in_pyproject_found_from_a_subdirectory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "py"
    root.mkdir()
    package = write_project(root)
    table = (root / "tether.toml").read_text(encoding="utf-8")
    (root / "tether.toml").unlink()
    (root / "pyproject.toml").write_text(
        f'[project]\nname = "x"\nversion = "0"\n\n[tool.tether]\n{table}', encoding="utf-8"
    )
    # A pyproject.toml without [tool.tether] on the way up is passed over.
    (root / "sub").mkdir()
    (root / "sub" / "pyproject.toml").write_text('[project]\nname = "y"\n', encoding="utf-8")
    monkeypatch.chdir(root / "sub")
    result = Project(root, package).invoke("agent", "run", "echo", "-i", "hi")
    assert result.exit_code == 0, result.output
    assert result.stdout == "you said: hi (1 messages)\n"
    assert (root / ".tether" / "cli.db").is_file()


@pytest.mark.parametrize(
    ("config", "lab", "message"),
    [
        (
            'agents = ["APP.missing:agent"]',
            LAB,
            "Error: RegistryError: agents[0] = 'APP.missing:agent': module 'APP.missing' not "
            "found (is it under the project directory or installed?)",
        ),
        (
            'agents = ["APP.lab:NOT_AN_AGENT"]',
            LAB,
            "Error: RegistryError: agents[0] = 'APP.lab:NOT_AN_AGENT' is a int, not an agent "
            "(made with runtime.create_agent)",
        ),
        (
            'agents = ["APP.lab:echo"]',
            "raise ValueError('broken at import')\n",
            "Error: RegistryError: agents[0] = 'APP.lab:echo': importing 'APP.lab' raised "
            "ValueError at APP/lab.py, line 1: broken at import",
        ),
        (
            "agents = [",
            LAB,
            "Error: RegistryError: TOML_PATH is not valid TOML",
        ),
    ],
    ids=["missing-module", "not-an-agent", "import-raises", "bad-toml"],
)
def test_registry_errors_are_shown_with_their_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, config: str, lab: str, message: str
) -> None:
    root = tmp_path / "broken"
    root.mkdir()
    package = write_project(root, lab=lab, config=config)
    monkeypatch.chdir(root)
    result = Project(root, package).invoke("agent", "list")
    assert result.exit_code == EXIT_PROJECT
    expected = message.replace("APP", package).replace("TOML_PATH", str(root / "tether.toml"))
    assert result.stderr.startswith(expected)
    if "not valid TOML" in message:
        assert "Fix the TOML of the file named above." in result.stderr
    elif " raised " in message:
        assert "Fix the code at the line named above" in result.stderr
    else:
        assert f"Fix the entry in {root / 'tether.toml'}" in result.stderr


def test_a_bad_store_url_in_the_config_is_a_project_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "badstore"
    root.mkdir()
    package = write_project(root, config=CONFIG.replace("sqlite:///.tether/cli.db", "mongo://x"))
    monkeypatch.chdir(root)
    result = Project(root, package).invoke("agent", "run", "echo", "-i", "hi")
    assert result.exit_code == EXIT_PROJECT
    assert result.stderr.startswith("Error: ConfigError: unknown store URL 'mongo://x'")
    assert "or pass --store URL" in result.stderr


def test_store_replaces_the_projects_store_relative_to_the_current_directory(
    project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    config = str(project.root)
    result = project.invoke(
        "--config", config, "--store", "sqlite:///here.db", "agent", "run", "echo", "-i", "hi"
    )
    assert result.exit_code == 0, result.output
    assert (work / "here.db").is_file()
    assert not project.db.exists()
    listed = project.invoke("--config", config, "--store", "sqlite:///here.db", "runs", "list")
    assert "echo" in listed.stdout
    in_memory = project.invoke("--store", "memory", "--config", config, "runs", "list", "--json")
    assert json.loads(in_memory.stdout) == []


def test_a_store_url_with_an_unknown_scheme_is_a_project_error_listing_the_schemes(
    project: Project,
) -> None:
    for args in (["agent", "run", "echo", "-i", "hi"], ["runs", "list"]):
        result = project.invoke("--store", "mongo://x", *args)
        assert result.exit_code == EXIT_PROJECT, args
        assert result.stderr.startswith(
            "Error: ConfigError: --store mongo://x: unknown store URL 'mongo://x' (unknown "
            "scheme 'mongo'); the store URLs are: memory, sqlite:///relative/path.db, "
            "sqlite:////absolute/path.db, postgresql://user:password@host/db (or postgres://...)"
        )
    as_json = project.invoke("--store", "mongo://x", "runs", "list", "--json")
    assert as_json.exit_code == EXIT_PROJECT
    error = json.loads(as_json.stdout)["error"]
    assert (error["type"], error["exit_code"]) == ("ConfigError", EXIT_PROJECT)
    assert "unknown scheme 'mongo'" in error["message"]


def test_store_when_the_runtime_opened_its_stores_at_import(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "eager"
    root.mkdir()
    package = write_project(root, lab=LAB + "\nlab.run_store\n")
    monkeypatch.chdir(root)
    project = Project(root, package)
    result = project.invoke("--store", "memory", "agent", "run", "echo", "-i", "hi")
    assert result.exit_code == EXIT_USAGE
    assert "--store memory: the runtime's stores are already open" in result.stderr
    assert "Runtime(store=...)" in result.stderr


def test_a_store_url_password_never_reaches_an_error_message(project: Project) -> None:
    for args in (["runs", "list"], ["agent", "run", "echo", "-i", "hi"]):
        result = project.invoke("--store", "mongo://admin:s3cret@db.example:27017/x", *args)
        assert result.exit_code == EXIT_PROJECT, args
        assert "s3cret" not in result.stderr
        assert "mongo://admin:***@db.example:27017/x" in result.stderr


def test_a_store_server_that_cannot_be_reached_is_a_project_error_before_anything_runs(
    project: Project,
) -> None:
    """PostgreSQL connects on first use; the commands reach the store before they run
    anything, so a server that is down is exit 3 (not a failed run) and nothing has started."""
    pytest.importorskip("psycopg")
    url = "postgresql://me:s3cret@127.0.0.1:1/db"  # nothing listens on port 1
    for args in (
        ["runs", "list"],
        ["runs", "show", "x"],
        ["agent", "run", "echo", "-i", "hi"],
        ["workflow", "run", "greet", "-i", "x"],
    ):
        result = project.invoke("--store", url, *args)
        assert result.exit_code == EXIT_PROJECT, (args, result.output)
        assert result.stderr.startswith(
            "Error: StoreError: cannot open the store postgresql://me:***@127.0.0.1:1/db: "
            "cannot connect to PostgreSQL"
        ), result.stderr
        assert "s3cret" not in result.stderr
        assert "\\t" not in result.stderr  # libpq indents its hint with a tab: kept as one
        assert result.stdout == ""


def test_config_naming_a_pyproject_without_tool_tether_says_what_to_add(
    project: Project, tmp_path: Path
) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[project]\nname = "x"\n', encoding="utf-8")
    result = project.invoke("--config", str(pyproject), "agent", "list")
    assert result.exit_code == EXIT_PROJECT
    assert result.stderr.splitlines() == [
        f"Error: RegistryError: {pyproject} has no [tool.tether] table",
        "Add one (the keys of a tether.toml, under [tool.tether]), or point --config at a "
        "tether.toml.",
    ]


def test_tether_toml_in_a_parent_directory_is_found_and_its_store_stays_there(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    deep = project.root / "src" / "deeper"
    deep.mkdir(parents=True)
    monkeypatch.chdir(deep)
    result = project.invoke("agent", "run", "echo", "-s", "up", "-i", "hi")
    assert result.exit_code == 0, result.output
    assert project.db.is_file()  # the project's store, relative to tether.toml
    assert list(deep.iterdir()) == []
    assert [
        r["memory_scope"] for r in json.loads(project.invoke("runs", "list", "--json").stdout)
    ] == ["up"]


@pytest.mark.parametrize(
    ("lab", "where", "what"),
    [
        (
            "from tether.lab import Runtime\nlab = Runtime()\n\necho = lab.create_agent(\n"
            "    id='echo', model='gpt-4o'\n)\n",
            "APP/lab.py, line 4",
            "ConfigError at APP/lab.py, line 4: agent 'echo': model= must be 'provider:model'",
        ),
        ("x = 1\ndef broken(:\n", "APP/lab.py, line 2", "SyntaxError at APP/lab.py, line 2"),
        (
            "from tether import tool\n\n\n@tool\ndef f(x: object.__class__) -> str:\n"
            "    return ''\n",
            "APP/lab.py, line 4",
            "ToolDefinitionError at APP/lab.py, line 4: tool 'f'",
        ),
    ],
    ids=["bad-model", "syntax", "tool-type"],
)
def test_an_error_in_the_users_code_names_its_file_and_line_and_debug_prints_the_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lab: str, where: str, what: str
) -> None:
    root = tmp_path / "mine"
    root.mkdir()
    package = write_project(root, lab=lab, config='agents = ["APP.lab:echo"]')
    monkeypatch.chdir(root)
    project = Project(root, package)
    result = project.invoke("agent", "list")
    assert result.exit_code == EXIT_PROJECT
    first, hint = result.stderr.splitlines()[:2]
    assert what.replace("APP", package) in first
    assert "Traceback" not in result.stderr
    assert "--debug" in hint and "TETHER_DEBUG=1" in hint
    debug = project.invoke("--debug", "agent", "list")
    assert debug.exit_code == EXIT_PROJECT
    assert debug.stderr.startswith("Traceback (most recent call last):")
    assert f'{where.split(",")[0].replace("APP", package)}", line' in debug.stderr
    monkeypatch.setenv("TETHER_DEBUG", "1")
    assert project.invoke("agent", "list").stderr.startswith("Traceback (most recent call last):")
