"""The stdio transport: a child process per session, against a bare server that misbehaves on
request (tests/mcp/mcp_raw_stdio_server.py)."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp_kit import call, process_gone, results

from tether import McpConnectionError, create_agent
from tether.mcp import _stdio, mcp_stdio
from tether.testing import collect, script_client

RAW = str(Path(__file__).with_name("mcp_raw_stdio_server.py"))


def raw_agent(*flags: str, turns: list[Any] | None = None, **kwargs: Any) -> Any:
    source = mcp_stdio(sys.executable, [RAW, *flags], **kwargs)
    return create_agent(llm=script_client(turns or []), integrations=[source])


async def test_a_call_over_stdio_skips_lines_that_are_not_json_rpc() -> None:
    agent = raw_agent("--junk", turns=[call("pid"), {"text": "ok"}])
    [report] = await agent.connect()
    assert report["transport"] == "stdio" and report["command"] == [sys.executable, RAW, "--junk"]
    assert report["tools"] == ["pid", "crash", "where", "stray"]
    [res] = results(await collect(agent, agent.create_session(), "pid"))
    pid = int(res["output"])
    await agent.aclose()
    with pytest.raises(ProcessLookupError):  # closing ended (and reaped) the child
        os.kill(pid, 0)


async def test_env_is_added_to_ours_and_cwd_is_where_the_child_runs(tmp_path: Path) -> None:
    agent = raw_agent(
        turns=[call("where"), {"text": "ok"}], env={"TETHER_RAW_VAR": "set"}, cwd=tmp_path
    )
    [res] = results(await collect(agent, agent.create_session(), "where"))
    await agent.aclose()
    assert json.loads(res["output"]) == {"cwd": str(tmp_path), "var": "set"}


async def test_a_command_that_does_not_exist_cannot_connect() -> None:
    agent = create_agent(
        llm=script_client([]), integrations=[mcp_stdio("/nonexistent/tether-mcp-server")]
    )
    with pytest.raises(McpConnectionError, match="cannot start '/nonexistent/tether-mcp-server'"):
        await agent.connect()


async def test_a_child_that_exits_at_once_is_explained_with_its_status_and_stderr() -> None:
    agent = raw_agent("--exit-now", "3")
    with pytest.raises(McpConnectionError) as info:
        await agent.connect()
    message = str(info.value)
    assert "server/discover failed" in message and "exited with status 3" in message
    assert "fatal: no config file" in message


async def test_an_unspeakable_version_over_stdio_is_refused_and_the_child_ended() -> None:
    agent = raw_agent("--version", "1999-01-01")
    with pytest.raises(McpConnectionError, match="'1999-01-01'"):
        await agent.connect()


async def test_a_child_crashing_mid_call_is_an_error_result_and_the_next_call_respawns() -> None:
    agent = raw_agent(
        "--crash-on-call", turns=[call("pid"), call("crash"), call("pid"), {"text": "ok"}]
    )
    before, crashed, after = results(await collect(agent, agent.create_session(), "go"))
    await agent.aclose()
    assert crashed["is_error"] is True
    assert "went away before answering" in crashed["output"]
    assert "exited with status 9" in crashed["output"]
    assert "is_error" not in after and after["output"] != before["output"]


async def test_a_child_killed_between_calls_is_replaced_quietly() -> None:
    agent = raw_agent(turns=[call("pid"), {"text": "a"}, call("pid"), {"text": "b"}])
    session = agent.create_session()
    [first] = results(await collect(agent, session, "one"))
    os.kill(int(first["output"]), signal.SIGKILL)
    await process_gone(int(first["output"]))
    [second] = results(await collect(agent, session, "two"))
    await agent.aclose()
    assert "is_error" not in second and second["output"] != first["output"]


async def test_close_escalates_to_kill_for_a_child_that_ignores_eof_and_sigterm(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_stdio, "_EXIT_GRACE", 0.2)
    agent = raw_agent("--ignore-eof", turns=[call("pid"), {"text": "ok"}])
    [res] = results(await collect(agent, agent.create_session(), "pid"))
    await agent.aclose()
    with pytest.raises(ProcessLookupError):
        os.kill(int(res["output"]), 0)


async def test_an_answer_with_another_id_is_not_taken_for_ours() -> None:
    agent = raw_agent(turns=[call("stray"), call("pid"), {"text": "ok"}])
    stray, pid = results(await collect(agent, agent.create_session(), "go"))
    await agent.aclose()
    assert stray["output"] == pid["output"]  # the real answer (the pid), not "not yours"
    assert "is_error" not in stray and stray["output"].isdigit()


async def test_a_child_that_never_answers_initialize_hits_the_startup_timeout() -> None:
    agent = raw_agent("--silent", startup_timeout_ms=300)
    with pytest.raises(McpConnectionError, match="initialize failed: no answer within 300 ms"):
        await agent.connect()
    assert agent.tools == []


async def test_a_child_that_writes_only_prose_fails_showing_what_it_wrote() -> None:
    agent = raw_agent("--only-text", startup_timeout_ms=1000)
    with pytest.raises(McpConnectionError) as info:
        await agent.connect()
    message = str(info.value)
    assert "initialize failed: no answer within 1000 ms" in message
    assert "it wrote only non-JSON to stdout" in message
    assert "'Hello! Type a command, or help.'" in message


async def test_a_child_that_prints_its_usage_and_exits_shows_it() -> None:
    agent = raw_agent("--usage")
    with pytest.raises(McpConnectionError) as info:
        await agent.connect()
    message = str(info.value)
    assert "exited with status 2" in message
    assert "'usage: tool [--verbose] FILE' | 'Converts FILE.'" in message
