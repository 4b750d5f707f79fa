"""Partial structured output costs O(1) amortized per chunk: a long answer is parsed a number of
times that grows with the log of its length (not once per chunk), and its last event is the
whole object; a short one is parsed after every chunk."""

from __future__ import annotations

import json
from typing import Any

import pydantic_core
import pytest

from tether import Session, create_agent
from tether._partial import SHORT, PartialOutput
from tether._text import TextBuffer
from tether.testing import collect, script_client

ANSWER = json.dumps({"items": [{"id": i, "name": f"item {i}"} for i in range(2000)]})


def test_a_long_fast_answer_is_parsed_a_logarithmic_number_of_times(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    parses: list[int] = []
    real = pydantic_core.from_json

    def counting(text: str, **kw: Any) -> Any:
        parses.append(len(text))
        return real(text, **kw)

    monkeypatch.setattr(pydantic_core, "from_json", counting)
    buffer, partial = TextBuffer(), PartialOutput()
    chunks = [ANSWER[i : i + 10] for i in range(0, len(ANSWER), 10)]
    for chunk in chunks:
        buffer.add(chunk)
        partial.feed(buffer)
    partial.flush(buffer)
    assert partial.last == json.loads(ANSWER)
    short = SHORT // 10 + 1
    assert len(parses) <= short + 12, len(parses)  # 5,000 chunks, ~30 parses
    assert sum(parses) <= 3 * len(ANSWER)  # linear in the answer (it was 5,000 parses)


def test_a_short_answer_is_parsed_after_every_chunk() -> None:
    buffer, partial = TextBuffer(), PartialOutput()
    seen = []
    for chunk in ['{"a": "x', "y", '", "b": [1', ", 2]}"]:
        buffer.add(chunk)
        event = partial.feed(buffer)
        seen.append(None if event is None else event["output"])
    assert seen == [{"a": "x"}, {"a": "xy"}, {"a": "xy", "b": [1]}, {"a": "xy", "b": [1, 2]}]
    assert partial.flush(buffer) is None  # nothing new since the last parse


async def test_the_turns_last_partial_output_is_the_whole_long_answer() -> None:
    chunks = [ANSWER[i : i + 10] for i in range(0, len(ANSWER), 10)]
    agent = create_agent(model=script_client([{"text": chunks}]))
    fmt = {"name": "items", "schema": {"type": "object"}}
    events = await collect(agent, Session(), "list", response_format=fmt)
    partials = [e["output"] for e in events if e["type"] == "partial_output"]
    assert partials[-1] == json.loads(ANSWER)
    assert len(partials) < 100  # not one per chunk (5,000)
