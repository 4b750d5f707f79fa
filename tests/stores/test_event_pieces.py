"""Long events: every RunStore gives them back whole, and the SQL stores keep them in pieces
that a reader can take one at a time (`EventPieces`), so passing one on never holds it whole."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from tests.stores.test_run_store import STORES, agent_run, ev

from tether.errors import LeaseLostError
from tether.stores import RunStore
from tether.stores.run_store import PIECE, EventPieces, StoredEvent

SQL = [name for name in STORES if name != "memory"]


@pytest.fixture(params=list(STORES))
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[RunStore]:
    s = STORES[request.param](tmp_path)
    yield s
    await s.aclose()


@pytest.fixture(params=SQL)
async def sql_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[RunStore]:
    s = STORES[request.param](tmp_path)
    yield s
    await s.aclose()


def text_of(length: int) -> str:
    """`length` characters of mixed width (ASCII, 2-, 3- and 4-byte UTF-8, a quote to escape)."""
    unit = 'aé€😀"'
    return (unit * (length // len(unit) + 1))[:length]


def stored_text(text: str) -> str:
    """The stored JSON text of `{"text": text}` (compact, non-ASCII as it is)."""
    return json.dumps({"text": text}, ensure_ascii=False, separators=(",", ":"))


async def test_long_events_come_back_whole_from_every_write(store: RunStore) -> None:
    long = text_of(3 * PIECE + 17)
    edge = "x" * (PIECE - len(stored_text("")))  # exactly PIECE characters stored: one row
    await store.start_run(agent_run("r1"))
    await store.append_events("r1", [ev("agent_text_delta", text="a"), ev("big", text=long)])
    await store.append_events("r1", [ev("edge", text=edge), ev("edge", text=edge + "y")])
    await store.finish_run("r1", "completed", events=[ev("agent_finished", text=long + "!")])
    events = await store.events("r1")
    assert [(e["seq"], e["type"], e["data"]) for e in events] == [
        (1, "agent_text_delta", {"text": "a"}),
        (2, "big", {"text": long}),
        (3, "edge", {"text": edge}),
        (4, "edge", {"text": edge + "y"}),
        (5, "agent_finished", {"text": long + "!"}),
    ]
    # Paged reads see the same, a long event inside or at the edge of a page.
    assert [e["data"] for e in await store.events("r1", after=1, limit=1)] == [{"text": long}]


async def test_many_runs_appended_at_once_keep_their_long_events_apart(store: RunStore) -> None:
    many = getattr(store, "append_events_many", None)
    if many is None:
        pytest.skip("this store has no append_events_many")
    for run_id in ("a", "b"):
        await store.start_run(agent_run(run_id))
    lasts = await many(
        [
            ("b", [ev("d", text="b1"), ev("big", text=text_of(PIECE * 2))], None),
            ("a", [ev("big", text=text_of(PIECE + 1) + "a"), ev("d", text="a2")], None),
        ]
    )
    assert lasts == [2, 2]
    assert [e["data"]["text"] for e in await store.events("a")] == [
        text_of(PIECE + 1) + "a",
        "a2",
    ]
    assert [e["data"]["text"] for e in await store.events("b")] == ["b1", text_of(PIECE * 2)]


async def test_sql_stores_read_a_long_event_a_piece_at_a_time(sql_store: RunStore) -> None:
    assert isinstance(sql_store, EventPieces)
    long = text_of(5 * PIECE + 3)
    await sql_store.start_run(agent_run("r1"))
    await sql_store.append_events("r1", [ev("d", text="short"), ev("big", text=long)])
    await sql_store.finish_run("r1", "completed", events=[ev("agent_finished", text=long)])
    stored = await sql_store.stored_events("r1")
    assert stored == [
        StoredEvent(1, "d", 1.0, stored_text("short")),
        StoredEvent(2, "big", 1.0, None),
        StoredEvent(3, "agent_finished", 1.0, None),
    ]
    assert await sql_store.stored_events("r1", after=1, limit=1) == stored[1:2]
    for seq in (2, 3):
        pieces: list[str] = []
        while page := await sql_store.event_pieces("r1", seq, start=len(pieces), limit=2):
            assert len(page) <= 2 and all(len(p) <= PIECE for p in page)
            pieces.extend(page)
        assert "".join(pieces) == stored_text(long)
        assert len(pieces) == -(-len(stored_text(long)) // PIECE)
    assert await sql_store.event_pieces("r1", 1) == []  # not stored in pieces
    assert await sql_store.event_pieces("nope", 2) == []


async def test_a_fenced_write_leaves_no_pieces_behind(sql_store: RunStore) -> None:
    assert isinstance(sql_store, EventPieces)
    await sql_store.start_run(agent_run("r1"), lease_ttl=30, lease="old")
    await sql_store.finish_run("r1", "running", lease_ttl=30, lease="new")
    with pytest.raises(LeaseLostError, match="r1"):
        await sql_store.append_events("r1", [ev("big", text=text_of(PIECE * 3))], lease="old")
    await sql_store.append_events("r1", [ev("big", text=text_of(PIECE * 2))], lease="new")
    assert await sql_store.stored_events("r1") == [StoredEvent(1, "big", 1.0, None)]
    pieces = await sql_store.event_pieces("r1", 1, limit=100)
    assert "".join(pieces) == stored_text(text_of(PIECE * 2))
