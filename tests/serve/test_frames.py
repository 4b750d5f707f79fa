"""Run events as SSE in bounded pieces (`tether.serve._frames`): the same JSON an event encodes
to, written without ever holding a big event's encoding whole."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.serve.conftest import parse_sse, sse_lines

from tether.serve._frames import WRITE, event_messages, json_pieces
from tether.stores import InMemoryRunStore, RunInfo, RunStore, SqliteRunStore
from tether.stores.run_store import PIECE, EventPieces, RunEvent

BIG = 4_000_000
"""Characters of the long answer (a few MB: big enough that holding it whole would show)."""


def compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=40) | st.dictionaries(st.text(), inner, max_size=40),
    max_leaves=60,
)
"""Nested JSON values; kept small enough that 100 of them take seconds, not a minute, on a
loaded two-core machine (this test timed out at 60 s under load with 200 leaves)."""


@settings(max_examples=100, deadline=None)
@given(json_values)
def test_the_pieces_of_any_value_are_its_json(value: Any) -> None:
    assert "".join(json_pieces(value)) == compact(value)


def test_long_strings_and_long_lists_come_in_bounded_pieces() -> None:
    text = ('é"\n\u2028😀' * (3 * PIECE))[: 3 * PIECE + 5]
    value = {"text": text, "items": [{"n": i, "s": "x" * 10} for i in range(5000)], "e": []}
    pieces = list(json_pieces(value))
    assert "".join(pieces) == compact(value)
    # A piece of a long string is at most PIECE characters, each escaped to at most 6.
    assert max(len(p) for p in pieces) <= 6 * PIECE
    assert len(pieces) > 5000


async def messages_of(store: object, events: list[Any]) -> list[bytes]:
    return [m async for m in event_messages(store, "r1", events)]


def parsed(writes: list[bytes]) -> list[tuple[str, Any, str | None]]:
    text = b"".join(writes).decode("utf-8")
    return [(kind, json.loads(data), ident) for kind, data, ident in parse_sse(sse_lines([text]))]


def live_event(seq: int, kind: str, data: dict[str, Any]) -> RunEvent:
    return {"run_id": "r1", "seq": seq, "type": kind, "at": 1.5, "data": data}


async def test_small_events_go_out_in_one_write_with_their_id_type_and_json() -> None:
    events = [live_event(i, "agent_text_delta", {"text": f"t{i}\r\n"}) for i in range(1, 4)]
    writes = await messages_of(None, events)
    assert len(writes) == 1
    assert parsed(writes) == [("agent_text_delta", e, str(e["seq"])) for e in events]


async def test_a_lone_surrogate_goes_out_as_its_json_escape() -> None:
    event = live_event(1, "agent_tool_result", {"output": "a\ud800b" + "c" * PIECE * 2})
    writes = await messages_of(None, [event])
    assert b"\\ud800" in b"".join(writes)
    assert parsed(writes) == [("agent_tool_result", event, "1")]


async def test_a_big_live_event_is_written_in_bounded_writes_never_encoded_whole() -> None:
    event = live_event(7, "agent_finished", {"text": "é" * BIG, "turns": 1})
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        sizes = [len(m) async for m in event_messages(None, "r1", [event])]
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert sum(sizes) > 2 * BIG  # "é" is 2 bytes
    assert max(sizes) <= WRITE + 6 * PIECE * 4  # a write, plus the last piece that filled it
    assert peak < 2_000_000  # the encoding whole would be 8 MB
    writes = await messages_of(None, [event])
    assert parsed(writes) == [("agent_finished", event, "7")]


@pytest.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    s: RunStore = (
        InMemoryRunStore() if request.param == "memory" else SqliteRunStore.open(tmp_path / "r.db")
    )
    await s.start_run(RunInfo(run_id="r1", kind="agent", name="a", started_at=1.0))
    yield s
    await s.aclose()


async def test_stored_events_go_out_as_the_store_gives_them_a_long_one_in_pieces(
    store: RunStore,
) -> None:
    answer = "ü" * BIG
    await store.append_events(
        "r1",
        [
            {"type": "agent_text_delta", "at": 1.5, "data": {"text": "hi"}},
            {"type": "agent_finished", "at": 2.5, "data": {"text": answer, "turns": 1}},
        ],
    )
    page = (
        await store.stored_events("r1")
        if isinstance(store, EventPieces)
        else await store.events("r1")
    )
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        sizes = [len(m) async for m in event_messages(store, "r1", page)]
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert sum(sizes) > 2 * BIG
    assert peak < 2_000_000  # the event whole is 8 MB of UTF-8
    writes = await messages_of(store, page)
    assert parsed(writes) == [
        ("agent_text_delta", await_one(await store.events("r1", limit=1)), "1"),
        ("agent_finished", await_one(await store.events("r1", after=1)), "2"),
    ]


def await_one(events: list[RunEvent]) -> RunEvent:
    (event,) = events
    return event
