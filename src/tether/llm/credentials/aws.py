"""AWS credentials for Bedrock, from botocore: its credential chain (environment, shared
credentials and config files, SSO, assume-role, container and instance roles) and its SigV4
signer. Nothing of the signing is ours: every request is signed by ``botocore.auth.SigV4Auth``.

The region comes from AWS_REGION, else AWS_DEFAULT_REGION, else the profile's ``region`` (the
SDKs' order); the endpoint from AWS_ENDPOINT_URL_BEDROCK_RUNTIME, else AWS_ENDPOINT_URL, else
``https://bedrock-runtime.<region>.amazonaws.com``. The chain is walked on the first request, in a
worker thread (an instance-role lookup is network I/O), and credentials that expire (SSO, roles)
are refreshed by botocore as they near their end.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from typing import Any, ClassVar

from ...errors import ConfigError, MissingCredentialsError
from ._base import Credentials, chain_failure, require_sdk

__all__ = ["AWSCredentials", "require_botocore"]

_HINT = (
    "set AWS_PROFILE (a profile in ~/.aws/config, `aws sso login` for SSO) or "
    "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN for temporary ones), "
    "or run where an instance or container role is attached"
)


def require_botocore(provider: str) -> Any:
    """The botocore package, or a ConfigError naming the extra to install."""
    modules = ("botocore.exceptions", "botocore.session")
    require_sdk(provider, modules, "the AWS provider needs botocore", "bedrock")
    import botocore

    return botocore


class AWSCredentials(Credentials):
    """Where Bedrock lives for one region, and SigV4 signatures over each request.

    Args:
        provider: The provider's name, for messages (``bedrock``).
        region: The AWS region (default: the environment's or the profile's, see the module).
        profile: A named profile (default AWS_PROFILE, else ``default``).
        base_url: Another endpoint (a VPC endpoint, a local test server).
        aws_credentials: botocore credentials to sign with instead of the chain's.
        service: The SigV4 signing name (``bedrock`` for the Bedrock runtime).
    """

    env_vars: ClassVar[tuple[str, ...]] = ("AWS_PROFILE", "AWS_ACCESS_KEY_ID")
    keywords: ClassVar[tuple[str, ...]] = ("region", "profile", "aws_credentials")
    signs = True

    def __init__(
        self,
        provider: str = "bedrock",
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        region: str | None = None,
        profile: str | None = None,
        aws_credentials: Any = None,
        service: str = "bedrock",
    ) -> None:
        if api_key is not None:
            raise ConfigError(
                f"{provider}: requests are signed with AWS credentials, not an api_key; {_HINT}"
            )
        botocore = require_botocore(provider)
        self.provider = provider
        self.service = service
        self.profile = profile
        try:
            self._session = botocore.session.Session(profile=profile)
            configured = self._session.get_config_variable("region")
        except botocore.exceptions.BotoCoreError as exc:
            raise ConfigError(f"{provider}: AWS configuration error: {exc}") from exc
        self.region = (
            region
            or os.environ.get("AWS_REGION")
            or os.environ.get("AWS_DEFAULT_REGION")
            or configured
        )
        if not self.region:
            raise ConfigError(
                f"no AWS region for {provider}: set AWS_REGION (or AWS_DEFAULT_REGION, or a "
                "region in the profile), or pass model={'model': ..., 'region': 'us-east-1'}"
            )
        own = f"https://bedrock-runtime.{self.region}.amazonaws.com"
        self.base_url = (
            base_url
            or os.environ.get("AWS_ENDPOINT_URL_BEDROCK_RUNTIME")
            or os.environ.get("AWS_ENDPOINT_URL")
            or own
        ).rstrip("/")
        self.api_key = None
        self._given = aws_credentials
        self._resolved: Any = aws_credentials
        self.source: str | None = "given" if aws_credentials is not None else None
        """Where the credentials came from, as botocore names it (``env``,
        ``shared-credentials-file``, ``sso``, ``iam-role``...), once resolved."""

    def __repr__(self) -> str:
        return f"AWSCredentials(region={self.region!r}, base_url={self.base_url!r})"

    def headers(self) -> dict[str, str]:
        return {}  # each request carries its own signature (`sign`)

    def auth_hint(self) -> str:
        source = f"the credentials from {self.source}" if self.source else "the AWS credentials"
        return f"check {source} ({self.where()}) and the model's access in the Bedrock console"

    def where(self) -> str:
        """The region and profile, for messages."""
        profile = self.profile or os.environ.get("AWS_PROFILE")
        return f"region {self.region}" + (f", profile {profile}" if profile else "")

    def _chain(self) -> Any:
        botocore = require_botocore(self.provider)
        try:
            found = self._session.get_credentials()
        except botocore.exceptions.BotoCoreError as exc:
            what = f"the AWS credential chain failed ({self.where()})"
            raise chain_failure(self.provider, what, exc, _HINT) from exc
        if found is None:
            raise MissingCredentialsError(
                self.provider, f"no AWS credentials for {self.provider} ({self.where()}): {_HINT}"
            )
        self.source = getattr(found, "method", None) or "unknown"
        return found

    def _frozen(self, creds: Any) -> Any:
        botocore = require_botocore(self.provider)
        try:
            return creds.get_frozen_credentials()
        except botocore.exceptions.BotoCoreError as exc:
            what = f"the AWS credentials from {self.source} ({self.where()}) could not be refreshed"
            raise chain_failure(self.provider, what, exc, _HINT) from exc

    async def credentials(self) -> Any:
        """Frozen credentials to sign one request with (access key, secret, token)."""
        creds = self._resolved
        if creds is None:
            # Two first requests at once may both walk the chain; either result is right.
            creds = self._resolved = await asyncio.to_thread(self._chain)
        refresh = getattr(creds, "refresh_needed", None)
        if refresh is not None and refresh():
            return await asyncio.to_thread(self._frozen, creds)
        return self._frozen(creds)

    async def sign(
        self, method: str, url: str, content: bytes, headers: Mapping[str, str]
    ) -> dict[str, str]:
        """`headers` plus ``x-amz-date``, ``x-amz-security-token`` (temporary credentials) and
        the SigV4 ``authorization`` over the method, URL, body and headers."""
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest

        frozen = await self.credentials()
        request = AWSRequest(method=method, url=url, data=content, headers=dict(headers))
        SigV4Auth(frozen, self.service, self.region).add_auth(request)
        return dict(request.headers.items())
