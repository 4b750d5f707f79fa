"""A tool that returns an image: each provider's second request, as a local HTTP server received
it, carries the image where that provider takes it (in the tool result; for Chat Completions,
whose tool messages are text only, in a user message after the results, with a trace record),
and `max_tool_result_bytes` drops media past it with a marker the model reads."""

from __future__ import annotations

import base64
from typing import Any

from tether import Session, TraceRecord, create_agent, define_tool, image
from tether.session import reduce

from .conftest import OWN_FIXTURES, Reply, WireServer

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(40))
B64_PNG = base64.b64encode(PNG).decode()

_CASES = {
    "anthropic": (
        "anthropic:claude-test",
        "",
        "anthropic/tool_use_after_text.sse",
        "anthropic/text_with_ping.sse",
        "get_weather",
    ),
    "openai": (
        "openai:gpt-test",
        "/v1",
        "openai_chat/text_then_tool_call.sse",
        "openai_chat/text_with_usage_chunk.sse",
        "get_forecast",
    ),
    "openai-responses": (
        "openai-responses:gpt-test",
        "/v1",
        "openai_responses/function_call.sse",
        "openai_responses/text.sse",
        "get_weather",
    ),
    "gemini": (
        "gemini:gemini-test",
        "/v1beta",
        "gemini/function_call_no_id_2_5.sse",
        "gemini/text_three_chunks.sse",
        "get_weather",
    ),
}


async def _second_request(
    wire: WireServer, provider: str, returned: Any, **options: Any
) -> tuple[dict[str, Any], Session, list[TraceRecord]]:
    model, prefix, call, text, tool_name = _CASES[provider]
    wire.reply(Reply(body=(OWN_FIXTURES / call).read_bytes()))
    wire.reply(Reply(body=(OWN_FIXTURES / text).read_bytes()))
    tool = define_tool(
        name=tool_name,
        description="Draws a chart",
        input_schema={"type": "object"},
        execute=lambda value: returned,
    )
    records: list[TraceRecord] = []
    agent = create_agent(
        llm={"model": model, "base_url": f"{wire.url}{prefix}", "api_key": "k"},
        tools=[tool],
        trace=records.append,
        **options,
    )
    session = Session(id="s")
    async with agent:
        async for event in agent.send(session, "Chart it."):
            reduce(session, event)
    assert len(wire.requests) == 2
    body: dict[str, Any] = wire.requests[-1].json()
    return body, session, records


RETURNED = ["the chart:", image(PNG, name="chart.png")]


async def test_anthropic_images_inside_tool_result(wire: WireServer) -> None:
    body, session, _ = await _second_request(wire, "anthropic", RETURNED)
    (result,) = [b for b in body["messages"][-1]["content"] if b["type"] == "tool_result"]
    assert result["content"] == [
        {"type": "text", "text": "the chart:"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": B64_PNG}},
    ]
    part = session.messages[2]["content"][0]
    assert part["type"] == "tool_result"
    assert part["output"] == "the chart:" and part["parts"] == [RETURNED[1]]


async def test_openai_chat_image_follows_the_tool_results_as_a_user_message(
    wire: WireServer,
) -> None:
    body, _, records = await _second_request(wire, "openai", RETURNED)
    tool_message, follow = body["messages"][-2:]
    assert tool_message == {"role": "tool", "tool_call_id": "call_mix1", "content": "the chart:"}
    assert follow == {
        "role": "user",
        "content": [
            {
                "type": "text",
                "text": "[the 1 attachment returned by tool get_forecast (call call_mix1)]",
            },
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{B64_PNG}"}},
        ],
    }
    (moved,) = [r for r in records if r["name"] == "result:media_follows"]
    assert moved["data"] == {
        "id": "call_mix1",
        "name": "get_forecast",
        "parts": 1,
        "provider": "openai",
    }


async def test_openai_responses_image_in_function_call_output(wire: WireServer) -> None:
    body, _, records = await _second_request(wire, "openai-responses", RETURNED)
    (output,) = [i for i in body["input"] if i.get("type") == "function_call_output"]
    assert output["output"] == [
        {"type": "input_text", "text": "the chart:"},
        {
            "type": "input_image",
            "image_url": f"data:image/png;base64,{B64_PNG}",
            "detail": "auto",
        },
    ]
    assert not [r for r in records if r["name"] == "result:media_follows"]


async def test_gemini_parts_in_function_response(wire: WireServer) -> None:
    body, _, _ = await _second_request(wire, "gemini", RETURNED)
    (response,) = [
        p["functionResponse"]
        for c in body["contents"]
        for p in c["parts"]
        if "functionResponse" in p
    ]
    assert response["response"] == {"result": "the chart:"}
    assert response["parts"] == [{"inlineData": {"mimeType": "image/png", "data": B64_PNG}}]


async def test_media_past_max_tool_result_bytes_is_dropped_with_a_marker(
    wire: WireServer,
) -> None:
    big = image(PNG + bytes(100), name="big.png")
    body, session, records = await _second_request(
        wire, "anthropic", ["two charts", image(PNG), big], max_tool_result_bytes=100
    )
    (result,) = [b for b in body["messages"][-1]["content"] if b["type"] == "tool_result"]
    text, kept = result["content"]
    assert kept["source"]["data"] == B64_PNG
    assert text["text"] == (
        "two charts\n\n[tether: left out big.png (image/png, 148 bytes): this result may "
        "carry 100 bytes of media]"
    )
    (dropped,) = [r for r in records if r["name"] == "result:media_dropped"]
    assert dropped["data"]["limit"] == 100
    assert len(session.messages[2]["content"][0]["parts"]) == 1


async def test_max_tool_result_chars_counts_text_only(wire: WireServer) -> None:
    body, _, _ = await _second_request(wire, "anthropic", RETURNED, max_tool_result_chars=20)
    (result,) = [b for b in body["messages"][-1]["content"] if b["type"] == "tool_result"]
    assert result["content"][0] == {"type": "text", "text": "the chart:"}
    assert result["content"][1]["source"]["data"] == B64_PNG


async def test_a_broken_part_from_a_tool_is_an_error_result(wire: WireServer) -> None:
    bad = {"type": "image", "media_type": "image/png", "data": "%%%"}
    body, _, _ = await _second_request(wire, "anthropic", ["x", bad])
    (result,) = [b for b in body["messages"][-1]["content"] if b["type"] == "tool_result"]
    assert result["is_error"] is True
    assert "not valid base64" in result["content"]
