"""The shared record codecs: what a damaged stored record is read as."""

from __future__ import annotations

import pytest

from tether.errors import StoreCorruptError
from tether.stores._codecs import decode_record, decode_records


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
