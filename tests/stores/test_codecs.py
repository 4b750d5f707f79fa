"""The shared record codecs: what a damaged stored record is read as, and how records and events
to write are encoded."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from pydantic_core import to_json

from tether.errors import NotJSONSafeError, StoreCorruptError
from tether.stores import StoredRecord, _codecs
from tether.stores._codecs import (
    decode_record,
    decode_records,
    encode_new_events,
    encode_new_records,
)


def test_records_are_read_back_as_stored() -> None:
    raws = ['{"role":"user","content":[]}', '{"role":"assistant","content":[],"x":1}']
    assert decode_records("s", 4, raws) == [
        {"role": "user", "content": []},
        {"role": "assistant", "content": [], "x": 1},
    ]


@pytest.mark.parametrize("raw", ['{"content":[]}', '{"role":3}', "[1]", '"user"'])
def test_a_record_without_a_string_role_is_corrupt(raw: str) -> None:
    with pytest.raises(StoreCorruptError, match="scope 's', record 7: not a message record"):
        decode_record("s", 7, raw)


def test_the_damaged_record_of_a_transcript_is_named() -> None:
    raws = ['{"role":"user"}', '{"role":null}', '{"role":"assistant"}']
    with pytest.raises(StoreCorruptError, match="record 11: not a message record"):
        decode_records("s", 10, raws)


def test_short_records_and_events_are_encoded_once_and_not_walked_for_media(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Encoded first: a text too short to hold media over the threshold is what is stored,
    without a walk (or a second encoding) of the record or event."""

    def walk(*args: object) -> None:
        raise AssertionError("walked for media")

    record: StoredRecord = {"role": "user", "content": [{"type": "text", "text": "hi"}]}
    with monkeypatch.context() as patched:
        patched.setattr(_codecs, "externalize_records", walk)
        patched.setattr(_codecs, "externalize_events", walk)
        assert encode_new_records("s", [record], 64) == ([to_json(record).decode()], {})
        rows, blobs = encode_new_events("r", [{"type": "x", "at": 1.0, "data": {"a": 1}}], 64)
        assert rows == [("x", 1.0, '{"a":1}')] and blobs == {}
    # Long enough to hold media over the threshold: its media is moved out, as always.
    data = base64.b64encode(bytes(range(256)) * 4).decode()
    image: StoredRecord = {
        "role": "user",
        "content": [{"type": "image", "media_type": "image/png", "data": data}],
    }
    (text,), blobs = encode_new_records("s", [image], 64)
    assert len(blobs) == 1 and data not in text and '"blob":' in text
    (row,), blobs = encode_new_events("r", [{"type": "x", "at": 1.0, "data": image}], 64)
    assert len(blobs) == 1 and data not in row[2]
    # A record that is not JSON-safe is refused the way it always was.
    with pytest.raises(NotJSONSafeError, match=r"records\[0\]"):
        bad: Any = {"role": "user", "content": [], "when": {1, 2}}
        encode_new_records("s", [bad], 64)
