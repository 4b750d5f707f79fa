"""Shared test setup: no real provider keys reach a test, fixtures are found where they lie, and
the test PostgreSQL server is stopped at the end."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.postgres_server import shutdown

SHARED = Path(os.environ.get("TETHER_SHARED_DIR") or Path(__file__).resolve().parents[2] / "shared")
"""The shared material beside the checkout (``../shared``); TETHER_SHARED_DIR points elsewhere."""
FIXTURES = SHARED / "fixtures" / "providers"

_KEYS = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "OPENAI_ORG_ID",
    "OPENAI_PROJECT_ID",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "GOOGLE_GEMINI_BASE_URL",
    "GOOGLE_GENAI_API_VERSION",
    # The clouds' credential chains and endpoints (tether.llm.credentials.aws / google / azure).
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_BEDROCK_RUNTIME",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "GOOGLE_CLOUD_PROJECT",
    "GOOGLE_CLOUD_LOCATION",
    "GOOGLE_CLOUD_REGION",
    "CLOUDSDK_CORE_PROJECT",
    "CLOUD_ML_REGION",
    "AZURE_OPENAI_API_KEY",
    "AZURE_OPENAI_ENDPOINT",
    "OPENAI_API_VERSION",
    "AZURE_CLIENT_ID",
    "AZURE_TENANT_ID",
    "AZURE_CLIENT_SECRET",
)


@pytest.fixture(autouse=True)
def _no_real_keys(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Tests never reach a real provider: keys and base URLs are removed from the environment,
    and the user's config directory (stored keys, the log of prompts) is an empty one."""
    for key in _KEYS:
        monkeypatch.delenv(key, raising=False)
    # No cloud's credential chain reads the user's files or asks a metadata service.
    empty = tmp_path_factory.mktemp("cloud-config")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(empty / "aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(empty / "aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(empty / "gcloud"))
    monkeypatch.setenv("NO_GCE_CHECK", "True")
    monkeypatch.setenv("TETHER_CONFIG_DIR", str(tmp_path_factory.mktemp("user-config")))
    monkeypatch.delenv("TETHER_MODEL", raising=False)
    monkeypatch.delenv("TETHER_DEBUG", raising=False)


@pytest.fixture(scope="session", autouse=True)
def _stop_the_test_postgres_server() -> Iterator[None]:
    """The PostgreSQL cluster `postgres_url()` starts on first use is stopped when the session ends
    (a no-op when no test asked for one)."""
    yield
    shutdown()


def provider_fixtures() -> Path:
    """The recorded wire data; tests that need it skip, saying why, where ../shared is absent."""
    if not FIXTURES.is_dir():
        pytest.skip(f"provider wire fixtures not found at {FIXTURES} (a clone without ../shared)")
    return FIXTURES
