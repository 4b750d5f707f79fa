"""The installed `tether` console script, end to end in real processes: an episode, its record,
Ctrl-C, and the inspection UI on a real port."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import IO

import httpx
import pytest
from tests.helpers import texts

from tether.cli import EXIT_INTERRUPTED

from .conftest import Project

TETHER = Path(sys.executable).parent / ("tether.exe" if sys.platform == "win32" else "tether")

posix_only = pytest.mark.skipif(sys.platform == "win32", reason="sends SIGINT to a child process")


def env() -> dict[str, str]:
    """The test's environment without provider keys, and with unbuffered output."""
    keys = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY")
    return {**{k: v for k, v in os.environ.items() if k not in keys}, "PYTHONUNBUFFERED": "1"}


def tether(project: Project, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(TETHER), *args],
        cwd=project.root,
        env=env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_console_script_is_installed() -> None:
    assert TETHER.is_file(), f"{TETHER} is missing: run scripts/install (pip install -e .)"


def test_an_episode_and_its_record_through_the_real_entry_point(project: Project) -> None:
    run = tether(project, "agent", "run", "echo", "--scope", "e2e", "--input", "over the wire")
    assert run.returncode == 0, run.stderr
    assert run.stdout == "you said: over the wire (1 messages)\n"
    assert "scope  e2e" in run.stderr
    listed = tether(project, "runs", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    (info,) = json.loads(listed.stdout)
    assert (info["name"], info["status"], info["memory_scope"]) == ("echo", "completed", "e2e")
    missing = tether(project, "agent", "run", "nobody", "--input", "x")
    assert missing.returncode == 2
    assert "no agent 'nobody'" in missing.stderr


@posix_only
def test_ctrl_c_in_a_real_process_cancels_cleanly_with_exit_130(project: Project) -> None:
    child = subprocess.Popen(
        [str(TETHER), "agent", "run", "stopper", "-s", "job", "--input", "noop then wait"],
        cwd=project.root,
        env=env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stderr is not None
        seen = []
        for line in child.stderr:  # the wait tool announces itself, then blocks
            seen.append(line)
            if line.strip() == "WAITING":
                break
        else:
            pytest.fail(f"the wait tool never ran: {''.join(seen)}")
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()
    assert child.returncode == EXIT_INTERRUPTED, "".join(seen) + err
    assert out == "calling noop\ncalling wait\n"
    assert "Error: interrupted: the episode of agent 'stopper' was cancelled" in err
    assert "Traceback" not in err
    assert texts(project.stored("job")) == [
        ("user", "noop then wait"),
        ("assistant", "calling noop <call noop>"),
        ("tool", "<result ok>"),
    ]
    listed = json.loads(tether(project, "runs", "list", "--json").stdout)
    assert listed[0]["status"] == "cancelled"
    assert listed[0]["error"].startswith("AbortedError")


def read_until(stream: IO[str], marker: str) -> str:
    """Lines of `stream` up to the one that is `marker` (fails if the stream ends first)."""
    seen = []
    for line in stream:
        seen.append(line)
        if line.strip() == marker:
            return "".join(seen)
    pytest.fail(f"never saw {marker}: {''.join(seen)}")


@posix_only
def test_a_second_ctrl_c_ends_a_run_that_will_not_stop(project: Project) -> None:
    """The first Ctrl-C asks the run to stop; a tool that ignores it would keep the command
    waiting (asyncio's shutdown waits for every task). The second ends the process at once."""
    child = subprocess.Popen(
        [str(TETHER), "agent", "run", "stopper", "-s", "job", "--input", "stubborn"],
        cwd=project.root,
        env=env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stderr is not None
        read_until(child.stderr, "WAITING")
        child.send_signal(signal.SIGINT)
        read_until(child.stderr, "IGNORED")  # the first Ctrl-C reached the tool
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()
    assert child.returncode == EXIT_INTERRUPTED, err
    assert out == "calling stubborn\n"
    assert err.splitlines()[-1] == (
        "Error: interrupted again: stopped at once, without waiting for the run to wind down"
    )
    assert "Traceback" not in err


@posix_only
def test_ui_serves_the_project_on_a_real_port_until_ctrl_c(project: Project) -> None:
    pytest.importorskip("tether.ui", reason="the inspection UI is not in this checkout")
    assert tether(project, "agent", "run", "echo", "-i", "for the ui").returncode == 0
    child = subprocess.Popen(
        [str(TETHER), "ui", "--port", "0"],
        cwd=project.root,
        env=env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert child.stdout is not None
        seen = []
        port = None
        for line in child.stdout:
            seen.append(line)
            found = re.search(r"running on http://127\.0\.0\.1:(\d+)", line)
            if found:
                port = int(found.group(1))
                break
        assert port is not None, "".join(seen)
        page = httpx.get(f"http://127.0.0.1:{port}/", follow_redirects=True, timeout=30)
        assert page.status_code == 200
        assert "for the ui" in page.text or "echo" in page.text  # the project's run is listed
        child.send_signal(signal.SIGINT)
        rest, _ = child.communicate(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()
    assert child.returncode == 0, "".join(seen) + rest
