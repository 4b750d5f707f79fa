"""`TurnEnds` on the in-memory stores: a turn's last records, its scope's lease given back and
its run's end in one call under both stores' locks — or nothing written, when that cannot be
one write."""

from __future__ import annotations

from typing import Any

import pytest

from tether.errors import LeaseLostError, StoreError
from tether.stores import RunInfo, SqliteMessageStore, StoredRecord
from tether.stores.memory import InMemoryMessageStore, InMemoryRunStore
from tether.stores.run_store import ScopeAppend, TurnEnds

ANSWER: StoredRecord = {"role": "assistant", "content": [{"type": "text", "text": "the answer"}]}
QUESTION: StoredRecord = {"role": "user", "content": [{"type": "text", "text": "the question"}]}
EVENT: Any = {"type": "agent_finished", "at": 1.0, "data": {"text": "the answer"}}


@pytest.fixture
async def stores() -> tuple[InMemoryMessageStore, InMemoryRunStore]:
    messages, runs = InMemoryMessageStore(), InMemoryRunStore()
    await messages.append("s", [QUESTION])
    await runs.start_run(RunInfo("r1", "agent", "a", input_text="the question"))
    assert await messages.acquire_scope("s", "me", ttl=30) is None
    return messages, runs


def _end(messages: Any, start: int, lease: str | None = "me") -> ScopeAppend:
    return ScopeAppend(messages, "s", [ANSWER], start, lease)


async def _still_running(runs: InMemoryRunStore) -> None:
    info = await runs.get_run("r1")
    assert info is not None and info.status == "running"
    assert await runs.events("r1") == []


async def test_the_records_the_lease_and_the_runs_end_are_one_call(
    stores: tuple[InMemoryMessageStore, InMemoryRunStore],
) -> None:
    messages, runs = stores
    assert isinstance(runs, TurnEnds)
    version = await messages.version("s")
    seq = await runs.finish_turn(
        "r1", "completed", _end(messages, 1), output_text="the answer", events=[EVENT]
    )
    assert seq == 1
    assert await messages.load("s") == [QUESTION, ANSWER]
    assert await messages.version("s") == version + 1  # one append, as `ScopeVersions` counts
    # The lease is given back: another owner takes the scope at once.
    assert await messages.acquire_scope("s", "other", ttl=30) is None
    info = await runs.get_run("r1")
    assert info is not None and (info.status, info.output_text) == ("completed", "the answer")
    assert info.ended_at is not None
    assert [e["type"] for e in await runs.events("r1")] == ["agent_finished"]


async def test_it_stores_what_an_append_then_a_finish_store(
    stores: tuple[InMemoryMessageStore, InMemoryRunStore],
) -> None:
    messages, runs = stores
    other_messages, other_runs = InMemoryMessageStore(), InMemoryRunStore()
    await other_messages.append("s", [QUESTION])
    await other_runs.start_run(RunInfo("r1", "agent", "a", input_text="the question"))
    end: Any = {"output_text": "the answer", "usage": {"input_tokens": 3}, "cost_usd": 0.5}
    await runs.finish_turn("r1", "completed", _end(messages, 1), events=[EVENT], **end)
    await other_messages.append("s", [ANSWER])
    await other_runs.finish_run("r1", "completed", events=[EVENT], **end)
    assert await messages.load("s") == await other_messages.load("s")
    one, two = await runs.get_run("r1"), await other_runs.get_run("r1")
    assert one is not None and two is not None
    assert {**vars_of(one), "ended_at": 0} == {**vars_of(two), "ended_at": 0}
    assert await runs.events("r1") == await other_runs.events("r1")


def vars_of(info: RunInfo) -> dict[str, Any]:
    return {name: getattr(info, name) for name in info.__slots__}


async def test_a_scope_that_grew_meanwhile_writes_nothing(
    stores: tuple[InMemoryMessageStore, InMemoryRunStore],
) -> None:
    messages, runs = stores
    await messages.append("s", [QUESTION])  # unfenced, meanwhile
    assert await runs.finish_turn("r1", "completed", _end(messages, 1), events=[EVENT]) is None
    assert await messages.length("s") == 2
    assert await messages.acquire_scope("s", "other", ttl=30) == "me"  # still held
    await _still_running(runs)


async def test_a_lost_lease_refuses_the_whole_write(
    stores: tuple[InMemoryMessageStore, InMemoryRunStore],
) -> None:
    messages, runs = stores
    with pytest.raises(LeaseLostError, match="memory scope 's'"):
        await runs.finish_turn("r1", "completed", _end(messages, 1, lease="stalled"))
    assert await messages.length("s") == 1
    await _still_running(runs)


async def test_a_run_it_cannot_finish_writes_no_records(
    stores: tuple[InMemoryMessageStore, InMemoryRunStore],
) -> None:
    messages, runs = stores
    with pytest.raises(StoreError, match="never started"):
        await runs.finish_turn("r2", "completed", _end(messages, 1))
    assert await messages.length("s") == 1
    assert await messages.acquire_scope("s", "other", ttl=30) == "me"  # still held


async def test_a_message_store_that_is_not_in_memory_is_two_writes(
    stores: tuple[InMemoryMessageStore, InMemoryRunStore],
) -> None:
    _, runs = stores
    other = SqliteMessageStore.open(":memory:")
    try:
        assert await runs.finish_turn("r1", "completed", _end(other, 0, lease=None)) is None
        assert await other.length("s") == 0
    finally:
        await other.aclose()
    await _still_running(runs)


class OwnAppend(InMemoryMessageStore):
    async def append(self, scope: str, records: Any, *, lease: str | None = None) -> int:
        return await super().append(scope, records, lease=lease)


async def test_a_store_whose_class_changes_the_append_is_two_writes() -> None:
    messages, runs = OwnAppend(), InMemoryRunStore()
    await runs.start_run(RunInfo("r1", "agent", "a"))
    assert await runs.finish_turn("r1", "completed", _end(messages, 0, lease=None)) is None
    assert await messages.length("s") == 0
    await _still_running(runs)


async def test_a_finish_run_replaced_on_the_instance_is_two_writes(
    stores: tuple[InMemoryMessageStore, InMemoryRunStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    messages, runs = stores
    monkeypatch.setattr(runs, "finish_run", runs.finish_run)
    assert await runs.finish_turn("r1", "completed", _end(messages, 1)) is None
    assert await messages.length("s") == 1
    await _still_running(runs)
