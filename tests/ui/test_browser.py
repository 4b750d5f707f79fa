"""The UI in a real browser: uvicorn serves the app on loopback over a SQLite store filled by
real lab runs, and headless Chromium (driven by Selenium through Debian's chromedriver) loads,
clicks and watches it. One server and one browser for the whole module."""

from __future__ import annotations

import asyncio
import socket
import sqlite3
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from tests.browser import chromium, require_chromium, run_in_thread

from tether import define_tool
from tether.lab import Runtime
from tether.stores.run_store import RunInfo
from tether.testing import script_client
from tether.ui._serve import _server

from .conftest import HOSTILE, World, populate

require_chromium()

from selenium.common.exceptions import NoAlertPresentException  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.remote.webdriver import WebDriver  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402


@dataclass
class Site:
    world: World
    url: str
    db: Path

    @property
    def runtime(self) -> Runtime:
        return self.world.runtime


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    path = tmp_path_factory.mktemp("ui") / "ui.db"
    runtime = Runtime(
        store=f"sqlite:///{path}", version=False, defaults={"model": script_client([])}
    )
    world = run_in_thread(populate(runtime))
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))  # a free port, held until uvicorn takes the socket over
    port = sock.getsockname()[1]
    # The server `tether.ui.serve` runs, started on a socket of our own.
    server = _server(runtime, "127.0.0.1", port, world.registry, "warning")
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    try:
        yield Site(world, f"http://127.0.0.1:{port}", path)
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()
        run_in_thread(runtime.aclose())


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebDriver]:
    with chromium(tmp_path_factory.mktemp("chromium")) as driver:
        yield driver


def no_alert(browser: WebDriver) -> bool:
    try:
        browser.switch_to.alert  # noqa: B018
    except NoAlertPresentException:
        return True
    return False


def pwned(browser: WebDriver) -> Any:
    return browser.execute_script("return window.__pwned === undefined ? null : window.__pwned")


def test_runs_page_renders_and_a_click_leads_to_the_run(site: Site, browser: WebDriver) -> None:
    browser.get(f"{site.url}/runs")
    assert browser.title.startswith("Runs")
    rows = browser.find_elements(By.CSS_SELECTOR, "tr.run-row")
    assert [r.get_attribute("data-run-id") for r in rows] == [
        site.world.review,
        site.world.failed,
        site.world.second,
        site.world.first,
    ]
    # The stylesheet loaded (from this server, not the network).
    header = browser.find_element(By.CSS_SELECTOR, "header.top")
    assert header.value_of_css_property("background-color") == "rgba(29, 35, 48, 1)"
    browser.find_element(By.CSS_SELECTOR, f'tr[data-run-id="{site.world.first}"] a').click()
    WebDriverWait(browser, 10).until(lambda d: site.world.first in d.current_url)
    text = browser.find_element(By.CSS_SELECTOR, "#timeline li.ev-text .md").text
    assert text == f"Found it {HOSTILE}"
    assert browser.find_element(By.ID, "run-status").text == "completed"
    footer = browser.find_element(By.CSS_SELECTOR, "footer.tags-footer").text
    assert "Tags" in footer and "demo" in footer


def test_hostile_content_is_shown_as_text_and_never_runs(site: Site, browser: WebDriver) -> None:
    for path in [
        f"/runs/{site.world.first}",
        "/runs",
        "/conversations",
        "/conversations/notes",
        f"/runs/{site.world.review}",
    ]:
        browser.get(f"{site.url}{path}")
        assert no_alert(browser), path
        assert pwned(browser) is None, path
        assert not browser.find_elements(By.CSS_SELECTOR, "main img, main script"), path
        assert "<script>window.__pwned=1</script>" in browser.find_element(By.TAG_NAME, "main").text
    browser.get(f"{site.url}/runs/{site.world.first}")
    output = browser.find_element(By.CSS_SELECTOR, "#timeline li.ev-agent-tool-result pre").text
    assert output == f"result for {HOSTILE}: {HOSTILE}"


async def wait_for_event(runtime: Runtime, run_id: str, kind: str) -> None:
    """Wait (bounded) until the recorder has written an event of `kind` for the run."""
    for _ in range(1000):
        if any(e["type"] == kind for e in await runtime.run_store.events(run_id)):
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"run {run_id} never recorded {kind}")


async def test_live_polling_appends_events_that_arrive_after_the_page_loaded(
    site: Site, browser: WebDriver
) -> None:
    gate = asyncio.Event()

    async def wait(value: Any) -> str:
        await gate.wait()
        return f"opened {HOSTILE}"

    agent = site.runtime.create_agent(
        id="live-run",
        tools=[define_tool(name="wait", description="Wait for the gate", execute=wait)],
        model=script_client(
            [{"tool_use": [{"name": "wait", "input": {}}]}, {"text": ["after ", "the gate"]}]
        ),
    )
    handle = agent.run(memory_scope="live-browser", user="go")
    await wait_for_event(site.runtime, handle.run_id, "agent_tool_call")
    await asyncio.to_thread(browser.get, f"{site.url}/runs/{handle.run_id}")

    def loaded() -> tuple[str, int, list[str]]:
        return (
            browser.find_element(By.ID, "run-status").text,
            len(browser.find_elements(By.CSS_SELECTOR, "#timeline li.ev")),
            [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#timeline li.ev-text .md")],
        )

    status, count, texts = await asyncio.to_thread(loaded)
    assert status == "running" and texts == []
    gate.set()
    await handle.result

    def finished(driver: WebDriver) -> bool:
        done = driver.find_element(By.ID, "timeline").get_attribute("data-live-done") == "1"
        return done and driver.find_element(By.ID, "run-status").text == "completed"

    await asyncio.to_thread(WebDriverWait(browser, 30).until, finished)
    status, after, texts = await asyncio.to_thread(loaded)
    assert after > count
    assert texts == ["after the gate"]  # deltas appended into one text item

    def result_text() -> str:
        return str(browser.find_element(By.CSS_SELECTOR, "li.ev-agent-tool-result pre").text)

    assert await asyncio.to_thread(result_text) == f"opened {HOSTILE}"

    def calls() -> list[bool]:
        started = browser.find_elements(By.CSS_SELECTOR, "#timeline li.ev-model-call-started")
        return [bool(li.find_elements(By.CSS_SELECTOR, ".call-facts")) for li in started]

    # The model call that ran while the page watched shows its time and tokens, as after a
    # reload (it was drawn again once it ended), not "(running)".
    assert await asyncio.to_thread(calls) == [True, True]
    assert await asyncio.to_thread(pwned, browser) is None
    assert await asyncio.to_thread(no_alert, browser)


def test_live_polling_stops_when_the_run_is_gone(site: Site, browser: WebDriver) -> None:
    """A store that lost the run (the server restarted on another store, the row was deleted)
    answers 404: the page says so and stops asking, instead of polling forever."""
    run_id = "gone-while-watched"
    info = RunInfo(run_id=run_id, kind="agent", name="researcher", started_at=time.time())
    run_in_thread(site.runtime.run_store.start_run(info))
    browser.get(f"{site.url}/runs/{run_id}")
    assert browser.find_element(By.ID, "timeline").get_attribute("data-live-run") is not None
    with sqlite3.connect(site.db, isolation_level=None) as conn:
        # Its search row too, as a store would: a later run may take the freed rowid.
        conn.execute(
            "DELETE FROM tether_runs_fts WHERE rowid ="
            " (SELECT rowid FROM tether_runs WHERE run_id = ?)",
            (run_id,),
        )
        conn.execute("DELETE FROM tether_runs WHERE run_id = ?", (run_id,))
    WebDriverWait(browser, 30).until(
        lambda d: d.find_element(By.ID, "timeline").get_attribute("data-live-done") == "1"
    )
    assert browser.find_element(By.ID, "live-note").text == "This run is no longer in the store."


def test_the_timeline_request_view_and_filters_in_the_browser(
    site: Site, browser: WebDriver, tmp_path: Path
) -> None:
    browser.get(f"{site.url}/runs/{site.world.first}")
    bars = browser.find_elements(By.CSS_SELECTOR, "ol.waterfall li.bar")
    assert [str(b.get_attribute("class")).split()[1] for b in bars] == [
        "bar-model",
        "bar-tool",
        "bar-model",
    ]
    # Every bar is drawn (a positive width inside the track) and in start order.
    boxes = browser.execute_script(
        "return Array.from(document.querySelectorAll('ol.waterfall rect.span'))"
        ".map(r => { const b = r.getBoundingClientRect(); return [b.left, b.width]; })"
    )
    assert all(width > 0 for _, width in boxes)
    assert [left for left, _ in boxes] == sorted(left for left, _ in boxes)
    # A bar leads to its event.
    bars[1].find_element(By.TAG_NAME, "a").click()
    WebDriverWait(browser, 10).until(lambda d: "#ev-" in d.current_url)
    anchor = browser.current_url.split("#")[1]
    assert "ev-agent-tool-call" in str(browser.find_element(By.ID, anchor).get_attribute("class"))
    # The request view of the second call opens on a click and shows what was sent.
    request = browser.find_elements(By.CSS_SELECTOR, "li.ev-model-call-started details.request")[1]
    assert not request.find_element(By.CSS_SELECTOR, ".request-view").is_displayed()
    request.find_element(By.TAG_NAME, "summary").click()
    view = request.find_element(By.CSS_SELECTOR, ".request-view")
    assert view.is_displayed() and "Recorded at the metadata level" in view.text
    assert "lookup" in view.text
    browser.find_element(By.CSS_SELECTOR, ".waterfall-section").screenshot(
        str(tmp_path / "timeline.png")
    )
    assert (tmp_path / "timeline.png").stat().st_size > 1000
    assert pwned(browser) is None and no_alert(browser)
    # The run list's form filters it.
    browser.get(f"{site.url}/runs")
    form = browser.find_element(By.CSS_SELECTOR, "form.filters")
    form.find_element(By.CSS_SELECTOR, 'select[name="status"] option[value="failed"]').click()
    form.find_element(By.CSS_SELECTOR, 'button[type="submit"]').click()
    WebDriverWait(browser, 10).until(lambda d: "status=failed" in d.current_url)
    rows = browser.find_elements(By.CSS_SELECTOR, "tr.run-row")
    assert [r.get_attribute("data-run-id") for r in rows] == [site.world.failed]


async def test_a_run_an_agent_tool_started_is_a_nested_bar_that_leads_there_and_back(
    site: Site, browser: WebDriver
) -> None:
    runtime = site.runtime
    helper = runtime.create_agent(id="nested-helper", model=script_client([{"text": "helped"}]))
    boss = runtime.create_agent(
        id="nested-boss",
        tools=[runtime.tool_from_agent(helper)],
        model=script_client(
            [{"tool_use": [{"name": "nested-helper", "input": {"user": "x"}}]}, {"text": "ok"}]
        ),
    )
    outer = await boss.run(user="delegate").result
    [child] = [r for r in await runtime.run_store.list_runs(limit=500) if r.name == "nested-helper"]

    def walk() -> tuple[list[str], str, str]:
        browser.get(f"{site.url}/runs/{outer.run_id}")
        bars = browser.find_elements(By.CSS_SELECTOR, "ol.waterfall li.bar")
        kinds = [str(b.get_attribute("class")).split()[1] for b in bars]
        nested = browser.find_element(By.CSS_SELECTOR, "ol.waterfall li.bar-run")
        # Indented under the tool call's bar, and drawn (a positive width).
        width = nested.find_element(By.CSS_SELECTOR, "rect.span").get_attribute("width")
        assert width is not None and float(width) > 0
        nested.find_element(By.TAG_NAME, "a").click()
        WebDriverWait(browser, 10).until(lambda d: child.run_id in d.current_url)
        child_url = browser.current_url
        browser.find_element(By.CSS_SELECTOR, "dd.parent-run a").click()
        WebDriverWait(browser, 10).until(lambda d: d.current_url.endswith(outer.run_id))
        return kinds, child_url, browser.current_url

    kinds, child_url, back = await asyncio.to_thread(walk)
    assert kinds == ["bar-model", "bar-tool", "bar-run", "bar-model"]
    assert child_url == f"{site.url}/runs/{child.run_id}"
    assert back == f"{site.url}/runs/{outer.run_id}"


def test_live_events_render_as_a_reload_would_and_stay_inert(
    site: Site, browser: WebDriver
) -> None:
    """Text that arrives while the page follows the run is the page's Markdown at once (no
    reload), and hostile live text (a script, a javascript: link, raw HTML) stays text."""
    run_id = "live-markdown"
    store = site.runtime.run_store
    info = RunInfo(run_id=run_id, kind="agent", name="researcher", started_at=time.time())
    run_in_thread(store.start_run(info))

    def text(value: str) -> Any:
        return {"type": "agent_text_delta", "at": time.time(), "data": {"text": value}}

    run_in_thread(store.append_events(run_id, [text("Plan:\n\n")]))
    browser.get(f"{site.url}/runs/{run_id}")
    assert browser.find_element(By.ID, "timeline").get_attribute("data-live-run") is not None
    assert not browser.find_elements(By.CSS_SELECTOR, "#timeline .md strong")
    run_in_thread(
        store.append_events(
            run_id,
            [
                text("- **bold** step\n"),
                text("- second step\n\n"),
                text(f"{HOSTILE} [bad](javascript:window.__pwned=3) <b>raw</b>"),
            ],
        )
    )
    WebDriverWait(browser, 30).until(
        lambda d: d.find_elements(By.CSS_SELECTOR, "#timeline li.ev-text .md li strong")
    )
    items = browser.find_elements(By.CSS_SELECTOR, "#timeline li.ev-text .md ul > li")
    assert [i.text for i in items] == ["bold step", "second step"]
    # One text item, drawn whole again as it grew (the page loaded with its first delta).
    assert len(browser.find_elements(By.CSS_SELECTOR, "#timeline li.ev-text")) == 1
    shown = browser.find_element(By.CSS_SELECTOR, "#timeline li.ev-text .md").text
    assert "<script>window.__pwned=1</script>" in shown and "<b>raw</b>" in shown
    assert "[bad](javascript:window.__pwned=3)" in shown
    assert not browser.find_elements(By.CSS_SELECTOR, "#timeline script, #timeline img")
    assert not browser.find_elements(By.CSS_SELECTOR, '#timeline a[href^="javascript"]')
    assert not browser.find_elements(By.CSS_SELECTOR, "#timeline b")
    assert pwned(browser) is None and no_alert(browser)
    # A later event is appended after it; the run ends and the page stops following it.
    run_in_thread(
        store.append_events(
            run_id,
            [{"type": "agent_finished", "at": time.time(), "data": {"text": "x", "turns": 1}}],
        )
    )
    run_in_thread(store.finish_run(run_id, "completed"))
    WebDriverWait(browser, 30).until(
        lambda d: d.find_element(By.ID, "timeline").get_attribute("data-live-done") == "1"
    )
    kinds = [
        str(li.get_attribute("class"))
        for li in browser.find_elements(By.CSS_SELECTOR, "#timeline > li")
    ]
    assert kinds == ["ev ev-text", "ev ev-agent-finished"]
    assert browser.find_element(By.ID, "run-status").text == "completed"


def test_a_run_that_fails_while_followed_shows_the_one_error_panel(
    site: Site, browser: WebDriver
) -> None:
    """A failure that arrives live is drawn as a reload draws it: one error panel at the top,
    the traceback folded, the message text."""
    run_id = "live-failure"
    store = site.runtime.run_store
    info = RunInfo(run_id=run_id, kind="agent", name="researcher", started_at=time.time())
    run_in_thread(store.start_run(info))
    browser.get(f"{site.url}/runs/{run_id}")
    assert browser.find_element(By.ID, "timeline").get_attribute("data-live-run") is not None
    assert not browser.find_elements(By.CSS_SELECTOR, ".error-panel")
    error = {"type": "LLMError", "message": f"quota {HOSTILE}"}
    failed = {"error": error, "cancelled": False}
    run_in_thread(
        store.append_events(run_id, [{"type": "agent_failed", "at": time.time(), "data": failed}])
    )
    trace = 'Traceback (most recent call last):\n  File "x.py", line 1, in call_the_model\n'
    run_in_thread(
        store.finish_run(run_id, "failed", error=f"LLMError: quota {HOSTILE}", traceback=trace)
    )
    WebDriverWait(browser, 30).until(lambda d: d.find_elements(By.CSS_SELECTOR, ".error-panel"))
    (panel,) = browser.find_elements(By.CSS_SELECTOR, ".error-panel")
    details = panel.find_element(By.CSS_SELECTOR, "details.traceback")
    assert details.get_attribute("open") is None  # folded
    assert "call_the_model" in str(details.get_attribute("textContent"))
    assert "<script>window.__pwned=1</script>" in panel.text
    assert browser.find_element(By.ID, "run-status").text == "failed"
    assert browser.find_element(By.ID, "timeline").get_attribute("data-live-run") is None
    assert pwned(browser) is None and no_alert(browser)
