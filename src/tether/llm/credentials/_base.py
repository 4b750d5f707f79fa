"""`Credentials`: the base URL of an API and the headers that authenticate a request to it."""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping, Sequence
from typing import ClassVar

from ...errors import ConfigError, MissingCredentialsError, MissingKeyError
from .._keys import stored_key

__all__ = ["Credentials", "chain_failure", "require_sdk"]


def chain_failure(
    provider: str, what: str, exc: BaseException, hint: str
) -> MissingCredentialsError:
    """The error for a cloud credential chain that failed: `what` failed, the SDK's exception
    (type and message, cut at 400 characters), and `hint`, what to set or run."""
    detail = f"{type(exc).__name__}: {str(exc)[:400]}"
    return MissingCredentialsError(provider, f"{what}: {detail}; {hint}")


def require_sdk(provider: str, modules: Sequence[str], needs: str, extra: str) -> None:
    """Import a cloud SDK's `modules`, or raise ConfigError saying what `provider` `needs` and
    the extra that installs it."""
    try:
        for name in modules:
            importlib.import_module(name)
    except ImportError as exc:  # pragma: no cover - the dev install has them
        raise ConfigError(f"{provider}: {needs}: pip install 'tether[{extra}]'") from exc


class Credentials:
    """Where an adapter's requests go and what authenticates them.

    A subclass names where its SDK reads a key (`env_vars`, in order) and a base URL
    (`base_url_env`), and the provider's own endpoint (`default_base_url`); it writes the
    authentication headers (`headers()`). A key is required (else `MissingKeyError`, raised when
    the credentials are made) unless the base URL points somewhere of your own, or
    `has_other_auth()` says another credential is there.
    """

    env_vars: ClassVar[tuple[str, ...]] = ()
    """Where the API key is looked up, in order (the provider's own SDK's variables); then
    the key `tether keys set PROVIDER` stored."""
    base_url_env: ClassVar[str | None] = None
    """The variable the provider's own SDK reads its base URL from."""
    default_base_url: ClassVar[str] = ""
    keywords: ClassVar[tuple[str, ...]] = ()
    """The keywords the class takes besides `provider`, `api_key` and `base_url` that a client
    of it takes too (`tether.llm._adapter.CloudAdapter`): where and as whom it calls."""
    signs: bool = False
    """True: each request's headers come from `sign()` (a signature over the request, a token
    that expires) rather than from `headers()` alone."""

    def __init__(
        self, provider: str, *, api_key: str | None = None, base_url: str | None = None
    ) -> None:
        """Args:
        provider: The provider's name, for messages (``openai``, ``openai-responses``...).
        api_key: Overrides the environment variable(s) in `env_vars`.
        base_url: Where the API lives; default the SDK's environment variable (`base_url_env`),
            else `default_base_url`.
        """
        self.provider = provider
        self.base_url = (base_url or self.env_base_url() or self.default_base_url).rstrip("/")
        key = api_key
        if key is None:
            for var in self.env_vars:
                key = os.environ.get(var) or None
                if key:
                    break
        if key is None:
            key = stored_key(provider)  # `tether keys set PROVIDER`, after the environment
        if key is None and self.base_url == self.default_base_url and not self.has_other_auth():
            raise MissingKeyError(provider, " or ".join(self.env_vars))
        self.api_key = key

    def __repr__(self) -> str:  # never the key
        return f"{type(self).__name__}(base_url={self.base_url!r})"

    @classmethod
    def env_base_url(cls) -> str | None:
        """The base URL from the environment, as the provider's own SDK reads it."""
        return os.environ.get(cls.base_url_env) or None if cls.base_url_env else None

    def has_other_auth(self) -> bool:
        """Credentials other than an API key are configured (Anthropic's ANTHROPIC_AUTH_TOKEN)."""
        return False

    def headers(self) -> dict[str, str]:
        """The headers that authenticate every request (none without a credential)."""
        raise NotImplementedError

    async def sign(
        self, method: str, url: str, content: bytes, headers: Mapping[str, str]
    ) -> dict[str, str]:
        """The headers to send one request with, given its method, URL, body and the adapter's
        headers; read only when `signs` is True."""
        return dict(headers)

    def auth_hint(self) -> str | None:
        """What to check when the provider refuses the credentials (None: the API key's
        variables and the model config's api_key)."""
        return None
