"""A paused run survives its process: the first process pauses an episode and is SIGKILLed
while it waits; another process resumes it with the same stores (SQLite, PostgreSQL) and the
approved tool runs exactly once, with nothing of the turn lost."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import textwrap
from pathlib import Path

import pytest
from tests.helpers import texts
from tests.postgres_server import postgres_url

from tether import approve
from tether.lab import Runtime

PROJECT = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from tether import define_tool
    from tether.lab import Runtime
    from tether.testing import script_client

    def reply(request):
        results = [
            p for m in request["messages"] for p in m["content"] if p["type"] == "tool_result"
        ]
        if not results:
            return {"tool_use": [
                {"id": "w", "name": "wipe", "input": {"path": "/tmp"}},
                {"id": "l", "name": "look", "input": {}},
            ]}
        return {"text": "done: " + ", ".join(p["output"] for p in results)}

    def agent(store, log):
        def wipe(value):
            with open(log, "a") as f:
                f.write("wipe\\n")
            return "wiped"
        lab = Runtime(store=store, version=False)
        tools = [
            define_tool(name="wipe", input_schema={"type": "object"}, execute=wipe,
                        approval=True),
            define_tool(name="look", input_schema={"type": "object"}, execute=lambda v: "seen"),
        ]
        return lab, lab.create_agent(id="janitor", model=script_client([reply] * 5), tools=tools)
    """
)

FIRST = textwrap.dedent(
    """
    import asyncio, sys
    from project import agent

    async def main(store, log):
        lab, janitor = agent(store, log)
        result = await janitor.run(memory_scope="room", user="tidy up").result
        print("PAUSED", result.run_id, flush=True)
        await asyncio.Event().wait()  # still alive, holding its runtime, when it is killed

    asyncio.run(main(sys.argv[1], sys.argv[2]))
    """
)


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'lab.db'}"
    return postgres_url()


async def test_a_run_paused_in_a_killed_process_resumes_in_another(
    store: str, tmp_path: Path
) -> None:
    (tmp_path / "project.py").write_text(PROJECT, encoding="utf-8")
    log = tmp_path / "wipes.log"
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        FIRST,
        store,
        str(log),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])},
    )
    assert process.stdout is not None
    line = (await process.stdout.readline()).decode().split()
    assert line[:1] == ["PAUSED"], (line, (await process.stderr.read()).decode())  # type: ignore[union-attr]
    run_id = line[1]
    process.send_signal(signal.SIGKILL)
    await process.wait()
    assert not log.exists()  # the approval was never given: wipe did not run

    sys.path.insert(0, str(tmp_path))
    try:
        from project import agent  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(tmp_path))
    lab: Runtime
    lab, janitor = agent(store, str(log))
    try:
        info = await lab.run_store.get_run(run_id)
        assert info is not None and info.status == "paused"  # not "interrupted": no lease held
        assert [p["id"] for p in info.pending] == ["w"]
        done = await janitor.resume(run_id, {"w": approve()}, decided_by="ann")
        assert done.text == "done: seen, wiped"
        assert log.read_text() == "wipe\n"  # exactly once
        stored = await lab.message_store.load("room")
        assert texts(stored)[0] == ("user", "tidy up")
        results = [p["id"] for m in stored for p in m["content"] if p["type"] == "tool_result"]
        assert results == ["l", "w"]  # the call that ran before the kill is kept, not rerun
        info = await lab.run_store.get_run(run_id)
        assert info is not None and info.status == "completed"
    finally:
        await lab.aclose()
        sys.modules.pop("project", None)


RESUME_AND_DIE = textwrap.dedent(
    """
    import asyncio, os, sys
    from project import agent
    from tether import approve
    from tether.testing import script_client

    async def main(store, log, run_id):
        lab, janitor = agent(store, log)
        # The model call after the approved tool ran: the process dies there.
        janitor.model = script_client([lambda request: os._exit(9)])
        await janitor.resume(run_id, {"w": approve()})

    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3]))
    """
)


async def test_a_resume_whose_process_dies_after_the_tool_keeps_its_result(
    tmp_path: Path,
) -> None:
    store = f"sqlite:///{tmp_path / 'lab.db'}"
    (tmp_path / "project.py").write_text(PROJECT, encoding="utf-8")
    log = tmp_path / "wipes.log"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    first = await asyncio.create_subprocess_exec(
        sys.executable, "-c", FIRST, store, str(log),
        stdout=asyncio.subprocess.PIPE, cwd=tmp_path, env=env,
    )  # fmt: skip
    assert first.stdout is not None
    line = (await first.stdout.readline()).decode().split()
    assert line[:1] == ["PAUSED"]
    first.send_signal(signal.SIGKILL)
    await first.wait()
    dying = await asyncio.create_subprocess_exec(
        sys.executable, "-c", RESUME_AND_DIE, store, str(log), line[1], cwd=tmp_path, env=env
    )
    assert await dying.wait() == 9
    assert log.read_text() == "wipe\n"

    sys.path.insert(0, str(tmp_path))
    try:
        from project import agent
    finally:
        sys.path.remove(str(tmp_path))
    lab: Runtime
    lab, janitor = agent(store, str(log))
    try:
        stored = await lab.message_store.load("room")
        results = [p["id"] for m in stored for p in m["content"] if p["type"] == "tool_result"]
        assert results == ["l", "w"]  # the approved call's result outlived its process
        later = await janitor.run(memory_scope="room", user="and now?").result
        assert later.text == "done: seen, wiped"
        assert log.read_text() == "wipe\n"  # not run again
    finally:
        await lab.aclose()
        sys.modules.pop("project", None)
