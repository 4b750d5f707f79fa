"""The package as users get it: what `import tether` loads, the command without the `lab` extra,
and the built wheel installed into fresh virtual environments (core, then `[lab]`).

The wheel test builds the wheel and the sdist with hatchling, then installs with
``pip --no-index``: the dependencies come from a wheelhouse made of the distributions already
installed in this environment (each repacked from its RECORD), so it needs no network and no
pip cache, and pip still resolves every requirement from the wheel's own metadata — a missing
core dependency fails the install or the agent run.
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import subprocess
import sys
import textwrap
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.tags import sys_tags
from packaging.utils import canonicalize_name

import tether

ROOT = Path(__file__).resolve().parents[1]

EXTRA_MODULES = {
    "lab": (
        "jinja2",
        "starlette",
        "uvicorn",
        "typer",
        "rich",
        "genai_prices",
        "markdown_it",
        "ag_ui",
    ),
    "postgres": ("psycopg", "psycopg_pool"),
    "otel": ("opentelemetry",),
    "evals": ("yaml",),
    "ray": ("ray",),
    "fetch": ("markdownify", "bs4"),
    "docs": ("mkdocs", "material", "mkdocstrings"),
}
"""The top-level modules each extra brings: `import tether` imports none of them."""


def _modules(code: str) -> set[str]:
    """The modules a fresh interpreter has loaded after running `code`."""
    out = subprocess.run(
        [sys.executable, "-c", code + "\nimport sys, json; print(json.dumps(sorted(sys.modules)))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return set(json.loads(out.splitlines()[-1]))


def _top_level(modules: set[str]) -> set[str]:
    return {name.split(".")[0] for name in modules}


def test_import_tether_imports_no_extra() -> None:
    # httpx imports rich and click itself when they are installed (for its own command line):
    # what it brings alone is not tether's doing.
    by_httpx = _top_level(_modules("import httpx"))
    loaded = _modules("import tether")
    brought = _top_level(loaded) - by_httpx
    for extra, names in EXTRA_MODULES.items():
        assert not brought & set(names), f"import tether imported the {extra} extra's modules"
    upper = ("lab", "cli", "ui", "serve", "web", "evals", "otel", "pricing", "stores")
    assert sorted(m for m in loaded if m.split(".")[:2][-1] in upper) == []


def test_the_harness_loads_without_pydantic_jsonschema_or_importlib_metadata() -> None:
    # Each costs tens of milliseconds to import; the harness imports them on first use.
    loaded = _modules("from tether import create_agent, define_tool, mcp_server, reduce")
    heavy = ("pydantic", "pydantic_core", "jsonschema", "importlib.metadata", "psycopg")
    assert sorted(m for m in loaded if m in heavy) == []


@pytest.mark.parametrize("args", [["--version"], ["-V"], ["--help"], ["agent", "--help"]])
def test_the_commands_version_and_help_load_no_harness_starlette_or_jinja(
    args: list[str],
) -> None:
    script = (
        "import json, sys\n"
        f"sys.argv = ['tether', *{args!r}]\n"
        "from tether.__main__ import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print(json.dumps(sorted(sys.modules)), file=sys.stderr)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    loaded = set(json.loads(out.stderr.splitlines()[-1]))
    assert "tether" in out.stdout
    harness = ("agent", "loop", "turn", "tools", "mcp", "lab", "stores", "evals", "workflows")
    assert sorted(m for m in loaded if m.split(".")[:2][-1] in harness) == []
    # (typer imports pydantic itself for a command group's help: not tether's doing.)
    assert not _top_level(loaded) & {"starlette", "jinja2", "uvicorn", "httpx", "psycopg"}


def test_agent_list_on_the_example_project_loads_no_store_backend(tmp_path: Path) -> None:
    # The list reads the registry only: the store (SQLite here) is opened by what writes.
    project = tmp_path / "lab"
    shutil.copytree(ROOT / "examples" / "lab", project, ignore=shutil.ignore_patterns(".tether"))
    script = (
        "import json, sys\n"
        "sys.argv = ['tether', 'agent', 'list']\n"
        "from tether.__main__ import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print(json.dumps(sorted(sys.modules)), file=sys.stderr)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    out = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        check=True,
        cwd=project,
        env=env,
    )
    loaded = set(json.loads(out.stderr.splitlines()[-1]))
    assert "assistant" in out.stdout
    backends = ("tether.stores.memory", "tether.stores.sqlite", "tether.stores.postgres")
    assert sorted(m for m in loaded if m.startswith(backends)) == []
    # No model is called: no provider adapter, no httpx (the app's scripted client and the
    # in-process MCP server beside it in tether.testing are not one import), and the table is
    # drawn without rich's console.
    assert not _top_level(loaded) & {"starlette", "jinja2", "uvicorn", "psycopg", "httpx"}
    adapters = ("tether.llm.anthropic", "tether.llm._adapter", "tether.testing.mcp_server")
    assert sorted(m for m in loaded if m.startswith(adapters)) == []
    assert sorted(m for m in loaded if m in ("rich.console", "rich.table")) == []
    # typer builds the `agent` group alone: the other commands' modules stay unimported.
    others = ("_chat", "_eval", "_init", "_prompt", "_runs", "_serve", "_ui", "_workflows")
    assert sorted(m for m in loaded if m in {f"tether.cli.{name}" for name in others}) == []


def test_the_command_starts_without_garbage_collection_and_turns_it_back_on(
    tmp_path: Path,
) -> None:
    # Start-up makes long-lived objects and no garbage: the command holds collection off while
    # it loads itself and the project, then freezes what it made and collects as usual.
    (tmp_path / "tether.toml").write_text('runtime = "app:lab"\nagents = ["app:helper"]\n')
    (tmp_path / "app.py").write_text(
        "import gc\n"
        "from tether.lab import Runtime\n"
        "from tether.testing import script_client\n"
        "COLLECTING = gc.isenabled()\n"
        "lab = Runtime(defaults={'model': script_client([])})\n"
        "helper = lab.create_agent(id='helper', system_prompt='Help.')\n"
    )
    script = (
        "import gc, json, sys\n"
        "sys.argv = ['tether', 'agent', 'list']\n"
        "from tether.__main__ import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "import app\n"
        "print(json.dumps([app.COLLECTING, gc.isenabled(), gc.get_freeze_count() > 0]),"
        " file=sys.stderr)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=tmp_path
    )
    assert "helper" in out.stdout
    assert json.loads(out.stderr.splitlines()[-1]) == [False, True, True]
    # Elsewhere (a program running the typer app itself, as the tests do) nothing changes.
    from typer.testing import CliRunner

    from tether.cli import app

    sys.modules.pop("app", None)
    frozen = gc.get_freeze_count()
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(tmp_path)
        patch.syspath_prepend(str(tmp_path))
        listed = CliRunner().invoke(app, ["agent", "list"], prog_name="tether")
        assert listed.exit_code == 0, listed.output
        assert sys.modules["app"].COLLECTING is True
    sys.modules.pop("app", None)
    assert gc.isenabled() and gc.get_freeze_count() == frozen


def test_version() -> None:
    assert tether.__version__ == metadata.version("tether")
    out = subprocess.run(
        [sys.executable, "-m", "tether", "--version"], capture_output=True, text=True, check=True
    )
    assert out.stdout == f"tether {tether.__version__}\n"


def test_the_command_without_the_lab_extra_says_what_to_install() -> None:
    # find_spec reports a module set to None in sys.modules as absent: the lab extra "missing".
    hide = "import sys; sys.modules['typer'] = None; sys.modules['genai_prices'] = None; "
    run = "from tether.__main__ import main; sys.argv = ['tether', *sys.argv[1:]]; main()"
    missing = subprocess.run(
        [sys.executable, "-c", hide + run, "agent", "list"], capture_output=True, text=True
    )
    assert missing.returncode == 3
    assert "pip install 'tether[lab]'" in missing.stderr
    assert "missing: typer, genai_prices" in missing.stderr
    assert "Traceback" not in missing.stderr
    assert "typer" not in _top_level(_modules("import tether.__main__"))
    version = subprocess.run(
        [sys.executable, "-c", hide + run, "--version"], capture_output=True, text=True
    )
    assert (version.returncode, version.stdout) == (0, f"tether {tether.__version__}\n")


# -- the built wheel in fresh virtual environments ----------------------------------------------


def _requirements(dist_requires: list[str] | None, extras: set[str]) -> list[Requirement]:
    out = []
    for line in dist_requires or []:
        req = Requirement(line)
        if req.marker is None or any(req.marker.evaluate({"extra": e}) for e in extras | {""}):
            out.append(req)
    return out


def _closure(wheel_requires: list[str], extras: set[str]) -> set[str]:
    """The installed distributions that `tether[extras]` needs, from the wheel's requirements."""
    needed: set[str] = set()
    todo = [(r, set(r.extras)) for r in _requirements(wheel_requires, extras)]
    seen_self: set[str] = set(extras)
    while todo:
        req, req_extras = todo.pop()
        name = canonicalize_name(req.name)
        if name == "tether":  # an extra naming other extras of tether
            new = req_extras - seen_self
            seen_self |= new
            todo += [(r, set(r.extras)) for r in _requirements(wheel_requires, new)]
            continue
        if name in needed:
            continue
        needed.add(name)
        dist = metadata.distribution(req.name)
        todo += [(r, set(r.extras)) for r in _requirements(dist.requires, req_extras)]
    return needed


def _repack(name: str, into: Path) -> None:
    """A wheel of the installed distribution `name`, made from the files its RECORD lists."""
    dist = metadata.distribution(name)
    tags = [
        line.split(":", 1)[1].strip()
        for line in (dist.read_text("WHEEL") or "Tag: py3-none-any").splitlines()
        if line.startswith("Tag:")
    ]
    supported = {str(t) for t in sys_tags()}
    tag = next(t for t in tags if t in supported)  # one this interpreter installs (py2.py3: py3)
    stem = f"{canonicalize_name(name).replace('-', '_')}-{dist.version}"
    with zipfile.ZipFile(into / f"{stem}-{tag}.whl", "w", zipfile.ZIP_STORED) as whl:
        for file in dist.files or []:
            path = str(file)
            if path.startswith("..") or "__pycache__" in path or path.endswith(".pyc"):
                continue  # console scripts (pip writes them anew) and bytecode
            located = Path(str(file.locate()))
            if located.is_file():
                whl.write(located, path)


@dataclass
class Built:
    wheel: Path
    sdist: Path
    wheelhouse: Path
    requires: list[str]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    out = tmp_path_factory.mktemp("dist")
    src = out / "src"
    # Built from a copy of what git would commit, as a release is (no .venv, no ignored files).
    files = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for name in filter(None, files):
        target = src / name.decode()
        if (ROOT / name.decode()).is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name.decode(), target)
    subprocess.run(
        [sys.executable, "-m", "hatchling", "build", "-d", str(out)],
        cwd=src,
        check=True,
        capture_output=True,
    )
    wheel = next(out.glob("tether-*.whl"))
    sdist = next(out.glob("tether-*.tar.gz"))
    with zipfile.ZipFile(wheel) as whl:
        meta = whl.read(f"tether-{tether.__version__}.dist-info/METADATA").decode()
    requires = [
        line.split(":", 1)[1].strip()
        for line in meta.splitlines()
        if line.startswith("Requires-Dist:")
    ]
    wheelhouse = out / "wheelhouse"
    wheelhouse.mkdir()
    for dist_name in _closure(requires, {"lab"}):
        _repack(dist_name, wheelhouse)
    shutil.copy2(wheel, wheelhouse)
    return Built(wheel, sdist, wheelhouse, requires)


def test_the_wheel_and_sdist_carry_the_metadata(built: Built) -> None:
    with zipfile.ZipFile(built.wheel) as whl:
        names = whl.namelist()
        meta = whl.read(f"tether-{tether.__version__}.dist-info/METADATA").decode()
        entry_points = whl.read(f"tether-{tether.__version__}.dist-info/entry_points.txt").decode()
    assert "tether/py.typed" in names and "tether/ui/templates/base.html" in names
    assert not [n for n in names if n.startswith("tests/")]
    core = sorted(
        canonicalize_name(Requirement(r).name) for r in built.requires if "extra ==" not in r
    )
    assert core == ["httpx", "jsonschema", "pydantic"]
    for extra in ("lab", "postgres", "otel", "evals", "ray", "all", "docs"):
        assert f"Provides-Extra: {extra}" in meta
    assert "Project-URL: Documentation" in meta and "Classifier: Typing :: Typed" in meta
    assert "tether = tether.__main__:main" in entry_points
    # The README the package index shows points at no path of the repository's set-up.
    # What a user reads first names no path of a checkout: the contributor set-up comes last.
    readme = meta.split("\n\n", 1)[1]
    users_part, development = readme.split("\n## Development\n")
    for path in ("scripts/", ".venv/", "../", "](docs/"):
        assert path not in users_part
    assert "bash scripts/demo" in development and "bash scripts/test" in development
    import tarfile

    with tarfile.open(built.sdist) as sdist:
        members = sdist.getnames()
    root = f"tether-{tether.__version__}"
    for needed in (
        "pyproject.toml",
        "README.md",
        "src/tether/__init__.py",
        "src/tether/_version.py",
    ):
        assert f"{root}/{needed}" in members


@dataclass
class Venv:
    root: Path

    @property
    def python(self) -> str:
        return str(self.root / "bin" / "python")

    def pip_install(self, wheelhouse: Path, *requirements: str) -> None:
        env = {
            k: v for k, v in os.environ.items() if not k.startswith("PIP_") and k != "VIRTUAL_ENV"
        }
        env["PIP_CONFIG_FILE"] = os.devnull  # only the wheelhouse: no index, no site config
        done = subprocess.run(
            [
                self.python,
                "-m",
                "pip",
                "install",
                "-q",
                "--no-index",
                "--disable-pip-version-check",
                "--find-links",
                str(wheelhouse),
                *requirements,
            ],
            env=env,
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stderr

    def run(self, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.endswith("_API_KEY") and k not in ("PYTHONPATH", "VIRTUAL_ENV")
        }
        return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def venv(built: Built, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Venv]:
    root = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", str(root)], check=True, capture_output=True)
    env = Venv(root)
    env.pip_install(built.wheelhouse, str(built.wheel))
    yield env


CORE_AGENT = textwrap.dedent(
    """
    import asyncio, json, sys

    import tether
    from tether import create_agent, define_tool, reduce
    from tether.testing import script_client

    def add(input):
        return input["a"] + input["b"]

    async def main():
        model = script_client([
            {"tool_use": [{"name": "add", "input": {"a": 2, "b": 3}}]},
            {"text": "2 + 3 = 5"},
        ])
        agent = create_agent(
            model=model,
            system_prompt="You add numbers.",
            tools=[define_tool(
                name="add",
                input_schema={
                    "type": "object",
                    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                    "required": ["a", "b"],
                },
                execute=add,
            )],
        )
        session = agent.create_session()
        async for event in agent.send(session, "2 + 3?"):
            session = reduce(session, event)
        print(json.dumps({
            "answer": session.messages[-1]["content"][0]["text"],
            "tool_output": session.messages[-2]["content"][0]["output"],
            "version": tether.__version__,
        }))

    asyncio.run(main())
    """
)


def test_the_core_install_runs_an_agent_and_says_what_the_command_needs(
    built: Built, venv: Venv, tmp_path: Path
) -> None:
    installed = venv.run(venv.python, "-m", "pip", "list", "--format", "json")
    names = {canonicalize_name(p["name"]) for p in json.loads(installed.stdout)}
    assert names - {"pip", "setuptools"} == _closure(built.requires, set()) | {"tether"}
    for extra_module in EXTRA_MODULES["lab"]:
        assert canonicalize_name(extra_module) not in names
    script = tmp_path / "agent.py"
    script.write_text(CORE_AGENT)
    ran = venv.run(venv.python, str(script), cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout) == {
        "answer": "2 + 3 = 5",
        "tool_output": "5",
        "version": tether.__version__,
    }
    command = venv.run(str(venv.root / "bin" / "tether"), "agent", "list", cwd=tmp_path)
    assert command.returncode == 3
    assert "pip install 'tether[lab]'" in command.stderr and "Traceback" not in command.stderr
    version = venv.run(str(venv.root / "bin" / "tether"), "--version")
    assert version.stdout == f"tether {tether.__version__}\n"


def test_with_the_lab_extra_the_command_runs_the_example_project(
    built: Built, venv: Venv, tmp_path: Path
) -> None:
    venv.pip_install(built.wheelhouse, f"tether[lab] @ {built.wheel.as_uri()}")
    project = tmp_path / "lab"
    shutil.copytree(ROOT / "examples" / "lab", project, ignore=shutil.ignore_patterns(".tether"))
    tether_bin = str(venv.root / "bin" / "tether")
    ran = venv.run(tether_bin, "agent", "run", "assistant", "Hello", "--scope", "demo", cwd=project)
    assert ran.returncode == 0, ran.stderr
    assert "(scripted model) you said: Hello" in ran.stdout
    listed = venv.run(tether_bin, "runs", "list", "--json", cwd=project)
    assert listed.returncode == 0, listed.stderr
    assert [r["name"] for r in json.loads(listed.stdout)] == ["assistant"]


@pytest.mark.timeout(600)  # builds the wheel and the virtualenv when run on its own
def test_the_first_hour_in_a_fresh_virtualenv_with_only_the_lab_extra(
    built: Built, venv: Venv, tmp_path: Path
) -> None:
    """What a new user types, in order, against the built wheel: a prompt with no project, a
    scaffold, and the scaffold's agent through agent run, chat and eval run, all on the keyless
    test model."""
    venv.pip_install(built.wheelhouse, f"tether[lab] @ {built.wheel.as_uri()}")
    tether_bin = str(venv.root / "bin" / "tether")
    home = tmp_path / "home"
    home.mkdir()

    def run(
        *args: str, cwd: Path = home, stdin: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.endswith("_API_KEY") and k not in ("PYTHONPATH", "VIRTUAL_ENV")
        }
        env["TETHER_CONFIG_DIR"] = str(tmp_path / "config")
        return subprocess.run(
            [tether_bin, *args],
            cwd=cwd,
            env=env,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=120,
        )

    helped = run("--help")
    commands = helped.stdout.split("Commands:")[1].split()
    assert [w for w in commands if w in ("init", "prompt", "chat")] == ["init", "prompt", "chat"]
    assert commands[0] == "init"
    # No project at all: a prompt, logged where `tether runs list` finds it.
    asked = run("prompt", "Hello from nowhere", "-m", "test")
    assert (asked.returncode, asked.stdout) == (0, "Hello from nowhere\n"), asked.stderr
    bare = run("Also this", "-m", "test:echo")
    assert (bare.returncode, bare.stdout) == (0, "Also this\n"), bare.stderr
    runs = json.loads(run("runs", "list", "--json").stdout)
    assert [r["name"] for r in runs] == ["prompt", "prompt"]
    # The scaffold, and every command a beginner tries on it.
    made = run("init", "demo")
    assert made.returncode == 0, made.stderr
    project = home / "demo"
    assert sorted(p.relative_to(project).as_posix() for p in project.rglob("*") if p.is_file()) == [
        ".gitignore",
        "app.py",
        "datasets/smoke.jsonl",
        "tether.toml",
    ]
    listed = run("agent", "list", "--json", cwd=project)
    assert [a["id"] for a in json.loads(listed.stdout)] == ["assistant"], listed.stderr
    answered = run("agent", "run", "assistant", "Hello", cwd=project)
    assert (answered.returncode, answered.stdout) == (0, "Hello\n"), answered.stderr
    chatted = run("chat", "assistant", cwd=project, stdin="first\nsecond\n")
    assert chatted.returncode == 0, chatted.stderr
    assert "first" in chatted.stdout and "second" in chatted.stdout
    evaluated = run("eval", "run", "assistant", "--dataset", "datasets/smoke.jsonl", cwd=project)
    assert evaluated.returncode == 0, evaluated.stdout + evaluated.stderr
    assert "2 passed, 0 failed" in evaluated.stdout
    again = run("init", "demo")
    assert again.returncode == 2 and "already exists" in again.stderr
    assert "Traceback" not in again.stderr
