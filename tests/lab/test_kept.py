"""Kept transcripts (`tether.lab._kept`): a turn goes on from the transcript the last turn on its
scope left, without loading it, unless anybody else wrote the scope since."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, cast

import pytest
from tests.helpers import assistant, texts, user
from tests.postgres_server import postgres_url

from tether.lab import Runtime, _kept
from tether.lab._episode import split_pin
from tether.session import Message
from tether.stores import (
    InMemoryMessageStore,
    MessageStore,
    PostgresMessageStore,
    SqliteMessageStore,
    SystemRecord,
)
from tether.testing import script_client


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def setup(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[Runtime, MessageStore]]:
    """A runtime, and another writer of its scopes (for SQLite and PostgreSQL: another
    connection, as another process would have)."""
    if request.param == "memory":
        lab = Runtime(store="memory", version=False)
        yield lab, lab.message_store
        await lab.aclose()
        return
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'lab.db'}"
        other: MessageStore = SqliteMessageStore.open(tmp_path / "lab.db")
    else:
        url = postgres_url()
        other = PostgresMessageStore(url)
    lab = Runtime(store=url, version=False)
    yield lab, other
    await lab.aclose()
    await other.aclose()


def _counting(store: MessageStore, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The scopes `store` loads whole, as they are loaded."""
    loads: list[str] = []
    load = store.load_versioned  # type: ignore[attr-defined]

    async def counted(scope: str) -> Any:
        loads.append(scope)
        return await load(scope)

    monkeypatch.setattr(store, "load_versioned", counted)
    return loads


async def test_a_turn_goes_on_from_the_kept_transcript_until_another_writer_writes_the_scope(
    setup: tuple[Runtime, MessageStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    lab, other = setup
    client = script_client([{"text": f"reply {i}"} for i in range(1, 6)])
    agent = lab.create_agent(id="a", system_prompt="Be brief.", model=client)
    loads = _counting(lab.message_store, monkeypatch)
    for i in (1, 2, 3):
        await agent.run(memory_scope="chat", user=f"turn {i}").result
    # The first turn finds a new scope, the second loads what it holds (a new scope starts at
    # a version nobody knows beforehand); the third goes on from what the second left.
    assert loads == ["chat", "chat"]
    assert len(client.calls[2]["messages"]) == 5

    # Another writer appends: the next turn loads the scope, and is sent that record too.
    await other.append("chat", [user("from elsewhere")])
    await agent.run(memory_scope="chat", user="turn 4").result
    assert loads == ["chat"] * 3
    sent = texts(client.calls[3]["messages"])
    assert sent[-2:] == [("user", "from elsewhere"), ("user", "turn 4")]

    # A replace of the same length changes no length, only the version: loaded again.
    stored = await lab.message_store.load("chat")
    changed = [*stored[:-1], assistant("edited")]
    await other.replace("chat", changed)
    await agent.run(memory_scope="chat", user="turn 5").result
    assert loads == ["chat"] * 4
    assert texts(client.calls[4]["messages"])[-2:] == [("assistant", "edited"), ("user", "turn 5")]
    # What each turn was sent is what the store holds.
    assert client.calls[4]["messages"] == (await lab.message_store.load("chat"))[1:-1]


async def test_a_kept_transcript_is_what_a_load_gives_and_the_callers_own_list() -> None:
    store = InMemoryMessageStore()
    system: SystemRecord = {"role": "system", "content": [{"type": "text", "text": "pinned"}]}
    await store.append("s", [system, user("a")])
    pin, messages, length = await _kept.load(store, "s", split_pin)
    assert (pin, messages, length) == (system, [user("a")], 2)
    # Appended after what was loaded: kept, as copies (the appender's records may change).
    reply: dict[str, Any] = {"role": "assistant", "content": [{"type": "text", "text": "b"}]}
    length = await store.append("s", [cast(Message, reply)])
    _kept.appended(store, "s", [cast(Message, reply)], length)
    reply["content"][0]["text"] = "changed later"
    pin, messages, length = await _kept.load(store, "s", split_pin)
    assert (pin, messages, length) == (system, [user("a"), assistant("b")], 3)
    messages.append(user("the caller's"))  # its own list: the kept one does not grow
    assert (await _kept.load(store, "s", split_pin))[1] == [user("a"), assistant("b")]


@pytest.mark.parametrize(
    "record",
    [
        {"role": "user", "content": [{"type": "image", "media_type": "image/png", "data": "AA=="}]},
        {"role": "summary", "content": [{"type": "text", "text": "so far"}], "covers": [0, 0]},
        {"role": "assistant", "content": [{"type": "provider", "wire": "w", "block": {}}]},
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_call",
                    "id": "c",
                    "name": "show",
                    "input": {"images": [{"type": "image", "media_type": "image/png", "data": ""}]},
                }
            ],
        },
    ],
    ids=["media", "summary", "provider-block", "media-in-a-tool-call"],
)
async def test_an_append_a_load_might_not_give_back_equal_drops_the_kept_copy(
    record: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Media may be stored as a blob reference; a summary is no message of the transcript.
    store = InMemoryMessageStore()
    await store.append("s", [user("a")])
    await _kept.load(store, "s", split_pin)
    length = await store.append("s", [record])  # type: ignore[list-item]
    _kept.appended(store, "s", [record], length)  # type: ignore[list-item]
    loads = _counting(store, monkeypatch)
    await _kept.load(store, "s", lambda scope, stored: (None, stored))  # type: ignore[arg-type,return-value]
    assert loads == ["s"]


async def test_an_append_not_right_after_the_kept_transcript_drops_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = InMemoryMessageStore()
    await store.append("s", [user("a")])
    await _kept.load(store, "s", split_pin)
    await store.append("s", [user("another writer's")])
    length = await store.append("s", [user("b")])
    _kept.appended(store, "s", [user("b")], length)  # the length says something came between
    loads = _counting(store, monkeypatch)
    assert (await _kept.load(store, "s", split_pin))[1] == [
        user("a"),
        user("another writer's"),
        user("b"),
    ]
    assert loads == ["s"]


async def test_the_least_recently_used_transcripts_go_once_a_store_keeps_too_many_records(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_kept, "KEEP_RECORDS", 4)
    store = InMemoryMessageStore()
    for scope, n in (("a", 2), ("b", 2), ("long", 5)):
        await store.append(scope, [user(str(i)) for i in range(n)])
    await _kept.load(store, "a", split_pin)
    await _kept.load(store, "b", split_pin)
    await _kept.load(store, "a", split_pin)  # used again: "b" is now the least recent
    await _kept.load(store, "long", split_pin)  # longer than all: not kept, nothing dropped
    loads = _counting(store, monkeypatch)
    await _kept.load(store, "a", split_pin)
    await _kept.load(store, "b", split_pin)
    assert loads == []
    await store.append("c", [user("c")])
    await _kept.load(store, "c", split_pin)  # 5 records: "a", used least recently, goes
    await _kept.load(store, "long", split_pin)
    await _kept.load(store, "b", split_pin)
    await _kept.load(store, "a", split_pin)
    assert loads == ["c", "long", "a"]
