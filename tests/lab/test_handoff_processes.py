"""Handoffs across processes, on one SQLite file and on one PostgreSQL database: a turn handed
over in one process leaves the scope held by the target, and a fresh process sending the next
turn to the entry agent reaches the target (the holder is in the stored records, not in a
process)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from tests.postgres_server import postgres_url

from tether.lab import Runtime

WORKER = Path(__file__).with_name("handoff_worker.py")


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'handoff.db'}" if request.param == "sqlite" else postgres_url()


def _turn(url: str, scope: str, message: str) -> str:
    done = subprocess.run(
        [sys.executable, str(WORKER), url, scope, message],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


async def _stored(url: str, scope: str) -> list[dict[str, object]]:
    lab = Runtime(store=url, version=False)
    try:
        return list(await lab.message_store.load(scope))  # type: ignore[arg-type]
    finally:
        await lab.aclose()


def test_a_handoff_in_one_process_holds_the_scope_for_the_next(url: str) -> None:
    scope = f"handoff-{uuid.uuid4().hex}"
    # The entry agent's run, answered by billing in the same turn.
    assert _turn(url, scope, "where is my invoice?") == "RUN triage billing saw 3"
    # Another process: the turn sent to triage goes to billing, which holds the scope.
    assert _turn(url, scope, "can I pay now?") == "RUN billing billing saw 5"
    stored = asyncio.run(_stored(url, scope))
    assert [(r["role"], r.get("agent")) for r in stored] == [
        ("system", None),
        ("user", None),
        ("assistant", "triage"),
        ("tool", None),
        ("assistant", "billing"),
        ("user", None),
        ("assistant", "billing"),
    ]
