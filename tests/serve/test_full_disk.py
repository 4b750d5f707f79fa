"""A full disk under a real `tether serve` process: its SQLite store lives on a 3 MB tmpfs, and a
run that writes more than that fails — its stream on this server ends at once `failed` with the
store's error (the store cannot take the run's end either), instead of waiting for the run's
lease to expire and reading `interrupted`. Needs a tmpfs mount (root); skipped, saying so,
where the test cannot mount one."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import Server, start_server, stream_all, write_project


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    where = tmp_path / "disk"
    where.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(where)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here (needs root): {mounted.stderr.decode()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


@pytest.fixture
def server(small_disk: Path, tmp_path: Path) -> Iterator[Server]:
    root = write_project(tmp_path / "project")
    server = start_server(
        root,
        {
            "TETHER_TEST_STORE": f"sqlite:///{small_disk / 'tether.db'}",
            "TETHER_TEST_DELAY": "0.002",
        },
    )
    yield server
    server.stop()


def test_a_run_that_fills_the_disk_fails_and_its_stream_ends_at_once(server: Server) -> None:
    with server.client() as client:
        started = client.post("/api/agents/chat/runs", json={"input": "chunks 3000 1000"})
        assert started.status_code == 202, started.text
        messages = stream_all(client, started.json()["run_id"])
        end = messages[-1]
        assert end.event == "run_ended"
        assert end.data["status"] == "failed", end.data
        assert "disk is full" in end.data["error"]
        # The server goes on answering reads.
        assert client.get("/api/runs").status_code == 200
