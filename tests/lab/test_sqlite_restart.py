"""A conversation persisted in SQLite survives the process: three episodes in one process, the
fourth in another sees the whole transcript and the pinned prompt."""

from __future__ import annotations

import asyncio
import sys
import textwrap
from pathlib import Path

from tests.helpers import texts

from tether import Session
from tether.lab import Runtime
from tether.testing import script_client

from .conftest import system_of

FIRST_PROCESS = textwrap.dedent(
    """
    import asyncio, sys
    from tether.lab import Runtime
    from tether.testing import script_client

    async def main(db: str) -> None:
        client = script_client([{"text": f"reply {i}"} for i in (1, 2, 3)])
        lab = Runtime(store=f"sqlite:///{db}", version=False)
        agent = lab.create_agent(id="researcher", system_prompt="You research.", model=client)
        for i in (1, 2, 3):
            await agent.run(memory_scope="notes", user=f"turn {i}").result
        await lab.aclose()
        print("stored", len(client.calls))

    asyncio.run(main(sys.argv[1]))
    """
)


async def test_the_fourth_episode_after_a_restart_sees_the_whole_transcript(
    tmp_path: Path,
) -> None:
    db = tmp_path / "tether.db"
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        FIRST_PROCESS,
        str(db),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    assert out.decode().strip() == "stored 3"

    client = script_client([{"text": "reply 4"}])
    lab = Runtime(store=f"sqlite:///{db}", version=False)
    agent = lab.create_agent(id="researcher", system_prompt="A new prompt.", model=client)
    result = await agent.run(memory_scope="notes", user="turn 4").result
    assert texts(client.calls[0]["messages"]) == [
        ("user", "turn 1"),
        ("assistant", "reply 1"),
        ("user", "turn 2"),
        ("assistant", "reply 2"),
        ("user", "turn 3"),
        ("assistant", "reply 3"),
        ("user", "turn 4"),
    ]
    # The pin written by the first process is still the conversation's identity.
    assert system_of(client.calls[0]) == "You research."
    stored = await lab.message_store.load("notes")
    assert len(stored) == 9 and result.text == "reply 4"
    Session.from_json({"id": "notes", "messages": stored[1:]})
    runs = await lab.run_store.list_runs(memory_scope="notes")
    assert [r.status for r in runs] == ["completed"] * 4
    await lab.aclose()
