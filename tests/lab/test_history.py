"""History policies in the lab: what an episode loads and sends, and stored summaries."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, cast

import pytest
from tests.helpers import assistant, texts, user

from tether import keep_last, summarize
from tether.history import SUMMARY_OPEN
from tether.lab import Runtime
from tether.lab._history import load_kept
from tether.run_events import AGENT_SUMMARIZED
from tether.stores import InMemoryMessageStore, StoredRecord
from tether.testing import script_client

from .conftest import pin, run_events, scripted


async def test_keep_last_sends_and_loads_only_the_last_turns(lab: Runtime) -> None:
    client = scripted(*[{"text": f"a{i}"} for i in range(6)])
    agent = lab.create_agent(
        id="chat", system_prompt="Be brief.", model=client, history=[keep_last(turns=2)]
    )
    for i in range(6):
        await agent.run(memory_scope="s", user=f"q{i}").result
    assert texts(client.calls[5]["messages"]) == [
        ("user", "q4"),
        ("assistant", "a4"),
        ("user", "q5"),
    ]
    stored = await lab.message_store.load("s")
    assert stored[0] == pin("Be brief.", "chat") and len(stored) == 13  # the whole transcript


async def test_a_long_scope_is_read_from_its_tail() -> None:
    store = InMemoryMessageStore()
    await store.append("s", [cast(StoredRecord, pin("p", "a"))])
    for i in range(2000):
        await store.append("s", [user(f"q{i}"), assistant(f"a{i}")])
    loaded = await load_kept(store, "s", [keep_last(turns=20)])
    assert loaded.pin == pin("p", "a")
    assert texts(loaded.messages)[0] == ("user", "q1980") and len(loaded.messages) == 40
    assert loaded.seqs[0] == 1 + 2 * 1980 and loaded.length == 4001
    assert loaded.records_read <= 64 + 1  # one page and the pin, not 4,001 records
    # without a bound the policy needs everything
    assert len((await load_kept(store, "s", [lambda m, c: m])).messages) == 4000


async def test_a_summary_is_stored_as_a_record_and_the_next_turn_starts_from_it(
    lab: Runtime,
) -> None:
    writer = script_client(
        [{"text": "We talked about q0 to q3.", "usage": {"input_tokens": 40, "output_tokens": 9}}]
    )
    client = scripted(*[{"text": f"a{i}" + "x" * 200} for i in range(7)])
    policy = summarize(model=writer, when_tokens_over=250, keep_last_turns=2)
    agent = lab.create_agent(id="chat", system_prompt="Be brief.", model=client, history=[policy])
    results = [await agent.run(memory_scope="s", user=f"q{i}").result for i in range(6)]
    assert len(writer.calls) == 1
    stored: list[Any] = await lab.message_store.load("s")
    summaries = [(i, r) for i, r in enumerate(stored) if r["role"] == "summary"]
    assert len(summaries) == 1
    index, record = summaries[0]
    first_kept = record["covers"][1] + 1
    assert record["covers"][0] == 1
    assert stored[first_kept]["role"] == "user"
    assert record["content"][0]["text"] == "We talked about q0 to q3."
    # the run that made it says so, with the summary's usage
    made = [
        r
        for r in results
        if any(e["type"] == AGENT_SUMMARIZED for e in await run_events(lab, r.run_id))
    ]
    assert len(made) == 1
    event = next(e for e in await run_events(lab, made[0].run_id) if e["type"] == AGENT_SUMMARIZED)
    assert event["data"]["index"] == index and event["data"]["covers"] == record["covers"]
    assert event["data"]["usage"] == {"input_tokens": 40, "output_tokens": 9}
    # the records around it are what the turns said: nothing was edited or dropped
    assert [r["role"] for r in stored if r["role"] != "summary"].count("user") == 6
    # the next turn sends the summary, then the records after what it covers
    await agent.run(memory_scope="s", user="q6").result
    sent = client.calls[6]["messages"]
    assert sent[0]["content"][0]["text"].startswith(SUMMARY_OPEN)
    assert "We talked about q0 to q3." in sent[0]["content"][0]["text"]
    assert texts(sent)[-1] == ("user", "q6")
    assert all(t != "q0" for _, t in texts(sent))


_SECOND_PROCESS = textwrap.dedent(
    """
    import asyncio, json, sys
    from tether import summarize
    from tether.lab import Runtime
    from tether.testing import script_client

    async def main():
        lab = Runtime(store=sys.argv[1], version=False)
        client = script_client([{"text": "later"}])
        writer = script_client([])  # a new summary here would fail: there is none to make
        policy = summarize(model=writer, when_tokens_over=250, keep_last_turns=2)
        agent = lab.create_agent(id="chat", system_prompt="Be brief.", model=client,
                                 history=[policy])
        await agent.run(memory_scope="s", user="from another process").result
        await lab.aclose()
        print(json.dumps(client.calls[0]["messages"]))

    asyncio.run(main())
    """
)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_a_stored_summary_is_reused_by_another_process(backend: str, tmp_path: Path) -> None:
    if backend == "sqlite":
        url = f"sqlite:///{tmp_path / 'lab.db'}"
    else:
        from tests.postgres_server import postgres_url

        url = postgres_url()
    writer = script_client([{"text": "Earlier: numbers."}])
    client = scripted(*[{"text": f"a{i}" + "x" * 200} for i in range(6)])
    lab = Runtime(store=url, version=False)
    policy = summarize(model=writer, when_tokens_over=250, keep_last_turns=2)
    agent = lab.create_agent(id="chat", system_prompt="Be brief.", model=client, history=[policy])
    for i in range(6):
        await agent.run(memory_scope="s", user=f"q{i}").result
    assert len(writer.calls) == 1
    await lab.aclose()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", _SECOND_PROCESS, url],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    sent: list[Any] = json.loads(out.stdout.strip().splitlines()[-1])
    assert "Earlier: numbers." in sent[0]["content"][0]["text"]
    assert texts(sent)[-1] == ("user", "from another process")
    assert len(sent) <= 2 * 2 + 2
