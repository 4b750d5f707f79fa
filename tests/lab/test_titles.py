"""Conversation titles: after the first successful episode of a new scope, isolated, best
effort, never on follow-ups, and never recursively."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pydantic
import pytest
from tests.helpers import texts

from tether.errors import ConfigError, LLMError
from tether.lab import ConversationTitleInput, ConversationTitleOutput, Runtime
from tether.workflows import Workflow, WorkflowContext

from .conftest import scripted


class TitleOut(pydantic.BaseModel):
    title: str


def fmt(messages: list[Any]) -> str:
    return "\n".join(
        f"{m['role']}: {p['text']}" for m in messages for p in m["content"] if p["type"] == "text"
    )


def conversation_title(
    lab: Runtime, namer_client: Any, *, recursive: bool = False
) -> Workflow[Any, Any]:
    """The seed's example: a namer agent with a title schema inside a typed workflow."""
    namer = lab.create_agent(
        id="conversation-title-namer",
        system_prompt="Reply with a short conversation title.",
        output_schema=TitleOut,
        model=namer_client,
    )

    async def run(
        input: ConversationTitleInput, ctx: WorkflowContext[ConversationTitleInput]
    ) -> ConversationTitleOutput:
        episode = await namer.run(
            memory_scope=ctx.memory_scope_with_suffix("namer"),
            user=f"Write a short title.\n\n{fmt(input['messages'])}",
        ).result
        return {"title": episode.output.title}

    workflow = lab.create_workflow("conversation-title", run)
    if recursive:
        namer.title_workflow = workflow
    return workflow


async def test_a_new_scope_is_named_after_its_first_successful_episode(lab: Runtime) -> None:
    namer_client = scripted({"text": '{"title": "CRISPR basics"}'})
    title = conversation_title(lab, namer_client)
    researcher = lab.create_agent(
        id="researcher",
        system_prompt="You are a research assistant.",
        title_workflow=title,
        model=scripted({"text": "CRISPR edits genes."}),
    )
    await researcher.run(memory_scope="notes", user="What is CRISPR?").result
    await lab.wait_idle()
    assert await lab.message_store.get_title("notes") == "CRISPR basics"
    # The workflow received the transcript (pin excluded).
    assert (
        texts(namer_client.calls[0]["messages"])[0][1]
        == "Write a short title.\n\nuser: What is CRISPR?\nassistant: CRISPR edits genes."
    )
    info = await lab.message_store.info("notes")
    assert info is not None and info.title == "CRISPR basics"


async def test_follow_up_turns_do_not_rename_the_conversation(lab: Runtime) -> None:
    namer_client = scripted({"text": '{"title": "First"}'}, {"text": '{"title": "Second"}'})
    researcher = lab.create_agent(
        id="researcher",
        title_workflow=conversation_title(lab, namer_client),
        model=scripted({"text": "a"}, {"text": "b"}),
    )
    await researcher.run(memory_scope="notes", user="one").result
    await lab.wait_idle()
    await researcher.run(memory_scope="notes", user="two").result
    await lab.wait_idle()
    assert len(namer_client.calls) == 1
    assert await lab.message_store.get_title("notes") == "First"


async def test_two_first_episodes_started_at_once_on_a_new_scope_name_it_once(
    lab: Runtime,
) -> None:
    names: list[str] = []

    async def count(input: Any, ctx: Any) -> Any:
        names.append(input["memory_scope"])
        return {"title": f"title {len(names)}"}

    client = scripted({"text": "a"}, {"text": "b"})
    researcher = lab.create_agent(
        id="researcher", title_workflow=lab.create_workflow("count-titles", count), model=client
    )
    await asyncio.gather(
        researcher.run(memory_scope="notes", user="one").result,
        researcher.run(memory_scope="notes", user="two").result,
    )
    await lab.wait_idle()
    # Turns on one scope run one after another: the second found the scope started by the
    # first (its request holds the first turn), so only the first is the scope's first episode.
    assert len(client.calls[1]["messages"]) == 3
    assert names == ["notes"]
    assert await lab.message_store.get_title("notes") == "title 1"


async def test_a_failing_title_workflow_never_fails_the_turn(
    lab: Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    async def broken(input: Any, ctx: Any) -> Any:
        raise RuntimeError("namer is down")

    researcher = lab.create_agent(
        id="researcher",
        title_workflow=lab.create_workflow("broken-title", broken),
        model=scripted({"text": "answer"}),
    )
    with caplog.at_level(logging.WARNING, logger="tether.lab"):
        result = await researcher.run(memory_scope="notes", user="q").result
        await lab.wait_idle()
    assert result.text == "answer"
    assert await lab.message_store.get_title("notes") is None
    warnings = [
        e["data"] for e in await lab.run_store.events(result.run_id) if e["type"] == "agent_warning"
    ]
    assert [w["code"] for w in warnings] == ["title_failed"]
    assert "namer is down" in warnings[0]["message"]
    assert any("namer is down" in r.getMessage() for r in caplog.records)


async def test_a_title_workflow_must_return_a_title(lab: Runtime) -> None:
    async def wrong_shape(input: Any, ctx: Any) -> Any:
        return {"name": "not a title"}

    researcher = lab.create_agent(
        id="r",
        title_workflow=lab.create_workflow("bad", wrong_shape),
        model=scripted({"text": "x"}),
    )
    result = await researcher.run(memory_scope="s", user="q").result
    await lab.wait_idle()
    assert await lab.message_store.get_title("s") is None
    assert "agent_warning" in [e["type"] for e in await lab.run_store.events(result.run_id)]


async def test_a_failed_episode_is_not_named(lab: Runtime) -> None:
    namer_client = scripted({"text": '{"title": "Never"}'})
    researcher = lab.create_agent(
        id="r",
        title_workflow=conversation_title(lab, namer_client),
        model=scripted({"error": LLMError("down", provider="script")}),
    )
    with pytest.raises(LLMError):
        await researcher.run(memory_scope="s", user="q").result
    await lab.wait_idle()
    assert namer_client.calls == []


async def test_a_title_workflow_that_runs_a_titled_agent_does_not_recurse(lab: Runtime) -> None:
    namer_client = scripted({"text": '{"title": "Once"}'}, {"text": '{"title": "Twice"}'})
    researcher = lab.create_agent(
        id="researcher",
        title_workflow=conversation_title(lab, namer_client, recursive=True),
        model=scripted({"text": "answer"}),
    )
    await researcher.run(memory_scope="notes", user="q").result
    await lab.wait_idle()
    # The namer's own new scope got no title run of its own.
    assert len(namer_client.calls) == 1
    assert await lab.message_store.get_title("notes") == "Once"


async def test_the_title_run_is_isolated_from_the_enclosing_workflow(lab: Runtime) -> None:
    namer_client = scripted({"text": '{"title": "Outlined"}'})
    researcher = lab.create_agent(
        id="researcher",
        title_workflow=conversation_title(lab, namer_client),
        model=scripted({"text": "outline"}),
    )

    async def review(topic: str, ctx: WorkflowContext[str]) -> str:
        async def outline() -> str:
            result = await researcher.run(
                memory_scope=ctx.memory_scope_with_suffix("outline"), user=topic
            ).result
            return result.text

        return await ctx.step("outline", outline)

    literature_review = lab.create_workflow("literature-review", review)
    handle = literature_review.run("CRISPR delivery")
    assert await handle.result == "outline"
    await lab.wait_idle()
    assert await lab.message_store.get_title(f"{handle.workflow_run_id}:outline") == "Outlined"
    runs = {r.workflow_id: r for r in await lab.workflow_store.list_runs()}
    title_run = runs["conversation-title"]
    assert title_run.parent_run_id is None
    assert title_run.root_run_id == title_run.run_id != handle.workflow_run_id


async def test_a_title_workflow_must_be_a_workflow(lab: Runtime) -> None:
    async def not_a_workflow(input: Any, ctx: Any) -> Any:
        return {"title": "x"}

    with pytest.raises(ConfigError, match="title_workflow= takes a workflow"):
        lab.create_agent(id="a", model=scripted(), title_workflow=not_a_workflow)  # type: ignore[call-overload]
