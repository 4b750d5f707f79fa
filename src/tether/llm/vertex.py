"""Google Vertex AI: Gemini and Anthropic's models through ``aiplatform.googleapis.com``, with
OAuth credentials from google-auth (`GoogleCredentials`, the ``[vertex]`` extra).

``vertex:MODEL`` picks the wire from the model's publisher: a ``claude-…`` model is Anthropic's
Messages API, anything else Gemini's ``generateContent``. Both wires are the direct adapters'
own (`anthropic`, `gemini`); what differs:

- Gemini: ``POST {endpoint}/v1/projects/{project}/locations/{location}/publishers/google/models/
  {model}:streamGenerateContent?alt=sse``; the body and stream are the Gemini API's.
- Anthropic: ``POST {endpoint}/v1/projects/{project}/locations/{location}/publishers/anthropic/
  models/{model}:streamRawPredict``; the model is in the URL, not the body, and the body carries
  ``"anthropic_version": "vertex-2023-10-16"`` instead of the ``anthropic-version`` header.
"""

from __future__ import annotations

from typing import Any, ClassVar
from urllib.parse import quote

from ._adapter import CloudAdapter
from .anthropic import AnthropicClient
from .base import ChatRequest, LLMClient
from .credentials import Credentials
from .credentials.google import GoogleCredentials
from .gemini import GeminiClient

__all__ = ["VERTEX_ANTHROPIC_VERSION", "VertexAnthropicClient", "VertexGeminiClient", "vertex"]

VERTEX_ANTHROPIC_VERSION = "vertex-2023-10-16"


def _model_path(credentials: Credentials, publisher: str, model: str) -> str:
    project = getattr(credentials, "project", "")
    location = getattr(credentials, "location", "")
    return (
        f"{credentials.base_url}/v1/projects/{quote(project, safe='')}/locations/"
        f"{quote(location, safe='')}/publishers/{publisher}/models/{quote(model, safe='')}"
    )


class _Vertex(CloudAdapter):
    """What both Vertex clients share: google-auth credentials, project and location (first
    in the MRO, before the direct adapter whose wire it speaks)."""

    credentials_class: ClassVar[type[Credentials]] = GoogleCredentials


class VertexGeminiClient(_Vertex, GeminiClient):
    """`vertex:<gemini model>`: Gemini on Vertex AI."""

    provider: ClassVar[str] = "vertex"

    def url(self, request: ChatRequest) -> str:
        path = _model_path(self.credentials, "google", request["model"])
        return f"{path}:streamGenerateContent?alt=sse"


class VertexAnthropicClient(_Vertex, AnthropicClient):
    """`vertex:<claude model>`: Anthropic's Messages API on Vertex AI."""

    provider: ClassVar[str] = "vertex"

    def wire_headers(self) -> dict[str, str]:
        headers = super().wire_headers()
        del headers["anthropic-version"]  # the version goes in the body on Vertex
        return headers

    def url(self, request: ChatRequest) -> str:
        return f"{_model_path(self.credentials, 'anthropic', request['model'])}:streamRawPredict"

    def build_body(self, request: ChatRequest) -> dict[str, Any]:
        body = super().build_body(request)
        del body["model"]
        return {"anthropic_version": VERTEX_ANTHROPIC_VERSION, **body}


def vertex(model: str, **options: Any) -> LLMClient:
    """The client for ``vertex:MODEL``: Anthropic's wire for a ``claude`` model, else Gemini's."""
    if model.startswith("claude"):
        return VertexAnthropicClient(model, **options)
    return VertexGeminiClient(model, **options)
