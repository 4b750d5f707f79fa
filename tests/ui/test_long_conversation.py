"""A conversation of 10,000 messages is paged: the first page shows the newest episodes, a link
leads to older ones, and following the links reaches every record exactly once."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tether.lab import Runtime
from tether.stores.run_store import RunInfo
from tether.testing import script_client
from tether.ui._views import EPISODES_PER_PAGE

from .conftest import assert_inert, client_for

EPISODES = 2500
PER_EPISODE = 4  # user, assistant tool call, tool result, assistant text
FILLER = "x" * 300


def record(role: str, text: str) -> dict[str, object]:
    return {"role": role, "content": [{"type": "text", "text": text}]}


@pytest.fixture
async def long_runtime(tmp_path: Path) -> AsyncIterator[Runtime]:
    runtime = Runtime(
        store=f"sqlite:///{tmp_path / 'long.db'}",
        version=False,
        defaults={"model": script_client([])},
    )
    runtime.create_agent(id="chatty", system_prompt="Be chatty.")
    messages = runtime.message_store
    runs = runtime.run_store
    await messages.append(
        "long", [{"role": "system", "content": "Be chatty.", "agent_id": "chatty"}]
    )
    length = 1
    for e in range(EPISODES):
        batch = [
            record("user", f"question {e} {FILLER}"),
            record("assistant", f"thinking {e} {FILLER}"),
            record("user", f"more {e} {FILLER}"),
            record("assistant", f"answer {e} {FILLER}"),
        ]
        run_id = f"run-{e:05d}"
        await runs.start_run(
            RunInfo(run_id, "agent", "chatty", "completed", 1000.0 + e, memory_scope="long")
        )
        await runs.append_events(
            run_id,
            [
                {
                    "type": "agent_messages_committed",
                    "at": 1000.0 + e,
                    "data": {"start": length, "count": len(batch), "messages": []},
                }
            ],
        )
        length = await messages.append("long", batch)  # type: ignore[arg-type]
    assert length == 1 + EPISODES * PER_EPISODE
    yield runtime
    await runtime.aclose()


def episode_numbers(html: str) -> list[int]:
    return [int(n) for n in re.findall(r"answer (\d+) x", html)]


async def test_a_10000_message_conversation_is_paged_newest_episodes_first(
    long_runtime: Runtime,
) -> None:
    async with client_for(long_runtime) as client:
        first = await client.get("/conversations/long")
        assert first.status_code == 200
        assert len(first.content) < 200_000  # not one 4 MB page
        assert_inert(first.text)
        newest = list(range(EPISODES - EPISODES_PER_PAGE, EPISODES))
        assert episode_numbers(first.text) == newest  # in the order they ran
        assert "Be chatty." in first.text  # the pinned prompt is on every page
        older = re.search(
            r'<a class="older" rel="prev" href="\?before=(\d+&amp;skip=\d+)', first.text
        )
        assert older is not None
        seen = episode_numbers(first.text)
        before = older.group(1)
        # The skip in the link is a hint: without it (or stale) the page is the same.
        end = before.split("&")[0]
        with_hint = await client.get(f"/conversations/long?before={before.replace('&amp;', '&')}")
        without = await client.get(f"/conversations/long?before={end}")
        assert episode_numbers(with_hint.text) == episode_numbers(without.text)
        assert episode_numbers(without.text) == list(range(EPISODES - 40, EPISODES - 20))
        pages = 1
        while True:
            page = await client.get(f"/conversations/long?before={before.replace('&amp;', '&')}")
            assert page.status_code == 200 and len(page.content) < 200_000
            seen = episode_numbers(page.text) + seen
            pages += 1
            link = re.search(r'href="\?before=(\d+&amp;skip=\d+)', page.text)
            if link is None:
                break
            before = link.group(1)
            if pages == 3:
                assert 'class="newest"' in page.text
        assert seen == list(range(EPISODES))  # every episode once, in order
        assert pages == EPISODES // EPISODES_PER_PAGE
        api = (await client.get("/api/scopes/long")).json()
        assert len(api["turns"]) == EPISODES_PER_PAGE and api["older_before"] is not None
        assert (await client.get("/conversations/long?before=-1")).status_code == 400
        assert (await client.get("/api/scopes/long?before=x")).status_code == 400
