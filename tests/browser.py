"""Headless Debian Chromium for the browser tests, started one way everywhere."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pytest

if TYPE_CHECKING:
    from selenium.webdriver.remote.webdriver import WebDriver

CHROMIUM = os.environ.get("TETHER_TEST_CHROMIUM", "/usr/bin/chromium")
"""The browser binary; `TETHER_TEST_CHROMIUM` points elsewhere (or at nothing, to see the suite
pass on a machine without one)."""
CHROMEDRIVER = os.environ.get("TETHER_TEST_CHROMEDRIVER", "/usr/bin/chromedriver")
MISSING = f"no {CHROMIUM} / {CHROMEDRIVER}: apt-get install chromium chromium-driver"
"""Why a browser test was skipped, and how to get the browser."""

T = TypeVar("T")

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--no-first-run",
    # Without these Chromium keeps reaching for Google's hosts, which this network refuses.
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def have_chromium() -> bool:
    return os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)


needs_chromium = pytest.mark.skipif(not have_chromium(), reason=MISSING)
"""Mark one test of a module that also has tests without a browser."""


def require_chromium() -> None:
    """Skip the calling test module, saying how to get the browser, where it is absent. Only a
    module whose every test needs the browser calls it; nothing may import from such a module."""
    if not have_chromium():
        pytest.skip(MISSING, allow_module_level=True)


def run_in_thread(coro: Coroutine[Any, Any, T]) -> T:
    """Run `coro` to completion on a fresh event loop in its own thread (module fixtures are
    set up outside the tests' loops)."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(coro)
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]  # type: ignore[no-any-return]


@contextmanager
def chromium(profile: Path, *extra_flags: str) -> Iterator[WebDriver]:
    """A driver on a fresh profile directory; quit on exit."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*FLAGS, *extra_flags):
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    # The driver path is given, so Selenium never looks for (or downloads) a browser.
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()
