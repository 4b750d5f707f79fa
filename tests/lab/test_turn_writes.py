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


def _transactions(shapes: list[str]) -> tuple[list[list[str]], list[str]]:
    """The statements of each transaction, and those made outside any."""
    groups: list[list[str]] = []
    alone: list[str] = []
    current: list[str] | None = None
    for shape in shapes:
        if shape == "BEGIN":
            current = []
        elif shape == "COMMIT":
            assert current is not None
            groups.append(current)
            current = None
        elif current is not None:
            current.append(shape)
        else:
            alone.append(shape)
    assert current is None, "a transaction left open"
    return groups, alone


async def test_a_persisted_turn_makes_four_writes_and_reads_the_transcript_at_most_once(
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
        groups, alone = _transactions(ours)
        # The run's start and the scope's lease are one statement each (a transaction of its
        # own: a live run is not in the search index, its text goes in once, as it ends); the
        # scope is read once; the tool round and the turn's end are two transactions.
        assert alone == [
            "INSERT tether_runs",
            "INSERT tether_scope_leases",
            "SELECT tether_message_scopes",
        ], ours
        (read,) = [s for s in statements if s.startswith("SELECT")]
        # The turn after the one that created the scope loads the transcript with its version
        # (a new scope starts at a version nobody knows beforehand); the next one finds the
        # version the last turn left and reads no record: it goes on with the kept transcript.
        assert ("JOIN tether_messages" in read) == (i == 1), read
        tool_round, end = groups
        # A fenced append is one upsert of the scope row, conditional on the lease (no read of
        # the lease before it), then its records.
        assert tool_round == ["INSERT tether_message_scopes", *["INSERT tether_messages"] * 3]
        # The answer, the lease given back, the run's end with every event of the turn.
        assert end == [
            "INSERT tether_message_scopes",
            "INSERT tether_messages",
            "DELETE tether_scope_leases",
            "UPDATE tether_runs",
            *["INSERT tether_run_events"] * 11,
        ], end  # the run goes into the search index with its batch (INDEX_BATCH)
    conn.set_trace_callback(None)
    await lab.aclose()
    await messages.aclose()
    await runs.aclose()
    conn.close()
