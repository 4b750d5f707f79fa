"""Azure OpenAI: deployment URLs with api-version, the api-key header or an Entra ID token
(a fake token source; the HTTP wire is a real loopback server), the OpenAI wire unchanged."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tether.errors import AuthenticationError, ConfigError, MissingCredentialsError
from tether.llm import client_from_config
from tether.llm.azure import AzureChatClient, AzureResponsesClient
from tether.llm.credentials.azure import ENTRA_SCOPE

from .conftest import Reply, WireServer, run_chat, simple_request, sse

CHAT_BODY = sse(
    (
        None,
        {"id": "c1", "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hej"}}]},
    ),
    (None, {"id": "c1", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
    (None, {"id": "c1", "choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 1}}),
    (None, "[DONE]"),
)
RESPONSES_BODY = sse(
    (
        "response.created",
        {"type": "response.created", "response": {"id": "resp_1", "status": "in_progress"}},
    ),
    (
        "response.output_text.delta",
        {
            "type": "response.output_text.delta",
            "item_id": "m1",
            "output_index": 0,
            "content_index": 0,
            "delta": "Hej",
        },
    ),
    (
        "response.output_item.done",
        {
            "type": "response.output_item.done",
            "output_index": 0,
            "item": {
                "type": "message",
                "id": "m1",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Hej"}],
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
                "usage": {"input_tokens": 5, "output_tokens": 1},
            },
        },
    ),
)


class FakeToken:
    def __init__(self, token: str, expires_on: float) -> None:
        self.token = token
        self.expires_on = expires_on


class FakeEntra:
    """A TokenCredential: hands out numbered tokens, each valid for `lifetime` seconds."""

    def __init__(self, lifetime: float = 3600) -> None:
        self.scopes: list[tuple[str, ...]] = []
        self.lifetime = lifetime

    def get_token(self, *scopes: str, **kwargs: Any) -> FakeToken:
        self.scopes.append(scopes)
        return FakeToken(f"entra-{len(self.scopes)}", time.time() + self.lifetime)


class Unavailable:
    def get_token(self, *scopes: str, **kwargs: Any) -> FakeToken:
        raise RuntimeError("EnvironmentCredential authentication unavailable")


_OPEN: list[Any] = []


@pytest.fixture(autouse=True)
async def _close_clients() -> AsyncIterator[None]:
    yield
    while _OPEN:
        await _OPEN.pop().aclose()


def opened(client: Any) -> Any:
    _OPEN.append(client)
    return client


async def test_chat_goes_to_the_deployment_with_api_version_and_api_key(
    wire: WireServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", wire.url + "/")
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "az-key")
    wire.reply(Reply(body=CHAT_BODY))
    client = opened(client_from_config("azure:gpt-4o-prod"))
    assert isinstance(client, AzureChatClient)
    out = await run_chat(client, simple_request("gpt-4o-prod"))
    assert out.text == "Hej" and out.finish is not None
    (seen,) = wire.requests
    assert seen.path == "/openai/deployments/gpt-4o-prod/chat/completions?api-version=2024-10-21"
    assert seen.headers["api-key"] == "az-key"
    assert "authorization" not in seen.headers
    body = seen.json()
    assert body["messages"][0] == {"role": "system", "content": "Be brief."}
    assert body["stream"] is True


async def test_api_version_from_the_environment_and_the_config(
    wire: WireServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_VERSION", "2025-01-01-preview")
    wire.reply(Reply(body=CHAT_BODY), Reply(body=CHAT_BODY))
    env = opened(AzureChatClient("dep", base_url=wire.url, api_key="k"))
    await run_chat(env, simple_request("dep"))
    given = opened(
        client_from_config(
            {
                "model": "azure:dep",
                "base_url": wire.url,
                "api_key": "k",
                "api_version": "2024-06-01",
            }
        )
    )
    await run_chat(given, simple_request("dep"))
    assert [s.path.split("?")[1] for s in wire.requests] == [
        "api-version=2025-01-01-preview",
        "api-version=2024-06-01",
    ]


async def test_responses_on_azure(wire: WireServer) -> None:
    wire.reply(Reply(body=RESPONSES_BODY))
    client = opened(AzureResponsesClient("gpt-5-dep", base_url=wire.url, api_key="k"))
    out = await run_chat(client, simple_request("gpt-5-dep"))
    assert out.text == "Hej"
    (seen,) = wire.requests
    assert seen.path == "/openai/responses?api-version=2025-04-01-preview"
    assert seen.headers["api-key"] == "k"
    assert seen.json()["model"] == "gpt-5-dep"
    assert seen.json()["instructions"] == "Be brief."


async def test_an_entra_token_is_sent_as_bearer_and_renewed_before_it_expires(
    wire: WireServer,
) -> None:
    entra = FakeEntra(lifetime=3600)
    wire.reply(*(Reply(body=CHAT_BODY) for _ in range(3)))
    client = opened(AzureChatClient("dep", base_url=wire.url, azure_credential=entra))
    await run_chat(client, simple_request("dep"))
    await run_chat(client, simple_request("dep"))
    assert [s.headers["authorization"] for s in wire.requests] == ["Bearer entra-1"] * 2
    assert entra.scopes == [(ENTRA_SCOPE,)]
    assert all("api-key" not in s.headers for s in wire.requests)
    entra.lifetime = 60  # the next token lives less than the renewal margin
    client.credentials._expires = time.time() + 10
    await run_chat(client, simple_request("dep"))
    assert wire.requests[-1].headers["authorization"] == "Bearer entra-2"


async def test_an_unavailable_entra_credential_names_the_endpoint_and_what_to_set(
    wire: WireServer,
) -> None:
    client = opened(AzureChatClient("dep", base_url=wire.url, azure_credential=Unavailable()))
    with pytest.raises(MissingCredentialsError) as info:
        await run_chat(client, simple_request("dep"))
    text = str(info.value)
    assert f"no Entra ID token for Azure OpenAI at {wire.url} from Unavailable" in text
    assert "AZURE_OPENAI_API_KEY" in text and "az" in text
    assert wire.requests == []


async def test_a_refused_key_says_what_to_check(wire: WireServer) -> None:
    wire.reply(
        Reply(
            401,
            b'{"error": {"code": "401", "message": "Access denied due to invalid subscription key."}}',
        )
    )
    client = opened(AzureChatClient("dep", base_url=wire.url, api_key="bad"))
    out = await run_chat(client, simple_request("dep"))
    assert isinstance(out.error, AuthenticationError)
    assert "azure returned 401: Access denied" in str(out.error)
    assert f"check AZURE_OPENAI_API_KEY for {wire.url}" in str(out.error)


def test_no_endpoint_is_a_config_error() -> None:
    with pytest.raises(
        ConfigError, match="no Azure OpenAI endpoint for azure: set AZURE_OPENAI_ENDPOINT"
    ):
        AzureChatClient("dep", api_key="k")


def test_without_a_key_default_azure_credential_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("azure.identity", reason="the [azure] extra is not installed")
    client = AzureChatClient("dep", base_url="https://r.openai.azure.com")
    assert client.credentials.source == "DefaultAzureCredential"  # type: ignore[attr-defined]
    assert client.credentials.signs


def test_credentials_given_refuse_the_keywords_they_would_have_been_made_from() -> None:
    from tether.llm.credentials.azure import AzureCredentials

    given = AzureCredentials("azure", api_key="k", base_url="https://r.openai.azure.com")
    assert AzureChatClient("dep", credentials=given).api_version == given.api_version
    with pytest.raises(ConfigError, match=r"give credentials= or api_version=, not both"):
        AzureChatClient("dep", credentials=given, api_version="2025-01-01")
