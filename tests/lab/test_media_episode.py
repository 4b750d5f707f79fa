"""A lab episode whose user message carries an image: sent to the provider as a part, stored in
the memory scope as the same part, and a bad part refused before anything runs."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from tether import ConfigError, ContentError, image
from tether._known_media import KNOWN
from tether.lab import Runtime

from .test_provider_episode import Loopback, model, server, text_stream

__all__ = ["server"]

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 40


async def test_user_parts_reach_the_provider_and_the_store(lab: Runtime, server: Loopback) -> None:
    server.replies = [(200, text_stream("A small square."))]
    agent = lab.create_agent(id="looker", system_prompt="Describe images.", model=model(server))
    picture = image(PNG, name="square.png")
    result = await agent.run(memory_scope="m", user=["What is this?", picture]).result
    assert result.text == "A small square."
    (body,) = server.bodies
    assert body["messages"][1] == {
        "role": "user",
        "content": [
            {"type": "text", "text": "What is this?"},
            {
                "type": "image_url",
                "image_url": {"url": "data:image/png;base64," + base64.b64encode(PNG).decode()},
            },
        ],
    }
    stored = await lab.message_store.load("m")
    assert stored[1]["content"] == [{"type": "text", "text": "What is this?"}, picture]


async def test_bad_user_content_is_refused_before_anything_runs(
    lab: Runtime, server: Loopback
) -> None:
    agent = lab.create_agent(id="looker", system_prompt="Describe images.", model=model(server))
    with pytest.raises(ContentError, match="not valid base64"):
        agent.run(
            memory_scope="b",
            user=["hi", {"type": "image", "media_type": "image/png", "data": "not base64!"}],
        )
    with pytest.raises(ConfigError, match="a string or a list"):
        agent.run(memory_scope="b", user=42)  # type: ignore[call-overload]
    assert server.bodies == []
    assert await lab.message_store.load("b") == []


async def test_two_images_with_one_name_each_reach_the_turns_that_hold_them(
    lab: Runtime, server: Loopback
) -> None:
    """Two images over the blob threshold, both named photo.png, in turns 1 and 3 of one scope:
    stored as references, read once each, and each request carries the data URL of every image
    its transcript holds, in its own message (the encodings kept between turns never mix)."""
    first = b"\x89PNG\r\n\x1a\n" + b"\x01" * 100_000
    second = b"\x89PNG\r\n\x1a\n" + b"\x02" * 100_000
    agent = lab.create_agent(id="looker", system_prompt="Describe images.", model=model(server))
    turns: list[Any] = [
        ["What is this?", image(first, name="photo.png")],
        "and now?",
        ["And this?", image(second, name="photo.png")],
        "which is brighter?",
    ]
    for user in turns:
        server.replies.append((200, text_stream("ok")))
        await agent.run(memory_scope="two", user=user).result
        KNOWN.clear()  # so the requests after it read from the store, as in a later process
    urls = ["data:image/png;base64," + base64.b64encode(b).decode() for b in (first, second)]

    def images(body: dict[str, Any]) -> list[tuple[int, str]]:
        found = []
        for i, message in enumerate(body["messages"]):
            content = message["content"]
            for part in content if isinstance(content, list) else []:
                if part["type"] == "image_url":
                    found.append((i, part["image_url"]["url"]))
        return found

    assert [images(b) for b in server.bodies] == [
        [(1, urls[0])],
        [(1, urls[0])],
        [(1, urls[0]), (5, urls[1])],
        [(1, urls[0]), (5, urls[1])],
    ]
    stored = await lab.message_store.load("two")
    refs = [p for m in stored for p in m["content"] if p.get("type") == "image"]
    assert [p["name"] for p in refs] == ["photo.png", "photo.png"]
    assert all("blob" in p and "data" not in p for p in refs)
    resolver = lab.blob_resolver(lab.message_store)
    assert resolver is not None and resolver.reads == 2


@pytest.mark.parametrize("made_by", ["image()", "hand"])
async def test_a_first_turn_decodes_and_hashes_its_image_at_most_once(
    lab: Runtime, server: Loopback, monkeypatch: pytest.MonkeyPatch, made_by: str
) -> None:
    """The user's part is checked, written to the transcript and to the run's events, and
    sent; its bytes are decoded at most once (never, when `image()` made it from the bytes),
    hashed once, and the request takes the very text the caller gave, reading no blob."""
    import binascii
    import hashlib

    big = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 800  # over the 64 KB blob threshold
    text = base64.b64encode(big).decode()
    part: Any = (
        image(big)
        if made_by == "image()"
        else {
            "type": "image",
            "media_type": "image/png",
            "data": text,
        }
    )
    calls = {"decode": 0, "hash": 0}
    decode, sha256 = binascii.a2b_base64, hashlib.sha256

    def counted_decode(data: Any, *args: Any, **kwargs: Any) -> bytes:
        calls["decode"] += len(data) > 100_000
        return decode(data, *args, **kwargs)

    def counted_sha256(data: bytes = b"", *args: Any, **kwargs: Any) -> Any:
        calls["hash"] += len(data) > 100_000
        return sha256(data, *args, **kwargs)

    monkeypatch.setattr(binascii, "a2b_base64", counted_decode)
    monkeypatch.setattr(hashlib, "sha256", counted_sha256)
    server.replies = [(200, text_stream("A pattern."))]
    agent = lab.create_agent(id="looker", system_prompt="Describe images.", model=model(server))
    await agent.run(memory_scope="once", user=["What is this?", part]).result
    assert calls == {"decode": 0 if made_by == "image()" else 1, "hash": 1}
    (body,) = server.bodies
    assert body["messages"][1]["content"][1]["image_url"]["url"].endswith(text)
    resolver = lab.blob_resolver(lab.message_store)
    assert resolver is not None and resolver.reads == 0
    (record,) = [m for m in await lab.message_store.load("once") if m["role"] == "user"]
    assert "blob" in record["content"][1] and "data" not in record["content"][1]
