"""`tether._options`: the agent's keywords are written once, and every signature built on them
refuses a misspelt keyword, for mypy and at run time."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tether import Session, create_agent
from tether._options import AgentOptions, AgentParts, TurnOverrides, keys_of
from tether.lab import Runtime
from tether.lab._agent import RunOptions
from tether.lab._definition import AGENT_KEYS, ALIASES, AgentDefaults, LabAgentOptions
from tether.testing import script_client


def test_the_lab_keys_are_the_harness_parts_and_what_persistence_adds() -> None:
    shared = keys_of(AgentParts)
    assert shared <= keys_of(AgentOptions) and shared <= keys_of(LabAgentOptions)
    assert set(AGENT_KEYS) == keys_of(AgentDefaults) - set(ALIASES)
    assert "output_schema" in AGENT_KEYS and "llm" not in AGENT_KEYS
    assert keys_of(RunOptions) & {"memory_scope", "user", "tags"} == {
        "memory_scope",
        "user",
        "tags",
    }


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda: create_agent(model=script_client([]), max_tool_round=3),  # type: ignore[call-arg]
            "create_agent() got an unexpected keyword argument 'max_tool_round' "
            "(did you mean 'max_tool_rounds'?)",
        ),
        (
            lambda: create_agent(model=script_client([])).send(Session(), "x", singal=None),  # type: ignore[call-arg]
            "send() got an unexpected keyword argument 'singal' (did you mean 'signal'?)",
        ),
    ],
)
def test_a_misspelt_keyword_is_a_type_error_naming_the_closest(call: Any, message: str) -> None:
    with pytest.raises(TypeError) as caught:
        call()
    assert str(caught.value) == message


def test_the_turn_overrides_take_the_prompt_alias() -> None:
    client = script_client([{"text": "a"}])
    agent = create_agent(model=client, system_prompt="own")
    agent.run_turn_sync(agent.create_session(), "hi", prompt="for this turn")
    assert client.calls[0]["system"][0]["text"] == "for this turn"
    assert keys_of(TurnOverrides) >= {"prompt", "system_prompt", "signal", "settings"}


def test_mypy_refuses_a_misspelt_keyword_on_every_signature(tmp_path: Path) -> None:
    user = tmp_path / "user_code.py"
    user.write_text(
        textwrap.dedent(
            """
            from tether import Session, create_agent
            from tether.lab import Runtime

            async def main() -> None:
                agent = create_agent(model="openai:gpt-4o", max_tool_round=3)
                agent.send(agent.create_session(), "hi", singal=None)
                await agent.run_turn(agent.create_session(), "hi", setings={})
                lab = Runtime(store="memory")
                lab.create_agent(id="a", stop_wen=None)
                fine = lab.create_agent(id="b", model="openai:gpt-4o", max_retries=1)
                fine.run(usr="hi")
                fine.stream(memory_scop="s")
                fine.run(user="hi", memory_scope="s", tags=["x"])
            """
        )
    )
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(user)],
        capture_output=True,
        text=True,
        check=False,
    )
    out = result.stdout
    assert result.returncode == 1, out + result.stderr
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert {line.split(":")[1] for line in errors} == {"6", "7", "8", "10", "12", "13"}, out
    for name in ("max_tool_round", "singal", "setings", "stop_wen"):
        assert f'Unexpected keyword argument "{name}"' in out, out


def test_runtime_defaults_are_typed_by_the_same_keys() -> None:
    lab = Runtime(store="memory", version=False, defaults={"max_tool_rounds": 3})
    assert lab.defaults.max_tool_rounds == 3
