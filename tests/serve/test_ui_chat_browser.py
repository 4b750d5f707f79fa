"""`tether ui` has the chat page, with the answer's timeline beside the conversation: headless
Chromium against a real `tether ui` process. The project's files are followed (an agent added
to `tether.toml` can be chatted with without a restart)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from tests.browser import chromium, require_chromium

from .conftest import Server, start_server, write_project

require_chromium()

from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.remote.webdriver import WebDriver  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_project(tmp_path_factory.mktemp("ui-chat") / "project")


@pytest.fixture(scope="module")
def server(project: Path) -> Iterator[Server]:
    env = {"TETHER_TEST_STORE": f"sqlite:///{project / 'tether.db'}", "TETHER_TEST_DELAY": "0.02"}
    server = start_server(project, env, command="ui")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebDriver]:
    with chromium(tmp_path_factory.mktemp("chromium"), "--window-size=1400,900") as driver:
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


def bars(browser: WebDriver) -> list[tuple[str, str]]:
    """(kind class, label) of each timeline bar."""
    out = []
    for item in browser.find_elements(By.CSS_SELECTOR, "#chat-timeline-bars .chat-bar"):
        kind = next(
            c
            for c in (item.get_attribute("class") or "").split()
            if c in ("chat-bar-model", "chat-bar-tool")
        )
        out.append((kind, item.find_element(By.CSS_SELECTOR, ".chat-bar-label span").text))
    return out


def test_the_ui_chats_with_the_timeline_beside_the_answer(
    server: Server, browser: WebDriver
) -> None:
    browser.get(f"{server.base}/chat")
    browser.find_element(By.LINK_TEXT, "chat").click()
    wait(browser, lambda d: d.current_url.endswith("/chat/chat"))
    send(browser, "tool please")
    wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".chat-tool-result"))
    wait(browser, lambda d: idle(d))
    messages = browser.find_elements(By.CSS_SELECTOR, ".chat-msg .chat-text")
    assert [m.text for m in messages] == ["tool please", "Looking it up. ", "The tool answered."]
    # Two model calls around one tool call, each a bar, once the run has ended.
    wait(
        browser,
        lambda d: len(bars(d)) == 3 and not d.find_elements(By.CSS_SELECTOR, ".chat-bar-running"),
    )
    kinds = [kind for kind, _ in bars(browser)]
    assert sorted(kinds) == ["chat-bar-model", "chat-bar-model", "chat-bar-tool"]
    assert ("chat-bar-tool", "tool lookup") in bars(browser)
    # The timeline links to the run's own page in the UI.
    link = browser.find_element(By.CSS_SELECTOR, "#chat-timeline-run a")
    assert link.text.startswith("Run ")
    link.click()
    wait(browser, lambda d: "/runs/" in d.current_url)
    assert "tool lookup" in browser.page_source


def test_an_agent_added_to_the_project_is_served_without_a_restart(
    server: Server, project: Path, browser: WebDriver
) -> None:
    assert httpx.get(f"{server.base}/chat/helper").status_code == 404
    (project / "extra_app.py").write_text(
        "from project_app import model, runtime\n\n"
        'helper = runtime.create_agent(id="helper", model=model, system_prompt="Help.")\n',
        encoding="utf-8",
    )
    toml = project / "tether.toml"
    toml.write_text(
        toml.read_text(encoding="utf-8").replace(
            'agents = ["project_app:chat"]', 'agents = ["project_app:chat", "extra_app:helper"]'
        ),
        encoding="utf-8",
    )
    deadline = time.monotonic() + 15
    while httpx.get(f"{server.base}/chat/helper").status_code != 200:
        assert time.monotonic() < deadline, server.log.read_text(errors="replace")
        time.sleep(0.3)
    browser.get(f"{server.base}/chat/helper")
    send(browser, "hi")
    wait(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, ".chat-msg")) == 2)
    wait(browser, lambda d: idle(d))
    assert browser.find_elements(By.CSS_SELECTOR, ".chat-msg .chat-text")[-1].text == (
        "Hello from turn 1."
    )
