"""Starting agent runs over the API: a start is answered once the run is stored, before its
episode's first step (on SQLite those steps never wait, so a burst of starts answered after
them would each wait for every episode started before it)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from tether.lab import Runtime, _recorder
from tether.serve import create_app
from tether.testing import PacedClient, paced_client

from .conftest import asgi_client, parse_sse, sse_lines


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[PacedClient, httpx.AsyncClient]]:
    lab = Runtime(store=f"sqlite:///{tmp_path / 'tether.db'}", version=False)
    model = paced_client(lambda request: {"text": ["Hello ", "there."]})
    lab.create_agent(id="chat", model=model)
    async with asgi_client(create_app(lab)) as http:
        yield model, http
    await lab.aclose()


async def test_a_start_is_answered_once_stored_before_the_model_is_asked(
    served: tuple[PacedClient, httpx.AsyncClient],
) -> None:
    model, http = served
    response = await http.post("/api/agents/chat/runs", json={"input": "hi"})
    assert response.status_code == 202, response.text
    # Answered before the episode's first step: the model is not asked yet.
    assert model.calls == []
    run_id = response.json()["run_id"]
    # The run is stored already: listed running, and its stream follows it to its end.
    info = (await http.get(f"/api/runs/{run_id}")).json()["run"]
    assert info["status"] == "running"
    stream = await http.get(f"/api/runs/{run_id}/stream")
    messages = list(parse_sse(sse_lines([stream.text])))
    events = [(event, ident) for event, _, ident in messages if ident is not None]
    assert [ident for _, ident in events] == [str(n) for n in range(1, len(events) + 1)]
    assert events[0][0] == "agent_started" and events[-1][0] == "agent_finished"
    assert messages[-1][0] == "run_ended"
    assert len(model.calls) == 1


async def test_concurrent_starts_are_each_answered_and_each_run_goes_on(
    served: tuple[PacedClient, httpx.AsyncClient],
) -> None:
    model, http = served
    answers = await asyncio.gather(
        *(http.post("/api/agents/chat/runs", json={"input": f"hi {n}"}) for n in range(20))
    )
    assert all(a.status_code == 202 for a in answers)
    run_ids = {a.json()["run_id"] for a in answers}
    assert len(run_ids) == 20
    for run_id in run_ids:
        stream = await http.get(f"/api/runs/{run_id}/stream")
        *_, (event, data, _) = parse_sse(sse_lines([stream.text]))
        assert event == "run_ended" and json.loads(data)["status"] == "completed"
    assert len(model.calls) == 20


async def test_the_price_data_loads_as_the_server_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Not at the first model call, beside the first runs served.
    monkeypatch.setattr(_recorder, "_PRICING", None)
    lab = Runtime(store=f"sqlite:///{tmp_path / 'tether.db'}", version=False)
    async with asgi_client(create_app(lab)):
        assert _recorder._PRICING is not None
    await lab.aclose()
