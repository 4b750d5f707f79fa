"""A provider-hosted tool's block in a stored conversation (tether.llm.builtin) is shown as a
labelled, collapsed block with its data escaped."""

from __future__ import annotations

from .conftest import HOSTILE, World, assert_inert, client_for


async def test_hosted_tool_blocks_are_shown_escaped(world: World) -> None:
    await world.runtime.message_store.append(
        "searched",
        [
            {"role": "user", "content": [{"type": "text", "text": "Weather?"}]},
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "provider",
                        "wire": "anthropic",
                        "block": {
                            "type": "server_tool_use",
                            "id": "srvtoolu_1",
                            "name": "web_search",
                            "input": {"query": HOSTILE},
                        },
                    },
                    {
                        "type": "provider",
                        "wire": "gemini",
                        "block": {"executableCode": {"language": "PYTHON", "code": "print(1)"}},
                    },
                    {"type": "text", "text": "12°C"},
                ],
            },
        ],
    )
    async with client_for(world.runtime, world.registry) as client:
        response = await client.get("/conversations/searched")
        assert response.status_code == 200
        html = response.text
        text = assert_inert(html)
        assert html.count('class="part part-provider"') == 2
        assert "hosted tool" in text and "server_tool_use" in text and "executableCode" in text
        assert "web_search" in text and "print(1)" in text
