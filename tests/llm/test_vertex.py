"""Vertex AI: Gemini and Anthropic on aiplatform URLs, bodies and OAuth bearer headers, against
a loopback server; tokens from a fake google-auth credentials object, and from a real
service-account key file whose token endpoint is the loopback server too."""

from __future__ import annotations

import datetime
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import pytest

pytest.importorskip("google.auth", reason="the [vertex] extra (google-auth) is not installed")

from google.auth import credentials as gcreds

from tether.errors import AuthenticationError, ConfigError, MissingCredentialsError
from tether.llm import client_from_config
from tether.llm.vertex import VertexAnthropicClient, VertexGeminiClient

from .conftest import Reply, Seen, WireServer, run_chat, simple_request, sse

GEMINI_BODY = sse(
    (
        None,
        {
            "candidates": [{"content": {"role": "model", "parts": [{"text": "Hei"}]}}],
            "modelVersion": "gemini-2.5-flash",
        },
    ),
    (
        None,
        {
            "candidates": [
                {"content": {"role": "model", "parts": [{"text": "!"}]}, "finishReason": "STOP"}
            ],
            "usageMetadata": {"promptTokenCount": 4, "candidatesTokenCount": 2},
        },
    ),
)
ANTHROPIC_BODY = sse(
    (
        "message_start",
        {
            "type": "message_start",
            "message": {
                "id": "msg_vrtx_1",
                "model": "claude-sonnet-4-5",
                "usage": {"input_tokens": 4, "output_tokens": 1},
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
            "delta": {"type": "text_delta", "text": "Hei!"},
        },
    ),
    ("content_block_stop", {"type": "content_block_stop", "index": 0}),
    (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn"},
            "usage": {"output_tokens": 3},
        },
    ),
    ("message_stop", {"type": "message_stop"}),
)


class FakeGoogle(gcreds.Credentials):
    """A google-auth credentials object whose tokens are numbered and live `lifetime` seconds."""

    def __init__(self, lifetime: int = 3600) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.refreshes = 0
        self.lifetime = lifetime

    def refresh(self, request: Any) -> None:
        self.refreshes += 1
        self.token = f"ya29.fake-{self.refreshes}"
        self.expiry = datetime.datetime.now(datetime.UTC).replace(tzinfo=None) + datetime.timedelta(
            seconds=self.lifetime
        )


_OPEN: list[Any] = []


@pytest.fixture(autouse=True)
async def _close_clients() -> AsyncIterator[None]:
    yield
    while _OPEN:
        await _OPEN.pop().aclose()


def opened(client: Any) -> Any:
    _OPEN.append(client)
    return client


async def test_gemini_on_vertex(wire: WireServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "acme-prod")
    monkeypatch.setenv("GOOGLE_CLOUD_LOCATION", "europe-north1")
    fake = FakeGoogle()
    wire.reply(Reply(body=GEMINI_BODY), Reply(body=GEMINI_BODY))
    client = opened(
        client_from_config(
            {"model": "vertex:gemini-2.5-flash", "base_url": wire.url, "google_credentials": fake}
        )
    )
    assert isinstance(client, VertexGeminiClient)
    out = await run_chat(client, simple_request("gemini-2.5-flash"))
    assert out.text == "Hei!"
    await run_chat(client, simple_request("gemini-2.5-flash"))
    first, second = wire.requests
    assert first.path == (
        "/v1/projects/acme-prod/locations/europe-north1/publishers/google/models/"
        "gemini-2.5-flash:streamGenerateContent?alt=sse"
    )
    assert first.headers["authorization"] == "Bearer ya29.fake-1"
    assert second.headers["authorization"] == "Bearer ya29.fake-1"  # still valid: not refreshed
    assert "x-goog-api-key" not in first.headers
    assert first.json() == {
        "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
        "systemInstruction": {"parts": [{"text": "Be brief."}]},
    }


async def test_an_expiring_token_is_refreshed(wire: WireServer) -> None:
    fake = FakeGoogle(lifetime=1)  # inside google-auth's refresh margin at once
    wire.reply(Reply(body=GEMINI_BODY), Reply(body=GEMINI_BODY))
    client = opened(
        VertexGeminiClient(
            "gemini-2.5-pro", base_url=wire.url, project="p", google_credentials=fake
        )
    )
    await run_chat(client, simple_request("gemini-2.5-pro"))
    await run_chat(client, simple_request("gemini-2.5-pro"))
    assert [s.headers["authorization"] for s in wire.requests] == [
        "Bearer ya29.fake-1",
        "Bearer ya29.fake-2",
    ]
    assert "/locations/global/" in wire.requests[0].path


async def test_claude_on_vertex(wire: WireServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLOUD_ML_REGION", "us-east5")
    wire.reply(Reply(body=ANTHROPIC_BODY))
    fake = FakeGoogle()
    fake.refresh(None)
    fake._quota_project_id = "billing-proj"
    client = opened(
        client_from_config(
            {
                "model": "vertex:claude-sonnet-4-5@20250929",
                "base_url": wire.url,
                "project": "acme",
                "google_credentials": fake,
            }
        )
    )
    assert isinstance(client, VertexAnthropicClient)
    out = await run_chat(client, simple_request("claude-sonnet-4-5@20250929"))
    assert out.text == "Hei!" and out.finish is not None
    assert out.finish["usage"]["output_tokens"] == 3
    (seen,) = wire.requests
    assert seen.path == (
        "/v1/projects/acme/locations/us-east5/publishers/anthropic/models/"
        "claude-sonnet-4-5%4020250929:streamRawPredict"
    )
    assert seen.headers["authorization"] == "Bearer ya29.fake-1"
    assert seen.headers["x-goog-user-project"] == "billing-proj"
    assert "anthropic-version" not in seen.headers and "x-api-key" not in seen.headers
    body = seen.json()
    assert "model" not in body
    assert body["anthropic_version"] == "vertex-2023-10-16"
    assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    assert body["stream"] is True and body["max_tokens"] == 4096


def _service_account(tmp_path: Path, token_uri: str) -> Path:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    info = {
        "type": "service_account",
        "project_id": "sa-project",
        "private_key_id": "k1",
        "private_key": pem,
        "client_email": "agent@sa-project.iam.gserviceaccount.com",
        "client_id": "1",
        "token_uri": token_uri,
    }
    path = tmp_path / "sa.json"
    path.write_text(json.dumps(info))
    return path


async def test_a_service_account_file_through_adc(
    wire: WireServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    pytest.importorskip("cryptography", reason="signing a service-account JWT needs cryptography")

    def answer(seen: Seen) -> Reply:
        if seen.path == "/token":
            form = parse_qs(seen.body.decode())
            assert form["grant_type"] == ["urn:ietf:params:oauth:grant-type:jwt-bearer"]
            token = {"access_token": "ya29.from-sa", "expires_in": 3600, "token_type": "Bearer"}
            return Reply(
                body=json.dumps(token).encode(), headers={"content-type": "application/json"}
            )
        return Reply(body=GEMINI_BODY)

    wire.handler = answer
    monkeypatch.setenv(
        "GOOGLE_APPLICATION_CREDENTIALS", str(_service_account(tmp_path, wire.url + "/token"))
    )
    client = opened(VertexGeminiClient("gemini-2.5-flash", base_url=wire.url))
    assert client.credentials.project == "sa-project"
    out = await run_chat(client, simple_request("gemini-2.5-flash"))
    assert out.text == "Hei!"
    token_request, call = wire.requests
    assert token_request.path == "/token"
    assert call.headers["authorization"] == "Bearer ya29.from-sa"
    assert "/projects/sa-project/" in call.path


def test_no_credentials_names_what_to_do(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "p")
    monkeypatch.setattr("google.auth._default._get_gce_credentials", lambda *a, **k: (None, None))
    with pytest.raises(
        MissingCredentialsError,
        match="no Google Cloud credentials for vertex: run `gcloud auth application-default login`",
    ):
        VertexGeminiClient("gemini-2.5-flash")


def test_no_project_and_api_keys_are_config_errors() -> None:
    with pytest.raises(
        ConfigError, match="no Google Cloud project for vertex: set GOOGLE_CLOUD_PROJECT"
    ):
        VertexGeminiClient("g", google_credentials=FakeGoogle())
    with pytest.raises(ConfigError, match="not an api_key"):
        VertexGeminiClient("g", api_key="AIza")


async def test_a_refusal_names_project_and_location(wire: WireServer) -> None:
    wire.reply(
        Reply(
            403,
            b'[{"error": {"code": 403, "message": "Permission denied on resource project p.", "status": "PERMISSION_DENIED"}}]',
        )
    )
    client = opened(
        VertexGeminiClient(
            "g",
            base_url=wire.url,
            project="p",
            location="us-central1",
            google_credentials=FakeGoogle(),
        )
    )
    out = await run_chat(client, simple_request("g"))
    assert isinstance(out.error, AuthenticationError)
    assert "vertex returned 403: Permission denied on resource project p." in str(out.error)
    assert "project p, location us-central1" in str(out.error)
    assert wire.requests[0].path.startswith("/v1/projects/p/locations/us-central1/")


def test_the_regional_and_global_endpoints() -> None:
    regional = VertexGeminiClient(
        "g", project="p", location="europe-west4", google_credentials=FakeGoogle()
    )
    assert regional.base_url == "https://europe-west4-aiplatform.googleapis.com"
    assert (
        VertexGeminiClient("g", project="p", google_credentials=FakeGoogle()).base_url
        == "https://aiplatform.googleapis.com"
    )
