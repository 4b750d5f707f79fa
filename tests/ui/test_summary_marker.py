"""Where older turns were summarized, the conversation page shows a marker in headless Chromium,
with the summary's text behind it; the records it covers are still shown."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.browser import chromium, require_chromium, run_in_thread

from tether.lab import Runtime
from tether.testing import script_client
from tether.ui._serve import _server

require_chromium()

from selenium.webdriver.common.by import By  # noqa: E402


def _text(role: str, text: str) -> dict[str, object]:
    return {"role": role, "content": [{"type": "text", "text": text}]}


async def _fill(runtime: Runtime) -> None:
    records: list[object] = [{"role": "system", "content": "Be brief.", "agent_id": "chat"}]
    for i in range(4):
        records += [_text("user", f"question {i}"), _text("assistant", f"answer {i}")]
    records.append(
        {
            "role": "summary",
            "content": [{"type": "text", "text": "The user asked four questions."}],
            "covers": [1, 6],
            "model": "anthropic:claude-haiku",
        }
    )
    records += [_text("user", "question 4"), _text("assistant", "answer 4")]
    await runtime.message_store.append("talk", records)  # type: ignore[arg-type]


@pytest.fixture
def url(tmp_path: Path) -> Iterator[str]:
    runtime = Runtime(
        store=f"sqlite:///{tmp_path / 'ui.db'}",
        version=False,
        defaults={"model": script_client([])},
    )
    runtime.create_agent(id="chat", system_prompt="Be brief.")
    run_in_thread(_fill(runtime))
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
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()
        run_in_thread(runtime.aclose())


def test_the_summary_marker_opens_to_the_summary(url: str, tmp_path: Path) -> None:
    with chromium(tmp_path / "chromium") as browser:
        browser.get(f"{url}/conversations/talk")
        marker = browser.find_element(By.CSS_SELECTOR, "details.summary-marker")
        label = marker.find_element(By.TAG_NAME, "summary")
        assert "records 1–6" in label.text and "summarized" in label.text
        assert marker.get_attribute("open") is None
        assert "four questions" not in marker.text  # behind the marker until opened
        label.click()
        assert marker.get_attribute("open") is not None
        assert "The user asked four questions." in marker.text
        # the covered records are still on the page, before the marker
        main = browser.find_element(By.TAG_NAME, "main").text
        assert main.index("question 0") < main.index("summarized") < main.index("question 4")
