"""Splitting a stored transcript into turns by the list lengths each episode recorded."""

from __future__ import annotations

from typing import Any

from tether.lab import Runtime
from tether.stores.message_store import StoredRecord
from tether.stores.run_store import RunInfo
from tether.testing import script_client
from tether.ui._views import split_turns

from .conftest import client_for


def msg(role: str, text: str) -> StoredRecord:
    return {"role": role, "content": [{"type": "text", "text": text}]}  # type: ignore[return-value,misc]


def run(run_id: str, started: float) -> RunInfo:
    return RunInfo(run_id=run_id, kind="agent", name="a", started_at=started)


def shape(turns: Any) -> list[tuple[int, int, str | None, bool]]:
    return [(t.start, t.end, t.run.run_id if t.run else None, t.continued) for t in turns]


def test_each_episode_owns_the_records_it_appended_and_the_pin_is_no_turn() -> None:
    records = [
        {"role": "system", "content": [{"type": "text", "text": "pin"}]},
        msg("user", "1"),
        msg("assistant", "1"),
        msg("user", "2"),
        msg("assistant", "2"),
    ]
    turns = split_turns(
        records,  # type: ignore[arg-type]
        [(run("a", 1), [(0, 2), (2, 1)]), (run("b", 2), [(3, 2)])],
    )
    assert shape(turns) == [(1, 3, "a", False), (3, 5, "b", False)]
    assert [i for i, _ in turns[0].records] == [1, 2]


def test_records_no_episode_wrote_form_their_own_turns() -> None:
    records = [msg("user", str(i)) for i in range(6)]
    turns = split_turns(records, [(run("a", 1), [(2, 2)])])
    assert shape(turns) == [(0, 2, None, False), (2, 4, "a", False), (4, 6, None, False)]


def test_interleaved_episodes_on_one_scope_split_into_stretches() -> None:
    records = [msg("user", str(i)) for i in range(6)]
    turns = split_turns(
        records,
        [(run("a", 1), [(0, 2), (4, 2)]), (run("b", 2), [(2, 2)])],
    )
    assert shape(turns) == [(0, 2, "a", False), (2, 4, "b", False), (4, 6, "a", True)]


def test_episodes_that_stored_nothing_are_placed_by_start_time() -> None:
    records = [msg("user", str(i)) for i in range(4)]
    turns = split_turns(
        records,
        [
            (run("a", 1), [(0, 2)]),
            (run("failed", 2), []),
            (run("b", 3), [(2, 2)]),
            (run("late", 4), []),
        ],
    )
    assert shape(turns) == [
        (0, 2, "a", False),
        (4, 4, "failed", False),
        (2, 4, "b", False),
        (4, 4, "late", False),
    ]


def test_commits_past_the_stored_list_are_ignored() -> None:
    # A replaced (shortened) list: what the events claim beyond its end is not shown.
    turns = split_turns([msg("user", "x")], [(run("a", 1), [(0, 5)])])
    assert shape(turns) == [(0, 1, "a", False)]


async def test_a_conversation_of_several_episodes_and_agents_splits_per_episode() -> None:
    runtime = Runtime(store="memory", version=False)
    researcher = runtime.create_agent(
        id="researcher",
        system_prompt="Research.",
        model=script_client([{"text": "one"}, {"text": "three"}]),
    )
    editor = runtime.create_agent(
        id="editor", system_prompt="Edit.", model=script_client([{"text": "two"}])
    )
    a = await researcher.run(memory_scope="doc", user="first").result
    b = await editor.run(
        memory_scope="doc",
        messages=[{"role": "user", "content": "second"}, {"role": "user", "content": "more"}],
        suppress_system_prompt_conflict_warning=True,
    ).result
    c = await researcher.run(memory_scope="doc", user="third").result
    async with client_for(runtime) as client:
        body = (await client.get("/api/scopes/doc")).json()
        html = (await client.get("/conversations/doc")).text
    assert [(t["start"], t["end"], t["run"]["run_id"]) for t in body["turns"]] == [
        (1, 3, a.run_id),
        (3, 6, b.run_id),
        (6, 8, c.run_id),
    ]
    # The pin stays the researcher's: the editor's episode did not rewrite it.
    assert body["system_prompt"]["text"] == "Research."
    assert html.count('<section class="turn"') == 3
    await runtime.aclose()
