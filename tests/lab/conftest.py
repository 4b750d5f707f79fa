"""Shared lab fixtures: a runtime on in-memory stores that records nothing about the checkout,
and helpers to read what an episode stored."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tether.lab import Runtime
from tether.stores.run_store import RunEvent
from tether.testing import ScriptClient, script_client


@pytest.fixture(params=["memory", "sqlite"])
async def lab(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Runtime]:
    """A runtime on in-memory stores, and on a SQLite file: every lab rule is checked on both."""
    store = "memory" if request.param == "memory" else f"sqlite:///{tmp_path / 'lab.db'}"
    runtime = Runtime(store=store, version=False, defaults={"model": script_client([])})
    yield runtime
    await runtime.aclose()


def scripted(*turns: Any) -> ScriptClient:
    return script_client(list(turns))


def pin(text: str, agent_id: str) -> dict[str, Any]:
    return {"role": "system", "content": [{"type": "text", "text": text}], "agent_id": agent_id}


def system_of(request: Any) -> str:
    return "\n\n".join(block["text"] for block in request["system"])


async def run_events(lab: Runtime, run_id: str) -> list[RunEvent]:
    return await lab.run_store.events(run_id)


async def event_types(lab: Runtime, run_id: str) -> list[str]:
    return [e["type"] for e in await lab.run_store.events(run_id)]
