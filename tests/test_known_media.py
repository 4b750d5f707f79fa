"""The process-wide memo of media texts and their bytes (`tether._known_media`)."""

from __future__ import annotations

import base64
import binascii
import hashlib

import pytest

from tether._known_media import KnownMedia, decode_base64


def test_a_text_is_found_by_identity_only() -> None:
    memo = KnownMedia()
    raw = b"\x00\x01" * 100
    text = base64.b64encode(raw).decode()
    memo.remember(text, raw)
    assert memo.raw(text) is raw
    twin = "".join(list(text))  # equal, but another object: not what the memo was shown
    assert twin == text and twin is not text
    assert memo.raw(twin) is None
    assert memo.decoded(twin) == raw  # decoded, then remembered too
    assert memo.raw(twin) is not None


def test_the_hash_is_computed_once_and_names_the_text() -> None:
    memo = KnownMedia()
    raw = b"abc" * 50
    text = base64.b64encode(raw).decode()
    assert memo.text(hashlib.sha256(raw).hexdigest()) is None
    sha = memo.sha256(text, memo.decoded(text))
    assert sha == hashlib.sha256(raw).hexdigest()
    assert memo.text(sha) is text
    memo.clear()
    assert memo.text(sha) is None and memo.raw(text) is None


def test_the_memo_is_bounded_and_forgets_the_least_recently_used() -> None:
    texts = [base64.b64encode(bytes([i]) * 30).decode() for i in range(3)]  # 40 + 30 each
    memo = KnownMedia(max_bytes=150)
    for t in texts[:2]:
        memo.sha256(t, memo.decoded(t))
    memo.raw(texts[0])  # used again: the second is now the oldest
    memo.decoded(texts[2])
    assert (
        memo.raw(texts[1]) is None
        and memo.text(hashlib.sha256(bytes([1]) * 30).hexdigest()) is None
    )
    assert memo.raw(texts[0]) is not None and memo.raw(texts[2]) is not None
    huge = base64.b64encode(b"x" * 200).decode()
    memo.decoded(huge)  # bigger than the whole bound: not kept, nothing else evicted
    assert memo.raw(huge) is None and memo.raw(texts[0]) is not None


@pytest.mark.parametrize("bad", ["abc", "ab c", "ab==cd==", "a\nbcd", "!!!!"])
def test_decoding_is_strict(bad: str) -> None:
    with pytest.raises(binascii.Error):
        decode_base64(bad)
    with pytest.raises(binascii.Error):
        KnownMedia().decoded(bad)
