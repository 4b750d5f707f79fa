"""A paused run decided from the UI in headless Chromium: a real `tether ui` behind a token,
a logged-in browser finds the run under "Waiting for you", clicks Approve (a POST carrying the
session's CSRF token) and sees the run finish; an edited approval runs with the new input. The
chat page decides under each call: Approve / Edit / Deny (a refused edit shown inline, to fix),
an external call's result, and the answer an MCP tool asks for (an input call)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from tests.browser import chromium, require_chromium

from .conftest import HERE, Server, start_server, stream_all, write_project

require_chromium()

from selenium.common.exceptions import StaleElementReferenceException  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.remote.webdriver import WebDriver  # noqa: E402
from selenium.webdriver.remote.webelement import WebElement  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

TOKEN = "decisions-browser-token"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = write_project(tmp_path_factory.mktemp("decide-ui") / "project")
    (root / "hitl_app.py").write_text((HERE / "hitl_app.py").read_text(), encoding="utf-8")
    (root / "tether.toml").write_text(
        'runtime = "project_app:runtime"\n'
        'agents = ["project_app:chat", "hitl_app:clerk", "hitl_app:asker"]\n',
        encoding="utf-8",
    )
    env = {
        "TETHER_TEST_STORE": f"sqlite:///{root / 'tether.db'}",
        "TETHER_TEST_DELAY": "0",
        "TETHER_SERVE_TOKEN": TOKEN,
    }
    server = start_server(root, env, command="ui", headers={"Authorization": f"Bearer {TOKEN}"})
    yield server
    server.stop()


@pytest.fixture(scope="module")
def browser(server: Server, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebDriver]:
    with chromium(tmp_path_factory.mktemp("chromium"), "--window-size=1400,900") as driver:
        driver.get(f"{server.base}/login?token={TOKEN}")
        WebDriverWait(driver, 15).until(lambda d: "/login" not in d.current_url)
        yield driver


def _paused(server: Server, text: str, agent: str = "clerk") -> str:
    with server.client() as client:
        response = client.post(f"/api/agents/{agent}/runs", json={"input": text})
        assert response.status_code == 202, response.text
        run_id: str = response.json()["run_id"]
        assert stream_all(client, run_id)[-1].data["status"] == "paused"
    return run_id


def _finished(browser: WebDriver) -> str:
    # The page is drawn again once the decision is taken: an element of the old one goes stale.
    WebDriverWait(browser, 30, ignored_exceptions=[StaleElementReferenceException]).until(
        lambda d: d.find_element(By.ID, "run-status").text.strip() == "completed"
    )
    return str(browser.find_element(By.ID, "timeline").text)


def test_approve_in_the_browser_finishes_the_run(server: Server, browser: WebDriver) -> None:
    run_id = _paused(server, "mail ann@example.com")
    browser.get(f"{server.base}/runs")
    browser.find_element(By.CSS_SELECTOR, "a.waiting-filter").click()
    WebDriverWait(browser, 15).until(lambda d: "status=paused" in d.current_url)
    rows = browser.find_elements(By.CSS_SELECTOR, "tr.run-row")
    assert run_id in [r.get_attribute("data-run-id") for r in rows]
    browser.get(f"{server.base}/runs/{run_id}")
    section = browser.find_element(By.ID, "pending")
    assert "send_email" in section.text and "ann@example.com" in section.text
    section.find_element(By.CSS_SELECTOR, "button[data-action=approve]").click()
    assert "Done: sent to ann@example.com" in _finished(browser)
    assert not browser.find_elements(By.ID, "pending")
    with server.client() as client:
        run = client.get(f"/api/runs/{run_id}").json()["run"]
    assert (run["status"], run["pending"]) == ("completed", [])


def test_an_edit_in_the_browser_runs_with_the_new_input(server: Server, browser: WebDriver) -> None:
    run_id = _paused(server, "mail ann@example.com")
    browser.get(f"{server.base}/runs/{run_id}")
    section = browser.find_element(By.ID, "pending")
    section.find_element(By.CSS_SELECTOR, "button[data-action=edit]").click()
    box = section.find_element(By.CSS_SELECTOR, "textarea.pending-edit")
    box.clear()
    box.send_keys('{"to": "bob@example.com"}')
    section.find_element(By.CSS_SELECTOR, "button[data-action=approve]").click()
    assert "Done: sent to bob@example.com" in _finished(browser)


def test_the_run_page_answers_what_an_mcp_tool_asks(server: Server, browser: WebDriver) -> None:
    run_id = _paused(server, "who am I?", agent="asker")
    browser.get(f"{server.base}/runs/{run_id}")
    section = browser.find_element(By.ID, "pending")
    assert "asks for input" in section.text and "Who are you?" in section.text
    box = section.find_element(By.CSS_SELECTOR, "textarea.pending-result")
    box.send_keys('{"name": "Bo"}')
    section.find_element(By.CSS_SELECTOR, "button[data-action=result]").click()
    assert "Done: hello Bo" in _finished(browser)


def test_the_chat_page_asks_and_goes_on(server: Server, browser: WebDriver) -> None:
    browser.get(f"{server.base}/chat/clerk")
    box = browser.find_element(By.ID, "chat-input")
    box.send_keys("mail cy@example.com")
    browser.find_element(By.ID, "chat-send").click()
    WebDriverWait(browser, 30).until(
        lambda d: d.find_elements(By.CSS_SELECTOR, ".chat-decide button[data-action=approve]")
    )
    assert "Waiting for your decision" in browser.find_element(By.ID, "chat").text
    browser.find_element(By.CSS_SELECTOR, ".chat-decide button[data-action=approve]").click()
    WebDriverWait(browser, 30).until(
        lambda d: "Done: sent to cy@example.com" in d.find_element(By.ID, "chat").text
    )
    # The tool call's own result shows under it once the resumed stream brings it.
    results = browser.find_elements(By.CSS_SELECTOR, ".chat-tool-result")
    assert results[-1].text == "sent to cy@example.com"


def _chat(browser: WebDriver, server: Server, agent: str, text: str, kind: str) -> WebElement:
    """Say `text` on the chat page of `agent`; the decision box of the call it pauses on."""
    browser.get(f"{server.base}/chat/{agent}")
    browser.find_element(By.ID, "chat-input").send_keys(text)
    browser.find_element(By.ID, "chat-send").click()
    WebDriverWait(browser, 30).until(
        lambda d: d.find_elements(By.CSS_SELECTOR, f".chat-decide[data-kind={kind}] button")
    )
    box: WebElement = browser.find_element(By.CSS_SELECTOR, f".chat-decide[data-kind={kind}]")
    return box


def _inline_error(box: WebElement, words: str) -> None:
    error = box.find_element(By.CSS_SELECTOR, ".chat-decide-error")
    WebDriverWait(box, 30).until(lambda b: error.is_displayed() and words in error.text)


def _said(browser: WebDriver, words: str) -> None:
    WebDriverWait(browser, 30).until(lambda d: words in d.find_element(By.ID, "chat").text)


def _retype(box: WebElement, text: str) -> None:
    area = box.find_element(By.CSS_SELECTOR, "textarea")
    area.clear()
    area.send_keys(text)


def test_the_chat_page_edits_an_approval_and_shows_a_refused_edit_inline(
    server: Server, browser: WebDriver
) -> None:
    box = _chat(browser, server, "clerk", "mail eve@example.com", "approval")
    area = box.find_element(By.CSS_SELECTOR, "textarea.chat-decide-edit")
    assert not area.is_displayed()
    box.find_element(By.CSS_SELECTOR, "button[data-action=edit]").click()
    assert area.is_displayed() and '"eve@example.com"' in (area.get_attribute("value") or "")
    _retype(box, "{not json")
    box.find_element(By.CSS_SELECTOR, "button[data-action=approve]").click()
    _inline_error(box, "not JSON")
    # Against the tool's schema, on the server: refused, nothing taken, decided again here.
    _retype(box, '{"to": 5}')
    box.find_element(By.CSS_SELECTOR, "button[data-action=approve]").click()
    _inline_error(box, "does not match the tool's schema")
    assert box.find_element(By.CSS_SELECTOR, "button[data-action=approve]").is_enabled()
    _retype(box, '{"to": "fay@example.com"}')
    box.find_element(By.CSS_SELECTOR, "button[data-action=approve]").click()
    _said(browser, "Done: sent to fay@example.com")


def test_the_chat_page_gives_an_external_calls_result(server: Server, browser: WebDriver) -> None:
    box = _chat(browser, server, "clerk", "color please", "external")
    assert "pick_color" in box.text
    _retype(box, "teal")
    box.find_element(By.CSS_SELECTOR, "button[data-action=result]").click()
    _said(browser, "Done: teal")


def test_the_chat_page_answers_what_an_mcp_tool_asks(server: Server, browser: WebDriver) -> None:
    box = _chat(browser, server, "asker", "who am I?", "input")
    assert "whoami asks: Who are you?" in box.text
    assert "name (string, required)" in box.text
    _retype(box, '"Ada"')
    box.find_element(By.CSS_SELECTOR, "button[data-action=result]").click()
    _inline_error(box, "must be a JSON object")
    _retype(box, '{"nickname": "A"}')
    box.find_element(By.CSS_SELECTOR, "button[data-action=result]").click()
    _inline_error(box, "does not match the schema asked for")
    _retype(box, '{"name": "Ada"}')
    box.find_element(By.CSS_SELECTOR, "button[data-action=result]").click()
    _said(browser, "Done: hello Ada")


def test_the_chat_page_declines_what_an_mcp_tool_asks(server: Server, browser: WebDriver) -> None:
    box = _chat(browser, server, "asker", "who am I, again?", "input")
    box.find_element(By.CSS_SELECTOR, "button[data-action=deny]").click()
    _said(browser, "Done: no name given")
