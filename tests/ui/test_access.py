"""Who the UI answers: the Host allow-list (DNS rebinding), the token gate and its `/login`, and
`serve()` refusing a non-loopback address without a token."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from tether.errors import ConfigError
from tether.lab import Runtime
from tether.testing import script_client
from tether.ui import allowed_hosts, create_app, is_loopback
from tether.ui._serve import _server
from tether.web.middleware import CONTENT_SECURITY_POLICY, SESSION_COOKIE

TOKEN = "s3cret-token"


@pytest.fixture
async def runtime() -> AsyncIterator[Runtime]:
    lab = Runtime(store="memory", version=False, defaults={"model": script_client([])})
    yield lab
    await lab.aclose()


def client(app: object, host: str = "localhost") -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),  # type: ignore[arg-type]
        base_url=f"http://{host}",
    )


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1:8321", "[::1]:8321", "LOCALHOST."])
async def test_loopback_names_are_answered_by_default(runtime: Runtime, host: str) -> None:
    async with client(create_app(runtime)) as c:
        response = await c.get("/runs", headers={"host": host})
    assert response.status_code == 200


@pytest.mark.parametrize("host", ["evil.example", "evil.example:8321", "127.0.0.1.evil.example"])
async def test_another_host_name_gets_400(runtime: Runtime, host: str) -> None:
    # A rebinding page's requests carry its own name in Host, so they never reach a page.
    async with client(create_app(runtime)) as c:
        for path in ("/runs", "/api/runs", "/static/tether.css", "/nowhere"):
            response = await c.get(path, headers={"host": host})
            assert response.status_code == 400, path
            assert "--allowed-host" in response.text
            assert response.headers["content-security-policy"] == CONTENT_SECURITY_POLICY


async def test_a_missing_host_header_gets_400(runtime: Runtime) -> None:
    app = create_app(runtime)
    sent: list[dict[str, object]] = []

    async def receive() -> dict[str, object]:
        return {"type": "http.request", "body": b""}

    async def send(message: dict[str, object]) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "GET", "path": "/runs", "headers": [],
             "query_string": b"", "root_path": ""}  # fmt: skip
    await app(scope, receive, send)  # type: ignore[arg-type]
    assert sent[0]["status"] == 400


def test_allowed_hosts_follow_the_bound_address() -> None:
    assert {"localhost", "127.0.0.1", "::1"} <= allowed_hosts("127.0.0.1")
    assert allowed_hosts("ui.example.org") == {"ui.example.org"}
    assert allowed_hosts("192.0.2.7", ["Box.Example:80"]) == {"192.0.2.7", "box.example"}
    wildcard = allowed_hosts("0.0.0.0")
    assert "localhost" in wildcard and len(wildcard) > 3  # and this machine's names
    assert is_loopback("127.1.2.3") and is_loopback("[::1]") and not is_loopback("0.0.0.0")


async def test_allowed_host_names_and_the_wildcard(runtime: Runtime) -> None:
    app = create_app(runtime, allowed_hosts=allowed_hosts("192.0.2.7", ["ui.example"]))
    async with client(app) as c:
        assert (await c.get("/runs", headers={"host": "ui.example:8321"})).status_code == 200
        assert (await c.get("/runs", headers={"host": "192.0.2.7"})).status_code == 200
        assert (await c.get("/runs", headers={"host": "localhost"})).status_code == 400
    async with client(create_app(runtime, allowed_hosts=["*"])) as c:
        assert (await c.get("/runs", headers={"host": "anything"})).status_code == 200


# -- the token ---------------------------------------------------------------------------------


async def test_without_the_token_the_api_answers_401(runtime: Runtime) -> None:
    async with client(create_app(runtime, token=TOKEN)) as c:
        response = await c.get("/api/runs")
        assert response.status_code == 401
        assert response.headers["www-authenticate"].startswith("Bearer")
        wrong = await c.get("/api/runs", headers={"authorization": "Bearer nope"})
        assert wrong.status_code == 401
        right = await c.get("/api/runs", headers={"authorization": f"Bearer {TOKEN}"})
        assert right.status_code == 200 and right.json()["runs"] == []


async def test_a_browser_is_sent_to_the_login_form_and_trades_the_token_once(
    runtime: Runtime,
) -> None:
    async with client(create_app(runtime, token=TOKEN)) as c:
        page = await c.get("/runs?status=failed", headers={"accept": "text/html"})
        assert page.status_code == 303
        assert page.headers["location"] == "/login?next=%2Fruns%3Fstatus%3Dfailed"
        form = await c.get(page.headers["location"])
        assert form.status_code == 200 and 'name="token"' in form.text
        assert form.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
        assert 'value="/runs?status=failed"' in form.text
        bad = await c.post("/login", data={"token": "nope", "next": "/runs"})
        assert bad.status_code == 401 and "wrong" in bad.text
        assert SESSION_COOKIE not in c.cookies
        good = await c.post("/login", data={"token": TOKEN, "next": "/runs?status=failed"})
        assert good.status_code == 303 and good.headers["location"] == "/runs?status=failed"
        cookie = good.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and TOKEN not in cookie
        # The cookie alone now opens pages and the API.
        assert (await c.get("/runs", headers={"accept": "text/html"})).status_code == 200
        assert (await c.get("/api/runs")).status_code == 200


async def test_login_by_link_and_no_open_redirect(runtime: Runtime) -> None:
    async with client(create_app(runtime, token=TOKEN)) as c:
        response = await c.get(f"/login?token={TOKEN}&next=//evil.example/x")
        assert response.status_code == 303 and response.headers["location"] == "/"
        assert (await c.get("/api/runs")).status_code == 200
    async with client(create_app(runtime, token=TOKEN)) as c:
        c.cookies.set(SESSION_COOKIE, "forged")
        assert (await c.get("/api/runs")).status_code == 401


async def test_the_host_check_comes_before_the_login(runtime: Runtime) -> None:
    async with client(create_app(runtime, token=TOKEN)) as c:
        response = await c.get(f"/login?token={TOKEN}", headers={"host": "evil.example"})
        assert response.status_code == 400 and "set-cookie" not in response.headers


def test_serving_off_loopback_needs_a_token(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TETHER_UI_TOKEN", raising=False)
    with pytest.raises(ConfigError, match="needs a token"):
        _server(runtime, "0.0.0.0", 0, None, "warning")
    assert _server(runtime, "0.0.0.0", 0, None, "warning", token="t") is not None
    monkeypatch.setenv("TETHER_UI_TOKEN", "from-env")
    assert _server(runtime, "192.0.2.7", 0, None, "warning") is not None
    assert _server(runtime, "127.0.0.1", 0, None, "warning") is not None
