"""`tether._text`: a `text` event's snapshot is joined only when read, and every way of reading
the event as a dict sees it."""

from __future__ import annotations

import copy
import json
import operator
import pickle
from typing import Any

import pytest

from tether._text import TextBuffer


def events(*deltas: str) -> tuple[TextBuffer, list[Any]]:
    buffer = TextBuffer()
    return buffer, [buffer.add(d) for d in deltas]


def test_an_event_nobody_reads_holds_no_snapshot() -> None:
    _, made = events("a", "b", "c")
    assert all(not dict.__contains__(e, "snapshot") for e in made)
    assert [dict.__getitem__(e, "text") for e in made] == ["a", "b", "c"]


def test_each_snapshot_is_the_text_up_to_its_delta_in_any_reading_order() -> None:
    buffer, made = events("Hel", "lo", ", ", "world")
    assert made[3]["snapshot"] == "Hello, world"
    assert made[0]["snapshot"] == "Hel"  # an earlier one after a later one
    assert made[2].get("snapshot") == "Hello, "
    assert made[1]["snapshot"] == "Hello"
    assert buffer.value() == "Hello, world"
    buffer.add("!")
    assert made[3]["snapshot"] == "Hello, world"  # kept once read: a later delta changes nothing


@pytest.mark.parametrize(
    "read",
    [
        lambda e: dict(e),
        lambda e: e.copy(),
        lambda e: copy.copy(e),
        lambda e: copy.deepcopy(e),
        lambda e: pickle.loads(pickle.dumps(e)),
        lambda e: json.loads(json.dumps(e)),
        lambda e: {k: e[k] for k in e},
        lambda e: dict(e.items()),
        lambda e: dict(zip(e.keys(), e.values(), strict=True)),
        lambda e: e | {},
        lambda e: {**e},
    ],
    ids=[
        "dict",
        "copy",
        "copy.copy",
        "deepcopy",
        "pickle",
        "json",
        "iter",
        "items",
        "keys-values",
        "or",
        "unpack",
    ],
)
def test_every_way_of_reading_the_event_sees_the_snapshot(read: Any) -> None:
    _, made = events("one ", "two")
    assert read(made[1]) == {"type": "text", "text": "two", "snapshot": "one two"}
    assert read(made[0])["snapshot"] == "one "


def test_membership_length_equality_and_repr_see_the_snapshot() -> None:
    _, made = events("x", "y")
    event = made[1]
    assert "snapshot" in event and "other" not in event
    assert len(event) == 3
    assert event == {"type": "text", "text": "y", "snapshot": "xy"}
    _, fresh = events("x", "y")
    assert operator.ne(fresh[1], {"type": "text", "text": "y", "snapshot": "x"})  # filled first
    assert "'snapshot': 'xy'" in repr(made[1]) and "'snapshot': 'x'" in repr(made[0])
    with pytest.raises(KeyError):
        event["missing"]
    with pytest.raises(TypeError):
        hash(event)


def test_changing_the_event_keeps_the_snapshot() -> None:
    _, made = events("a", "b")
    assert made[1].pop("snapshot") == "ab"
    assert made[0].setdefault("snapshot", "other") == "a"
    key, value = made[0].popitem()
    assert (key, value) == ("snapshot", "a")
