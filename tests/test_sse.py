"""The one incremental SSE decoder (`tether._sse`, read by the adapters and the MCP channel):
line ends, fields, comments, flushing, and arbitrary splits."""

from __future__ import annotations

import itertools
from collections.abc import Iterable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tether._sse import ServerSentEvent, SSEDecoder


def split_at(data: bytes, cuts: Iterable[int]) -> list[bytes]:
    points = sorted({c for c in cuts if 0 < c < len(data)})
    bounds = [0, *points, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds)]


def decode(*pieces: bytes) -> tuple[list[ServerSentEvent], list[str]]:
    decoder = SSEDecoder()
    events: list[ServerSentEvent] = []
    for piece in pieces:
        events.extend(decoder.feed(piece))
    events.extend(decoder.flush())
    return events, decoder.stray


def ev(data: str, event: str = "message", id: str | None = None) -> ServerSentEvent:
    return ServerSentEvent(event, data, id)


def test_an_event_compares_by_value_and_is_unhashable() -> None:
    assert ServerSentEvent("message", "a", "1") == ServerSentEvent("message", "a", "1")
    assert ServerSentEvent("message", "a") != ServerSentEvent("message", "a", "1")
    with pytest.raises(TypeError, match="unhashable"):
        hash(ServerSentEvent("message", "a"))


def test_fields_and_line_ends() -> None:
    body = b"event: a\ndata: 1\n\nevent: b\r\ndata: 2\r\n\r\nevent: c\rdata: 3\r\rdata: 4\n\n"
    assert decode(body)[0] == [ev("1", "a"), ev("2", "b"), ev("3", "c"), ev("4")]


def test_multi_line_data_comments_and_spaces() -> None:
    body = b": keep-alive\ndata: one\ndata:two\ndata:  three\ndata\n:\nid: 7\n\n"
    assert decode(body)[0] == [ev("one\ntwo\n three\n", id="7")]


def test_event_without_data_is_not_dispatched() -> None:
    assert decode(b"event: ping\n\n\n\ndata: x\n\n")[0] == [ev("x")]


def test_unterminated_last_event_is_flushed() -> None:
    assert decode(b"data: a\n\ndata: b")[0] == [ev("a"), ev("b")]
    assert decode(b"data: a\n\ndata: b\n")[0] == [ev("a"), ev("b")]
    assert decode(b"data: b\r\n")[0] == [ev("b")]


def test_crlf_split_between_chunks_is_one_line_end() -> None:
    assert decode(b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n")[0] == [ev("a\nb")]


def test_bom_is_dropped_even_when_split() -> None:
    assert decode(b"\xef\xbb\xbfdata: x\n\n")[0] == [ev("x")]
    assert decode(b"\xef", b"\xbb", b"\xbfdata: x\n\n")[0] == [ev("x")]
    assert decode(b"\xef\xbb", b"\xbfdata: x\n\n")[0] == [ev("x")]


def test_utf8_split_inside_a_character() -> None:
    text = "é — 🙂".encode()
    body = b"data: " + text + b"\n\n"
    assert decode(*[bytes([b]) for b in body])[0] == [ev("é — 🙂")]


def test_stray_lines_are_kept_in_order() -> None:
    events, stray = decode(b'data: 1\n\n{\n  "error": {"code": 499}\n}\n')
    assert events == [ev("1")]
    assert stray == ["{", '  "error": {"code": 499}', "}"]


def test_a_long_line_in_tiny_pieces() -> None:
    data = "x" * 100_000
    body = f"data: {data}\n\n".encode()
    pieces = [body[i : i + 3] for i in range(0, len(body), 3)]
    assert decode(*pieces)[0] == [ev(data)]


_text = st.text(
    alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="\r\n"), max_size=12
)
_events = st.lists(
    st.tuples(
        st.none() | st.text(alphabet="abcdefgh_.", min_size=1, max_size=8),
        st.lists(_text, min_size=1, max_size=3),
    ),
    max_size=8,
)


@given(
    events=_events,
    ends=st.lists(st.sampled_from([b"\n", b"\r\n", b"\r"]), min_size=1, max_size=5),
    comments=st.booleans(),
    terminated=st.booleans(),
    data=st.data(),
)
def test_any_encoding_and_split_decodes_the_same(
    events: list[tuple[str | None, list[str]]],
    ends: list[bytes],
    comments: bool,
    terminated: bool,
    data: st.DataObject,
) -> None:
    out = bytearray()
    n = 0

    def line(text: str) -> None:
        nonlocal n
        end = ends[n % len(ends)]
        if not text and end == b"\n" and out.endswith(b"\r"):
            end = b"\r\n"  # CR then LF would be one CRLF line end, not two
        out.extend(text.encode() + end)
        n += 1

    for name, lines in events:
        if comments:
            line(": ping")
        if name is not None:
            line(f"event: {name}")
        for value in lines:
            line(f"data: {value}")
        line("")
    body = bytes(out)
    if not terminated and body:
        # Drop the last blank line (and with it the last line end when there is only one):
        # the decoder must still flush that event.
        body = body[: -2 if body.endswith(b"\r\n") else -1]
    expected = [ev("\n".join(lines), name or "message") for name, lines in events]
    cuts = data.draw(st.lists(st.integers(0, len(body)), max_size=20))
    assert decode(*split_at(body, cuts))[0] == expected
