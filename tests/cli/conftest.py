"""A throwaway project for the `tether` command: a package of agents and workflows on a scripted
model, a tether.toml naming them, and a SQLite store under the project directory.

The CLI runs in-process through typer's CliRunner. A real `tether` process imports the project
once; here every invocation imports it afresh (its modules are dropped after each run), so each
one gets a new runtime and a new scripted model, as a new process would.
"""

from __future__ import annotations

import asyncio
import sys
import textwrap
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from tether.cli import app
from tether.stores import SqliteMessageStore, SqliteRunStore, StoredRecord

LAB = '''
"""The project's runtime, agents and workflows."""

import asyncio
import json
import signal
import sys
from pathlib import Path

from pydantic import BaseModel

from tether import define_tool
from tether.errors import LLMError
from tether.lab import Runtime, tool_provider
from tether.testing import script_client

HERE = Path(__file__).resolve().parent
NOT_AN_AGENT = 42


def last_part(request):
    message = request["messages"][-1]
    return message["role"], message["content"][-1]


def echo_reply(request):
    """Answers from the last user message; 'fail' makes the provider fail."""
    role, part = last_part(request)
    text = part.get("text", "")
    if text == "fail":
        return {"error": LLMError("the provider is down", provider="script")}
    if text == "prose":
        return {"text": "no JSON here"}
    if text == "summarize":
        return {"text": '{"summary": "short"}'}
    n = len(request["messages"])
    return {"text": ["you ", "said: ", text, f" ({n} messages)"]}


def tool_reply(request):
    """The user message is a plan, 'noop then wait': call each tool in turn, one per request,
    then report the last tool's output."""
    messages = request["messages"]
    start = max(i for i, m in enumerate(messages) if m["role"] == "user" and
                m["content"][0]["type"] == "text")
    plan = messages[start]["content"][0]["text"].split(" then ")
    results = [p for m in messages[start + 1:] for p in m["content"] if p["type"] == "tool_result"]
    if len(results) < len(plan):
        name = plan[len(results)]
        return {"text": f"calling {name}", "tool_use": [{"name": name, "input": {}}]}
    return {"text": f"the tool said {results[-1]['output']}"}


lab = Runtime(version="1.2.3", defaults={"model": script_client([echo_reply] * 50)})

echo = lab.create_agent(id="echo", system_prompt="Echo the user.", description="Repeats you.")


def sandbox_tools(context):
    return [
        define_tool(
            name="where",
            description="Report the tool context.",
            execute=lambda args: json.dumps(context),
        )
    ]


sandboxed = lab.create_agent(
    id="sandboxed",
    model=script_client([tool_reply] * 10),
    tools=tool_provider(sandbox_tools),
)


class Summary(BaseModel):
    summary: str


summarizer = lab.create_agent(id="summarizer", output_schema=Summary)

keyless = lab.create_agent(id="keyless", model="openai:gpt-4o")


async def interrupt(args):
    """Presses Ctrl-C (in-process: raises SIGINT) and waits to be cancelled."""
    signal.raise_signal(signal.SIGINT)
    await asyncio.Event().wait()


async def wait(args):
    """Says so on stderr, then waits to be cancelled (a test presses Ctrl-C meanwhile)."""
    print("WAITING", file=sys.stderr, flush=True)
    await asyncio.Event().wait()


async def stubborn(args):
    """Says WAITING, then will not stop: each cancellation is said (IGNORED) and ignored."""
    print("WAITING", file=sys.stderr, flush=True)
    while True:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            print("IGNORED", file=sys.stderr, flush=True)


stopper = lab.create_agent(
    id="stopper",
    model=script_client([tool_reply] * 10),
    tools=[
        define_tool(name="noop", execute=lambda args: "ok"),
        define_tool(name="interrupt", execute=interrupt),
        define_tool(name="wait", execute=wait),
        define_tool(name="stubborn", execute=stubborn),
    ],
)


async def greet(input, ctx):
    """Greets whoever the input names.

    More lines that the listing leaves out.
    """
    greeting = await ctx.step("hello", lambda: f"hello {input}")
    return {"greeting": greeting}


greet_workflow = lab.create_workflow("greet", greet)


async def flaky(input, ctx):
    """Fails at its second step until the file 'fixed' exists in the project."""
    first = await ctx.step("first", lambda: {"count": len(str(input))})

    def second():
        if not (HERE.parent / "fixed").exists():
            raise RuntimeError("the second step is broken")
        return "repaired"

    return {"first": first, "second": await ctx.step("second", second)}


flaky_workflow = lab.create_workflow("flaky", flaky)


async def ask(input, ctx):
    async def episode():
        result = await echo.run(memory_scope=ctx.run_local_scope("echo"), user=input).result
        return result.text

    return await ctx.step("ask", episode)


ask_workflow = lab.create_workflow("ask", ask)


async def nested(input, ctx):
    """Runs the ask workflow inside its step, then greets."""

    async def inner():
        return await ask_workflow.run(input).result

    answer = await ctx.step("inner", inner)
    return await ctx.step("greet", lambda: f"{answer}, greeted")


nested_workflow = lab.create_workflow("nested", nested)


async def waiting(input, ctx):
    async def block():
        print("WAITING", file=sys.stderr, flush=True)
        signal.raise_signal(signal.SIGINT)
        await asyncio.Event().wait()

    await ctx.step("done-first", lambda: 1)
    return await ctx.step("block", block)


waiting_workflow = lab.create_workflow("waiting", waiting)
'''

CONFIG = """
runtime = "APP.lab:lab"
agents = [
    "APP.lab:echo",
    "APP.lab:sandboxed",
    "APP.lab:summarizer",
    "APP.lab:keyless",
    "APP.lab:stopper",
]
workflows = ["APP.lab:greet_workflow", "APP.lab:flaky_workflow", "APP.lab:ask_workflow",
             "APP.lab:waiting_workflow", "APP.lab:nested_workflow"]
store = "sqlite:///.tether/cli.db"
"""


@dataclass
class Project:
    """A project directory and the package in it."""

    root: Path
    package: str
    runner: CliRunner = field(default_factory=CliRunner)

    @property
    def db(self) -> Path:
        return self.root / ".tether" / "cli.db"

    def invoke(self, *args: str, input: str | bytes | None = None) -> Result:
        """Run `tether ARGS...` in-process from the project directory."""
        try:
            return self.runner.invoke(app, list(args), input=input, prog_name="tether")
        finally:
            for name in [m for m in sys.modules if m.split(".")[0] == self.package]:
                del sys.modules[name]

    def stored(self, scope: str) -> list[StoredRecord]:
        """The transcript stored on `scope`, read straight from the SQLite file."""

        async def load() -> list[StoredRecord]:
            store = SqliteMessageStore.open(self.db)
            try:
                return await store.load(scope)
            finally:
                await store.aclose()

        return asyncio.run(load())

    def run_status(self, run_id: str) -> str | None:
        async def get() -> str | None:
            store = SqliteRunStore.open(self.db)
            try:
                info = await store.get_run(run_id)
                return info.status if info is not None else None
            finally:
                await store.aclose()

        return asyncio.run(get())


def write_project(root: Path, lab: str = LAB, config: str = CONFIG) -> str:
    """Write a project under `root` with a uniquely named package; return the package name."""
    package = f"cliapp_{uuid.uuid4().hex[:10]}"
    (root / package).mkdir(parents=True)
    (root / package / "__init__.py").write_text("", encoding="utf-8")
    (root / package / "lab.py").write_text(textwrap.dedent(lab), encoding="utf-8")
    (root / "tether.toml").write_text(config.replace("APP", package), encoding="utf-8")
    return package


@pytest.fixture(autouse=True)
def _isolated_imports(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """load_registry puts the project on sys.path; each test gets the path back as it was."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    yield


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Project:
    root = tmp_path / "project"
    root.mkdir()
    package = write_project(root)
    monkeypatch.chdir(root)
    return Project(root, package)


def lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.splitlines() if line.strip()]
