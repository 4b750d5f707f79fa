"""Replaying a long run: a stream from `after=0` reads the store a page at a time and the next
page only once the last one was sent, so what a stream holds does not grow with the run. On real
`tether serve` processes over SQLite and PostgreSQL (every event, in order, from the start and
from the middle, while several clients read at once), and on the feed itself with a reader that
does not read (the store is asked for pages only, the live inbox stays bounded)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from tests.postgres_server import postgres_url

from tether.lab import Runtime
from tether.serve import RunEnd, RunFeed
from tether.serve._feed import INBOX, PAGE
from tether.stores import InMemoryRunStore, RunInfo
from tether.stores.run_store import RunEvent
from tether.testing import script_client

from .conftest import Server, start_server, stream_all, write_project

WORDS = 3 * PAGE + 17


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    root = write_project(tmp_path_factory.mktemp(f"replay-{request.param}") / "project")
    store = f"sqlite:///{root / 'tether.db'}" if request.param == "sqlite" else postgres_url()
    server = start_server(root, {"TETHER_TEST_STORE": store, "TETHER_TEST_DELAY": "0"})
    yield server
    server.stop()


def test_a_long_run_replays_whole_to_several_clients_at_once(server: Server) -> None:
    with server.client() as client:
        started = client.post("/api/agents/chat/runs", json={"input": f"words {WORDS}"})
        assert started.status_code == 202, started.text
        run_id = started.json()["run_id"]
        first = stream_all(client, run_id)  # followed live to its end
    count = len([m for m in first if m.id is not None])
    assert count > WORDS  # more than three pages

    def replay(after: int) -> list[int]:
        with server.client() as c:
            return [m.id for m in stream_all(c, run_id, last_id=after) if m.id is not None]

    with ThreadPoolExecutor(4) as pool:
        whole = list(pool.map(replay, [0, 0, 0, PAGE - 1]))
    for ids in whole[:3]:
        assert ids == list(range(1, count + 1))
    assert whole[3] == list(range(PAGE, count + 1))


class _Recording(InMemoryRunStore):
    """An in-memory run store that notes the `limit` of every read of events."""

    def __init__(self) -> None:
        super().__init__()
        self.limits: list[int | None] = []

    async def events(
        self, run_id: str, *, after: int = 0, limit: int | None = None
    ) -> list[RunEvent]:
        self.limits.append(limit)
        return await super().events(run_id, after=after, limit=limit)


async def test_a_stream_holds_one_page_and_a_bounded_inbox_whatever_the_run() -> None:
    store = _Recording()
    runtime = Runtime(
        store="memory", run_store=store, version=False, defaults={"model": script_client([])}
    )
    feed = RunFeed(runtime, poll=0.01, local_check=0.01)
    await store.start_run(RunInfo(run_id="r", kind="agent", name="a", started_at=1.0))
    total = 10 * PAGE
    await store.append_events(
        "r", [{"type": "agent_text_delta", "at": 1.0, "data": {"text": "x"}}] * total
    )
    stream = feed.follow("r").__aiter__()
    first: Any = await stream.__anext__()
    assert isinstance(first, list) and len(first) == PAGE
    # The reader stops reading; live events keep coming for it: its inbox stays bounded.
    follower = next(iter(feed._followers["r"]))
    for seq in range(total + 1, total + 3 * INBOX):
        follower.push({"run_id": "r", "seq": seq, "type": "x", "at": 1.0, "data": {}})
        assert len(follower.events) <= INBOX
    await store.append_events(
        "r", [{"type": "agent_finished", "at": 1.0, "data": {"text": "done"}}]
    )
    seen = len(first)
    async for item in stream:
        if isinstance(item, RunEnd):
            assert item.status == "completed"
            break
        assert len(item) <= PAGE
        seen += len(item)
    assert seen == total + 1
    assert store.limits and all(limit == PAGE for limit in store.limits)
    await asyncio.sleep(0)
    await runtime.aclose()
