"""A lab run paused on an MCP elicitation goes on in another process: `tether agent run` (one
process) ends its episode `paused` on the official `mcp` SDK server's "Who are you?" with a
pending call of kind "input" stored with the run; `tether runs resume RUN --result ID JSON`
(another process, a fresh connection) re-issues the call with the answer, from what the
stored pending entry keeps, and the server's final result reaches the model."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from mcp_interop_servers import HttpAppServer

from tether.stores import SqliteRunStore

SRC = Path(__file__).resolve().parents[2] / "src"

PROJECT = """
from tether.lab import Runtime
from tether.mcp import mcp_server
from tether.testing import script_client


def reply(request):
    results = [p for m in request["messages"] for p in m["content"] if p["type"] == "tool_result"]
    if not results:
        return {"tool_use": [{"id": "who", "name": "whoami", "input": {}}]}
    return {"text": "server said " + results[-1]["output"]}


lab = Runtime(version=False, defaults={"model": script_client([reply] * 5)})
asker = lab.create_agent(id="asker", integrations=[mcp_server(URL, elicitation="pause")])
"""

CONFIG = """
runtime = "elicitlab.lab:lab"
agents = ["elicitlab.lab:asker"]
store = "sqlite:///.tether/lab.db"
"""


@pytest.fixture
async def official() -> AsyncIterator[HttpAppServer]:
    server = HttpAppServer()
    await server.astart()
    try:
        yield server
    finally:
        await server.astop()


def write_project(root: Path, url: str) -> None:
    (root / "elicitlab").mkdir(parents=True)
    (root / "elicitlab" / "__init__.py").write_text("", encoding="utf-8")
    lab = textwrap.dedent(PROJECT).replace("URL", repr(url))
    (root / "elicitlab" / "lab.py").write_text(lab, encoding="utf-8")
    (root / "tether.toml").write_text(CONFIG, encoding="utf-8")


async def tether(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`tether ARGS...`, a process of its own, from the project directory."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), str(SRC)])}
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tether",
        *args,
        cwd=root,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate()
    assert process.returncode is not None
    return subprocess.CompletedProcess(args, process.returncode, out.decode(), err.decode())


async def run_events(db: Path, run_id: str) -> list[dict[str, Any]]:
    store = SqliteRunStore.open(db)
    try:
        return [dict(e) for e in await store.events(run_id)]
    finally:
        await store.aclose()


async def test_a_paused_elicitation_is_resumed_by_another_process(
    official: HttpAppServer, tmp_path: Path
) -> None:
    root = tmp_path / "project"
    write_project(root, official.url)
    first = await tether(root, "agent", "run", "asker", "-i", "who am I?", "--json")
    assert first.returncode == 0, first.stderr
    run_id = json.loads(first.stdout)["run_id"]

    listed = await tether(root, "runs", "list", "--status", "paused", "--json")
    [run] = json.loads(listed.stdout)
    assert run["run_id"] == run_id and run["status"] == "paused"
    [pending] = run["pending"]
    assert (pending["id"], pending["kind"], pending["message"]) == ("who", "input", "Who are you?")
    assert set(pending["schema"]["properties"]) == {"name", "age", "verified"}
    assert "requestState" in pending["state"]  # what re-issuing the call needs, stored

    refused = await tether(root, "runs", "resume", run_id, "--result", "who", '{"age": 1}')
    assert refused.returncode != 0 and "does not match the schema asked for" in refused.stderr
    done = await tether(
        root, "runs", "resume", run_id, "--result", "who", '{"name": "Ada"}', "--json"
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["status"] == "completed"
    said = out["text"].removeprefix("server said ")
    assert json.loads(said) == {
        "action": "accept",
        "content": {"name": "Ada", "age": 30, "verified": True},
    }
    events = await run_events(root / ".tether" / "lab.db", run_id)
    [decision] = [e["data"] for e in events if e["type"] == "decision"]
    assert decision["call_id"] == "who" and decision["action"] == "result"
    assert json.loads(decision["output"]) == {"name": "Ada"}


async def test_an_input_call_left_unanswered_expires_as_a_decline(
    official: HttpAppServer, tmp_path: Path
) -> None:
    from tether.lab import Runtime
    from tether.mcp import mcp_server
    from tether.testing import script_client

    def reply(request: Any) -> Any:
        results = [
            p for m in request["messages"] for p in m["content"] if p["type"] == "tool_result"
        ]
        if not results:
            return {"tool_use": [{"id": "who", "name": "whoami", "input": {}}]}
        return {"text": "server said " + results[-1]["output"]}

    def runtime() -> tuple[Runtime, Any]:
        # A long lease: the runtime's own sweep (every sixth of it) stays out of the way of
        # the test's expire_approvals().
        lab = Runtime(store=f"sqlite:///{tmp_path / 'lab.db'}", version=False, lease_ttl=3600)
        asker = lab.create_agent(
            id="asker",
            model=script_client([reply] * 3),
            integrations=[mcp_server(official.url, elicitation="pause")],
            approval_timeout=0.05,
        )
        return lab, asker

    first, asker = runtime()
    paused = await asker.run(user="who am I?").result
    assert [p["kind"] for p in paused.pending] == ["input"]
    await first.aclose()
    second, _ = runtime()  # another runtime's sweep finds it
    try:
        while True:  # until the store's clock passed the deadline (no assertion on time)
            if await second.run_store.expired_pauses():
                break
            await asyncio.sleep(0.01)
        [handle] = await second.expire_approvals()
        done = await handle.result
    finally:
        await second.aclose()
    # Denied as "expired": the server was told the person declined, and answered so.
    said = done.text.removeprefix("server said ")
    assert json.loads(said) == {"action": "decline", "content": None}
