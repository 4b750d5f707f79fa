"""The README's test command passes on a machine without Chromium: the browser tests skip, saying
why, and the tests beside them in the same modules still run (a module that skips itself as a
whole must not be imported by another)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_ui_tests_collect_and_pass_with_chromium_hidden() -> None:
    env = {
        **os.environ,
        "TETHER_TEST_CHROMIUM": "/nonexistent/chromium",
        "TETHER_TEST_CHROMEDRIVER": "/nonexistent/chromedriver",
    }
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-rs",
            "-p",
            "no:cacheprovider",
            "tests/ui/test_browser.py",
            "tests/ui/test_experiments.py",
            "tests/serve/test_chat_browser.py",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert "error" not in out.lower().split("short test summary info")[-1], out
    assert "1 passed" in out, out  # the experiment pages over ASGI
    assert "no /nonexistent/chromium / /nonexistent/chromedriver: apt-get install" in out, out
