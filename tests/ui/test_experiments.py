"""The experiment pages: the list, a cases × evaluators grid whose cells link to their runs,
and the compare page; over ASGI for status codes and escaping, and in headless Chromium."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from tests.browser import chromium, needs_chromium, run_in_thread

from tether.evals import evaluate
from tether.lab import Runtime
from tether.testing import script_client
from tether.ui._serve import _server

from .conftest import HOSTILE, assert_inert, client_for

NAME = f"base {HOSTILE}"
"""An experiment name with markup in it: shown as text, linked percent-encoded."""


def reply(request: Any) -> dict[str, Any]:
    text = request["messages"][-1]["content"][-1].get("text", "")
    if text == "b" and request.get("model") == "v2":
        return {"text": "wrong"}
    return {"text": f"ok {text} {HOSTILE}"}


@dataclass
class Experiments:
    runtime: Runtime
    base: dict[str, Any]
    cand: dict[str, Any]


async def fill(runtime: Runtime) -> Experiments:
    cases: list[dict[str, Any]] = [
        {"id": "a", "input": "a", "evaluators": [{"type": "contains", "value": "ok"}]},
        {"id": "b", "input": "b", "evaluators": [{"type": "regex", "pattern": "^ok"}]},
        {"id": f"c{HOSTILE}", "input": "c"},
    ]
    v1 = runtime.create_agent(id="answer", model=script_client([reply] * 50, model="v1"))
    base = await evaluate(runtime, v1, cases, experiment=NAME)
    v2 = runtime.create_agent(id="answer2", model=script_client([reply] * 50, model="v2"))
    cand = await evaluate(runtime, v2, cases, experiment="cand")
    return Experiments(runtime, base, cand)


@pytest.fixture
async def world(tmp_path: Path) -> Any:
    runtime = Runtime(store=f"sqlite:///{tmp_path / 'ui.db'}", version=False)
    yield await fill(runtime)
    await runtime.aclose()


async def test_pages_over_asgi(world: Experiments) -> None:
    async with client_for(world.runtime) as client:
        listing = await client.get("/experiments")
        assert listing.status_code == 200
        text = assert_inert(listing.text)
        assert NAME in text and "cand" in text
        assert f'href="/experiments/{quote(NAME, safe="")}"' in listing.text
        page = await client.get(f"/experiments/{quote(NAME, safe='')}")
        assert page.status_code == 200
        text = assert_inert(page.text)
        assert "3 passed, 0 failed" in text
        for case in world.base["cases"]:
            assert f'href="/runs/{case["run_id"]}"' in page.text
        diff = await client.get("/compare", params={"a": NAME, "b": "cand"})
        assert diff.status_code == 200
        text = assert_inert(diff.text)
        assert "broke 1 case(s)" in text
        missing = await client.get("/experiments/nope")
        assert missing.status_code == 404 and "no experiment 'nope'" in assert_inert(missing.text)
        assert (await client.get("/compare", params={"a": "cand"})).status_code == 400
        assert (await client.get("/compare", params={"a": "cand", "b": "x"})).status_code == 404


# -- in Chromium -----------------------------------------------------------------------------


@dataclass
class Site:
    url: str
    data: Experiments


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    path = tmp_path_factory.mktemp("ui-experiments") / "ui.db"
    runtime = Runtime(store=f"sqlite:///{path}", version=False)
    data = run_in_thread(fill(runtime))
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = _server(runtime, "127.0.0.1", port, None, "warning")
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    try:
        yield Site(f"http://127.0.0.1:{port}", data)
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()
        run_in_thread(runtime.aclose())


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with chromium(tmp_path_factory.mktemp("chromium-exp")) as driver:
        yield driver


@needs_chromium
def test_the_list_links_to_the_grid_whose_cells_open_their_runs(site: Site, browser: Any) -> None:
    from selenium.webdriver.common.by import By

    browser.get(site.url + "/experiments")
    rows = browser.find_elements(By.CSS_SELECTOR, "tr.experiment-row")
    assert sorted(r.get_attribute("data-name") for r in rows) == sorted([NAME, "cand"])
    link = browser.find_element(By.LINK_TEXT, NAME)
    link.click()
    assert browser.find_element(By.TAG_NAME, "h1").text.startswith(f"Experiment {NAME}")
    headers = [
        th.get_attribute("textContent")
        for th in browser.find_elements(By.CSS_SELECTOR, "#grid thead th")
    ]
    assert headers == ["Case", "Status", "contains", "regex", "Latency", "Output"]
    row = browser.find_element(By.CSS_SELECTOR, 'tr.case-row[data-case="b"]')
    cell = row.find_elements(By.CSS_SELECTOR, "td.cell")[1]
    assert cell.text == "pass"
    cell.find_element(By.TAG_NAME, "a").click()
    run_id = next(c["run_id"] for c in site.data.base["cases"] if c["id"] == "b")
    assert browser.current_url.endswith(f"/runs/{run_id}")
    assert browser.execute_script("return window.__pwned === undefined")


@needs_chromium
def test_the_compare_form_shows_the_broken_case_side_by_side(site: Site, browser: Any) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    browser.get(site.url + "/experiments")
    Select(browser.find_element(By.ID, "compare-a")).select_by_value(NAME)
    Select(browser.find_element(By.ID, "compare-b")).select_by_value("cand")
    browser.find_element(By.ID, "compare-go").click()
    assert browser.find_element(By.ID, "broken").text == "b"
    assert browser.find_element(By.ID, "regressed").is_displayed()
    row = browser.find_element(By.CSS_SELECTOR, 'tr.compare-row[data-case="b"]')
    assert "change-broken" in (row.get_attribute("class") or "")
    a_run = row.find_element(By.CSS_SELECTOR, "a.run-a").get_attribute("href") or ""
    b_run = row.find_element(By.CSS_SELECTOR, "a.run-b").get_attribute("href") or ""
    base_b = next(c for c in site.data.base["cases"] if c["id"] == "b")
    cand_b = next(c for c in site.data.cand["cases"] if c["id"] == "b")
    assert a_run.endswith(base_b["run_id"]) and b_run.endswith(cand_b["run_id"])
    row.find_element(By.CSS_SELECTOR, "a.run-b").click()
    assert browser.current_url.endswith(f"/runs/{cand_b['run_id']}")
    assert browser.execute_script("return window.__pwned === undefined")
