"""Who may call `tether serve` off loopback: a real server bound to every interface (reached on
127.0.0.1 only) with a token and one CORS origin."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from .conftest import Server, read_sse, start_server, write_project

TOKEN = "s3cret-token-for-tests"
ORIGIN = "https://app.example.com"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = write_project(tmp_path_factory.mktemp("access") / "project")
    server = start_server(
        root,
        {"TETHER_TEST_STORE": f"sqlite:///{root / 'tether.db'}", "TETHER_SERVE_TOKEN": TOKEN},
        ["--cors-origin", ORIGIN, "--max-body", "2048"],
        host="0.0.0.0",
        headers={"authorization": f"Bearer {TOKEN}"},
    )
    yield server
    server.stop()


def test_a_request_without_the_token_is_refused(server: Server) -> None:
    with httpx.Client(base_url=server.base) as anonymous:
        answer = anonymous.post("/api/agents/chat/runs", json={"input": "hi"})
        assert answer.status_code == 401
        assert answer.headers["www-authenticate"].startswith("Bearer")
        assert anonymous.get("/api/runs/x/stream").status_code == 401
        wrong = anonymous.get("/api/runs", headers={"authorization": "Bearer nope"})
        assert wrong.status_code == 401
        page = anonymous.get("/chat/chat", headers={"accept": "text/html"})
        assert page.status_code == 303 and page.headers["location"].startswith("/login")


def test_the_bearer_token_opens_the_api_and_its_streams(server: Server) -> None:
    with server.client() as client:
        started = client.post("/api/agents/chat/runs", json={"input": "hi"})
        assert started.status_code == 202, started.text
        run_id = started.json()["run_id"]
        with client.stream("GET", f"/api/runs/{run_id}/stream") as response:
            assert response.status_code == 200
            assert [m.event for m in read_sse(response)][-1] == "run_ended"


def test_a_browser_trades_the_token_once_for_a_cookie(server: Server) -> None:
    with httpx.Client(base_url=server.base) as browser:
        login = browser.post("/login", data={"token": TOKEN, "next": "/chat/chat"})
        assert login.status_code == 303
        cookie = login.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and TOKEN not in cookie
        page = browser.get("/chat/chat", headers={"accept": "text/html"})
        assert page.status_code == 200 and 'data-agent="chat"' in page.text
        assert browser.post("/login", data={"token": "wrong"}).status_code == 401


def test_cors_answers_only_the_configured_origin(server: Server) -> None:
    with httpx.Client(base_url=server.base) as browser:
        preflight = {
            "access-control-request-method": "POST",
            "access-control-request-headers": "authorization, content-type",
        }
        allowed = browser.options("/api/agents/chat/runs", headers={"origin": ORIGIN, **preflight})
        assert allowed.status_code == 200
        assert allowed.headers["access-control-allow-origin"] == ORIGIN
        other = browser.options(
            "/api/agents/chat/runs", headers={"origin": "https://evil.example", **preflight}
        )
        assert "access-control-allow-origin" not in other.headers
    with server.client() as client:
        simple = client.get("/api/runs", headers={"origin": "https://evil.example"})
        assert "access-control-allow-origin" not in simple.headers
        ok = client.get("/api/runs", headers={"origin": ORIGIN})
        assert ok.headers["access-control-allow-origin"] == ORIGIN


def test_the_body_limit_is_the_configured_one(server: Server) -> None:
    with server.client() as client:
        answer = client.post("/api/agents/chat/runs", json={"input": "x" * 3000})
        assert answer.status_code == 413
        assert answer.json()["error"]["type"] == "payload_too_large"


def test_an_unexpected_host_is_refused_even_with_the_token(server: Server) -> None:
    with server.client() as client:
        assert client.get("/api/runs", headers={"host": "rebound.example"}).status_code == 400
