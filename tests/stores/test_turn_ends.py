"""`TurnEnds`: a turn's last records, its scope's lease given back and its run's end in one
SQLite transaction — or nothing written, when that cannot be one write."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tether.errors import LeaseLostError
from tether.stores import RunInfo, RunQuery, SqliteMessageStore, SqliteRunStore, StoredRecord
from tether.stores.run_store import ScopeAppend, TurnEnds
from tether.stores.sqlite import connect

ANSWER: StoredRecord = {"role": "assistant", "content": [{"type": "text", "text": "the answer"}]}
QUESTION: StoredRecord = {"role": "user", "content": [{"type": "text", "text": "the question"}]}


@pytest.fixture
async def stores(tmp_path: Path) -> AsyncIterator[tuple[SqliteMessageStore, SqliteRunStore]]:
    conn = connect(tmp_path / "t.db")
    messages, runs = SqliteMessageStore(conn), SqliteRunStore(conn)
    await messages.append("s", [QUESTION])
    await runs.start_run(RunInfo("r1", "agent", "a", input_text="the question"))
    assert await messages.acquire_scope("s", "me", ttl=30) is None
    yield messages, runs
    await messages.aclose()
    await runs.aclose()
    conn.close()


def _end(messages: SqliteMessageStore, start: int, lease: str | None = "me") -> ScopeAppend:
    return ScopeAppend(messages, "s", [ANSWER], start, lease)


async def test_the_records_the_lease_and_the_runs_end_are_one_transaction(
    stores: tuple[SqliteMessageStore, SqliteRunStore],
) -> None:
    messages, runs = stores
    assert isinstance(runs, TurnEnds)
    begun: list[str] = []
    messages._conn.set_trace_callback(lambda s: begun.append(s) if s.startswith("BEGIN") else None)
    event: Any = {"type": "agent_finished", "at": 1.0, "data": {"text": "the answer"}}
    seq = await runs.finish_turn(
        "r1", "completed", _end(messages, 1), output_text="the answer", events=[event]
    )
    messages._conn.set_trace_callback(None)
    assert seq == 1 and len(begun) == 1
    assert await messages.load("s") == [QUESTION, ANSWER]
    # The lease is given back: another owner takes the scope at once.
    assert await messages.acquire_scope("s", "other", ttl=30) is None
    info = await runs.get_run("r1")
    assert info is not None and (info.status, info.output_text) == ("completed", "the answer")
    assert [e["type"] for e in await runs.events("r1")] == ["agent_finished"]
    # Found by its input and its output.
    assert [r.run_id for r in (await runs.query_runs(RunQuery(q="question answer"))).runs] == ["r1"]


async def test_a_scope_that_grew_meanwhile_writes_nothing(
    stores: tuple[SqliteMessageStore, SqliteRunStore],
) -> None:
    messages, runs = stores
    await messages.append("s", [QUESTION])  # unfenced, meanwhile
    event: Any = {"type": "agent_finished", "at": 1.0, "data": {}}
    assert await runs.finish_turn("r1", "completed", _end(messages, 1), events=[event]) is None
    assert await messages.length("s") == 2
    assert await messages.acquire_scope("s", "other", ttl=30) == "me"  # still held
    info = await runs.get_run("r1")
    assert info is not None and info.status == "running"
    assert await runs.events("r1") == []


async def test_a_lost_lease_refuses_the_whole_write(
    stores: tuple[SqliteMessageStore, SqliteRunStore],
) -> None:
    messages, runs = stores
    with pytest.raises(LeaseLostError, match="memory scope 's'"):
        await runs.finish_turn("r1", "completed", _end(messages, 1, lease="stalled"))
    assert await messages.length("s") == 1
    info = await runs.get_run("r1")
    assert info is not None and info.status == "running"


async def test_a_message_store_of_another_database_is_two_writes(
    stores: tuple[SqliteMessageStore, SqliteRunStore], tmp_path: Path
) -> None:
    _, runs = stores
    other = SqliteMessageStore.open(tmp_path / "other.db")
    try:
        assert await runs.finish_turn("r1", "completed", _end(other, 0, lease=None)) is None
        assert await other.length("s") == 0
    finally:
        await other.aclose()
    info = await runs.get_run("r1")
    assert info is not None and info.status == "running"
