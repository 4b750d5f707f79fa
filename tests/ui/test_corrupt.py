"""A stored record that does not parse shows an error panel; the rest of the page renders."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tether.lab import Runtime
from tether.stores import SqliteMessageStore, SqliteRunStore
from tether.testing import script_client

from .conftest import World, assert_inert, client_for, populate


@pytest.fixture
async def sqlite_world(tmp_path: Path) -> AsyncIterator[tuple[World, Path]]:
    path = tmp_path / "ui.db"
    runtime = Runtime(
        store=f"sqlite:///{path}", version=False, defaults={"model": script_client([])}
    )
    yield await populate(runtime), path
    await runtime.aclose()


@contextmanager
def database(path: Path) -> Iterator[sqlite3.Connection]:
    """A second connection to the file, as a bad disk or a hand edit would use."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        yield conn
    finally:
        conn.close()


async def test_a_corrupt_event_shows_a_panel_on_the_run_and_conversation_pages(
    sqlite_world: tuple[World, Path],
) -> None:
    world, path = sqlite_world
    with database(path) as conn:
        conn.execute(
            "UPDATE tether_run_events SET data = '{nope' WHERE run_id = ? AND seq = 3",
            (world.first,),
        )
    async with client_for(world.runtime, world.registry) as client:
        run = await client.get(f"/runs/{world.first}")
        assert run.status_code == 200
        text = assert_inert(run.text)
        assert "The events of this run cannot be read" in text and "StoreCorruptError" in text
        assert "researcher" in text and "Tags" in text  # the summary still renders
        assert "data-live-run" not in run.text
        api = await client.get(f"/api/events/{world.first}")
        assert api.status_code == 500 and api.json()["error"]["type"] == "unreadable"
        # The conversation cannot tell which records that episode wrote, and says so.
        conv = await client.get("/conversations/notes")
        assert conv.status_code == 200
        conv_text = assert_inert(conv.text)
        assert "Part of this conversation cannot be read" in conv_text
        assert "records without a recorded episode" in conv_text
        assert "Second answer." in conv_text


async def test_a_corrupt_run_summary_is_an_error_row_and_an_error_page(
    sqlite_world: tuple[World, Path],
) -> None:
    world, path = sqlite_world
    with database(path) as conn:
        conn.execute("UPDATE tether_runs SET tags = 'not json' WHERE run_id = ?", (world.second,))
    async with client_for(world.runtime, world.registry) as client:
        runs = await client.get("/runs")
        assert runs.status_code == 200
        text = assert_inert(runs.text)
        assert "This run cannot be read" in text and "StoreCorruptError" in text
        assert f'data-run-id="{world.first}"' in runs.text  # the other rows are still there
        assert f'data-run-id="{world.review}"' in runs.text
        api = (await client.get("/api/runs")).json()
        assert len(api["errors"]) == 1 and world.second not in {r["run_id"] for r in api["runs"]}
        page = await client.get(f"/runs/{world.second}")
        assert page.status_code == 500
        assert "cannot be read" in assert_inert(page.text)
        assert (await client.get(f"/api/runs/{world.second}")).status_code == 500
        # The conversation still shows, with the unreadable run reported.
        conv = await client.get("/conversations/notes")
        assert conv.status_code == 200 and "StoreCorruptError" in conv.text


async def test_a_corrupt_message_record_shows_a_panel_on_the_conversation(
    sqlite_world: tuple[World, Path],
) -> None:
    world, path = sqlite_world
    with database(path) as conn:
        conn.execute("UPDATE tether_messages SET record = '{bad' WHERE scope = 'notes' AND seq = 2")
    async with client_for(world.runtime, world.registry) as client:
        conv = await client.get("/conversations/notes")
        assert conv.status_code == 200
        text = assert_inert(conv.text)
        assert "The stored transcript cannot be read" in text and "record 2" in text
        assert "Title" in text  # the title and facts still render
        api = (await client.get("/api/scopes/notes")).json()
        assert api["turns"] == [] and any("record 2" in e for e in api["errors"])


async def test_a_corrupt_workflow_journal_shows_a_panel_on_the_workflow_run(
    sqlite_world: tuple[World, Path],
) -> None:
    world, path = sqlite_world
    with database(path) as conn:
        conn.execute(
            "UPDATE tether_workflow_runs SET output = '{' WHERE run_id = ?", (world.review,)
        )
    async with client_for(world.runtime, world.registry) as client:
        page = await client.get(f"/runs/{world.review}")
        assert page.status_code == 200
        text = assert_inert(page.text)
        assert "Part of this run cannot be read" in text and "StoreCorruptError" in text
        assert "outline" in text and "polish" in text  # the tree and events still render


async def test_a_failing_store_is_an_error_page_not_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "closed.db"
    messages, runs = SqliteMessageStore.open(path), SqliteRunStore.open(path)
    await messages.aclose()
    await runs.aclose()
    runtime = Runtime(message_store=messages, run_store=runs, version=False)
    async with client_for(runtime) as client:
        for url in ["/runs", "/conversations", "/runs/x", "/conversations/x"]:
            response = await client.get(url)
            assert response.status_code == 500, url
            assert "cannot be read" in assert_inert(response.text)
        api = await client.get("/api/runs")
        assert api.status_code == 500 and "closed" in api.json()["error"]["message"]
        assert (await client.get("/api/events/x")).status_code == 500
        assert (await client.get("/api/scopes")).status_code == 500
    await runtime.aclose()


def test_create_app_refuses_what_is_not_a_runtime() -> None:
    with pytest.raises(TypeError, match=r"tether\.lab\.Runtime"):
        client_for("memory")  # type: ignore[arg-type]


async def test_the_app_starts_and_stops_with_a_lifespan(tmp_path: Path) -> None:
    runtime = Runtime(store=f"sqlite:///{tmp_path / 'x.db'}", version=False)
    from tether.ui import create_app

    app = create_app(runtime)
    async with app.router.lifespan_context(app):
        # Started: the stores are open (so a bad store URL fails the start, not a page).
        assert runtime.stores_open
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://localhost"
        ) as client:
            assert (await client.get("/runs")).status_code == 200
    await runtime.aclose()
