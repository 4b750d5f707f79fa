"""The conversation page labels each assistant message with the agent that wrote it, in
headless Chromium: a turn handed from triage to billing shows both, and an agent name is
data (escaped), never markup."""

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

HOSTILE = "<img src=x onerror=alert(1)>"


async def _fill(runtime: Runtime) -> None:
    billing = runtime.agents["billing"]
    triage = runtime.agents["triage"]
    assert billing is not None
    await triage.run(memory_scope="desk", user="Where is my invoice?").result
    await triage.run(memory_scope="desk", user="Thanks").result
    await runtime.message_store.append(
        "odd",
        [
            {"role": "user", "content": [{"type": "text", "text": "hi"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "hello"}], "agent": HOSTILE},
        ],
    )


@pytest.fixture
def url(tmp_path: Path) -> Iterator[str]:
    runtime = Runtime(store=f"sqlite:///{tmp_path / 'ui.db'}", version=False)
    billing = runtime.create_agent(
        id="billing",
        system_prompt="You are billing.",
        model=script_client([{"text": "It is 42 EUR."}, {"text": "You are welcome."}]),
    )
    runtime.create_agent(
        id="triage",
        system_prompt="You are triage.",
        model=script_client(
            [{"tool_use": [{"name": "transfer_to_billing", "input": {"reason": "invoice"}}]}]
        ),
        handoffs=[billing],
    )
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


def test_each_assistant_message_is_labelled_with_its_agent(url: str, tmp_path: Path) -> None:
    with chromium(tmp_path / "chromium") as browser:
        browser.get(f"{url}/conversations/desk")
        records = browser.find_elements(By.CSS_SELECTOR, "article.record")
        labelled = [
            (
                r.find_element(By.CSS_SELECTOR, ".role").text.lower(),
                [a.text for a in r.find_elements(By.CSS_SELECTOR, ".agent")],
            )
            for r in records
            if "role-system" not in (r.get_attribute("class") or "")
        ]
        assert labelled == [
            ("user", []),
            ("assistant", ["triage"]),  # the transfer call
            ("tool", []),
            ("assistant", ["billing"]),  # the same turn, answered by billing
            ("user", []),
            ("assistant", ["billing"]),  # the next turn went to the holder
        ]
        page = browser.page_source
        assert "It is 42 EUR." in page and "You are welcome." in page
        browser.get(f"{url}/conversations/odd")
        (label,) = browser.find_elements(By.CSS_SELECTOR, ".agent")
        assert label.text == HOSTILE  # shown as text
        assert not browser.find_elements(By.CSS_SELECTOR, "article.record img")
