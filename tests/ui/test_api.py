"""The JSON API behind the pages, and following a running run by polling its events."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any
from urllib.parse import quote

import httpx

from tether import define_tool
from tether.lab import Registry, Runtime
from tether.stores.run_store import RunInfo
from tether.testing import script_client

from .conftest import HOSTILE, World, client_for


async def get_json(client: httpx.AsyncClient, url: str, status: int = 200) -> Any:
    response = await client.get(url)
    assert response.status_code == status, (url, response.text[:300])
    assert response.headers["content-type"] == "application/json"
    # Markup characters never appear raw, even inside JSON strings.
    assert "<" not in response.text and ">" not in response.text
    return response.json()


async def test_api_runs_lists_what_the_runs_page_lists(
    client: httpx.AsyncClient, world: World
) -> None:
    body = await get_json(client, "/api/runs")
    assert [r["run_id"] for r in body["runs"]] == [
        world.review,
        world.failed,
        world.second,
        world.first,
    ]
    first = body["runs"][-1]
    assert first["kind"] == "agent" and first["name"] == "researcher"
    assert first["status"] == "completed" and first["memory_scope"] == "notes"
    assert first["tags"] == ["demo", HOSTILE]  # the value itself, unharmed
    assert first["duration"] >= 0 and first["ended_at"] >= first["started_at"]
    assert body["next_cursor"] is None and body["errors"] == []
    every = await get_json(client, "/api/runs?all=1")
    assert world.title_run in {r["run_id"] for r in every["runs"]}


async def test_api_run_has_the_workflow_tree(client: httpx.AsyncClient, world: World) -> None:
    body = await get_json(client, f"/api/runs/{world.review}")
    assert body["run"]["name"] == "review" and body["run"]["status"] == "completed"
    assert body["workflow"]["input"] == {"topic": HOSTILE}
    tree = body["tree"]
    [outline] = tree["steps"]
    assert outline["step_id"] == "outline" and outline["output"] == "An outline."
    [writer] = outline["children"]
    assert (writer["kind"], writer["name"]) == ("agent", "writer")
    [polish] = tree["children"]
    assert polish["name"] == "polish" and polish["steps"][0]["step_id"] == "shine"
    agent = await get_json(client, f"/api/runs/{world.first}")
    assert agent["tree"] is None and agent["last_seq"] == 13


async def test_api_events_after_n(client: httpx.AsyncClient, world: World) -> None:
    body = await get_json(client, f"/api/events/{world.first}")
    assert [e["seq"] for e in body["events"]] == list(range(1, 14))
    assert body["done"] is True and body["status"] == "completed" and body["last_seq"] == 13
    tail = await get_json(client, f"/api/events/{world.first}?after=9")
    assert [e["type"] for e in tail["events"]] == [
        "agent_text_delta",
        "model_call_finished",
        "agent_messages_committed",
        "agent_finished",
    ]
    assert tail["events"][0]["data"]["text"] == HOSTILE
    none = await get_json(client, f"/api/events/{world.first}?after=13")
    assert none["events"] == [] and none["last_seq"] == 13
    bad = await get_json(client, f"/api/events/{world.first}?after=x", 400)
    assert "after must be an integer" in bad["error"]["message"]
    await get_json(client, f"/api/events/{world.first}?after=-1", 400)


async def test_api_scopes(client: httpx.AsyncClient, world: World) -> None:
    body = await get_json(client, "/api/scopes")
    by_scope = {s["scope"]: s for s in body["scopes"]}
    assert set(by_scope) == {"notes", world.writer_scope}
    assert by_scope["notes"]["title"] == f"Title {HOSTILE}"
    assert by_scope["notes"]["length"] == 7 and by_scope["notes"]["agent_id"] == "researcher"
    notes = await get_json(client, "/api/scopes/notes")
    assert notes["system_prompt"] == {
        "source": "pinned",
        "text": f"You are a research assistant. {HOSTILE}",
        "error": None,
        "agent_id": "researcher",
    }
    assert [(t["start"], t["end"], t["run"]["run_id"]) for t in notes["turns"]] == [
        (1, 5, world.first),
        (5, 7, world.second),
    ]
    assert [r["index"] for r in notes["turns"][1]["records"]] == [5, 6]
    writer = await get_json(client, f"/api/scopes/{quote(world.writer_scope, safe='')}")
    assert writer["scope"] == world.writer_scope and len(writer["turns"]) == 1


async def test_api_scope_prompt_overlay(client: httpx.AsyncClient) -> None:
    broken = await get_json(client, "/api/scopes/broken")
    assert broken["system_prompt"]["source"] == "live"
    assert broken["info"] is None and broken["turns"][0]["records"] == []
    assert broken["turns"][0]["run"]["status"] == "failed"
    error = await get_json(client, "/api/scopes/new?agent=templated")
    assert error["system_prompt"]["source"] == "error"
    assert error["system_prompt"]["text"] is None
    assert "'missing' is undefined" in error["system_prompt"]["error"]


async def test_api_404s(client: httpx.AsyncClient) -> None:
    for url in [
        "/api/runs/nope",
        "/api/events/nope",
        "/api/scopes/nope",
        "/api/nothing",
        f"/api/runs/{quote(HOSTILE, safe='')}",
    ]:
        body = await get_json(client, url, 404)
        assert body["error"]["type"] == "not_found", url


async def test_a_running_run_is_followed_by_polling_its_events() -> None:
    runtime = Runtime(store="memory", version=False)
    gate = asyncio.Event()

    async def wait(value: Any) -> str:
        await gate.wait()
        return f"opened {HOSTILE}"

    agent = runtime.create_agent(
        id="slow",
        tools=[define_tool(name="wait", description="Wait for the gate", execute=wait)],
        model=script_client(
            [{"tool_use": [{"name": "wait", "input": {}}]}, {"text": ["after ", "the gate"]}]
        ),
    )
    handle = agent.run(memory_scope="live", user="go")
    async with client_for(runtime) as client:
        seen = await events_until(client, handle.run_id, "agent_tool_call")
        assert seen["status"] == "running" and seen["done"] is False
        page = await client.get(f"/runs/{handle.run_id}")
        assert "data-live-run" in page.text
        assert f'data-events-url="/api/events/{handle.run_id}"' in page.text
        assert f'data-after="{seen["last_seq"]}"' in page.text
        gate.set()
        await handle.result
        rest = await get_json(client, f"/api/events/{handle.run_id}?after={seen['last_seq']}")
        assert rest["events"][0]["seq"] == seen["last_seq"] + 1
        assert [e["type"] for e in rest["events"]] == [
            "agent_tool_result",
            "agent_messages_committed",
            "model_call_started",
            "agent_text_delta",
            "agent_text_delta",
            "model_call_finished",
            "agent_messages_committed",
            "agent_finished",
        ]
        assert rest["done"] is True and rest["status"] == "completed"
        finished = await client.get(f"/runs/{handle.run_id}")
        assert "data-live-run" not in finished.text
    await runtime.aclose()


async def events_until(client: httpx.AsyncClient, run_id: str, kind: str) -> Any:
    """Poll the API until an event of `kind` is recorded (the recorder writes in the
    background); bounded, so a run that never gets there fails the test."""
    for _ in range(1000):
        response = await client.get(f"/api/events/{run_id}")
        if response.status_code == 200:
            body = json.loads(response.text)
            if any(e["type"] == kind for e in body["events"]):
                return body
        await asyncio.sleep(0.01)
    raise AssertionError(f"run {run_id} never recorded {kind}")


async def test_run_ids_that_look_like_api_paths_reach_their_own_run() -> None:
    """Ids are path segments with `/` encoded, but the server matches routes on the decoded
    path: run "x/events" must not be taken for the events of run "x", and a run called ".."
    (which a client resolves away as a dot segment) is reached through the query."""
    runtime = Runtime(store="memory", version=False)
    for run_id in ("x", "x/events", ".."):
        await runtime.run_store.start_run(
            RunInfo(run_id=run_id, kind="agent", name="a", started_at=1.0)
        )
    await runtime.run_store.append_events("x", [{"type": "agent_started", "at": 1.0, "data": {}}])
    async with client_for(runtime) as client:
        run = await get_json(client, f"/api/runs/{quote('x/events', safe='')}")
        assert run["run"]["run_id"] == "x/events"
        events = await get_json(client, "/api/events/x")
        assert events["run_id"] == "x" and [e["seq"] for e in events["events"]] == [1]
        slash = await get_json(client, f"/api/events/{quote('x/events', safe='')}")
        assert slash["run_id"] == "x/events" and slash["events"] == []
        # The live page polls the URL it is given, adding its own `after`.
        html = (await client.get("/runs/?id=..")).text
        url = re.search(r'data-events-url="([^"]+)"', html)
        assert url is not None
        polled = await get_json(client, url.group(1).replace("&amp;", "&") + "&after=0")
        assert polled["run_id"] == ".." and polled["done"] is False
        assert (await get_json(client, "/api/runs/?id=.."))["run"]["run_id"] == ".."
        await get_json(client, "/api/scopes/?id=..", 404)
    await runtime.aclose()


async def test_after_out_of_a_stores_range_is_a_400(
    client: httpx.AsyncClient, world: World
) -> None:
    body = await get_json(client, f"/api/events/{world.first}?after={2**63}", 400)
    assert body["error"] == {
        "type": "bad_request",
        "message": f"after must be an integer from 0 to {2**63 - 1}, got '{2**63}'",
    }
    last = await get_json(client, f"/api/events/{world.first}?after={2**63 - 1}")
    assert last["events"] == [] and last["done"] is True
    for bad in ("limit=x", "limit=0", "limit=201", "status=nope", "since=yesterday", "cursor=zz"):
        page = await get_json(client, f"/api/runs?{bad}", 400)
        assert page["error"]["type"] == "bad_request", bad


async def test_experiment_case_conversations_are_left_out_of_the_conversation_list() -> None:
    runtime = Runtime(store="memory", version=False)
    agent = runtime.create_agent(id="echo", model="test")
    await agent.run(memory_scope="mine", user="hello").result
    await agent.run(memory_scope="eval/exp/1/c1/0", user="a case").result
    registry = Registry(runtime, {"echo": agent}, {})
    async with client_for(runtime, registry) as client:
        listed = await get_json(client, "/api/scopes")
        assert [s["scope"] for s in listed["scopes"]] == ["mine"]
        found = await get_json(client, "/api/scopes?q=case")
        assert found["scopes"] == []
        # Still there for the experiment's page to link to.
        case = await get_json(client, f"/api/scopes/{quote('eval/exp/1/c1/0', safe='')}")
        assert len(case["turns"]) == 1
    await runtime.aclose()
