"""What a running run's page receives while it follows the run: `/api/events/{id}?html=1`
carries each new event drawn by the page's own template, so it reads as it will after a reload
(Markdown rendered, everything escaped); the text item being streamed is sent again whole."""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tether.lab import Runtime
from tether.stores.run_store import NewRunEvent, RunInfo

from .conftest import HOSTILE, assert_inert, client_for

RUN = "live-run"


def delta(text: str) -> NewRunEvent:
    return {"type": "agent_text_delta", "at": time.time(), "data": {"text": text}}


@pytest.fixture
async def lab() -> AsyncIterator[Runtime]:
    runtime = Runtime(store="memory", version=False)
    await runtime.run_store.start_run(RunInfo(RUN, "agent", "researcher", "running", time.time()))
    yield runtime
    await runtime.aclose()


async def poll(client: httpx.AsyncClient, query: str) -> dict[str, Any]:
    response = await client.get(f"/api/events/{RUN}?html=1&{query}")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def page(fragments: list[dict[str, Any]]) -> str:
    """The fragments inside a page shell, for the scanner that finds anything that would run."""
    items = "".join(f["html"] for f in fragments)
    return f'<html><script src="/static/tether.js" defer></script><ol>{items}</ol></html>'


async def test_live_text_is_the_pages_markdown(lab: Runtime) -> None:
    store = lab.run_store
    await store.append_events(RUN, [delta("Here is **bold**"), delta(" and a list:\n\n- one\n")])
    async with client_for(lab) as client:
        first = await poll(client, "after=0")
        [item] = first["html"]
        assert item["seq"] == 1 and first["last_seq"] == 2
        assert "<strong>bold</strong>" in item["html"]
        assert '<li class="ev ev-text" id="ev-1" data-seq="1">' in item["html"]
        assert "#1–2" in item["html"]
        # More of the same answer: the text item comes again whole (a list item only reads as
        # one with the list it continues), to replace the page's.
        await store.append_events(RUN, [delta("- two\n")])
        more = await poll(client, "after=2&open=1")
        [again] = more["html"]
        assert again["seq"] == 1 and more["last_seq"] == 3
        assert re.search(r"<ul>\s*<li>one</li>\s*<li>two</li>\s*</ul>", again["html"])
        assert [e["seq"] for e in more["events"]] == [3]  # the JSON events stay the new ones
        # The same as a reload draws it.
        await store.append_events(
            RUN, [{"type": "agent_tool_call", "at": time.time(), "data": {"id": "c1", "name": "t", "input": {}}}]
        )  # fmt: skip
        later = await poll(client, "after=3&open=1")
        reload = (await client.get(f"/runs/{RUN}")).text
    assert [f["seq"] for f in later["html"]] == [1, 4]
    for fragment in later["html"]:
        drawn = re.sub(r"\s+", " ", fragment["html"]).strip()
        assert drawn in re.sub(r"\s+", " ", reload), drawn


async def test_live_content_stays_inert(lab: Runtime) -> None:
    hostile = [
        delta(f"{HOSTILE} [click](javascript:window.__pwned=3) "),
        delta('![x](javascript:alert(1)) <a href="javascript:alert(2)">a</a>'),
    ]
    await lab.run_store.append_events(RUN, hostile)
    await lab.run_store.append_events(
        RUN,
        [
            {"type": "agent_tool_result", "at": time.time(),
             "data": {"id": "c", "name": f"t{HOSTILE}", "output": HOSTILE, "is_error": False}},
            {"type": "agent_failed", "at": time.time(),
             "data": {"error": {"type": "X", "message": HOSTILE}, "cancelled": False}},
            {"type": f"custom_{HOSTILE}", "at": time.time(), "data": {"v": HOSTILE}},
        ],
    )  # fmt: skip
    async with client_for(lab) as client:
        body = await poll(client, "after=0")
    html = page(body["html"])
    text = assert_inert(html)
    assert "javascript:" not in "".join(re.findall(r'href="([^"]*)"', html))
    assert "[click](javascript:window.__pwned=3)" in text  # shown as the text it is
    assert text.count("<script>window.__pwned=1</script>") >= 4


async def test_storage_rows_come_only_when_the_page_shows_them(lab: Runtime) -> None:
    committed: NewRunEvent = {
        "type": "agent_messages_committed",
        "at": time.time(),
        "data": {"start": 0, "count": 1, "messages": []},
    }
    await lab.run_store.append_events(RUN, [delta("a"), committed, delta("b")])
    async with client_for(lab) as client:
        hidden = await poll(client, "after=0")
        shown = await poll(client, "after=0&storage=1")
        # The page's trailing text item was "a": the hidden row splits the answer, as a reload
        # draws it.
        resent = await poll(client, "after=1&open=1")
    assert [f["seq"] for f in hidden["html"]] == [1, 3]
    assert [f["seq"] for f in shown["html"]] == [1, 2, 3]
    assert [f["seq"] for f in resent["html"]] == [1, 3]


async def test_open_is_checked_like_after(lab: Runtime) -> None:
    async with client_for(lab) as client:
        bad = await client.get(f"/api/events/{RUN}?html=1&open=x")
        assert bad.status_code == 400 and "open must be an integer" in bad.text
        # Without html=1 the answer is the JSON events alone, as before.
        plain = (await client.get(f"/api/events/{RUN}?after=0")).json()
    assert "html" not in plain


async def test_a_model_call_drawn_running_is_drawn_again_once_it_ends(lab: Runtime) -> None:
    store = lab.run_store
    started: NewRunEvent = {
        "type": "model_call_started", "at": time.time(), "data": {"call": 1, "model": "m"}
    }  # fmt: skip
    await store.append_events(RUN, [started, delta("Hel")])
    async with client_for(lab) as client:
        first = await poll(client, "after=0")
        assert [f["seq"] for f in first["html"]] == [1, 2]
        assert "(running)" in first["html"][0]["html"]
        # Still running: nothing to draw again.
        quiet = await poll(client, "after=2&open=2&running=1")
        assert [f["seq"] for f in quiet["html"]] == [2]
        finished: NewRunEvent = {
            "type": "model_call_finished",
            "at": time.time(),
            "data": {"call": 1, "model": "m", "duration_s": 0.5, "first_token_s": 0.1,
                     "usage": {"input_tokens": 12, "output_tokens": 3}, "cost_usd": None},
        }  # fmt: skip
        await store.append_events(RUN, [delta("lo"), finished])
        done = await poll(client, "after=2&open=2&running=1")
        reload = (await client.get(f"/runs/{RUN}")).text
    assert [f["seq"] for f in done["html"]] == [1, 2, 4]
    call = done["html"][0]["html"]
    assert 'class="call-facts"' in call and "(running)" not in call and "12 → 3" in call
    assert re.sub(r"\s+", " ", call).strip() in re.sub(r"\s+", " ", reload)
    assert "Hello" in done["html"][1]["html"]
