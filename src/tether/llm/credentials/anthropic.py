"""Anthropic's credentials, as the Anthropic SDK reads them: ANTHROPIC_API_KEY as ``x-api-key``,
or a bearer token from ANTHROPIC_AUTH_TOKEN (a gateway's or proxy's); ANTHROPIC_BASE_URL, the API
root without ``/v1``."""

from __future__ import annotations

import os
from typing import ClassVar

from ._base import Credentials

__all__ = ["AnthropicCredentials"]


class AnthropicCredentials(Credentials):
    env_vars: ClassVar[tuple[str, ...]] = ("ANTHROPIC_API_KEY",)
    base_url_env: ClassVar[str | None] = "ANTHROPIC_BASE_URL"
    default_base_url: ClassVar[str] = "https://api.anthropic.com"

    def has_other_auth(self) -> bool:
        return bool(os.environ.get("ANTHROPIC_AUTH_TOKEN"))

    def headers(self) -> dict[str, str]:
        if self.api_key:
            return {"x-api-key": self.api_key}
        # The SDK's bearer-token alternative to a key (a gateway's or proxy's token).
        token = os.environ.get("ANTHROPIC_AUTH_TOKEN")
        return {"authorization": f"Bearer {token}"} if token else {}
