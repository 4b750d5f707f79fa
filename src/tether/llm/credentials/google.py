"""Google Cloud credentials for Vertex AI, from google-auth: Application Default Credentials
(GOOGLE_APPLICATION_CREDENTIALS naming a service-account or external-account file, the
``gcloud auth application-default login`` file, the metadata server on Google Cloud) or a
credentials object passed in, sent as ``Authorization: Bearer`` with the
``cloud-platform`` scope and refreshed by google-auth shortly before the token expires.

The project comes from GOOGLE_CLOUD_PROJECT (else the credentials' own project), the location
from GOOGLE_CLOUD_LOCATION, else CLOUD_ML_REGION (the Anthropic SDK's), else ``global``; the
endpoint is ``https://{location}-aiplatform.googleapis.com`` (``aiplatform.googleapis.com`` for
``global``).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from typing import Any, ClassVar

from ...errors import ConfigError, MissingCredentialsError
from ._base import Credentials, chain_failure, require_sdk

__all__ = ["CLOUD_PLATFORM_SCOPE", "GoogleCredentials"]

CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"

_HINT = (
    "run `gcloud auth application-default login`, or set GOOGLE_APPLICATION_CREDENTIALS to a "
    "service-account key file, or run on Google Cloud with a service account attached"
)


def _google_auth(provider: str) -> Any:
    modules = ("google.auth.exceptions", "google.auth.transport.requests")
    require_sdk(provider, modules, "Vertex AI needs google-auth", "vertex")
    import google.auth

    return google.auth


class GoogleCredentials(Credentials):
    """A Vertex AI project and location, and OAuth bearer tokens for them.

    Args:
        provider: The provider's name, for messages (``vertex``).
        base_url: Another endpoint (a Private Service Connect one, a local test server).
        project: Overrides GOOGLE_CLOUD_PROJECT and the credentials' project.
        location: Overrides GOOGLE_CLOUD_LOCATION / CLOUD_ML_REGION.
        google_credentials: google-auth credentials to use instead of the default ones.
    """

    keywords: ClassVar[tuple[str, ...]] = ("project", "location", "google_credentials")
    signs = True

    def __init__(
        self,
        provider: str = "vertex",
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        project: str | None = None,
        location: str | None = None,
        google_credentials: Any = None,
    ) -> None:
        if api_key is not None:
            raise ConfigError(
                f"{provider}: Vertex AI takes OAuth credentials, not an api_key; {_HINT} "
                "(for an API key use the gemini: provider)"
            )
        auth = _google_auth(provider)
        self.provider = provider
        self.api_key = None
        found_project: str | None = None
        if google_credentials is None:
            try:
                google_credentials, found_project = auth.default(scopes=[CLOUD_PLATFORM_SCOPE])
            except auth.exceptions.DefaultCredentialsError as exc:
                raise MissingCredentialsError(
                    provider,
                    f"no Google Cloud credentials for {provider}: {_HINT} ({exc})",
                ) from exc
            self.source = "application default credentials"
        else:
            self.source = type(google_credentials).__name__
        self._credentials = google_credentials
        self.project = (
            project
            or os.environ.get("GOOGLE_CLOUD_PROJECT")
            or found_project
            or getattr(google_credentials, "project_id", None)
        )
        if not self.project:
            raise ConfigError(
                f"no Google Cloud project for {provider}: set GOOGLE_CLOUD_PROJECT or pass "
                "model={'model': ..., 'project': ...}"
            )
        self.location = (
            location
            or os.environ.get("GOOGLE_CLOUD_LOCATION")
            or os.environ.get("CLOUD_ML_REGION")
            or "global"
        )
        host = (
            "aiplatform.googleapis.com"
            if self.location == "global"
            else f"{self.location}-aiplatform.googleapis.com"
        )
        self.base_url = (base_url or f"https://{host}").rstrip("/")

    def __repr__(self) -> str:
        return (
            f"GoogleCredentials(project={self.project!r}, location={self.location!r}, "
            f"base_url={self.base_url!r})"
        )

    def headers(self) -> dict[str, str]:
        return {}

    def where(self) -> str:
        return f"project {self.project}, location {self.location}"

    def auth_hint(self) -> str:
        return (
            f"check that the {self.source} may call Vertex AI in {self.where()} (the Vertex AI "
            "User role) and that the model is enabled there"
        )

    def _refresh(self) -> None:
        auth = _google_auth(self.provider)
        try:
            self._credentials.refresh(auth.transport.requests.Request())
        except auth.exceptions.GoogleAuthError as exc:
            what = (
                f"the Google Cloud credentials ({self.source}, {self.where()}) could not be "
                "refreshed"
            )
            raise chain_failure(self.provider, what, exc, _HINT) from exc

    async def sign(
        self, method: str, url: str, content: bytes, headers: Mapping[str, str]
    ) -> dict[str, str]:
        creds = self._credentials
        if not creds.valid:  # no token yet, or one near its expiry (google-auth's own margin)
            await asyncio.to_thread(self._refresh)
        out = {**headers, "authorization": f"Bearer {creds.token}"}
        quota = getattr(creds, "quota_project_id", None)
        if quota:
            out["x-goog-user-project"] = quota
        return out
