"""The run page's timeline: text deltas collapse into one item, in work linear in the events."""

from __future__ import annotations

import sys
from types import FrameType
from typing import Any

from tether.stores.run_store import RunEvent
from tether.ui._views import timeline


def delta(seq: int, text: Any) -> RunEvent:
    return {"seq": seq, "type": "agent_text_delta", "at": 0.0, "data": {"text": text}}


def other(seq: int) -> RunEvent:
    return {"seq": seq, "type": "agent_tool_call", "at": 0.0, "data": {"name": "t"}}


def test_consecutive_deltas_collapse_and_other_events_split_them() -> None:
    items = timeline([delta(1, "a"), delta(2, "b"), other(3), delta(4, "c"), delta(5, 7)])
    assert [(i["kind"], i["seq"], i["last_seq"]) for i in items] == [
        ("text", 1, 2),
        ("agent_tool_call", 3, 3),
        ("text", 4, 5),
    ]
    assert items[0]["data"] == {"text": "ab"}
    assert items[2]["data"] == {"text": "c7"}  # a stored non-string delta shows as JSON


def test_a_long_answer_is_joined_once_not_once_per_delta() -> None:
    """Thousands of deltas: joining the text so far at every delta is quadratic work (a
    40,000-delta answer took seconds). Counted, not timed: `str.join` calls."""
    events = [delta(i, "word ") for i in range(1, 5001)]
    joins = 0

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        nonlocal joins
        if event == "c_call" and getattr(arg, "__name__", "") == "join":
            joins += 1

    sys.setprofile(profile)
    try:
        items = timeline(events)
    finally:
        sys.setprofile(None)
    assert items[0]["data"]["text"] == "word " * 5000
    assert joins <= 1
