"""OpenAI's credentials, as the OpenAI SDK reads them (shared by Chat Completions, the Responses
API and every OpenAI-compatible server): OPENAI_API_KEY as a bearer token, the organization and
project from OPENAI_ORG_ID / OPENAI_PROJECT_ID, OPENAI_BASE_URL with the version path."""

from __future__ import annotations

import os
from typing import ClassVar

from ._base import Credentials

__all__ = ["OpenAICredentials"]


class OpenAICredentials(Credentials):
    """With a base URL of your own a key is optional: local servers usually need none, and no
    ``Authorization`` header is sent without one."""

    env_vars: ClassVar[tuple[str, ...]] = ("OPENAI_API_KEY",)
    base_url_env: ClassVar[str | None] = "OPENAI_BASE_URL"
    default_base_url: ClassVar[str] = "https://api.openai.com/v1"

    def headers(self) -> dict[str, str]:
        headers = {"authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        org = os.environ.get("OPENAI_ORG_ID")
        if org:
            headers["openai-organization"] = org
        project = os.environ.get("OPENAI_PROJECT_ID")
        if project:
            headers["openai-project"] = project
        return headers
