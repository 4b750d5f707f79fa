"""Where a model call goes and how it proves who it is, apart from how a request is written.

An adapter (`tether.llm.anthropic`, `openai_chat`, `openai_responses`, `gemini`) maps one wire
format; a `Credentials` object says where that API lives (the base URL) and what authenticates a
request to it (the headers). Each provider's own SDK conventions (the environment variables its
key and base URL are read from) live here, one provider per module:

| credentials            | key from                            | base URL from                |
|------------------------|-------------------------------------|------------------------------|
| `AnthropicCredentials` | ANTHROPIC_API_KEY, else ANTHROPIC_AUTH_TOKEN | ANTHROPIC_BASE_URL  |
| `OpenAICredentials`    | OPENAI_API_KEY (OPENAI_ORG_ID, OPENAI_PROJECT_ID) | OPENAI_BASE_URL |
| `GeminiCredentials`    | GOOGLE_API_KEY, else GEMINI_API_KEY | GOOGLE_GEMINI_BASE_URL + version |
| `AWSCredentials`       | botocore's chain, SigV4 per request | AWS_REGION, AWS_ENDPOINT_URL... |
| `GoogleCredentials`    | google-auth's ADC, an OAuth bearer  | GOOGLE_CLOUD_PROJECT / LOCATION |
| `AzureCredentials`     | AZURE_OPENAI_API_KEY, else an Entra ID token | AZURE_OPENAI_ENDPOINT |

A service that speaks one of these wire formats behind other credentials (a cloud's own keys or
tokens, another URL layout) is a new `Credentials` subclass handed to the existing adapter as
``credentials=``, not a new adapter.
"""

from __future__ import annotations

from ._base import Credentials
from .anthropic import AnthropicCredentials
from .aws import AWSCredentials
from .azure import AzureCredentials
from .gemini import GeminiCredentials
from .google import GoogleCredentials
from .openai import OpenAICredentials

__all__ = [
    "AWSCredentials",
    "AnthropicCredentials",
    "AzureCredentials",
    "Credentials",
    "GeminiCredentials",
    "GoogleCredentials",
    "OpenAICredentials",
]
