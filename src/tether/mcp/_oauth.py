"""The MCP authorization flow as an httpx auth: every request to the MCP server carries the
access token, and a 401 or a 403 `insufficient_scope` runs the flow that earns a new one.

On a challenge: read `WWW-Authenticate` (`resource_metadata`, `scope`), fetch the protected
resource metadata (the header's URL, else the path-based then the root well-known URI), refuse
it unless its `resource` is this server, fetch the authorization server's metadata (OAuth,
then OpenID Connect, path-inserted then path-appended) and refuse it unless its `issuer` is the
one asked for; without protected resource metadata, the 2025-03-26 way (metadata at the
server's origin, else `/authorize`, `/token`, `/register` there). Then register (pre-registered
credentials, a client ID metadata document, or dynamic registration, in that order), run the
authorization code flow with PKCE S256 and the `resource` parameter (checking `state` and `iss`
before the code goes anywhere), and authenticate at the token endpoint the way the server
advertises. Refresh tokens are used before they expire and when a token is refused; a 403
`insufficient_scope` asks again for the union of the scopes asked before and the new ones, a
few times at most. `ClientCredentials` replaces the login with the client-credentials grant.

No secret (token, code, verifier, client secret) is ever put in an error message.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import re
import secrets
import time
from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any
from urllib.parse import parse_qs, quote, urlencode, urlsplit

import httpx

from ..errors import McpAuthError
from ._auth import ClientCredentials, OAuth
from ._login import browser_login
from ._protocol import paused_clock

__all__ = ["McpAuth", "make_auth"]

_MAX_STEP_UPS = 2
"""Re-authorizations one request may make for a 403 insufficient_scope (after the first
authorization: at most three in all) before it is a permanent failure."""
_MAX_ROUNDS = 8
"""Times one request may be sent again with new credentials, whatever the reasons."""
_EXPIRY_MARGIN = 30.0
"""Seconds before expiry at which a token is refreshed instead of sent, at most..."""
_EXPIRY_FRACTION = 0.1
"""...and at most this fraction of the token's lifetime: a token that lives 4 s is good for
3.6 s, not refreshed before every request."""
_METADATA_TIMEOUT = 30.0
_CHALLENGE = re.compile(r'([A-Za-z0-9_\-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,]+))')


@dataclass(slots=True)
class _Server:
    """What discovery found: where to log in and what to ask for."""

    issuer: str
    resource: str
    metadata: dict[str, Any]
    scopes_supported: list[str] | None
    authorization_endpoint: str
    token_endpoint: str
    registration_endpoint: str | None


def _challenge(response: httpx.Response) -> dict[str, str]:
    """The parameters of the Bearer challenge in `WWW-Authenticate` (empty when absent)."""
    for header in response.headers.get_list("www-authenticate"):
        scheme, _, rest = header.strip().partition(" ")
        if scheme.lower() != "bearer":
            continue
        return {
            m.group(1).lower(): (m.group(2) if m.group(2) is not None else m.group(3) or "")
            for m in _CHALLENGE.finditer(rest)
        }
    return {}


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def _resource_matches(resource: str, server: str) -> bool:
    """Whether `resource` (from protected resource metadata) identifies `server`: the same
    origin, and a path that is the server's path or one of its parent paths."""
    r, s = urlsplit(resource), urlsplit(server)
    if (r.scheme.lower(), r.netloc.lower()) != (s.scheme.lower(), s.netloc.lower()):
        return False
    if r.fragment:
        return False
    rp, sp = r.path.rstrip("/"), s.path.rstrip("/")
    return rp == "" or sp == rp or sp.startswith(rp + "/")


def _scopes(value: str | None) -> list[str]:
    return [s for s in (value or "").split() if s]


def _pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(64)[:96]
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return verifier, base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def _secure(url: str) -> bool:
    """HTTPS, or plain HTTP to this machine (a local authorization server, or a test)."""
    parts = urlsplit(url)
    return parts.scheme == "https" or (
        parts.scheme == "http" and (parts.hostname or "") in ("localhost", "127.0.0.1", "::1")
    )


def _is_loopback(url: str) -> bool:
    host = urlsplit(url).hostname or ""
    return host in ("localhost", "127.0.0.1", "::1") or urlsplit(url).scheme not in (
        "http",
        "https",
    )


class McpAuth(httpx.Auth):
    """The authorization of one source's connection to its MCP server."""

    def __init__(
        self,
        config: OAuth | ClientCredentials,
        server_url: str,
        transport: httpx.AsyncBaseTransport | None,
    ) -> None:
        self._config = config
        self._server_url = server_url
        self._key = server_url
        self._store = config.store
        # Metadata, registration and token requests carry no MCP token and follow no redirect.
        self._http = httpx.AsyncClient(
            transport=transport, timeout=_METADATA_TIMEOUT, follow_redirects=False
        )
        self._lock = asyncio.Lock()
        self._loaded = False
        self._entry: dict[str, Any] = {}
        self._requested: list[str] = []
        """The scopes asked for last (a step-up asks for these and the new ones)."""

    async def aclose(self) -> None:
        await self._http.aclose()

    # -- the flow around each request --------------------------------------------------------

    @property
    def _tokens(self) -> dict[str, Any]:
        tokens = self._entry.get("tokens")
        return tokens if isinstance(tokens, dict) else {}

    def _apply(self, request: httpx.Request) -> str | None:
        token = self._tokens.get("access_token")
        if isinstance(token, str) and token:
            request.headers["authorization"] = f"Bearer {token}"
            return token
        request.headers.pop("authorization", None)
        return None

    async def async_auth_flow(
        self, request: httpx.Request
    ) -> AsyncGenerator[httpx.Request, httpx.Response]:
        async with self._lock:
            await self._load()
            if self._expired():
                await self._refresh()
        sent = self._apply(request)
        response = yield request
        refreshed = authorized = False
        step_ups = 0
        for _ in range(_MAX_ROUNDS):
            if response.status_code == 401:
                challenge = _challenge(response)
                async with self._lock:
                    current = self._tokens.get("access_token")
                    if current is not None and current != sent:
                        pass  # another request earned a new token meanwhile: try that one
                    elif not refreshed and sent is not None and await self._refresh():
                        refreshed = True
                    elif not authorized:
                        authorized = True
                        await self._authorize(challenge, step_up=False)
                    else:
                        raise McpAuthError(
                            "the server refused the access token it was just issued (HTTP "
                            "401); the authorization server and the MCP server disagree about it"
                        )
            elif response.status_code == 403 and _challenge(response).get("error") == (
                "insufficient_scope"
            ):
                challenge = _challenge(response)
                async with self._lock:
                    if self._tokens.get("access_token") == sent:
                        step_ups += 1
                        if step_ups > _MAX_STEP_UPS:
                            raise McpAuthError(
                                "the server still answers 403 insufficient_scope (asking for "
                                f"{challenge.get('scope') or 'more scope'!r}) after "
                                f"{_MAX_STEP_UPS} step-up authorizations; the account may not "
                                "be allowed that scope"
                            )
                        await self._authorize(challenge, step_up=True)
            else:
                return
            sent = self._apply(request)
            response = yield request

    # -- stored state ------------------------------------------------------------------------

    async def _load(self) -> None:
        if self._loaded:
            return
        entry = await self._store.load(self._key)
        self._entry = entry if isinstance(entry, dict) else {}
        requested = self._tokens.get("requested_scope")
        self._requested = _scopes(requested if isinstance(requested, str) else None)
        self._loaded = True

    async def _save(self) -> None:
        await self._store.save(self._key, self._entry)

    def _expired(self) -> bool:
        expires_at = self._tokens.get("expires_at")
        if not isinstance(expires_at, int | float):
            return False
        lifetime = self._tokens.get("expires_in")
        margin = _EXPIRY_MARGIN
        if isinstance(lifetime, int | float):
            margin = min(margin, _EXPIRY_FRACTION * lifetime)
        return time.time() > expires_at - margin

    # -- discovery ---------------------------------------------------------------------------

    async def _get_json(self, url: str) -> dict[str, Any] | None:
        try:
            resp = await self._http.get(url, headers={"accept": "application/json"})
        except httpx.HTTPError as exc:
            raise McpAuthError(f"fetching {url} failed: {type(exc).__name__}: {exc}") from exc
        if resp.status_code != 200:
            return None
        try:
            doc = resp.json()
        except ValueError:
            return None
        return doc if isinstance(doc, dict) else None

    async def _protected_resource(self, challenge: Mapping[str, str]) -> dict[str, Any] | None:
        parts = urlsplit(self._server_url)
        base = f"{parts.scheme}://{parts.netloc}"
        path = parts.path.rstrip("/")
        urls: list[str] = []
        if challenge.get("resource_metadata"):
            urls.append(challenge["resource_metadata"])
        if path:
            urls.append(f"{base}/.well-known/oauth-protected-resource{path}")
        urls.append(f"{base}/.well-known/oauth-protected-resource")
        for url in dict.fromkeys(urls):
            doc = await self._get_json(url)
            servers = doc.get("authorization_servers") if doc is not None else None
            if doc is not None and isinstance(servers, list) and servers:
                return doc
        return None

    @staticmethod
    def _metadata_urls(issuer: str) -> list[str]:
        parts = urlsplit(issuer)
        base = f"{parts.scheme}://{parts.netloc}"
        path = parts.path.rstrip("/")
        if not path:
            return [
                f"{base}/.well-known/oauth-authorization-server",
                f"{base}/.well-known/openid-configuration",
            ]
        return [
            f"{base}/.well-known/oauth-authorization-server{path}",
            f"{base}/.well-known/openid-configuration{path}",
            f"{base}{path}/.well-known/openid-configuration",
        ]

    async def _authorization_server(
        self, issuer: str, *, strict: bool = True
    ) -> dict[str, Any] | None:
        """The metadata of `issuer`, checked: a document naming another issuer is refused
        (`strict=False`: the 2025-03-26 way, where the MCP server's own origin serves it and
        nothing else names an issuer to hold it to)."""
        refused: str | None = None
        for url in self._metadata_urls(issuer):
            doc = await self._get_json(url)
            if doc is None:
                continue
            if strict and doc.get("issuer") != issuer:
                refused = f"{url} names issuer {doc.get('issuer')!r}"
                continue
            return doc
        if refused is not None:
            raise McpAuthError(
                f"the authorization server metadata does not belong to {issuer} ({refused}); "
                "refusing to use it"
            )
        return None

    async def _discover(self, challenge: Mapping[str, str]) -> _Server:
        prm = await self._protected_resource(challenge)
        if prm is None:
            # 2025-03-26: no protected resource metadata; the server's origin is its
            # authorization server, with default endpoints when it has no metadata either.
            issuer = _origin(self._server_url)
            resource = self._server_url
            metadata = await self._authorization_server(issuer, strict=False) or {}
            if isinstance(metadata.get("issuer"), str):
                issuer = metadata["issuer"]  # what an iss in the login answer must then say
            scopes_supported = None
        else:
            resource_value = prm.get("resource")
            if not isinstance(resource_value, str) or not _resource_matches(
                resource_value, self._server_url
            ):
                raise McpAuthError(
                    f"the server's protected resource metadata names resource "
                    f"{resource_value!r}, which is not {self._server_url}; refusing to "
                    "authorize (its tokens would be for another server)"
                )
            resource = resource_value
            issuer = str(prm["authorization_servers"][0])
            found = await self._authorization_server(issuer)
            if found is None:
                raise McpAuthError(
                    f"the authorization server {issuer} publishes no metadata (tried "
                    f"{', '.join(self._metadata_urls(issuer))})"
                )
            metadata = found
            listed = prm.get("scopes_supported")
            scopes_supported = [str(s) for s in listed] if isinstance(listed, list) else None
        origin = _origin(issuer)
        registration = metadata.get("registration_endpoint")
        if not metadata:
            registration = f"{origin}/register"
        server = _Server(
            issuer=issuer,
            resource=resource,
            metadata=metadata,
            scopes_supported=scopes_supported,
            authorization_endpoint=str(
                metadata.get("authorization_endpoint") or f"{origin}/authorize"
            ),
            token_endpoint=str(metadata.get("token_endpoint") or f"{origin}/token"),
            registration_endpoint=registration if isinstance(registration, str) else None,
        )
        for url in (
            server.authorization_endpoint,
            server.token_endpoint,
            server.registration_endpoint,
        ):
            if url is not None and not _secure(url):
                raise McpAuthError(
                    f"the authorization server's endpoint {url} is plain HTTP on a host that is "
                    "not this machine; refusing to send credentials over it (OAuth 2.1 requires "
                    "TLS)"
                )
        return server

    # -- the flows ---------------------------------------------------------------------------

    async def _authorize(self, challenge: Mapping[str, str], *, step_up: bool) -> None:
        # The request's deadline is about the MCP server; the authorization has clocks of its
        # own (each of its requests, and the person logging in), so it does not spend it.
        async with paused_clock():
            await self._authorize_now(challenge, step_up=step_up)

    async def _authorize_now(self, challenge: Mapping[str, str], *, step_up: bool) -> None:
        server = await self._discover(challenge)
        challenged = _scopes(challenge.get("scope"))
        if step_up:
            scopes = list(dict.fromkeys([*self._requested, *challenged]))
        elif self._config.scope:
            scopes = _scopes(self._config.scope)
        elif challenged:
            scopes = challenged
        else:
            scopes = list(server.scopes_supported or [])
        if isinstance(self._config, ClientCredentials):
            tokens = await self._client_credentials(server, scopes)
        else:
            tokens = await self._authorization_code(server, scopes)
        self._requested = scopes
        tokens["requested_scope"] = " ".join(scopes)
        self._entry["issuer"] = server.issuer
        self._entry["resource"] = server.resource
        self._entry["token_endpoint"] = server.token_endpoint
        self._entry["tokens"] = tokens
        await self._save()

    def _methods(self, server: _Server) -> list[str]:
        listed = server.metadata.get("token_endpoint_auth_methods_supported")
        return [str(m) for m in listed] if isinstance(listed, list) else []

    def _secret_method(self, server: _Server) -> str:
        methods = self._methods(server)
        if not methods or "client_secret_basic" in methods:
            return "client_secret_basic"  # RFC 8414's default when none is listed
        if "client_secret_post" in methods:
            return "client_secret_post"
        raise McpAuthError(
            f"the authorization server {server.issuer} accepts client authentication by "
            f"{', '.join(methods)} only; tether does client_secret_basic, client_secret_post "
            "and none"
        )

    async def _client(self, server: _Server) -> dict[str, Any]:
        """The client to log in as, in the spec's order of preference."""
        config = self._config
        assert isinstance(config, OAuth)
        if config.client_id is not None:
            if config.client_secret is None:
                return {"client_id": config.client_id, "method": "none"}
            return {
                "client_id": config.client_id,
                "client_secret": config.client_secret,
                "method": self._secret_method(server),
            }
        registrations = self._entry.setdefault("registrations", {})
        known = registrations.get(server.issuer)
        if isinstance(known, dict) and isinstance(known.get("client_id"), str):
            return known  # registered with this authorization server before
        if (
            config.client_metadata_url is not None
            and server.metadata.get("client_id_metadata_document_supported") is True
        ):
            return {"client_id": config.client_metadata_url, "method": "none"}
        if server.registration_endpoint is None:
            raise McpAuthError(
                f"the authorization server {server.issuer} offers no way to register tether "
                "(no dynamic client registration"
                + (
                    ", no client ID metadata documents"
                    if config.client_metadata_url is not None
                    else ""
                )
                + "); register a client there and pass OAuth(client_id=..., client_secret=...)"
                + ("" if config.client_metadata_url else ", or give client_metadata_url=...")
            )
        registered = await self._register(server)
        registrations[server.issuer] = registered
        return registered

    async def _register(self, server: _Server) -> dict[str, Any]:
        config = self._config
        assert isinstance(config, OAuth) and server.registration_endpoint is not None
        methods = self._methods(server)
        wanted = next(
            (m for m in ("none", "client_secret_basic", "client_secret_post") if m in methods),
            "client_secret_basic" if methods else "none",
        )
        body: dict[str, Any] = {
            "client_name": config.client_name,
            "redirect_uris": [config.redirect_uri],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": wanted,
            "application_type": "native" if _is_loopback(config.redirect_uri) else "web",
        }
        try:
            resp = await self._http.post(server.registration_endpoint, json=body)
        except httpx.HTTPError as exc:
            raise McpAuthError(
                f"registering with {server.registration_endpoint} failed: {type(exc).__name__}"
            ) from exc
        info = _json_object(resp)
        if resp.status_code not in (200, 201) or not isinstance(info.get("client_id"), str):
            raise McpAuthError(
                f"the authorization server refused to register tether (HTTP "
                f"{resp.status_code}{_oauth_error(info)}); register a client there and pass "
                "OAuth(client_id=..., client_secret=...)"
            )
        secret = info.get("client_secret")
        method = info.get("token_endpoint_auth_method")
        if not isinstance(method, str):
            method = wanted if wanted != "none" or not secret else "client_secret_basic"
        client: dict[str, Any] = {"client_id": info["client_id"], "method": method}
        if isinstance(secret, str):
            client["client_secret"] = secret
        return client

    def _authenticate(
        self, client: Mapping[str, Any], data: dict[str, str], headers: dict[str, str]
    ) -> None:
        method = client.get("method")
        client_id = str(client["client_id"])
        secret = client.get("client_secret")
        if method == "client_secret_basic" and isinstance(secret, str):
            pair = f"{quote(client_id, safe='')}:{quote(secret, safe='')}"
            headers["authorization"] = "Basic " + base64.b64encode(pair.encode()).decode("ascii")
            # Identifying the client in the body too is not a second authentication (RFC
            # 6749 4.1.3 asks for it with the code), and the MCP SDK's authorization server
            # (FastMCP's) refuses a token request without it: 401 "Missing client_id".
            data["client_id"] = client_id
        elif method == "client_secret_post" and isinstance(secret, str):
            data["client_id"] = client_id
            data["client_secret"] = secret
        else:
            data["client_id"] = client_id

    async def _token_request(
        self, endpoint: str, client: Mapping[str, Any], data: dict[str, str], grant: str
    ) -> dict[str, Any]:
        headers = {"accept": "application/json"}
        self._authenticate(client, data, headers)
        try:
            resp = await self._http.post(endpoint, data=data, headers=headers)
        except httpx.HTTPError as exc:
            raise McpAuthError(
                f"the token request ({grant}) to {endpoint} failed: {type(exc).__name__}"
            ) from exc
        info = _json_object(resp)
        token = info.get("access_token")
        if resp.status_code != 200 or not isinstance(token, str) or not token:
            raise McpAuthError(
                f"the token endpoint {endpoint} refused the {grant} grant (HTTP "
                f"{resp.status_code}{_oauth_error(info)})"
            )
        token_type = info.get("token_type")
        if isinstance(token_type, str) and token_type.lower() != "bearer":
            raise McpAuthError(
                f"the token endpoint issued a {token_type} token; tether sends bearer tokens only"
            )
        tokens: dict[str, Any] = {"access_token": token}
        expires_in = info.get("expires_in")
        if isinstance(expires_in, int | float) and not isinstance(expires_in, bool):
            tokens["expires_at"] = time.time() + float(expires_in)
            tokens["expires_in"] = float(expires_in)
        if isinstance(info.get("refresh_token"), str):
            tokens["refresh_token"] = info["refresh_token"]
        if isinstance(info.get("scope"), str):
            tokens["scope"] = info["scope"]
        tokens["client"] = dict(client)
        return tokens

    async def _client_credentials(self, server: _Server, scopes: list[str]) -> dict[str, Any]:
        config = self._config
        assert isinstance(config, ClientCredentials)
        methods = self._methods(server)
        if methods and not {"client_secret_basic", "client_secret_post"} & set(methods):
            raise McpAuthError(
                f"the authorization server {server.issuer} accepts client authentication by "
                f"{', '.join(methods)} only, so it cannot take ClientCredentials: the "
                "client-credentials grant needs a client that proves who it is with its secret "
                "(client_secret_basic or client_secret_post), and a public client (none) has "
                "no secret to prove it with; log in as a user with OAuth(...) instead, or ask "
                "its operator for a confidential client"
            )
        client = {
            "client_id": config.client_id,
            "client_secret": config.client_secret,
            "method": self._secret_method(server),
        }
        data = {"grant_type": "client_credentials", "resource": server.resource}
        if scopes:
            data["scope"] = " ".join(scopes)
        return await self._token_request(server.token_endpoint, client, data, "client_credentials")

    async def _authorization_code(self, server: _Server, scopes: list[str]) -> dict[str, Any]:
        config = self._config
        assert isinstance(config, OAuth)
        methods = server.metadata.get("code_challenge_methods_supported")
        if server.metadata and not (isinstance(methods, list) and "S256" in methods):
            raise McpAuthError(
                f"the authorization server {server.issuer} does not advertise PKCE with S256 "
                "(code_challenge_methods_supported); refusing to log in without it"
            )
        supported = server.metadata.get("scopes_supported")
        if isinstance(supported, list) and "offline_access" in supported:
            scopes = [*scopes, "offline_access"] if "offline_access" not in scopes else scopes
        client = await self._client(server)
        verifier, challenge = _pkce()
        state = secrets.token_urlsafe(32)
        query = {
            "response_type": "code",
            "client_id": str(client["client_id"]),
            "redirect_uri": config.redirect_uri,
            "code_challenge": challenge,
            "code_challenge_method": "S256",
            "state": state,
            "resource": server.resource,
        }
        if scopes:
            query["scope"] = " ".join(scopes)
        sep = "&" if "?" in server.authorization_endpoint else "?"
        url = server.authorization_endpoint + sep + urlencode(query)
        authorize = config.authorize or partial(browser_login, redirect_uri=config.redirect_uri)
        try:
            returned = await authorize(url)
        except McpAuthError:
            raise
        except Exception as exc:
            raise McpAuthError(f"the login did not complete: {type(exc).__name__}: {exc}") from exc
        code = self._code(returned, state, server)
        data = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": config.redirect_uri,
            "code_verifier": verifier,
            "resource": server.resource,
        }
        return await self._token_request(server.token_endpoint, client, data, "authorization_code")

    def _code(self, returned: object, state: str, server: _Server) -> str:
        """The authorization code in the URL the browser came back to, once `state` and `iss`
        say the answer is ours and from the authorization server we asked (RFC 9207)."""
        if not isinstance(returned, str):
            raise McpAuthError("OAuth(authorize=...) must return the URL the browser came back to")
        params = parse_qs(urlsplit(returned).query, keep_blank_values=True)

        def one(name: str) -> str | None:
            values = params.get(name)
            return values[0] if values else None

        if one("state") != state:
            raise McpAuthError(
                "the login answer carries another state than the one sent; it is not the "
                "answer to this login (stale or forged)"
            )
        iss = one("iss")
        promised = server.metadata.get("authorization_response_iss_parameter_supported") is True
        if iss is not None and iss != server.issuer:
            raise McpAuthError(
                f"the login answer comes from issuer {iss!r}, not {server.issuer!r}; refusing "
                "it (a mix-up attack, or a misconfigured authorization server)"
            )
        if iss is None and promised:
            raise McpAuthError(
                f"the authorization server {server.issuer} promises an iss parameter in its "
                "answers and this one has none; refusing it"
            )
        error = one("error")
        if error is not None:
            description = one("error_description")
            raise McpAuthError(
                f"the authorization server refused the login: {error}"
                + (f" ({description})" if description else "")
            )
        code = one("code")
        if not code:
            raise McpAuthError("the login answer carries no authorization code")
        return code

    async def _refresh(self) -> bool:
        """Trade the refresh token for a new access token; False when there is none or the
        authorization server refuses it (the stale tokens are then dropped)."""
        tokens = self._tokens
        refresh = tokens.get("refresh_token")
        client = tokens.get("client")
        endpoint = self._entry.get("token_endpoint")
        if not isinstance(refresh, str) or not isinstance(client, dict):
            return False
        if not isinstance(endpoint, str):
            return False
        data = {"grant_type": "refresh_token", "refresh_token": refresh}
        resource = self._entry.get("resource")
        if isinstance(resource, str):
            data["resource"] = resource
        try:
            fresh = await self._token_request(endpoint, client, data, "refresh_token")
        except McpAuthError:
            self._entry.pop("tokens", None)
            await self._save()
            return False
        fresh.setdefault("refresh_token", refresh)  # the server may keep the old one valid
        fresh["requested_scope"] = tokens.get("requested_scope", "")
        self._entry["tokens"] = fresh
        await self._save()
        return True


def _json_object(resp: httpx.Response) -> dict[str, Any]:
    try:
        value = json.loads(resp.content)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _oauth_error(info: Mapping[str, Any]) -> str:
    """The OAuth error of a response body (never anything else from it)."""
    error = info.get("error")
    if not isinstance(error, str):
        return ""
    description = info.get("error_description")
    tail = f": {description}" if isinstance(description, str) else ""
    return f", {error}{tail}"


def make_auth(
    config: OAuth | ClientCredentials, server_url: str, transport: httpx.AsyncBaseTransport | None
) -> McpAuth:
    """The httpx auth flow of one source connection."""
    return McpAuth(config, server_url, transport)
