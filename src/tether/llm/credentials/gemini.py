"""The Gemini API's credentials, as the google-genai SDK reads them: GOOGLE_API_KEY, else
GEMINI_API_KEY (GOOGLE_API_KEY wins when both are set), sent as ``x-goog-api-key``; a base URL
with the version path, from GOOGLE_GEMINI_BASE_URL (a root) plus GOOGLE_GENAI_API_VERSION
(default ``v1beta``)."""

from __future__ import annotations

import os
from typing import ClassVar

from ._base import Credentials

__all__ = ["GeminiCredentials"]


class GeminiCredentials(Credentials):
    env_vars: ClassVar[tuple[str, ...]] = ("GOOGLE_API_KEY", "GEMINI_API_KEY")
    base_url_env: ClassVar[str | None] = "GOOGLE_GEMINI_BASE_URL"
    default_base_url: ClassVar[str] = "https://generativelanguage.googleapis.com/v1beta"

    @classmethod
    def env_base_url(cls) -> str | None:
        root = os.environ.get("GOOGLE_GEMINI_BASE_URL")
        if not root:
            return None
        version = os.environ.get("GOOGLE_GENAI_API_VERSION") or "v1beta"
        return f"{root.rstrip('/')}/{version}"

    def headers(self) -> dict[str, str]:
        return {"x-goog-api-key": self.api_key} if self.api_key else {}
