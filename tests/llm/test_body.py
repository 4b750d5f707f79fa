"""A request body with long media in it is encoded once per string and sent in pieces: the bytes
are exactly `dumps(body)`'s, whatever the body's shape, and a kept encoding is never given for a
string it was not made from (two images of one size and name, an image replaced, an evicted
one, a data: URL of another media type)."""

from __future__ import annotations

import base64
import json
import os
from typing import Any

import pytest

from tether import Session, create_agent, image, reduce
from tether._json import dumps
from tether.blobs import BlobResolver
from tether.errors import ConfigError
from tether.llm._body import SPLICE_MIN, BodyEncoder, Pieces, carries_long_data, json_string
from tether.llm._kept import Kept
from tether.llm._media import data_url
from tether.llm.anthropic import AnthropicClient
from tether.stores import InMemoryBlobStore

from .conftest import OWN_FIXTURES, Reply, Sleeps, WireServer


def long_b64(seed: int = 0) -> str:
    """Base64 text of SPLICE_MIN-odd characters, different for each seed."""
    raw = bytes([seed]) + os.urandom(SPLICE_MIN)
    return base64.b64encode(raw).decode()


def png(seed: int) -> bytes:
    return b"\x89PNG\r\n\x1a\n" + bytes([seed]) * 8 + os.urandom(SPLICE_MIN)


A, B = long_b64(1), long_b64(2)
ODD = 'say "hi"\\ \n\t\x01 é ☃ ' * (SPLICE_MIN // 10)  # long, and every kind of escape

BODIES: list[Any] = [
    {"data": A},
    {"model": "m", "messages": [{"role": "user", "content": [{"text": "x"}, {"data": A}]}]},
    {"list": [A, 1, "x", None, True, 2.5, {"k": [A]}, [], {}, B]},
    {"list": [1, 2, A, B, 3]},
    {"list": [A]},
    {"list": [[A], [B, "x"], ["y", A]], "after": {"n": -1, "f": 1e300}},
    {"tuple": ("a", A, ("b", B))},
    {"odd": ODD, "again": [ODD, A]},
    {"é": {"☃": A}, 'q"uote': B},
    {1: A, "n": B},  # an int key: `json` writes it as "1", so the body is encoded whole
    {"short": "x" * (SPLICE_MIN - 1), "list": ["y" * (SPLICE_MIN - 1)]},
    {"empty": "", "nested": {"deeper": {"deepest": [[[A]]]}}},
]


@pytest.mark.parametrize("body", BODIES)
def test_the_bytes_are_exactly_dumps(body: Any) -> None:
    encoder = BodyEncoder()
    expected = dumps(body).encode("utf-8")
    for _ in range(2):  # encoded, then from what was kept
        assert encoder.encode(body) == expected
        assert b"".join(encoder.pieces(body)) == expected
    json.loads(expected)


def test_json_string_is_dumps_of_the_string() -> None:
    for text in (A, ODD, "", "plain", '"', "\\", "\x00", "\x1f", "\x7f", "é", "\ud7ff"):
        assert json_string(text) == dumps(text).encode("utf-8")


def test_a_long_string_is_encoded_once_and_its_bytes_are_sent_as_they_are() -> None:
    encoder = BodyEncoder()
    body = {"messages": [{"data": A}], "n": 1}
    first = encoder.pieces(body)
    second = encoder.pieces({"messages": [{"data": A}, {"text": "more"}], "n": 2})
    assert encoder.encoded == 1
    (kept,) = [p for p in first if len(p) > SPLICE_MIN]
    assert any(p is kept for p in second)  # the same bytes object: no copy, no new encoding
    assert kept == json_string(A)


def test_equal_text_in_another_string_is_encoded_again_and_never_confused() -> None:
    encoder = BodyEncoder()
    copy = "".join(list(A))  # equal to A, another object
    assert copy == A and copy is not A
    assert encoder.encode({"d": A}) == encoder.encode({"d": copy}) == dumps({"d": A}).encode()
    assert encoder.encoded == 2
    # Two images of the same length and name: each body carries its own.
    one = encoder.encode({"name": "photo.png", "data": A})
    two = encoder.encode({"name": "photo.png", "data": B})
    assert A.encode() in one and B.encode() not in one
    assert B.encode() in two and A.encode() not in two


def test_the_bound_evicts_the_least_recently_used_and_a_huge_string_is_not_kept() -> None:
    size = len(A) + len(json_string(A))
    encoder = BodyEncoder(max_bytes=2 * size + 10)
    c = long_b64(3)
    for text in (A, B, A, c):  # A is used again before c comes: B goes
        assert encoder.encode({"d": text}) == dumps({"d": text}).encode()
    assert encoder.encoded == 3
    assert encoder.kept.held <= encoder.kept.max_bytes and len(encoder.kept) == 2
    encoder.encode({"d": A})
    assert encoder.encoded == 3  # still kept
    encoder.encode({"d": B})
    assert encoder.encoded == 4  # evicted, so encoded again, correctly
    tiny = BodyEncoder(max_bytes=100)
    for _ in range(2):
        assert tiny.encode({"d": A}) == dumps({"d": A}).encode()
    assert tiny.encoded == 2 and len(tiny.kept) == 0 and tiny.kept.held == 0


def test_kept_refuses_a_bad_bound() -> None:
    for bad in (-1, 1.5, True):
        with pytest.raises(ConfigError, match="max_bytes"):
            Kept(bad)  # type: ignore[arg-type]


def test_a_data_url_is_made_once_per_string_and_media_type() -> None:
    part = {"type": "image", "media_type": "image/png", "data": A}
    url = data_url(part)
    assert url == "data:image/png;base64," + A
    assert data_url(dict(part)) is url  # the same string: the same URL object
    other = data_url({**part, "media_type": "image/jpeg"})
    assert other == "data:image/jpeg;base64," + A  # the tag keeps media types apart
    copy = "".join(list(A))
    assert data_url({**part, "data": copy}) == url  # equal text, another string: made again
    assert data_url({**part, "data": B}) == "data:image/png;base64," + B
    short = {**part, "data": "iVBORw0KGgo="}
    assert data_url(short) == "data:image/png;base64,iVBORw0KGgo="


def test_only_long_media_data_makes_a_body_worth_walking() -> None:
    text = [{"role": "user", "content": "hi"}, {"role": "user", "content": [{"type": "text"}]}]
    small = [{"role": "user", "content": [{"type": "image", "data": "abcd"}]}]
    long = [{"role": "user", "content": [{"type": "image", "data": A}]}]
    in_tool = [
        {
            "role": "tool",
            "content": [{"type": "tool_result", "parts": [{"type": "image", "data": A}]}],
        }
    ]
    url = [{"role": "user", "content": [{"type": "image", "url": "https://x/" + A}]}]
    assert not carries_long_data(text) and not carries_long_data(small)
    assert not carries_long_data(url)
    assert carries_long_data(long) and carries_long_data(in_tool)


async def test_pieces_start_over_for_each_reading() -> None:
    body = Pieces([b"a", b"bc", b""])
    assert body.length == 3
    for _ in range(2):
        assert [p async for p in body] == [b"a", b"bc", b""]


# -- on the wire --------------------------------------------------------------------------------

_REPLIES = {
    "anthropic": ("anthropic:claude-test", "", "anthropic/text_with_ping.sse"),
    "openai": ("openai:gpt-test", "/v1", "openai_chat/text_with_usage_chunk.sse"),
    "openai-responses": ("openai-responses:gpt-test", "/v1", "openai_responses/text.sse"),
    "gemini": ("gemini:gemini-test", "/v1beta", "gemini/text_three_chunks.sse"),
}


@pytest.mark.parametrize("provider", sorted(_REPLIES))
async def test_each_turn_sends_its_own_images_exactly(wire: WireServer, provider: str) -> None:
    """Two different images with the same name, in turns 1 and 3 of one conversation: every
    request carries each image that is in its transcript, in its own message, and its bytes are
    the compact JSON of what they hold (the server read exactly the content-length)."""
    model, prefix, reply = _REPLIES[provider]
    agent = create_agent(llm={"model": model, "base_url": f"{wire.url}{prefix}", "api_key": "k"})
    first, second = png(1), png(2)
    users: list[Any] = [
        ["what is this?", image(first, name="photo.png")],
        "and now?",
        ["and this one?", image(second, name="photo.png")],
        "which is brighter?",
    ]
    session = Session(id="s")
    async with agent:
        for user in users:
            wire.reply(Reply(body=(OWN_FIXTURES / reply).read_bytes()))
            async for event in agent.send(session, user):
                session = reduce(session, event)
    one, two = base64.b64encode(first).decode(), base64.b64encode(second).decode()
    assert len(wire.requests) == 4
    for turn, seen in enumerate(wire.requests):
        assert seen.body == dumps(seen.json()).encode("utf-8")
        text = seen.body.decode()
        assert text.count(one) == 1
        assert text.count(two) == (1 if turn >= 2 else 0)
        if turn >= 1:
            assert text.index(one) < text.index("and now?")
        if turn >= 2:
            assert text.index("and now?") < text.index("and this one?") < text.index(two)


async def test_a_replaced_blob_reference_sends_the_new_bytes(wire: WireServer) -> None:
    """The same message, its reference changed to another blob between turns (the image
    replaced), and a resolver that keeps nothing (each turn's base64 a new string): each
    request carries the blob its transcript refers to at the time."""
    blobs = InMemoryBlobStore()
    first, second = png(3), png(4)
    shas = [await blobs.put(first, "image/png"), await blobs.put(second, "image/png")]
    client = AnthropicClient("claude-test", base_url=wire.url, api_key="k")
    reply = (OWN_FIXTURES / "anthropic/text_with_ping.sse").read_bytes()
    sent: list[str] = []
    for resolver in (BlobResolver(blobs), BlobResolver(blobs, max_bytes=0)):
        agent = create_agent(model=client, blobs=resolver)
        for sha in (*shas, shas[0]):
            part: Any = {"type": "image", "media_type": "image/png", "blob": sha, "name": "p.png"}
            text: Any = {"type": "text", "text": "?"}
            session = Session("s", [{"role": "user", "content": [text, part]}])
            wire.reply(Reply(body=reply))
            async for event in agent.send(session, "what is it?"):
                session = reduce(session, event)
            sent.append(wire.requests[-1].body.decode())
    await client.aclose()
    expected = [base64.b64encode(b).decode() for b in (first, second, first)] * 2
    for body, data in zip(sent, expected, strict=True):
        assert data in body
        other = ({*(base64.b64encode(b).decode() for b in (first, second))} - {data}).pop()
        assert other not in body
        assert body.encode() == dumps(json.loads(body)).encode()


async def test_a_retried_request_sends_the_whole_body_again(
    wire: WireServer, sleeps: Sleeps
) -> None:
    client = AnthropicClient("claude-test", base_url=wire.url, api_key="k", max_retries=1)
    agent = create_agent(model=client)
    wire.reply(
        Reply(status=529, body=b'{"type":"error","error":{"type":"overloaded_error"}}'),
        Reply(body=(OWN_FIXTURES / "anthropic/text_with_ping.sse").read_bytes()),
    )
    picture = png(5)
    session = Session(id="s")
    async with agent:
        async for event in agent.send(session, ["?", image(picture)]):
            session = reduce(session, event)
    await client.aclose()
    assert session.messages[-1]["role"] == "assistant"
    first, again = wire.requests
    assert first.body == again.body
    assert int(again.headers["content-length"]) == len(again.body)
    assert base64.b64encode(picture) in again.body
    assert sleeps.waits
