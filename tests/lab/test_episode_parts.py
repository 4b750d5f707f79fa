"""What an episode runs with by its run options (`LabAgent._parts`): worked out once for runs
that set none of them, again once the definition or the runtime's clients changed."""

from __future__ import annotations

from tether.lab import Runtime

from .conftest import scripted


async def test_runs_that_set_no_such_option_share_their_parts() -> None:
    lab = Runtime(store="memory", version=False)
    agent = lab.create_agent(id="a", model=scripted({"text": "x"}), system_prompt="Answer.")
    first = agent.prepare_episode({"user": "q"}, buffer=None)
    again = agent.prepare_episode(
        {"user": "r", "memory_scope": "s", "tags": ["t"], "context": 1}, buffer=None
    )
    assert again.agent is first.agent and again.tags == ["t"] and again.scope == "s"
    own = agent.prepare_episode({"user": "q", "settings": {"temperature": 0}}, buffer=None)
    assert own.agent is not first.agent and own.agent.settings == {"temperature": 0}
    assert first.agent.settings is None
    await lab.aclose()


async def test_a_changed_definition_is_what_the_next_run_runs_with() -> None:
    lab = Runtime(store="memory", version=False)
    agent = lab.create_agent(id="a", model=scripted({"text": "x"}), system_prompt="Answer.")
    first = agent.prepare_episode({"user": "q"}, buffer=None).agent
    agent.system_prompt = "Answer briefly."
    changed = agent.prepare_episode({"user": "q"}, buffer=None).agent
    assert changed is not first
    assert changed.system_prompt.render_static() == ["Answer briefly."]
    await lab.aclose()


async def test_clients_built_anew_are_what_the_next_run_runs_on() -> None:
    lab = Runtime(store="memory", version=False)
    agent = lab.create_agent(id="a", model={"model": "openai:gpt-4o", "api_key": "sk-test-1234"})
    first = agent.prepare_episode({"user": "q"}, buffer=None).agent.harness
    assert agent.prepare_episode({"user": "q"}, buffer=None).agent.harness is first
    await lab.clients.aclose()
    rebuilt = agent.prepare_episode({"user": "q"}, buffer=None).agent.harness
    assert rebuilt is not first and rebuilt.client is not first.client
    await lab.aclose()
