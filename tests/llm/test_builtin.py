"""Provider-hosted tools: each declared in its provider's shape, refused at definition where the
provider does not host it, and its call and result blocks kept in the transcript and sent back
unchanged on the next turn (two turns of a real agent over a loopback server per wire).

Wire shapes from the providers' documentation: Anthropic, "Web search tool" (streaming: a
``server_tool_use`` block whose input arrives as ``input_json_delta``, then a
``web_search_tool_result`` block complete in its start event) and "Code execution tool";
OpenAI, "Web search" in the Responses API guide (``web_search_call`` output items,
``output_item.added`` then ``output_item.done`` with its ``action``); Google, "Code execution"
in the Gemini API docs (``executableCode`` and ``codeExecutionResult`` parts). Ids, encrypted
contents and texts are made up."""

from __future__ import annotations

from typing import Any

import pytest

from tether import create_agent, reduce
from tether.errors import ConfigError
from tether.llm.anthropic import AnthropicClient
from tether.llm.builtin import code_execution, file_search, web_search
from tether.llm.gemini import GeminiClient
from tether.llm.openai_chat import OpenAIChatClient
from tether.llm.openai_responses import OpenAIResponsesClient

from .conftest import Reply, WireServer, sse

SEARCH_USE = {
    "type": "server_tool_use",
    "id": "srvtoolu_01WYG3ziw53XMcoyKL4XcZmE",
    "name": "web_search",
    "input": {"query": "weather Oslo today"},
}
SEARCH_RESULT = {
    "type": "web_search_tool_result",
    "tool_use_id": "srvtoolu_01WYG3ziw53XMcoyKL4XcZmE",
    "content": [
        {
            "type": "web_search_result",
            "title": "Oslo weather today",
            "url": "https://weather.example/oslo",
            "encrypted_content": "EqgfCioIARgBIiQ3YTAwMjY1Mi1mZjM5LTQ1NGUtODgxNC1kNjNjNTk1ZWI3Y2Q",
            "page_age": "2 hours ago",
        }
    ],
}
ANTHROPIC_SEARCH = sse(
    (
        "message_start",
        {
            "type": "message_start",
            "message": {
                "id": "msg_1",
                "model": "claude-x",
                "usage": {"input_tokens": 10, "output_tokens": 1},
            },
        },
    ),
    (
        "content_block_start",
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {
                "type": "server_tool_use",
                "id": SEARCH_USE["id"],
                "name": "web_search",
                "input": {},
            },
        },
    ),
    (
        "content_block_delta",
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": '{"query": '},
        },
    ),
    (
        "content_block_delta",
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": '"weather Oslo today"}'},
        },
    ),
    ("content_block_stop", {"type": "content_block_stop", "index": 0}),
    (
        "content_block_start",
        {"type": "content_block_start", "index": 1, "content_block": SEARCH_RESULT},
    ),
    ("content_block_stop", {"type": "content_block_stop", "index": 1}),
    (
        "content_block_start",
        {"type": "content_block_start", "index": 2, "content_block": {"type": "text", "text": ""}},
    ),
    (
        "content_block_delta",
        {
            "type": "content_block_delta",
            "index": 2,
            "delta": {"type": "text_delta", "text": "It is 12°C in Oslo."},
        },
    ),
    ("content_block_stop", {"type": "content_block_stop", "index": 2}),
    (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn"},
            "usage": {"output_tokens": 30, "server_tool_use": {"web_search_requests": 1}},
        },
    ),
    ("message_stop", {"type": "message_stop"}),
)
ANTHROPIC_TEXT = sse(
    (
        "message_start",
        {
            "type": "message_start",
            "message": {
                "id": "msg_2",
                "model": "claude-x",
                "usage": {"input_tokens": 10, "output_tokens": 1},
            },
        },
    ),
    (
        "content_block_start",
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    ),
    (
        "content_block_delta",
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": "Yes."},
        },
    ),
    ("content_block_stop", {"type": "content_block_stop", "index": 0}),
    (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn"},
            "usage": {"output_tokens": 2},
        },
    ),
    ("message_stop", {"type": "message_stop"}),
)

WEB_CALL = {
    "type": "web_search_call",
    "id": "ws_67c9fa0502748190b7dd390736892e100be649c1a5ff9609",
    "status": "completed",
    "action": {"type": "search", "query": "weather Oslo today"},
}
RESPONSES_SEARCH = sse(
    (
        "response.created",
        {"type": "response.created", "response": {"id": "resp_1", "status": "in_progress"}},
    ),
    (
        "response.output_item.added",
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {"type": "web_search_call", "id": WEB_CALL["id"], "status": "in_progress"},
        },
    ),
    (
        "response.web_search_call.completed",
        {
            "type": "response.web_search_call.completed",
            "output_index": 0,
            "item_id": WEB_CALL["id"],
        },
    ),
    (
        "response.output_item.done",
        {"type": "response.output_item.done", "output_index": 0, "item": WEB_CALL},
    ),
    (
        "response.output_item.added",
        {
            "type": "response.output_item.added",
            "output_index": 1,
            "item": {"type": "message", "id": "msg_1", "role": "assistant", "content": []},
        },
    ),
    (
        "response.output_text.delta",
        {
            "type": "response.output_text.delta",
            "item_id": "msg_1",
            "output_index": 1,
            "content_index": 0,
            "delta": "It is 12°C in Oslo.",
        },
    ),
    (
        "response.output_item.done",
        {
            "type": "response.output_item.done",
            "output_index": 1,
            "item": {
                "type": "message",
                "id": "msg_1",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "It is 12°C in Oslo."}],
            },
        },
    ),
    (
        "response.completed",
        {
            "type": "response.completed",
            "response": {
                "id": "resp_1",
                "status": "completed",
                "usage": {"input_tokens": 10, "output_tokens": 9},
            },
        },
    ),
)
RESPONSES_TEXT = sse(
    (
        "response.output_text.delta",
        {
            "type": "response.output_text.delta",
            "item_id": "msg_2",
            "output_index": 0,
            "content_index": 0,
            "delta": "Yes.",
        },
    ),
    (
        "response.output_item.done",
        {
            "type": "response.output_item.done",
            "output_index": 0,
            "item": {
                "type": "message",
                "id": "msg_2",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Yes."}],
            },
        },
    ),
    (
        "response.completed",
        {"type": "response.completed", "response": {"id": "resp_2", "status": "completed"}},
    ),
)

CODE = {"executableCode": {"language": "PYTHON", "code": "print(sum(range(10)))"}}
RESULT = {"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "45\n"}}
GEMINI_CODE = sse(
    (None, {"candidates": [{"content": {"role": "model", "parts": [CODE]}}]}),
    (None, {"candidates": [{"content": {"role": "model", "parts": [RESULT]}}]}),
    (
        None,
        {
            "candidates": [
                {
                    "content": {"role": "model", "parts": [{"text": "The sum is 45."}]},
                    "finishReason": "STOP",
                }
            ],
            "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 9},
        },
    ),
)
GEMINI_TEXT = sse(
    (
        None,
        {
            "candidates": [
                {"content": {"role": "model", "parts": [{"text": "Yes."}]}, "finishReason": "STOP"}
            ]
        },
    ),
)


async def two_turns(client: Any, wire: WireServer, first: bytes, second: bytes) -> list[Any]:
    """Two turns of an agent: the second request is what the transcript sends back."""
    wire.reply(Reply(body=first), Reply(body=second))
    agent = create_agent(model=client)
    session = agent.create_session()
    for text in ("Weather in Oslo?", "Sure?"):
        async for event in agent.send(session, text):
            session = reduce(session, event)
    await client.aclose()
    return [seen.json() for seen in wire.requests]


async def test_anthropic_web_search_round_trip(wire: WireServer) -> None:
    client = AnthropicClient(
        "claude-x", base_url=wire.url, api_key="k", builtin_tools=[web_search(max_uses=3)]
    )
    first, second = await two_turns(client, wire, ANTHROPIC_SEARCH, ANTHROPIC_TEXT)
    assert first["tools"] == [{"type": "web_search_20250305", "name": "web_search", "max_uses": 3}]
    assert "anthropic-beta" not in wire.requests[0].headers
    assert second["messages"][1] == {
        "role": "assistant",
        "content": [SEARCH_USE, SEARCH_RESULT, {"type": "text", "text": "It is 12°C in Oslo."}],
    }


def test_anthropic_code_execution_needs_its_beta() -> None:
    client = AnthropicClient("claude-x", api_key="k", builtin_tools=[code_execution()])
    assert client._headers["anthropic-beta"] == "code-execution-2025-08-25"
    body = client.build_body({"model": "claude-x", "system": [], "messages": []})
    assert body["tools"] == [{"type": "code_execution_20250825", "name": "code_execution"}]


async def test_responses_web_search_round_trip(wire: WireServer) -> None:
    client = OpenAIResponsesClient(
        "gpt-x",
        base_url=wire.url,
        api_key="k",
        builtin_tools=[web_search(allowed_domains=["weather.example"])],
    )
    first, second = await two_turns(client, wire, RESPONSES_SEARCH, RESPONSES_TEXT)
    assert first["tools"] == [
        {"type": "web_search", "filters": {"allowed_domains": ["weather.example"]}}
    ]
    assert second["input"][1:3] == [
        WEB_CALL,
        {"role": "assistant", "content": "It is 12°C in Oslo."},
    ]


def test_responses_file_search_and_code_interpreter() -> None:
    client = OpenAIResponsesClient(
        "gpt-x", api_key="k", builtin_tools=[file_search(["vs_1"]), code_execution()]
    )
    body = client.build_body({"model": "gpt-x", "system": [], "messages": []})
    assert body["tools"] == [
        {"type": "file_search", "vector_store_ids": ["vs_1"]},
        {"type": "code_interpreter", "container": {"type": "auto"}},
    ]


async def test_gemini_code_execution_round_trip(wire: WireServer) -> None:
    client = GeminiClient(
        "gemini-x", base_url=wire.url, api_key="k", builtin_tools=[code_execution(), web_search()]
    )
    first, second = await two_turns(client, wire, GEMINI_CODE, GEMINI_TEXT)
    assert first["tools"] == [{"code_execution": {}}, {"google_search": {}}]
    assert second["contents"][1] == {
        "role": "model",
        "parts": [CODE, RESULT, {"text": "The sum is 45."}],
    }


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (
            lambda: OpenAIChatClient("g", api_key="k", builtin_tools=[web_search()]),
            "openai does not host the built-in tool 'web_search'",
        ),
        (
            lambda: GeminiClient("g", api_key="k", builtin_tools=[file_search(["vs"])]),
            "gemini does not host the built-in tool 'file_search'",
        ),
        (
            lambda: AnthropicClient("c", api_key="k", builtin_tools=[file_search(["vs"])]),
            "anthropic does not host the built-in tool 'file_search'",
        ),
        (
            lambda: create_agent(
                model={"model": "openai:gpt-x", "api_key": "k", "builtin_tools": [code_execution()]}
            ),
            "openai does not host the built-in tool 'code_execution'",
        ),
    ],
)
def test_a_tool_the_provider_does_not_host_is_refused_at_definition(
    build: Any, message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        build()


def test_bedrock_hosts_none(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("botocore")
    from tether.llm.bedrock import BedrockClient

    monkeypatch.setenv("AWS_REGION", "us-east-1")
    with pytest.raises(ConfigError, match="bedrock does not host the built-in tool 'web_search'"):
        BedrockClient("m", builtin_tools=[web_search()])


def test_another_wire_leaves_the_blocks_out() -> None:
    from tether.llm.anthropic import to_anthropic_messages
    from tether.llm.gemini import to_gemini_contents

    message: Any = {
        "role": "assistant",
        "content": [
            {"type": "provider", "wire": "gemini", "block": CODE},
            {"type": "text", "text": "45"},
        ],
    }
    assert to_anthropic_messages([message]) == [
        {"role": "assistant", "content": [{"type": "text", "text": "45"}]}
    ]
    assert to_gemini_contents([message]) == [{"role": "model", "parts": [CODE, {"text": "45"}]}]
