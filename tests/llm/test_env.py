"""The environment conventions of the providers' own SDKs: where keys, base URLs and the OpenAI
organization come from when the model config does not say, checked on a loopback server."""

from __future__ import annotations

import pytest

from tether.errors import MissingKeyError
from tether.llm import client_from_config
from tether.llm.anthropic import AnthropicClient
from tether.llm.gemini import GeminiClient
from tether.llm.openai_chat import OpenAIChatClient
from tether.llm.openai_responses import OpenAIResponsesClient

from .conftest import Reply, WireServer, run_chat, simple_request, sse

OK_CHAT = sse(
    (None, {"choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": "stop"}]}),
    (None, "[DONE]"),
)
OK_ANTHROPIC = sse(
    ("message_start", {"type": "message_start", "message": {"usage": {}}}),
    ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"}}),
    ("message_stop", {"type": "message_stop"}),
)
OK_GEMINI = sse((None, {"candidates": [{"content": {"parts": []}, "finishReason": "STOP"}]}))
OK_RESPONSES = sse(
    ("response.completed", {"type": "response.completed", "response": {"status": "completed"}})
)


async def test_openai_base_url_key_organization_and_project(
    wire: WireServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", f"{wire.url}/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    monkeypatch.setenv("OPENAI_ORG_ID", "org-1")
    monkeypatch.setenv("OPENAI_PROJECT_ID", "proj-1")
    wire.reply(Reply(body=OK_CHAT), Reply(body=OK_RESPONSES))
    for model in ("openai:gpt-x", "openai-responses:gpt-x"):
        client = client_from_config(model)
        assert isinstance(client, OpenAIChatClient | OpenAIResponsesClient)
        async with client:
            assert (await run_chat(client, simple_request("gpt-x"))).error is None
    for seen, path in zip(wire.requests, ("/v1/chat/completions", "/v1/responses"), strict=True):
        assert seen.path == path
        assert seen.headers["authorization"] == "Bearer sk-env"
        assert seen.headers["openai-organization"] == "org-1"
        assert seen.headers["openai-project"] == "proj-1"


def test_a_local_base_url_from_the_environment_needs_no_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(MissingKeyError, match="OPENAI_API_KEY"):
        OpenAIChatClient("llama")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:11434/v1/")
    local = OpenAIChatClient("llama")
    assert local.base_url == "http://127.0.0.1:11434/v1"
    assert "authorization" not in local._headers
    # The config's base_url wins over the environment's.
    assert OpenAIChatClient("llama", base_url="http://other/v1").base_url == "http://other/v1"


async def test_anthropic_base_url_and_auth_token(
    wire: WireServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", wire.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-env")
    wire.reply(Reply(body=OK_ANTHROPIC), Reply(body=OK_ANTHROPIC))
    async with AnthropicClient("claude-x") as client:
        assert (await run_chat(client, simple_request())).error is None
    assert wire.requests[0].path == "/v1/messages"
    assert wire.requests[0].headers["x-api-key"] == "sk-ant-env"
    # The SDK's bearer-token alternative, against the provider's own endpoint too.
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    monkeypatch.delenv("ANTHROPIC_BASE_URL")
    monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", "tok")
    gateway = AnthropicClient("claude-x")
    assert gateway.base_url == "https://api.anthropic.com"
    assert gateway._headers["authorization"] == "Bearer tok"
    assert "x-api-key" not in gateway._headers


async def test_gemini_base_url_version_and_key_order(
    wire: WireServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", wire.url + "/")
    monkeypatch.setenv("GEMINI_API_KEY", "gem")
    monkeypatch.setenv("GOOGLE_API_KEY", "goog")
    wire.reply(Reply(body=OK_GEMINI), Reply(body=OK_GEMINI))
    async with GeminiClient("gemini-x") as client:
        assert (await run_chat(client, simple_request("gemini-x"))).error is None
    seen = wire.requests[0]
    assert seen.path == "/v1beta/models/gemini-x:streamGenerateContent?alt=sse"
    assert seen.headers["x-goog-api-key"] == "goog"  # google-genai: GOOGLE_API_KEY wins
    monkeypatch.setenv("GOOGLE_GENAI_API_VERSION", "v1")
    async with GeminiClient("gemini-x") as client:
        assert (await run_chat(client, simple_request("gemini-x"))).error is None
    assert wire.requests[1].path.startswith("/v1/models/gemini-x:")
