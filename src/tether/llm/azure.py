"""Azure OpenAI: the OpenAI wire formats on an Azure resource, with Azure's URLs and auth.

The request and stream mapping is the OpenAI adapters' own (`openai_chat`, `openai_responses`);
what differs is where a request goes and what authenticates it (`AzureCredentials`):

- ``azure:DEPLOYMENT``: Chat Completions at
  ``{endpoint}/openai/deployments/{DEPLOYMENT}/chat/completions?api-version=V``;
- ``azure-responses:DEPLOYMENT``: the Responses API at
  ``{endpoint}/openai/responses?api-version=V``, the deployment as the body's ``model``.

`api_version` defaults to OPENAI_API_VERSION, else ``2024-10-21`` for Chat Completions and
``2025-04-01-preview`` for the Responses API (which has no generally available dated version).
"""

from __future__ import annotations

from typing import Any, ClassVar
from urllib.parse import quote

from ._adapter import CloudAdapter
from .base import ChatRequest
from .credentials import Credentials
from .credentials.azure import DEFAULT_AZURE_API_VERSION, AzureCredentials
from .openai_chat import OpenAIChatClient
from .openai_responses import OpenAIResponsesClient

__all__ = ["AZURE_RESPONSES_API_VERSION", "AzureChatClient", "AzureResponsesClient"]

AZURE_RESPONSES_API_VERSION = "2025-04-01-preview"


class _Azure(CloudAdapter):
    """What the two Azure clients share: credentials from an ``api-key`` or an Entra ID token
    (`AzureCredentials`), and the ``api-version`` each request names (first in the MRO, before
    the OpenAI adapter whose wire it speaks)."""

    provider: ClassVar[str]
    credentials_class: ClassVar[type[Credentials]] = AzureCredentials
    default_api_version: ClassVar[str]

    def __init__(self, model: str, **options: Any) -> None:
        super().__init__(model, **options)
        self.api_version: str = getattr(self.credentials, "api_version", self.default_api_version)

    def new_credentials(
        self, api_key: str | None, base_url: str | None, where: dict[str, Any]
    ) -> Credentials:
        return AzureCredentials(
            self.provider,
            api_key=api_key,
            base_url=base_url,
            default_api_version=self.default_api_version,
            **where,
        )


class AzureChatClient(_Azure, OpenAIChatClient):
    """`azure:<deployment>`: Chat Completions on an Azure OpenAI resource. Endpoint from
    AZURE_OPENAI_ENDPOINT, key from AZURE_OPENAI_API_KEY, else an Entra ID token from
    azure-identity (the ``[azure]`` extra) or `azure_credential`."""

    provider: ClassVar[str] = "azure"
    default_api_version: ClassVar[str] = DEFAULT_AZURE_API_VERSION

    def url(self, request: ChatRequest) -> str:
        deployment = quote(request["model"], safe="")
        return (
            f"{self.base_url}/openai/deployments/{deployment}/chat/completions"
            f"?api-version={quote(self.api_version, safe='')}"
        )


class AzureResponsesClient(_Azure, OpenAIResponsesClient):
    """`azure-responses:<deployment>`: the Responses API on an Azure OpenAI resource (the
    deployment goes as the body's ``model``). Credentials as `AzureChatClient`."""

    provider: ClassVar[str] = "azure-responses"
    default_api_version: ClassVar[str] = AZURE_RESPONSES_API_VERSION

    def url(self, request: ChatRequest) -> str:
        return f"{self.base_url}/openai/responses?api-version={quote(self.api_version, safe='')}"
