"""Media kept once: the blob contract of the message and run stores, on every backend.

Each backend is a `Backend`: a message store and a run store sharing one blob table (or dict),
and a way to count and damage what that table holds, read from the database itself.
"""

from __future__ import annotations

import base64
import hashlib
import sqlite3
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import pytest
from tests.postgres_server import postgres_url

from tether._known_media import KNOWN
from tether.blobs import BlobResolver, BlobStore
from tether.errors import BlobCorruptError, BlobNotFoundError, ConfigError, StoreError
from tether.stores import (
    InMemoryBlobStore,
    InMemoryMessageStore,
    InMemoryRunStore,
    RunInfo,
    SqliteMessageStore,
    SqliteRunStore,
    StoredRecord,
)
from tether.stores.sqlite import connect

IMAGE = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 400  # ~100 KB, over the 64 KB default
SHA = hashlib.sha256(IMAGE).hexdigest()
B64 = base64.b64encode(IMAGE).decode()


@dataclass
class Backend:
    messages: Any
    runs: Any
    count: Callable[[], int]
    """How many blob rows the backend holds."""
    damage: Callable[[str], None]
    """Overwrite the stored bytes of a blob."""
    statements: list[str] = field(default_factory=list)
    """SQLite only: each statement the connection ran, when traced."""

    @property
    def blobs(self) -> BlobStore:
        blobs: BlobStore = self.messages.blobs
        return blobs

    async def aclose(self) -> None:
        await self.messages.aclose()
        await self.runs.aclose()


def memory(tmp: Path, threshold: int) -> Backend:
    blobs = InMemoryBlobStore()
    messages = InMemoryMessageStore(blobs=blobs, blob_threshold=threshold)
    runs = InMemoryRunStore(blobs=blobs, blob_threshold=threshold)

    def damage(sha: str) -> None:
        blobs._blobs[sha] = (b"not the image", "image/png")

    return Backend(messages, runs, lambda: len(blobs), damage)


def sqlite(tmp: Path, threshold: int) -> Backend:
    conn = connect(tmp / "blobs.db")
    messages = SqliteMessageStore(conn, owns=True, blob_threshold=threshold)
    runs = SqliteRunStore(conn, owns=True, blob_threshold=threshold)
    backend = Backend(
        messages,
        runs,
        lambda: int(conn.execute("SELECT count(*) FROM tether_blobs").fetchone()[0]),
        lambda sha: _sqlite_damage(conn, sha),
    )
    conn.set_trace_callback(backend.statements.append)
    return backend


def _sqlite_damage(conn: sqlite3.Connection, sha: str) -> None:
    conn.execute("UPDATE tether_blobs SET data = ? WHERE sha256 = ?", (b"not the image", sha))


def postgres(tmp: Path, threshold: int) -> Backend:
    import psycopg

    from tether.stores.postgres import PostgresMessageStore, PostgresRunStore, connection_pool

    url = postgres_url()
    pool = connection_pool(url)
    messages = PostgresMessageStore(pool, owns=True, blob_threshold=threshold)
    runs = PostgresRunStore(pool, owns=True, blob_threshold=threshold)

    def count() -> int:
        with psycopg.connect(url, autocommit=True) as pg:
            row = pg.execute("SELECT count(*) FROM tether_blobs").fetchone()
            assert row is not None
            return int(row[0])

    def damage(sha: str) -> None:
        with psycopg.connect(url, autocommit=True) as pg:
            pg.execute("UPDATE tether_blobs SET data = %s WHERE sha256 = %s", (b"bad", sha))

    return Backend(messages, runs, count, damage)


BACKENDS = {"memory": memory, "sqlite": sqlite, "postgres": postgres}


@pytest.fixture(params=list(BACKENDS))
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    b = BACKENDS[request.param](tmp_path, 64 * 1024)
    yield b
    await b.aclose()


def photo_message(text: str = "what is this?", data: str = B64) -> StoredRecord:
    record: Any = {
        "role": "user",
        "content": [
            {"type": "text", "text": text},
            {"type": "image", "media_type": "image/png", "data": data, "name": "photo.png"},
        ],
    }
    return cast(StoredRecord, record)


REFERENCE = {
    "type": "image",
    "media_type": "image/png",
    "blob": SHA,
    "size": len(IMAGE),
    "name": "photo.png",
}


def run(run_id: str) -> RunInfo:
    return RunInfo(run_id=run_id, kind="agent", name="a", status="running", started_at=1.0)


async def test_the_same_image_in_ten_conversations_is_stored_once(backend: Backend) -> None:
    for i in range(10):
        await backend.messages.append(f"scope-{i}", [photo_message(f"question {i}")])
    await backend.runs.start_run(run("r"))
    await backend.runs.append_events("r", [{"type": "x", "data": {"messages": [photo_message()]}}])
    assert backend.count() == 1
    for i in range(10):
        (record,) = await backend.messages.load(f"scope-{i}")
        assert record["content"][1] == REFERENCE
    (event,) = await backend.runs.events("r")
    assert event["data"]["messages"][0]["content"][1] == REFERENCE
    info = await backend.blobs.info(SHA)
    assert info is not None and (info.size, info.media_type) == (len(IMAGE), "image/png")


async def test_records_hold_the_reference_not_the_bytes(backend: Backend) -> None:
    await backend.messages.append("s", [photo_message()])
    await backend.messages.replace("t", [photo_message()])
    await backend.runs.start_run(run("r"))
    await backend.runs.finish_run(
        "r", "completed", events=[{"type": "end", "data": {"out": [photo_message()["content"][1]]}}]
    )
    for scope in ("s", "t"):
        (record,) = await backend.messages.load(scope)
        assert "data" not in record["content"][1]
        assert B64[:1000] not in repr(record)
    (event,) = await backend.runs.events("r")
    assert event["data"]["out"] == [REFERENCE]
    assert backend.count() == 1


async def test_media_at_or_under_the_threshold_stays_inline(backend: Backend) -> None:
    small = base64.b64encode(b"GIF89a" + b"\0" * 100).decode()
    await backend.messages.append("s", [photo_message(data=small)])
    assert await backend.messages.load("s") == [photo_message(data=small)]
    assert backend.count() == 0


async def test_loading_a_scope_reads_no_blob(backend: Backend) -> None:
    await backend.messages.append("s", [photo_message(), photo_message("again")])
    backend.statements.clear()
    records = await backend.messages.load("s")
    assert len(records) == 2
    assert backend.blobs.reads == 0  # type: ignore[attr-defined]
    assert not [s for s in backend.statements if "tether_blobs" in s]


async def test_a_request_reads_each_blob_once_through_the_resolver(backend: Backend) -> None:
    await backend.messages.append("s", [photo_message(), photo_message("again")])
    records = await backend.messages.load("s")
    KNOWN.clear()  # a later process: it holds none of the texts written here
    resolver = BlobResolver(backend.blobs)
    for _ in range(3):  # three turns over the same transcript
        resolved = await resolver.resolve(records)
        assert resolved == [photo_message(), photo_message("again")]
    assert resolver.reads == 1
    assert backend.blobs.reads == 1  # type: ignore[attr-defined]
    assert records[0]["content"][1] == REFERENCE  # the loaded records are left as they were


async def test_the_writing_process_serves_its_own_text_without_a_read(backend: Backend) -> None:
    """The process that moved a text out to a blob keeps serving that text (the very string)
    to its requests: no read, no hash, no base64 encode of the bytes again."""
    text = base64.b64encode(IMAGE).decode()  # a text this process was not shown: decoded once
    await backend.messages.append("s", [photo_message(data=text)])
    records = await backend.messages.load("s")
    resolver = BlobResolver(backend.blobs)
    resolved = await resolver.resolve(records)
    assert resolved[0]["content"][1]["data"] is text
    assert resolver.reads == 0 and backend.blobs.reads == 0  # type: ignore[attr-defined]


async def test_the_resolver_cache_is_bounded_in_bytes(backend: Backend) -> None:
    await backend.messages.append("s", [photo_message()])
    records = await backend.messages.load("s")
    KNOWN.clear()  # a later process: it holds none of the texts written here
    resolver = BlobResolver(backend.blobs, max_bytes=len(B64) - 1)
    await resolver.resolve(records)
    await resolver.resolve(records)
    assert resolver.reads == 2
    assert resolver.cached_bytes == 0


async def test_a_damaged_or_missing_blob_is_a_typed_error(backend: Backend) -> None:
    await backend.messages.append("s", [photo_message()])
    records = await backend.messages.load("s")
    KNOWN.clear()  # a later process: it holds none of the texts written here
    backend.damage(SHA)
    with pytest.raises(BlobCorruptError) as corrupt:
        await BlobResolver(backend.blobs).resolve(records)
    assert corrupt.value.sha == SHA
    with pytest.raises(BlobNotFoundError) as missing:
        await backend.blobs.get("0" * 64)
    assert missing.value.sha == "0" * 64
    assert await backend.blobs.info("0" * 64) is None
    assert await backend.messages.load("s") == records  # the transcript itself is intact


async def test_media_data_that_is_not_base64_is_refused_and_nothing_is_written(
    backend: Backend,
) -> None:
    await backend.messages.append("s", [photo_message("first")])
    bad = photo_message(data="!" * 100_000)
    with pytest.raises(StoreError, match=r"records\[0\].content\[1\].*not base64"):
        await backend.messages.append("s", [bad])
    await backend.runs.start_run(run("r"))
    with pytest.raises(StoreError, match="not base64"):
        await backend.runs.append_events("r", [{"type": "x", "data": {"m": bad}}])
    assert await backend.messages.length("s") == 1
    assert await backend.runs.events("r") == []
    assert backend.count() == 1


async def test_put_and_get_round_trip_and_put_is_idempotent(backend: Backend) -> None:
    sha = await backend.blobs.put(b"%PDF-1.7 contract", "application/pdf")
    assert sha == hashlib.sha256(b"%PDF-1.7 contract").hexdigest()
    assert await backend.blobs.put(b"%PDF-1.7 contract", "application/pdf") == sha
    assert await backend.blobs.get(sha) == b"%PDF-1.7 contract"
    assert backend.count() == 1


@pytest.mark.parametrize("name", list(BACKENDS))
async def test_the_threshold_is_configurable(name: str, tmp_path: Path) -> None:
    b = BACKENDS[name](tmp_path, 10)
    try:
        small = base64.b64encode(b"GIF89a" + b"\0" * 100).decode()
        await b.messages.append("s", [photo_message(data=small)])
        (record,) = await b.messages.load("s")
        assert record["content"][1]["blob"] == hashlib.sha256(base64.b64decode(small)).hexdigest()
        assert b.count() == 1
        # A run event's media is moved at the same threshold, however small the event.
        await b.runs.start_run(run("r"))
        await b.runs.append_events("r", [{"type": "x", "data": {"m": photo_message(data=small)}}])
        (event,) = await b.runs.events("r")
        assert event["data"]["m"]["content"][1]["blob"] == record["content"][1]["blob"]
    finally:
        await b.aclose()


async def test_a_long_event_without_inline_media_is_stored_as_it_came(backend: Backend) -> None:
    # Long, and naming media everywhere, but no media part holds inline data: nothing to move.
    data = {
        "messages": [{"role": "user", "content": [{"type": "text", "text": B64}]}],
        "parts": [{"type": "image", "media_type": "image/png", "url": "https://x/y.png"}],
        "tool": {"input": {"data": B64, "type": "imagery"}},
    }
    await backend.runs.start_run(run("r"))
    await backend.runs.append_events("r", [{"type": "x", "data": data}])
    (event,) = await backend.runs.events("r")
    assert event["data"] == data
    assert backend.count() == 0


def test_a_bad_threshold_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="blob_threshold"):
        InMemoryMessageStore(blob_threshold=-1)
    conn = connect(tmp_path / "x.db")
    with pytest.raises(ConfigError, match="blob_threshold"):
        SqliteRunStore(conn, blob_threshold=True)
    conn.close()


@pytest.mark.parametrize("threshold", [0, 1, 2, 3, 4, 5, 100, 1000])
def test_a_part_one_byte_over_the_threshold_is_moved_and_one_at_it_stays(threshold: int) -> None:
    # The walk is skipped for what is too short to hold such a part: the bound must be exact.
    from tether.stores._blobs import externalize_events, externalize_records

    for size, moved in ((threshold + 1, True), (threshold, False)):
        data = base64.b64encode(b"x" * size).decode()
        part = {"type": "image", "media_type": "image/png", "data": data}
        record = {"role": "user", "content": [part]}
        records, blobs = externalize_records([record], threshold)
        assert bool(blobs) is moved and ("blob" in records[0]["content"][0]) is moved
        event = {"type": "agent_tool_result", "data": {"output": [part]}}
        events, blobs = externalize_events([event], threshold)
        assert bool(blobs) is moved and ("blob" in events[0]["data"]["output"][0]) is moved
