"""The MessageStore contract, run against every implementation.

Adding an implementation is one line in STORES: a name and a factory taking pytest's tmp_path.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from tests.helpers import assistant, text_of, user
from tests.postgres_server import postgres_url

from tether.errors import LeaseLostError, NotJSONSafeError, StoreCorruptError, StoreError
from tether.stores import (
    InMemoryMessageStore,
    MessageStore,
    ScopeLeases,
    ScopeVersions,
    SqliteMessageStore,
    StoredRecord,
)
from tether.stores.postgres import PostgresMessageStore
from tether.stores.sqlite import connect

STORES: dict[str, Callable[[Path], MessageStore]] = {
    "memory": lambda tmp: InMemoryMessageStore(),
    "sqlite": lambda tmp: SqliteMessageStore.open(tmp / "messages.db"),
    "postgres": lambda tmp: PostgresMessageStore(postgres_url()),
}


@pytest.fixture(params=list(STORES))
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[MessageStore]:
    s = STORES[request.param](tmp_path)
    yield s
    await s.aclose()


async def test_an_unknown_scope_is_empty(store: MessageStore) -> None:
    assert await store.load("nope") == []
    assert await store.length("nope") == 0
    assert await store.info("nope") is None
    assert await store.get_title("nope") is None


async def test_append_returns_the_new_length_and_load_returns_the_records_in_order(
    store: MessageStore,
) -> None:
    pin: StoredRecord = {
        "role": "system",
        "content": [{"type": "text", "text": "You are terse."}],
        "agent_id": "a",
    }
    assert await store.append("s", [pin, user("hi")]) == 2
    assert await store.append("s", [assistant("hello")]) == 3
    assert await store.load("s") == [pin, user("hi"), assistant("hello")]
    assert await store.load("s", start=2) == [assistant("hello")]
    assert await store.length("s") == 3


async def test_load_reads_a_range(store: MessageStore) -> None:
    await store.append("s", [user(str(i)) for i in range(10)])
    assert [text_of(r) for r in await store.load("s", start=3, end=6)] == ["3", "4", "5"]
    assert [text_of(r) for r in await store.load("s", end=2)] == ["0", "1"]
    assert await store.load("s", start=8, end=99) == [user("8"), user("9")]
    assert await store.load("s", start=5, end=5) == []
    assert await store.load("nope", start=0, end=3) == []


async def test_tail_reads_the_last_records_and_where_they_start(store: MessageStore) -> None:
    await store.append("s", [user(str(i)) for i in range(10)])
    await store.append("other", [user("x")])
    start, records = await store.tail("s", 3)
    assert start == 7 and [text_of(r) for r in records] == ["7", "8", "9"]
    assert await store.tail("s", 50) == (0, await store.load("s"))
    assert await store.tail("s", 0) == (0, [])
    assert await store.tail("nope", 5) == (0, [])
    assert [text_of(r) for r in await store.load("s", after=7)] == ["8", "9"]
    assert [text_of(r) for r in await store.load("s", after=2, end=5)] == ["3", "4"]


async def test_scopes_are_separate_lists(store: MessageStore) -> None:
    await store.append("a", [user("1")])
    await store.append("b", [user("2"), user("3")])
    assert await store.load("a") == [user("1")]
    assert await store.load("b") == [user("2"), user("3")]


async def test_load_returns_copies_the_caller_may_change(store: MessageStore) -> None:
    records = [user("hi")]
    await store.append("s", records)
    records[0]["content"][0]["text"] = "changed after append"  # type: ignore[typeddict-unknown-key]
    loaded = await store.load("s")
    loaded[0]["content"].clear()
    assert await store.load("s") == [user("hi")]


async def test_a_bad_record_is_refused_and_nothing_of_the_batch_is_written(
    store: MessageStore,
) -> None:
    await store.append("s", [user("kept")])
    with pytest.raises(NotJSONSafeError, match=r"records\[1\]"):
        bad: Any = {"role": "user", "content": [object()]}
        await store.append("s", [user("lost"), bad])
    with pytest.raises(NotJSONSafeError, match="lone surrogate"):
        await store.append("s", [user("lost"), user("half a pair \udc80")])
    with pytest.raises(StoreError, match=r"records\[0\]"):
        await store.append("s", ["not a record"])  # type: ignore[list-item]
    with pytest.raises(StoreError, match="scope"):
        await store.append("", [user("x")])
    assert await store.load("s") == [user("kept")]


async def test_replace_swaps_the_whole_list_and_keeps_the_title(store: MessageStore) -> None:
    await store.append("s", [user("1"), assistant("2")])
    await store.set_title("s", "Numbers")
    await store.replace("s", [user("only")])
    assert await store.load("s") == [user("only")]
    assert await store.length("s") == 1
    assert await store.get_title("s") == "Numbers"
    assert await store.append("s", [assistant("next")]) == 2


async def test_the_title_is_stored_with_the_scope(store: MessageStore) -> None:
    await store.append("s", [user("hi")])
    await store.set_title("s", "Greeting")
    info = await store.info("s")
    assert info is not None
    assert (info.scope, info.length, info.title) == ("s", 1, "Greeting")
    assert info.created_at <= info.updated_at


async def test_scopes_lists_most_recently_written_first(store: MessageStore) -> None:
    await store.append("old", [user("1")])
    await store.append("new", [user("2")])
    await store.append("newest", [user("3")])
    names = [s.scope for s in await store.scopes()]
    assert names == ["newest", "new", "old"]
    assert [s.scope for s in await store.scopes(limit=1, offset=1)] == ["new"]


async def test_delete_forgets_the_scope(store: MessageStore) -> None:
    await store.append("s", [user("hi")])
    await store.set_title("s", "t")
    await store.delete("s")
    await store.delete("s")
    assert await store.load("s") == []
    assert await store.info("s") is None
    assert await store.append("s", [user("again")]) == 1


async def test_concurrent_tasks_appending_to_one_scope_lose_nothing(
    store: MessageStore,
) -> None:
    async def writer(w: int) -> None:
        for i in range(25):
            await store.append("shared", [user(f"{w}:{i}"), assistant(f"{w}:{i}")])

    await asyncio.gather(*(writer(w) for w in range(8)))
    records = await store.load("shared")
    assert len(records) == 8 * 25 * 2
    # Each append is atomic: its two records stay adjacent, and each writer's order holds.
    pairs = [(records[i], records[i + 1]) for i in range(0, len(records), 2)]
    assert all(u["content"] == a["content"] for u, a in pairs)
    for w in range(8):
        mine = [text_of(u) for u, _ in pairs if text_of(u).startswith(f"{w}:")]
        assert mine == [f"{w}:{i}" for i in range(25)]


def _thread_writers(make: Callable[[], MessageStore], writers: int, each: int) -> None:
    errors: list[BaseException] = []

    def run(w: int) -> None:
        async def go() -> None:
            s = make()
            try:
                for i in range(each):
                    await s.append("shared", [user(f"{w}:{i}")])
            finally:
                await s.aclose()

        try:
            asyncio.run(go())
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


async def test_threads_with_their_own_connections_to_one_file_lose_nothing(
    tmp_path: Path,
) -> None:
    path = tmp_path / "shared.db"
    SqliteMessageStore.open(path)  # migrate once up front; the writers race on appends only
    await asyncio.to_thread(_thread_writers, lambda: SqliteMessageStore.open(path), 6, 30)
    s = SqliteMessageStore.open(path)
    records = await s.load("shared")
    await s.aclose()
    assert len(records) == 180
    texts = [text_of(r) for r in records]
    for w in range(6):
        assert [t for t in texts if t.startswith(f"{w}:")] == [f"{w}:{i}" for i in range(30)]


async def test_threads_sharing_one_store_and_connection_lose_nothing(tmp_path: Path) -> None:
    shared = SqliteMessageStore(connect(tmp_path / "one.db"))

    class Borrowed:
        """The shared store, handed to each thread without closing it."""

        def __getattr__(self, name: str) -> Any:
            return getattr(shared, name)

        async def aclose(self) -> None:
            return None

    borrowed: Any = Borrowed()
    await asyncio.to_thread(_thread_writers, lambda: borrowed, 6, 30)
    assert await shared.length("shared") == 180
    assert len(await shared.load("shared")) == 180


async def test_an_append_costs_the_same_at_record_10_and_record_10000(tmp_path: Path) -> None:
    """O(1) appends, measured in SQLite VM instructions (deterministic, unlike time)."""
    conn = connect(tmp_path / "big.db")
    s = SqliteMessageStore(conn)

    async def cost_of_one_append(scope: str) -> int:
        count = 0

        def tick() -> int:
            nonlocal count
            count += 1
            return 0

        conn.set_progress_handler(tick, 1)
        try:
            await s.append(scope, [user("one more")])
        finally:
            conn.set_progress_handler(None, 1)
        return count

    await s.append("small", [user(str(i)) for i in range(10)])
    await s.append("big", [user(str(i)) for i in range(10_000)])
    small, big = await cost_of_one_append("small"), await cost_of_one_append("big")
    assert big <= small * 1.2, (small, big)
    assert await s.length("big") == 10_001
    await s.aclose()


async def test_a_corrupt_record_is_reported_with_scope_and_index(tmp_path: Path) -> None:
    conn = connect(tmp_path / "c.db")
    s = SqliteMessageStore(conn)
    await s.append("s", [user("ok"), user("to be broken")])
    conn.execute("UPDATE tether_messages SET record = '{not json' WHERE scope = 's' AND seq = 1")
    with pytest.raises(StoreCorruptError, match=r"'s', record 1"):
        await s.load("s")
    await s.aclose()


@pytest.mark.parametrize(
    "damage",
    [
        '{"role": "user"}, {"role": "user"}',  # two objects in one record: one too many
        '{"role": "user", "x": 1',  # cut short
        '[{"role": "user"}]',  # JSON, but not an object
        '{"content": []}',  # an object without a role
    ],
)
async def test_every_kind_of_damaged_record_is_found_among_good_ones(
    tmp_path: Path, damage: str
) -> None:
    conn = connect(tmp_path / "c.db")
    s = SqliteMessageStore(conn)
    await s.append("s", [user(str(i)) for i in range(5)])
    conn.execute("UPDATE tether_messages SET record = ? WHERE scope = 's' AND seq = 3", (damage,))
    with pytest.raises(StoreCorruptError, match=r"'s', record 3"):
        await s.load("s")
    assert [text_of(r) for r in await s.load("s", end=3)] == ["0", "1", "2"]
    await s.aclose()


async def test_a_store_migrates_on_construction_and_reopens_with_the_data(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    s = SqliteMessageStore.open(path)
    await s.append("s", [user("persisted")])
    await s.set_title("s", "kept")
    await s.aclose()
    await s.aclose()
    again = SqliteMessageStore.open(path)
    assert await again.load("s") == [user("persisted")]
    assert await again.get_title("s") == "kept"
    await again.aclose()
    with pytest.raises(StoreError, match="closed"):
        await again.load("s")


async def test_a_store_on_a_callers_connection_leaves_it_open(tmp_path: Path) -> None:
    conn = connect(tmp_path / "caller.db")
    s = SqliteMessageStore(conn)
    await s.aclose()
    assert conn.execute("SELECT count(*) FROM tether_messages").fetchone() == (0,)
    conn.close()
    with pytest.raises(sqlite3.ProgrammingError):
        conn.execute("SELECT 1")


async def test_scopes_filter_by_title(store: MessageStore) -> None:
    for scope, title in [
        ("a", "Trip to Oslo"),
        ("b", "oslo budget"),
        ("c", "100% _done_"),
        ("d", None),
    ]:
        await store.append(scope, [user(scope)])
        if title is not None:
            await store.set_title(scope, title)
    assert {s.scope for s in await store.scopes(title="OSLO")} == {"a", "b"}
    assert [s.scope for s in await store.scopes(title="100%")] == ["c"]
    assert [s.scope for s in await store.scopes(title="_done_")] == ["c"]
    assert await store.scopes(title="%") == [s for s in await store.scopes() if s.scope == "c"]
    assert await store.scopes(title="nothing") == []


# -- scope leases --------------------------------------------------------------------------------


async def test_a_scope_lease_is_held_by_one_owner_until_released_or_expired(
    store: MessageStore,
) -> None:
    assert isinstance(store, ScopeLeases)
    assert await store.acquire_scope("s", "a", ttl=30) is None
    assert await store.acquire_scope("s", "a", ttl=30) is None  # the holder again: still held
    assert await store.acquire_scope("s", "b", ttl=30) == "a"
    assert await store.acquire_scope("other", "b", ttl=30) is None  # scopes are separate
    assert await store.renew_scope("s", "a", ttl=30) is True
    assert await store.renew_scope("s", "b", ttl=30) is False
    await store.release_scope("s", "b")  # not b's: nothing happens
    assert await store.acquire_scope("s", "b", ttl=30) == "a"
    await store.release_scope("s", "a")
    assert await store.acquire_scope("s", "b", ttl=30) is None
    # An owner that stops renewing loses the scope once its lease expired.
    assert await store.acquire_scope("short", "dead", ttl=0.2) is None
    assert await store.acquire_scope("short", "c", ttl=30) == "dead"
    await asyncio.sleep(0.3)
    assert await store.acquire_scope("short", "c", ttl=30) is None
    assert await store.renew_scope("short", "dead", ttl=30) is False
    # A lease is not a record: the scope has no records and no info.
    assert await store.length("s") == 0 and await store.info("s") is None


async def test_of_many_owners_taking_one_scope_at_once_exactly_one_gets_it(
    store: MessageStore,
) -> None:
    assert isinstance(store, ScopeLeases)
    results = await asyncio.gather(*(store.acquire_scope("s", f"o{n}", ttl=30) for n in range(8)))
    winners = [f"o{n}" for n, holder in enumerate(results) if holder is None]
    assert len(winners) == 1
    assert {holder for holder in results if holder is not None} == set(winners)


async def test_an_append_under_a_lease_is_refused_once_another_owner_took_the_scope(
    store: MessageStore,
) -> None:
    assert isinstance(store, ScopeLeases)
    assert await store.acquire_scope("s", "a", ttl=0.2) is None
    assert await store.append("s", [user("a's first")], lease="a") == 1
    await asyncio.sleep(0.3)  # a stalls past its lease; b takes the scope over
    assert await store.acquire_scope("s", "b", ttl=30) is None
    with pytest.raises(LeaseLostError, match="memory scope 's'") as lost:
        await store.append("s", [user("a's late")], lease="a")
    assert (lost.value.lease, lost.value.key, lost.value.holder) == ("memory scope", "s", "b")
    assert await store.append("s", [user("b's")], lease="b") == 2
    # Released: nobody's lease, so no fenced write goes in (an unfenced one still does).
    await store.release_scope("s", "b")
    with pytest.raises(LeaseLostError):
        await store.append("s", [user("b's late")], lease="b")
    with pytest.raises(LeaseLostError):
        await store.append("never", [user("x")], lease="a")
    assert [text_of(r) for r in await store.load("s")] == ["a's first", "b's"]
    assert await store.info("never") is None
    assert await store.append("s", [user("unfenced")]) == 3


# -- scope versions ------------------------------------------------------------------------------


async def test_a_scope_version_goes_one_up_with_each_write_of_its_records(
    store: MessageStore,
) -> None:
    assert isinstance(store, ScopeVersions)
    assert await store.version("s") == 0  # never written
    assert await store.load_versioned("s") == (0, [])
    await store.append("s", [user("a")])
    first = await store.version("s")
    assert first != 0
    assert await store.append("s", [user("b"), user("c")]) == 3
    assert await store.version("s") == first + 1
    assert await store.load_versioned("s") == (first + 1, await store.load("s"))
    await store.set_title("s", "a title")  # not a write of the records
    assert await store.version("s") == first + 1
    await store.replace("s", [user("d")])
    assert await store.load_versioned("s") == (first + 2, [user("d")])
    # Under a lease: one up as well; refused, nothing changes.
    assert isinstance(store, ScopeLeases)
    assert await store.acquire_scope("s", "a", ttl=30) is None
    await store.append("s", [user("e")], lease="a")
    with pytest.raises(LeaseLostError):
        await store.append("s", [user("f")], lease="b")
    assert await store.version("s") == first + 3
    # Deleted and written again: a new start, not the versions it had.
    await store.delete("s")
    assert await store.version("s") == 0
    await store.append("s", [user("g")])
    assert await store.version("s") not in range(first, first + 4)
    # A scope with a title and no records yet.
    await store.set_title("t", "titled")
    version, records = await store.load_versioned("t")
    assert records == [] and version == await store.version("t")


async def test_another_connection_writing_a_scope_moves_its_version(tmp_path: Path) -> None:
    # Two stores on one file (another process's connection, in effect), and on one database.
    url = postgres_url()
    pairs: list[tuple[MessageStore, MessageStore]] = [
        (SqliteMessageStore.open(tmp_path / "m.db"), SqliteMessageStore.open(tmp_path / "m.db")),
        (PostgresMessageStore(url), PostgresMessageStore(url)),
    ]
    for mine, other in pairs:
        assert isinstance(mine, ScopeVersions)
        await mine.append("s", [user("a")])
        known = await mine.version("s")
        await other.append("s", [user("b")])
        assert await mine.version("s") == known + 1
        assert await mine.load_versioned("s") == (known + 1, [user("a"), user("b")])
        await other.replace("s", [user("c"), user("d")])
        assert await mine.version("s") == known + 2
        await mine.aclose()
        await other.aclose()
