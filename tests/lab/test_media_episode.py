"""A lab episode whose user message carries an image: sent to the provider as a part, stored in
the memory scope as the same part, and a bad part refused before anything runs."""

from __future__ import annotations

import base64

import pytest

from tether import ConfigError, ContentError, image
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
