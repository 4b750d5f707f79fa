"""The chat page in headless Chromium against a real `tether serve` process: send, watch the
answer stream with its tool call, pick the conversation again, cancel a long answer. With
TETHER_SCREENSHOTS set to a directory, the page is saved there (docs/images/serve-chat.png is
made this way)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.browser import chromium, require_chromium

from .conftest import Server, start_server, write_project

require_chromium()

from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.remote.webdriver import WebDriver  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = write_project(tmp_path_factory.mktemp("chat") / "project")
    server = start_server(
        root, {"TETHER_TEST_STORE": f"sqlite:///{root / 'tether.db'}", "TETHER_TEST_DELAY": "0.02"}
    )
    yield server
    server.stop()


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebDriver]:
    with chromium(tmp_path_factory.mktemp("chromium"), "--window-size=1200,900") as driver:
        yield driver


def wait(browser: WebDriver, condition: object, timeout: float = 15) -> None:
    WebDriverWait(browser, timeout).until(condition)  # type: ignore[arg-type]


def send(browser: WebDriver, text: str) -> None:
    box = browser.find_element(By.ID, "chat-input")
    box.clear()
    box.send_keys(text)
    browser.find_element(By.ID, "chat-send").click()


def idle(browser: WebDriver) -> bool:
    return browser.find_element(By.ID, "chat").get_attribute("data-busy") == ""


def test_chat_sends_streams_with_tool_calls_and_continues_a_conversation(
    server: Server, browser: WebDriver
) -> None:
    browser.get(f"{server.base}/chat")
    browser.find_element(By.LINK_TEXT, "chat").click()
    wait(browser, lambda d: d.current_url.endswith("/chat/chat"))
    send(browser, "tool <b>please</b>")
    wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".chat-tool-result"))
    wait(browser, lambda d: idle(d))
    messages = browser.find_elements(By.CSS_SELECTOR, ".chat-msg .chat-text")
    assert [m.text for m in messages] == [
        "tool <b>please</b>",  # text, not markup
        "Looking it up. ",  # pre-wrap keeps the model's trailing space
        "The tool answered.",
    ]
    assert browser.find_element(By.CSS_SELECTOR, ".chat-tool-name").text == "Tool call: lookup"
    assert browser.find_element(By.CSS_SELECTOR, ".chat-tool-result").text == (
        "found tool <b>please</b>"
    )
    scope = browser.find_element(By.ID, "chat-scope").text
    assert scope != "new" and f"scope={scope}" in browser.current_url
    send(browser, "and again")
    wait(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, ".chat-msg")) == 5)
    wait(browser, lambda d: idle(d))
    assert browser.find_elements(By.CSS_SELECTOR, ".chat-msg .chat-text")[-1].text == (
        "Hello from turn 2."
    )
    shots = os.environ.get("TETHER_SCREENSHOTS")
    if shots:
        browser.save_screenshot(str(Path(shots) / "serve-chat.png"))
    # Reopened, the page shows the stored conversation and lists it.
    browser.get(f"{server.base}/chat/chat?scope={scope}")
    wait(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, ".chat-msg")) == 5)
    links = browser.find_elements(By.CSS_SELECTOR, "#chat-scope-list a")
    wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#chat-scope-list a.chat-current"))
    assert links


def test_cancel_stops_a_long_answer(server: Server, browser: WebDriver) -> None:
    browser.get(f"{server.base}/chat/chat")
    wait(browser, lambda d: idle(d))
    send(browser, "words 3000")
    wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".chat-assistant .chat-text"))
    browser.find_element(By.ID, "chat-cancel").click()
    wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".chat-note.chat-cancelled"))
    wait(browser, lambda d: idle(d))
    assert "cancelled" in browser.find_element(By.ID, "chat-status").text
    partial = browser.find_element(By.CSS_SELECTOR, ".chat-assistant .chat-text").text
    assert partial.startswith("w0 w1") and "w2999" not in partial


def test_an_unknown_agent_has_no_chat(server: Server, browser: WebDriver) -> None:
    browser.get(f"{server.base}/chat/nobody")
    assert "no agent 'nobody'" in browser.find_element(By.TAG_NAME, "main").text


def test_the_attach_button_uploads_files_with_the_message(
    server: Server, browser: WebDriver, tmp_path: Path
) -> None:
    import hashlib

    photo = b"\xff\xd8\xff\xe0" + bytes(range(256)) * 400
    path = tmp_path / "photo.jpg"
    path.write_bytes(photo)
    browser.get(f"{server.base}/chat/chat")
    browser.find_element(By.ID, "chat-attach").send_keys(str(path))
    send(browser, "what is this?")
    wait(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, ".chat-msg")) >= 2)
    wait(browser, lambda d: idle(d))
    first = browser.find_elements(By.CSS_SELECTOR, ".chat-msg .chat-text")[0].text
    assert first == "what is this? [photo.jpg]"
    scope = browser.find_element(By.ID, "chat-scope").text
    with server.client() as client:
        turns = client.get(f"/api/scopes/{scope}").json()["turns"]
    users = [r["record"] for t in turns for r in t["records"] if r["record"]["role"] == "user"]
    image = users[0]["content"][1]
    assert image["blob"] == hashlib.sha256(photo).hexdigest() and image["name"] == "photo.jpg"
    assert browser.find_element(By.ID, "chat-attach").get_attribute("value") == ""
