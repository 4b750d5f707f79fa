"""The lab on PostgreSQL: `Runtime(store="postgresql://…")` keeps conversations, run records and
durable workflow journals on a real server, where a fresh Runtime finds them."""

from __future__ import annotations

import pytest
from tests.helpers import texts
from tests.postgres_server import postgres_url

from tether import Session
from tether.errors import StoreError
from tether.lab import Runtime
from tether.stores import PostgresMessageStore, PostgresRunStore, PostgresWorkflowStore
from tether.testing import script_client
from tether.workflows import WorkflowContext

from .conftest import pin, system_of


@pytest.fixture
def url() -> str:
    return postgres_url()


async def test_a_three_episode_conversation_is_read_back_by_a_fresh_runtime(url: str) -> None:
    client = script_client([{"text": f"reply {i}"} for i in (1, 2, 3)])
    lab = Runtime(store=url, version=False)
    assert isinstance(lab.message_store, PostgresMessageStore)
    assert isinstance(lab.run_store, PostgresRunStore)
    assert isinstance(lab.workflow_store, PostgresWorkflowStore)
    agent = lab.create_agent(id="researcher", system_prompt="You research.", model=client)
    for i in (1, 2, 3):
        result = await agent.run(memory_scope="notes", user=f"turn {i}").result
        assert result.text == f"reply {i}"
    # The third episode was sent the whole conversation so far.
    assert len(client.calls[2]["messages"]) == 5
    await lab.aclose()

    fresh = Runtime(store=url, version=False)
    stored = await fresh.message_store.load("notes")
    assert stored[0] == pin("You research.", "researcher")
    conversation = [
        ("user", "turn 1"),
        ("assistant", "reply 1"),
        ("user", "turn 2"),
        ("assistant", "reply 2"),
        ("user", "turn 3"),
        ("assistant", "reply 3"),
    ]
    assert texts(stored[1:]) == conversation
    Session.from_json({"id": "notes", "messages": stored[1:]})
    runs = await fresh.run_store.list_runs(memory_scope="notes")
    assert [(r.name, r.status) for r in runs] == [("researcher", "completed")] * 3
    kinds = [e["type"] for e in await fresh.run_store.events(runs[0].run_id)]
    assert kinds[0] == "agent_started" and kinds[-1] == "agent_finished"

    # The conversation goes on from where the first runtime left it, under the pinned prompt.
    later = script_client([{"text": "reply 4"}])
    agent = fresh.create_agent(id="researcher", system_prompt="A new prompt.", model=later)
    await agent.run(memory_scope="notes", user="turn 4").result
    assert texts(later.calls[0]["messages"]) == [*conversation, ("user", "turn 4")]
    assert system_of(later.calls[0]) == "You research."
    assert await fresh.message_store.length("notes") == 9
    await fresh.aclose()


async def test_a_durable_workflow_journaled_in_postgres_resumes_in_a_fresh_runtime(
    url: str,
) -> None:
    fetched: list[str] = []

    async def review(topic: str, ctx: WorkflowContext[str]) -> str:
        async def fetch() -> str:
            fetched.append(topic)
            return f"notes on {topic}"

        return await ctx.step("fetch", fetch)

    lab = Runtime(store=url, version=False)
    handle = lab.create_workflow("review", review).run("CRISPR")
    assert await handle.result == "notes on CRISPR"
    await lab.aclose()

    fresh = Runtime(store=url, version=False)
    again = fresh.create_workflow("review", review).run(workflow_run_id=handle.workflow_run_id)
    assert await again.result == "notes on CRISPR"
    assert fetched == ["CRISPR"]  # the journaled step was not run again
    steps = await fresh.workflow_store.list_steps(handle.workflow_run_id)
    assert [(s.step_id, s.output) for s in steps] == [("fetch", "notes on CRISPR")]
    await fresh.aclose()


async def test_an_unreachable_server_fails_the_episode_with_a_clear_error() -> None:
    lab = Runtime(store="postgresql://tether:s3cret@127.0.0.1:1/tether", version=False)
    agent = lab.create_agent(id="a", model=script_client([{"text": "x"}]))
    with pytest.raises(StoreError, match="cannot connect to PostgreSQL") as info:
        await agent.run(user="q").result
    assert "s3cret" not in str(info.value)
    await lab.aclose()
