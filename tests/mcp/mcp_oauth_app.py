"""An OAuth-protected MCP server and its authorization server, ours, for the OAuth tests:
one Starlette app served by uvicorn on 127.0.0.1.

`/mcp` checks the bearer token (401 with a configurable `WWW-Authenticate`, 403
`insufficient_scope` per method) and hands the request to an in-process `TestMcpServer`. The
rest is the authorization server: protected resource metadata, authorization server metadata,
`/authorize` (answers at once with a redirect carrying the code), `/token` (authorization code
with PKCE S256, refresh token, client credentials; checks the client authentication it
advertises), `/register`. Every part is switched by the `Config` a test sets, and every request
is recorded.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import threading
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlencode

import httpx
import uvicorn
from mcp_interop_servers import free_port
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from tether.testing import TestMcpServer, create_test_mcp_server


@dataclass
class Config:
    prm_paths: list[str] = field(
        default_factory=lambda: ["/.well-known/oauth-protected-resource/mcp"]
    )
    prm_in_header: bool = True
    prm_resource: str | None = None
    """None: the server's own URL (or its origin when served at the root path)."""
    prm_scopes: list[str] | None = None
    header_scope: str | None = None
    as_prefix: str = ""
    """The authorization server's issuer path (its endpoints live under it too)."""
    as_metadata_path: str | None = "/.well-known/oauth-authorization-server"
    """Where its metadata is (None: nowhere); `{prefix}` is replaced by `as_prefix`."""
    issuer_override: str | None = None
    auth_methods: list[str] = field(default_factory=lambda: ["none"])
    scopes_supported: list[str] | None = None
    registration: bool = True
    cimd: bool = False
    pkce_methods: list[str] | None = field(default_factory=lambda: ["S256"])
    iss_supported: bool | None = True
    iss_mode: str = "correct"
    """correct | omit | wrong | normalized"""
    expires_in: int = 3600
    issue_refresh: bool = True
    required: dict[str, list[str]] = field(default_factory=dict)
    """JSON-RPC method -> scopes its token must hold (403 insufficient_scope otherwise)."""
    step_up_scope: dict[str, str] = field(default_factory=dict)
    """JSON-RPC method -> the scope its 403 challenge names (default: the required ones)."""
    pre_registered: dict[str, str] = field(default_factory=dict)
    """client_id -> secret known without registration."""
    withheld: list[str] = field(default_factory=list)
    """Scopes the authorization server never grants (the account may not have them)."""


@dataclass
class Issued:
    client_id: str
    scopes: list[str]
    resource: str | None
    expires_at: float


class OAuthWorld:
    """The running app: its config, what it recorded, and its URLs."""

    def __init__(self) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.mcp_url = f"{self.base}/mcp"
        self.config = Config()
        self.mcp: TestMcpServer = create_test_mcp_server()
        self.log: list[tuple[str, dict[str, Any]]] = []
        self.tokens: dict[str, Issued] = {}
        self.refresh_tokens: dict[str, Issued] = {}
        self.codes: dict[str, dict[str, Any]] = {}
        self.clients: dict[str, dict[str, Any]] = {}
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    def reset(self, mcp: TestMcpServer, config: Config) -> None:
        self.mcp = mcp
        self.config = config
        self.log.clear()
        self.tokens.clear()
        self.refresh_tokens.clear()
        self.codes.clear()
        self.clients.clear()

    @property
    def issuer(self) -> str:
        return self.config.issuer_override or f"{self.base}{self.config.as_prefix}"

    def seen(self, kind: str) -> list[dict[str, Any]]:
        return [data for what, data in self.log if what == kind]

    # -- the protected MCP endpoint ------------------------------------------------------------

    def _challenge(self, error: str | None = None, scope: str | None = None) -> str:
        parts: list[str] = []
        if error:
            parts.append(f'error="{error}"')
        if scope:
            parts.append(f'scope="{scope}"')
        if self.config.prm_in_header and self.config.prm_paths:
            parts.append(f'resource_metadata="{self.base}{self.config.prm_paths[0]}"')
        return "Bearer " + ", ".join(parts) if parts else "Bearer"

    async def mcp_endpoint(self, request: Request) -> Response:
        body = await request.body()
        self.log.append(("mcp", {"authorization": request.headers.get("authorization")}))
        auth = request.headers.get("authorization", "")
        issued = self.tokens.get(auth[7:]) if auth.startswith("Bearer ") else None
        if issued is None or issued.expires_at < time.time():
            return Response(
                status_code=401,
                headers={"www-authenticate": self._challenge(scope=self.config.header_scope)},
            )
        method = request.headers.get("mcp-method")
        needed = self.config.required.get(method or "", [])
        if not set(needed) <= set(issued.scopes):
            scope = self.config.step_up_scope.get(method or "", " ".join(needed))
            return Response(
                status_code=403,
                headers={"www-authenticate": self._challenge("insufficient_scope", scope)},
            )
        upstream = httpx.Request(
            request.method,
            self.mcp.url,
            headers=[(k, v) for k, v in request.headers.items() if k != "host"],
            content=body,
        )
        resp = await self.mcp.handle_async_request(upstream)
        content = await resp.aread()
        headers = {k: v for k, v in resp.headers.items() if k.lower() != "content-length"}
        return Response(content=content, status_code=resp.status_code, headers=headers)

    # -- protected resource and authorization server metadata ---------------------------------

    async def prm(self, request: Request) -> Response:
        self.log.append(("prm", {"path": request.url.path}))
        if request.url.path not in self.config.prm_paths:
            return JSONResponse({"error": "not_found"}, status_code=404)
        resource = self.config.prm_resource
        if resource is None:
            at_root = request.url.path == "/.well-known/oauth-protected-resource"
            resource = self.base if at_root else self.mcp_url
        doc: dict[str, Any] = {"resource": resource, "authorization_servers": [self.issuer]}
        if self.config.prm_scopes is not None:
            doc["scopes_supported"] = self.config.prm_scopes
        return JSONResponse(doc)

    async def as_metadata(self, request: Request) -> Response:
        self.log.append(("as-metadata", {"path": request.url.path}))
        path = self.config.as_metadata_path
        wanted = None if path is None else path.replace("{prefix}", self.config.as_prefix)
        if request.url.path != wanted:
            return JSONResponse({"error": "not_found"}, status_code=404)
        c = self.config
        endpoints = f"{self.base}{c.as_prefix}"
        doc: dict[str, Any] = {
            "issuer": self.issuer,
            "authorization_endpoint": f"{endpoints}/authorize",
            "token_endpoint": f"{endpoints}/token",
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code", "refresh_token", "client_credentials"],
            "token_endpoint_auth_methods_supported": c.auth_methods,
        }
        if c.registration:
            doc["registration_endpoint"] = f"{endpoints}/register"
        if c.pkce_methods is not None:
            doc["code_challenge_methods_supported"] = c.pkce_methods
        if c.iss_supported is not None:
            doc["authorization_response_iss_parameter_supported"] = c.iss_supported
        if c.scopes_supported is not None:
            doc["scopes_supported"] = c.scopes_supported
        if c.cimd:
            doc["client_id_metadata_document_supported"] = True
        return JSONResponse(doc)

    # -- the authorization server's endpoints -------------------------------------------------

    async def authorize(self, request: Request) -> Response:
        query = dict(request.query_params)
        self.log.append(("authorize", query))
        code = secrets.token_urlsafe(16)
        self.codes[code] = query
        params = {"code": code}
        if "state" in query:
            params["state"] = query["state"]
        mode = self.config.iss_mode
        if mode == "correct":
            params["iss"] = self.issuer
        elif mode == "wrong":
            params["iss"] = "https://evil.example.com"
        elif mode == "normalized":
            params["iss"] = self.issuer + "/"
        return RedirectResponse(f"{query['redirect_uri']}?{urlencode(params)}", status_code=302)

    def _client_auth(self, request: Request, form: dict[str, str]) -> tuple[str, str]:
        """(client_id, the method it authenticated with)."""
        header = request.headers.get("authorization", "")
        if header.startswith("Basic "):
            raw = base64.b64decode(header[6:]).decode()
            client_id, _, secret = raw.partition(":")
            client_id, secret = unquote(client_id), unquote(secret)
            method = "client_secret_basic"
        elif "client_secret" in form:
            client_id, secret, method = (
                form.get("client_id", ""),
                form["client_secret"],
                ("client_secret_post"),
            )
        else:
            client_id, secret, method = form.get("client_id", ""), "", "none"
        known = self.clients.get(client_id) or (
            {"secret": self.config.pre_registered[client_id]}
            if client_id in self.config.pre_registered
            else None
        )
        if client_id.startswith("https://"):  # a client ID metadata document: a public client
            known = {"secret": ""}
        if known is None or (known.get("secret") or "") != secret:
            raise PermissionError("invalid_client")
        if method not in self.config.auth_methods:
            raise PermissionError("unauthorized_client")
        return client_id, method

    def _issue(self, client_id: str, scopes: list[str], resource: str | None) -> dict[str, Any]:
        token = "at-" + secrets.token_urlsafe(16)
        scopes = [s for s in scopes if s not in self.config.withheld]
        issued = Issued(client_id, scopes, resource, time.time() + self.config.expires_in)
        self.tokens[token] = issued
        answer: dict[str, Any] = {
            "access_token": token,
            "token_type": "Bearer",
            "expires_in": self.config.expires_in,
            "scope": " ".join(scopes),
        }
        if self.config.issue_refresh:
            refresh = "rt-" + secrets.token_urlsafe(16)
            self.refresh_tokens[refresh] = issued
            answer["refresh_token"] = refresh
        return answer

    async def token(self, request: Request) -> Response:
        form = {k: str(v) for k, v in (await request.form()).items()}
        try:
            client_id, method = self._client_auth(request, form)
        except PermissionError as exc:
            self.log.append(("token", {**form, "error": str(exc)}))
            return JSONResponse({"error": str(exc)}, status_code=401)
        self.log.append(("token", {**form, "client_id": client_id, "method": method}))
        grant = form.get("grant_type")
        if grant == "authorization_code":
            asked = self.codes.pop(form.get("code", ""), None)
            verifier = form.get("code_verifier", "")
            digest = hashlib.sha256(verifier.encode()).digest()
            challenge = base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
            if asked is None or asked.get("code_challenge") != challenge:
                return JSONResponse({"error": "invalid_grant"}, status_code=400)
            scopes = (asked.get("scope") or "").split()
            return JSONResponse(self._issue(client_id, scopes, form.get("resource")))
        if grant == "refresh_token":
            issued = self.refresh_tokens.pop(form.get("refresh_token", ""), None)
            if issued is None:
                return JSONResponse({"error": "invalid_grant"}, status_code=400)
            return JSONResponse(self._issue(client_id, issued.scopes, form.get("resource")))
        if grant == "client_credentials":
            scopes = (form.get("scope") or "").split()
            return JSONResponse(self._issue(client_id, scopes, form.get("resource")))
        return JSONResponse({"error": "unsupported_grant_type"}, status_code=400)

    async def register(self, request: Request) -> Response:
        body = await request.json()
        self.log.append(("register", body))
        client_id = "client-" + secrets.token_hex(4)
        method = body.get("token_endpoint_auth_method", "client_secret_basic")
        secret = "" if method == "none" else "secret-" + secrets.token_hex(8)
        self.clients[client_id] = {"secret": secret, "method": method}
        answer = {"client_id": client_id, "token_endpoint_auth_method": method, **body}
        if secret:
            answer["client_secret"] = secret
        return JSONResponse(answer, status_code=201)

    # -- serving -------------------------------------------------------------------------------

    def app(self) -> Starlette:
        async def catch_all(request: Request) -> Response:
            path = request.url.path
            if "oauth-protected-resource" in path or path in self.config.prm_paths:
                return await self.prm(request)
            if "oauth-authorization-server" in path or "openid-configuration" in path:
                return await self.as_metadata(request)
            prefix = self.config.as_prefix
            if path == f"{prefix}/authorize":
                return await self.authorize(request)
            if path == f"{prefix}/token" and request.method == "POST":
                return await self.token(request)
            if (
                path == f"{prefix}/register"
                and request.method == "POST"
                and self.config.registration
            ):
                return await self.register(request)
            self.log.append(("404", {"path": path}))
            return Response(status_code=404)

        return Starlette(
            routes=[
                Route("/mcp", self.mcp_endpoint, methods=["GET", "POST", "DELETE"]),
                Route("/{path:path}", catch_all, methods=["GET", "POST"]),
            ]
        )

    def start(self) -> None:
        config = uvicorn.Config(self.app(), host="127.0.0.1", port=self.port, log_level="warning")
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        deadline = time.monotonic() + 15
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the OAuth test server did not start")
            time.sleep(0.01)
        self._server, self._thread = server, thread

    def stop(self) -> None:
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True
            self._thread.join(15)


async def follow_login(url: str) -> str:
    """An `authorize` that plays the browser: visit the authorization URL, do not follow the
    redirect, return where it points (the redirect URI with the code in it)."""
    async with httpx.AsyncClient() as client:
        resp = await client.get(url, follow_redirects=False)
    assert resp.status_code == 302, resp.text
    return resp.headers["location"]
