"""History policies on a harness agent: what each model call sends, never the caller's Session."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tether import (
    ConfigError,
    HistoryContext,
    Session,
    clear_tool_results,
    create_agent,
    keep_last,
    keep_tokens,
    summarize,
)
from tether.history import CLEARED, SUMMARY_OPEN, chars_of, check_transcript
from tether.session import Message
from tether.testing import script_client

from .helpers import add_tool, assistant, texts, user


def _tool_turn(n: int) -> list[Message]:
    """A turn with a tool round: the question, a call, its result, the answer."""
    cid = f"c{n}"
    return [
        user(f"q{n}"),
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "text": f"think {n}", "signature": f"sig{n}"},
                {"type": "tool_call", "id": cid, "name": "add", "input": {"a": n, "b": 1}},
            ],
        },
        {
            "role": "tool",
            "content": [
                {
                    "type": "tool_result",
                    "id": cid,
                    "name": "add",
                    "output": str(n + 1) * 50,
                    "is_error": False,
                }
            ],
        },
        assistant(f"a{n}"),
    ]


def _history(turns: int) -> list[Message]:
    out: list[Message] = []
    for n in range(turns):
        out += _tool_turn(n)
    return out


def _ctx(**kw: Any) -> HistoryContext:
    return HistoryContext(
        session_id="s", model="m", provider="anthropic", context_window=None, **kw
    )


async def test_keep_last_sends_the_last_turns_and_leaves_the_session_whole() -> None:
    client = script_client([{"text": "fine"}])
    agent = create_agent(model=client, history=[keep_last(turns=2)])
    session = Session(messages=_history(5))
    before = copy.deepcopy(session.messages)
    await agent.run_turn(session, "next")
    sent = client.calls[0]["messages"]
    # the last whole turn before, and the current one: each tool call with its result
    assert texts(sent) == [
        ("user", "q4"),
        ("assistant", "<call add>"),
        ("tool", f"<result {'5' * 50}>"),
        ("assistant", "a4"),
        ("user", "next"),
    ]
    assert sent[1]["content"][0] == {"type": "thinking", "text": "think 4", "signature": "sig4"}
    assert session.messages[: len(before)] == before
    assert len(session.messages) == len(before) + 2


async def test_the_policy_runs_each_model_call_and_never_cuts_the_current_turn() -> None:
    client = script_client(
        [
            {
                "thinking": {"text": "plan", "signature": "S"},
                "tool_use": [{"name": "add", "input": {"a": 1, "b": 2}}],
            },
            {"text": "3"},
        ]
    )
    agent = create_agent(model=client, tools=[add_tool()], history=[keep_last(turns=1)])
    session = Session(messages=_history(3))
    await agent.run_turn(session, "add")
    first, second = (c["messages"] for c in client.calls)
    assert texts(first) == [("user", "add")]
    # the second call carries the current turn whole: the thinking with its signature, the
    # call and its result
    assert [m["role"] for m in second] == ["user", "assistant", "tool"]
    assert second[1]["content"][0] == {"type": "thinking", "text": "plan", "signature": "S"}
    assert second[2]["content"][0]["type"] == "tool_result"


def test_clear_tool_results_marks_old_results_and_keeps_the_pairs() -> None:
    messages = _history(3)
    original = copy.deepcopy(messages)
    out = clear_tool_results(older_than_turns=1)(messages, _ctx())
    outputs = [p["output"] for m in out for p in m["content"] if p["type"] == "tool_result"]
    assert outputs == [CLEARED, CLEARED, "3" * 50]
    assert [m["role"] for m in out] == [m["role"] for m in messages]
    assert messages == original  # the input is never changed
    check_transcript(out, "clear_tool_results")


def test_keep_tokens_drops_the_oldest_whole_turns_until_the_estimate_fits() -> None:
    messages = _history(10)
    ctx = _ctx()
    per_turn = ctx.estimate(_tool_turn(0))
    out = keep_tokens(per_turn * 3)(messages, ctx)
    assert ctx.estimate(out) <= per_turn * 3
    assert out[0]["role"] == "user" and texts(out)[-1] == ("assistant", "a9")
    assert 2 <= len(out) // 4 <= 3 and len(out) % 4 == 0
    # the current turn stays even when it alone is over the limit
    assert keep_tokens(1)(messages, ctx) == messages[-4:]


def test_the_estimate_starts_from_the_last_calls_count() -> None:
    ctx = _ctx()
    sent = _history(2)
    ctx.counted(sent, 1000)
    more = [*sent, user("x" * 350)]
    assert ctx.estimate(more) == 1000 + round(chars_of(more[-1:]) / ctx.chars_per_token)
    # a list that does not extend what was sent is estimated whole, at the measured rate
    assert ctx.estimate(more[4:]) < 1000


async def test_summarize_replaces_old_turns_and_reuses_its_summary() -> None:
    writer = script_client([{"text": "they added numbers"}, {"text": "second summary"}])
    client = script_client([{"text": "ok"}] * 3)
    policy = summarize(model=writer, when_tokens_over=120, keep_last_turns=2)
    agent = create_agent(model=client, history=[policy])
    session = Session(messages=_history(6))
    await agent.run_turn(session, "next")
    sent = client.calls[0]["messages"]
    assert sent[0]["content"][0]["text"].startswith(SUMMARY_OPEN)
    assert "they added numbers" in sent[0]["content"][0]["text"]
    assert texts(sent)[-1] == ("user", "next") and len(sent) == 5
    asked = writer.calls[0]["messages"][0]["content"][0]["text"]
    assert "q4" in asked and "q5" not in asked  # the kept turns are not summarized
    # the next turn fits with the same summary: no new one is written
    await agent.run_turn(session, "more")
    assert len(writer.calls) == 1
    assert "they added numbers" in client.calls[1]["messages"][0]["content"][0]["text"]
    assert len(session.messages) == 24 + 4


async def test_a_summary_may_be_written_by_an_agent() -> None:
    writer = create_agent(model=script_client([{"text": "short"}]))
    policy = summarize(agent=writer, when_tokens_over=50, keep_last_turns=1, prompt="Sum up.")
    out = await policy(_history(3), _ctx())
    assert out[0]["content"][0]["text"] == f"{SUMMARY_OPEN}\nshort\n</conversation_summary>"
    assert out[0]["content"][1] == {"type": "text", "text": "q2"}
    assert out[1:] == _history(3)[9:]


async def test_a_custom_async_processor_runs_in_order() -> None:
    seen: list[int] = []

    async def drop_assistant_text(messages: list[Message], ctx: HistoryContext) -> list[Message]:
        seen.append(len(messages))
        return [m for m in messages if m["role"] != "assistant" or len(m["content"]) > 1]

    client = script_client([{"text": "ok"}])
    agent = create_agent(model=client, history=[keep_last(turns=2), drop_assistant_text])
    await agent.run_turn(Session(messages=_history(4)), "go")
    assert seen == [5]
    assert texts(client.calls[0]["messages"]) == [
        ("user", "q3"),
        ("assistant", "<call add>"),
        ("tool", f"<result {'4' * 50}>"),
        ("user", "go"),
    ]


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        (lambda m, c: m[2:], "the result of tool call 'c0' without the call"),
        (lambda m, c: m[:2], "tool call 'c0' has no result"),
        (lambda m, c: [*m, {"role": "user", "content": [{"type": "hologram"}]}], "unknown part"),
        (lambda m, c: "nope", "returned str"),
    ],
)
async def test_a_processor_returning_an_invalid_transcript_is_refused_before_any_request(
    bad: Any, says: str
) -> None:
    client = script_client([{"text": "never"}])
    agent = create_agent(model=client, history=[bad])
    session = Session(messages=_tool_turn(0))
    with pytest.raises(ConfigError, match=r"history processor .*<lambda>") as info:
        await agent.run_turn(session, "go")
    assert says in str(info.value)
    assert client.calls == [] and len(session.messages) == 4


async def test_a_non_json_tool_input_is_refused() -> None:
    def bad(messages: list[Message], ctx: HistoryContext) -> list[Message]:
        out = copy.deepcopy(messages)
        out[1]["content"][1]["input"] = {"when": object()}  # type: ignore[typeddict-unknown-key]
        return out

    agent = create_agent(model=script_client([{"text": "never"}]), history=[bad])
    with pytest.raises(ConfigError, match=r"history processor .*bad.*not JSON-safe"):
        await agent.run_turn(Session(messages=_tool_turn(0)), "go")


@pytest.mark.parametrize(
    ("value", "says"),
    [
        (keep_last(turns=2), "a list of history processors"),
        (["x"], r"history\[0\] must be a function"),
    ],
)
def test_history_takes_a_list_of_processors(value: Any, says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        create_agent(model="test", history=value)


@pytest.mark.parametrize(
    "make",
    [
        lambda: keep_last(turns=0),
        lambda: keep_tokens(0),
        lambda: clear_tool_results(older_than_turns=-1),
        lambda: summarize(when_tokens_over=10),
        lambda: summarize(model="test", agent=create_agent(model="test"), when_tokens_over=1),
    ],
)
def test_built_ins_check_their_arguments(make: Any) -> None:
    with pytest.raises(ConfigError):
        make()


async def test_without_a_policy_the_request_is_the_session() -> None:
    client = script_client([{"text": "ok"}])
    agent = create_agent(model=client)
    session = Session(messages=_history(2))
    await agent.run_turn(session, "go")
    assert client.calls[0]["messages"] == session.messages[:-1]
