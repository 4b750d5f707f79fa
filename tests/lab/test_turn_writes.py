"""What a persisted turn costs the database: the statements and transactions one episode with a
tool round makes in a real SQLite file (`bench/persisted_turn.py` times the same turn). A change
that adds a write to every turn fails here, not only in the bench."""

from __future__ import annotations

from pathlib import Path

import pytest

from tether import define_tool
from tether.lab import Runtime, _recorder
from tether.stores.sqlite import SqliteMessageStore, SqliteRunStore, connect
from tether.testing import script_client

ADD = define_tool(
    name="add",
    description="Add two integers",
    input_schema={
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
    },
    execute=lambda i: i["a"] + i["b"],
)


def _script(turns: int) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for i in range(turns):
        out.append({"tool_use": [{"name": "add", "input": {"a": i, "b": 1}}]})
        out.append({"text": f"the sum is {i + 1}"})
    return out


def _shape(statement: str) -> str:
    """A statement's kind: its first words, literals left out."""
    words = statement.split()
    if words[0] in ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE"):
        return words[0]
    table = next((w for w in words if w.startswith("tether_")), "?")
    return f"{words[0]} {table}"


async def test_a_persisted_turn_makes_six_writes_and_reads_the_transcript_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No flush while the turn runs, however slow the machine: its events all go with its end.
    monkeypatch.setattr(_recorder, "FLUSH_EVERY", 3600.0)
    conn = connect(tmp_path / "turns.db")
    messages, runs = SqliteMessageStore(conn), SqliteRunStore(conn)
    lab = Runtime(store="memory", message_store=messages, run_store=runs, version=False)
    agent = lab.create_agent(
        id="adder", system_prompt="You add.", model=script_client(_script(3)), tools=[ADD]
    )
    await agent.run(memory_scope="chat", user="add 0 and 1").result  # the scope is created
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    for i in (1, 2):
        statements.clear()
        result = await agent.run(memory_scope="chat", user=f"add {i} and 1").result
        assert result.text == f"the sum is {i + 1}"
        # SQLite's own statements inside FTS5 are traced as comments: not ours.
        ours = [_shape(s) for s in statements if not s.startswith("--")]
        transactions = ours.count("BEGIN")
        assert ours.count("COMMIT") == transactions
        # Outside a transaction, a write is one of its own (the lease given back).
        alone = [s for s in ours if s.startswith("DELETE")]
        # The run's start, the scope's lease, the tool round, the answer, the lease given
        # back, the run's end with all its events.
        assert transactions + len(alone) == 6, ours
        assert ours.count("SELECT tether_messages") == 1, ours  # the transcript, once
        # Every event of the turn goes in the run's last write, with its end.
        assert ours.count("UPDATE tether_runs") == 1, ours
        assert ours.count("INSERT tether_run_events") == 11, ours
        assert ours.count("INSERT tether_messages") == 4, ours
        assert len(ours) == 36, ours
    conn.set_trace_callback(None)
    await lab.aclose()
    await messages.aclose()
    await runs.aclose()
    conn.close()
