"""The MCP channel reads its event streams with the shared decoder (`tether._sse`): the rules a
streamable HTTP server relies on, fed as the channel feeds it (no `flush()`: an event is only
dispatched once its blank line arrived)."""

from __future__ import annotations

import pytest

from tether._sse import ServerSentEvent as SseEvent
from tether._sse import SSEDecoder


def parse_all(chunks: list[str]) -> list[SseEvent]:
    parser = SSEDecoder()
    out: list[SseEvent] = []
    for chunk in chunks:
        out.extend(parser.feed(chunk.encode()))
    return out


BODY = 'id: 0\ndata:\n\n: a comment\nevent: message\nid: 7\ndata: {"a":\ndata: 1}\n\n'


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_every_line_ending_gives_the_same_events(newline: str) -> None:
    events = parse_all([BODY.replace("\n", newline)])
    assert events == [SseEvent("message", "", "0"), SseEvent("message", '{"a":\n1}', "7")]


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_events_split_anywhere_across_chunks_parse_the_same(newline: str) -> None:
    body = BODY.replace("\n", newline)
    whole = parse_all([body])
    for size in (1, 2, 3, 5):
        chunks = [body[i : i + size] for i in range(0, len(body), size)]
        assert parse_all(chunks) == whole, size


def test_a_crlf_split_between_chunks_is_one_line_end_not_two() -> None:
    # "\r" closes the line at once; the "\n" arriving next must not end the event early.
    events = parse_all(["data: x\r", "\ndata: y\r\n\r\n"])
    assert events == [SseEvent("message", "x\ny", None)]


def test_an_event_without_data_is_not_dispatched_and_resets_its_type() -> None:
    events = parse_all(["event: ping\n\n", "data: z\n\n"])
    assert events == [SseEvent("message", "z", None)]


def test_a_field_without_a_colon_space_keeps_its_value() -> None:
    events = parse_all(["data:tight\n\n", "event:custom\ndata: x\n\n"])
    assert events == [SseEvent("message", "tight", None), SseEvent("custom", "x", None)]


def test_an_unterminated_event_is_not_dispatched() -> None:
    assert parse_all(["data: partial\n"]) == []


def test_retry_is_kept_and_a_bad_retry_ignored() -> None:
    parser = SSEDecoder()
    parser.feed(b"retry: 250\nid: 4\ndata:\n\nretry: soon\n\n")
    assert parser.retry == 250


def test_a_byte_order_mark_opening_the_body_is_dropped() -> None:
    parser = SSEDecoder()
    assert parser.feed(b"\xef\xbb") == []
    assert parser.feed(b"\xbfdata: x\n\n") == [SseEvent("message", "x", None)]
