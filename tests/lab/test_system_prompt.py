"""The pinned system prompt: pinned on a new scope, reused after, and the conflict rules."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from tests.helpers import texts

from tether.errors import TemplateError
from tether.lab import Runtime

from .conftest import event_types, pin, scripted, system_of


async def test_a_new_scope_pins_the_prompt_as_its_first_record(lab: Runtime) -> None:
    client = scripted({"text": "ok"})
    researcher = lab.create_agent(
        id="researcher", system_prompt="You are a research assistant.", model=client
    )
    await researcher.run(memory_scope="notes", user="First turn").result
    stored = await lab.message_store.load("notes")
    assert stored[0] == pin("You are a research assistant.", "researcher")
    assert [r for r, _ in texts(client.calls[0]["messages"])] == ["user"]


async def test_the_same_agent_again_keeps_the_pin_silently_even_after_a_hot_reload(
    lab: Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    client = scripted({"text": "1"}, {"text": "2"})
    researcher = lab.create_agent(
        id="researcher", system_prompt="You are a research assistant.", model=client
    )
    first = await researcher.run(memory_scope="notes", user="First turn").result
    # A hot reload changes the live definition; the conversation in flight keeps its pin.
    researcher.system_prompt = "You are a pirate."
    with caplog.at_level(logging.WARNING, logger="tether.lab"):
        second = await researcher.run(memory_scope="notes", user="Follow-up").result
    assert system_of(client.calls[1]) == "You are a research assistant."
    assert caplog.records == []
    assert "agent_warning" not in await event_types(lab, second.run_id)
    assert (await lab.message_store.load("notes"))[0] == pin(
        "You are a research assistant.", "researcher"
    )
    # A new scope pins the new prompt.
    third_client = scripted({"text": "3"})
    researcher.model = third_client
    await researcher.run(memory_scope="other", user="hi").result
    assert system_of(third_client.calls[0]) == "You are a pirate."
    assert first.memory_scope == "notes"


async def test_a_different_agent_keeps_the_pin_and_warns(
    lab: Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    client = scripted({"text": "draft"}, {"text": "tight"})
    researcher = lab.create_agent(id="researcher", system_prompt="Research.", model=client)
    editor = lab.create_agent(id="editor", system_prompt="Edit.", model=client)
    await researcher.run(memory_scope="notes", user="Draft the section").result
    with caplog.at_level(logging.WARNING, logger="tether.lab"):
        result = await editor.run(memory_scope="notes", user="Tighten the draft").result
    # Prompts are not stacked: the pinned one alone is used.
    assert system_of(client.calls[1]) == "Research."
    assert len(caplog.records) == 1
    assert "'editor'" in caplog.records[0].getMessage()
    assert "'researcher'" in caplog.records[0].getMessage()
    warnings = [
        e["data"] for e in await lab.run_store.events(result.run_id) if e["type"] == "agent_warning"
    ]
    assert len(warnings) == 1
    assert warnings[0]["code"] == "system_prompt_conflict"
    assert (warnings[0]["agent_id"], warnings[0]["pinned_agent_id"]) == ("editor", "researcher")
    # Same transcript: the editor saw the researcher's turn.
    assert texts(client.calls[1]["messages"])[:2] == [
        ("user", "Draft the section"),
        ("assistant", "draft"),
    ]


async def test_the_conflict_warning_can_be_suppressed(
    lab: Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    client = scripted({"text": "draft"}, {"text": "tight"})
    researcher = lab.create_agent(id="researcher", system_prompt="Research.", model=client)
    editor = lab.create_agent(id="editor", system_prompt="Edit.", model=client)
    await researcher.run(memory_scope="notes", user="Draft the section").result
    with caplog.at_level(logging.WARNING, logger="tether.lab"):
        result = await editor.run(
            memory_scope="notes",
            user="Tighten the draft",
            suppress_system_prompt_conflict_warning=True,
        ).result
    assert system_of(client.calls[1]) == "Research."
    assert caplog.records == []
    assert "agent_warning" not in await event_types(lab, result.run_id)


async def test_use_current_applies_this_agents_prompt_for_one_episode_only(
    lab: Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    client = scripted({"text": "draft"}, {"text": "tight"}, {"text": "again"})
    researcher = lab.create_agent(id="researcher", system_prompt="Research.", model=client)
    editor = lab.create_agent(id="editor", system_prompt="Edit.", model=client)
    await researcher.run(memory_scope="notes", user="Draft").result
    with caplog.at_level(logging.WARNING, logger="tether.lab"):
        await editor.run(
            memory_scope="notes", user="Tighten", system_prompt_conflict="use-current"
        ).result
    assert system_of(client.calls[1]) == "Edit."
    assert caplog.records == []
    # The stored pin is not rewritten.
    assert (await lab.message_store.load("notes"))[0] == pin("Research.", "researcher")
    await editor.run(
        memory_scope="notes", user="More", suppress_system_prompt_conflict_warning=True
    ).result
    assert system_of(client.calls[2]) == "Research."


async def test_use_current_also_applies_a_hot_reloaded_prompt_of_the_same_agent(
    lab: Runtime,
) -> None:
    client = scripted({"text": "1"}, {"text": "2"})
    agent = lab.create_agent(id="a", system_prompt="Old.", model=client)
    await agent.run(memory_scope="s", user="x").result
    agent.system_prompt = "New."
    await agent.run(memory_scope="s", user="y", system_prompt_conflict="use-current").result
    assert system_of(client.calls[1]) == "New."
    assert (await lab.message_store.load("s"))[0] == pin("Old.", "a")


async def test_a_different_agent_with_the_same_prompt_is_no_conflict(
    lab: Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    client = scripted({"text": "1"}, {"text": "2"})
    a = lab.create_agent(id="a", system_prompt="Shared identity.", model=client)
    b = lab.create_agent(id="b", system_prompt="Shared identity.", model=client)
    await a.run(memory_scope="s", user="x").result
    with caplog.at_level(logging.WARNING, logger="tether.lab"):
        await b.run(memory_scope="s", user="y").result
    assert caplog.records == []


async def test_an_agent_without_a_prompt_pins_nothing_and_sends_no_system(lab: Runtime) -> None:
    client = scripted({"text": "1"})
    agent = lab.create_agent(id="plain", model=client)
    await agent.run(memory_scope="s", user="x").result
    assert client.calls[0]["system"] == []
    assert [r["role"] for r in await lab.message_store.load("s")] == ["user", "assistant"]


async def test_a_template_prompt_is_rendered_once_and_pinned(lab: Runtime, tmp_path: Path) -> None:
    (tmp_path / "researcher.md").write_text("You research {{ field }}.", encoding="utf-8")
    template = lab.create_template(
        path="researcher.md", relative_to=tmp_path / "agents.py", data={"field": "biology"}
    )
    client = scripted({"text": "1"}, {"text": "2"})
    agent = lab.create_agent(id="researcher", system_prompt=template, model=client)
    await agent.run(memory_scope="s", user="x").result
    (tmp_path / "researcher.md").write_text("You are changed.", encoding="utf-8")
    await agent.run(memory_scope="s", user="y").result
    assert system_of(client.calls[0]) == system_of(client.calls[1]) == "You research biology."
    assert (await lab.message_store.load("s"))[0] == pin("You research biology.", "researcher")


async def test_a_template_that_cannot_render_fails_the_episode_and_stores_nothing(
    lab: Runtime,
) -> None:
    template = lab.create_template(source="Focus on {{ topic }}.")
    client = scripted({"text": "never"})
    agent = lab.create_agent(id="a", system_prompt=template, model=client)
    handle = agent.run(memory_scope="s", user="x")
    with pytest.raises(TemplateError) as info:
        await handle.result
    assert info.value.variable == "topic"
    assert info.value.template == "<string>"
    assert client.calls == []
    assert await lab.message_store.load("s") == []
    failed = [e for e in await lab.run_store.events(handle.run_id) if e["type"] == "agent_failed"]
    assert failed[0]["data"]["error"]["type"] == "TemplateError"
    inspection = agent.inspect_system_prompt()
    assert inspection.is_err and inspection.text is None
    assert "topic" in (inspection.error or "")
