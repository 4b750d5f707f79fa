"""Azure OpenAI's credentials, as the OpenAI SDK's ``AzureOpenAI`` client reads them: the
resource endpoint from AZURE_OPENAI_ENDPOINT (``https://<resource>.openai.azure.com``), the key
from AZURE_OPENAI_API_KEY (sent as ``api-key``), the API version from OPENAI_API_VERSION.

Without a key, a Microsoft Entra ID token is used when ``azure-identity`` is installed (the
``[azure]`` extra): ``DefaultAzureCredential`` (environment service principal, workload or
managed identity, ``az login``...) or a ``TokenCredential`` passed in, for the scope
``https://cognitiveservices.azure.com/.default``, sent as ``Authorization: Bearer``. The token is
fetched in a worker thread (the credential's I/O is blocking) and again shortly before it expires.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Mapping
from typing import Any, ClassVar

from ...errors import ConfigError, MissingCredentialsError
from ._base import Credentials, chain_failure

__all__ = ["DEFAULT_AZURE_API_VERSION", "ENTRA_SCOPE", "AzureCredentials"]

ENTRA_SCOPE = "https://cognitiveservices.azure.com/.default"
DEFAULT_AZURE_API_VERSION = "2024-10-21"
"""The newest generally available data-plane version when this was written (Chat
Completions); the Responses API takes a preview version (`AzureResponsesClient`)."""
_EARLY = 300.0
"""Seconds before its expiry a token is replaced."""

_HINT = (
    "set AZURE_OPENAI_API_KEY, or install tether[azure] (azure-identity) and sign in: `az "
    "login`, a managed identity, or AZURE_CLIENT_ID / AZURE_TENANT_ID / AZURE_CLIENT_SECRET"
)


class AzureCredentials(Credentials):
    """An Azure OpenAI resource: its endpoint, API version and an ``api-key`` or Entra token.

    Args:
        provider: The provider's name, for messages (``azure``).
        api_key: Overrides AZURE_OPENAI_API_KEY.
        base_url: The resource endpoint (overrides AZURE_OPENAI_ENDPOINT).
        api_version: Overrides OPENAI_API_VERSION (default `DEFAULT_AZURE_API_VERSION`).
        azure_credential: An azure-identity ``TokenCredential`` to use instead of a key.
    """

    env_vars: ClassVar[tuple[str, ...]] = ("AZURE_OPENAI_API_KEY",)
    base_url_env: ClassVar[str | None] = "AZURE_OPENAI_ENDPOINT"
    keywords: ClassVar[tuple[str, ...]] = ("api_version", "azure_credential")

    def __init__(
        self,
        provider: str = "azure",
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        api_version: str | None = None,
        azure_credential: Any = None,
        default_api_version: str = DEFAULT_AZURE_API_VERSION,
    ) -> None:
        self.provider = provider
        endpoint = base_url or os.environ.get("AZURE_OPENAI_ENDPOINT")
        if not endpoint:
            raise ConfigError(
                f"no Azure OpenAI endpoint for {provider}: set AZURE_OPENAI_ENDPOINT "
                "(https://<resource>.openai.azure.com) or pass model={'model': ..., "
                "'base_url': ...}"
            )
        self.base_url = endpoint.rstrip("/")
        self.api_version = (
            api_version or os.environ.get("OPENAI_API_VERSION") or default_api_version
        )
        self.api_key = api_key or os.environ.get("AZURE_OPENAI_API_KEY") or None
        self._credential = azure_credential
        self._token: str | None = None
        self._expires = 0.0
        if self.api_key is None and azure_credential is None:
            try:
                from azure.identity import DefaultAzureCredential
            except ImportError:
                raise MissingCredentialsError(
                    provider, f"no Azure OpenAI credentials for {self.base_url}: {_HINT}"
                ) from None
            self._credential = DefaultAzureCredential()
        self.signs = self.api_key is None  # an Entra token expires: each request checks it
        self.source = "api-key" if self.api_key else type(self._credential).__name__
        """``api-key``, or the class of the Entra credential."""

    def __repr__(self) -> str:  # never the key
        return f"AzureCredentials(base_url={self.base_url!r}, api_version={self.api_version!r})"

    def headers(self) -> dict[str, str]:
        return {"api-key": self.api_key} if self.api_key else {}

    def auth_hint(self) -> str:
        if self.api_key:
            return f"check AZURE_OPENAI_API_KEY for {self.base_url}"
        return (
            f"check that the identity of {self.source} has the Cognitive Services OpenAI User "
            f"role on {self.base_url}"
        )

    def _fetch(self) -> Any:
        try:
            return self._credential.get_token(ENTRA_SCOPE)
        except Exception as exc:  # azure-identity's CredentialUnavailableError and the rest
            what = f"no Entra ID token for Azure OpenAI at {self.base_url} from {self.source}"
            raise chain_failure(self.provider, what, exc, _HINT) from exc

    async def sign(
        self, method: str, url: str, content: bytes, headers: Mapping[str, str]
    ) -> dict[str, str]:
        if self._token is None or time.time() > self._expires - _EARLY:
            token = await asyncio.to_thread(self._fetch)
            self._token, self._expires = token.token, float(token.expires_on)
        return {**headers, "authorization": f"Bearer {self._token}"}
