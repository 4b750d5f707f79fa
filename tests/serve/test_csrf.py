"""Cross-site requests against real `tether serve` processes: on loopback without a token (the
default a developer runs) and with a token (cookie-logged-in browsers). A state-changing request
from another origin, or with a body a page can send cross-site without asking, changes nothing;
curl and the SDKs (no Origin) and the server's own pages keep working."""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest

from tether.web.middleware import CSRF_HEADER

from .conftest import Server, start_server, write_project

TOKEN = "csrf-test-token"
ORIGIN = "https://app.example.com"


@pytest.fixture(scope="module")
def open_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = write_project(tmp_path_factory.mktemp("csrf-open") / "project")
    server = start_server(
        root,
        {"TETHER_TEST_STORE": f"sqlite:///{root / 'tether.db'}", "TETHER_TEST_DELAY": "0"},
        ["--cors-origin", ORIGIN],
    )
    yield server
    server.stop()


@pytest.fixture(scope="module")
def token_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = write_project(tmp_path_factory.mktemp("csrf-token") / "project")
    server = start_server(
        root,
        {
            "TETHER_TEST_STORE": f"sqlite:///{root / 'tether.db'}",
            "TETHER_TEST_DELAY": "0",
            "TETHER_SERVE_TOKEN": TOKEN,
        },
        headers={"authorization": f"Bearer {TOKEN}"},
    )
    yield server
    server.stop()


def runs_of(server: Server) -> int:
    with server.client() as client:
        return len(client.get("/api/runs", params={"limit": 200}).json()["runs"])


def own(server: Server) -> str:
    return server.base  # http://127.0.0.1:PORT


def other_port(server: Server) -> str:
    port = int(server.base.rsplit(":", 1)[1])
    return f"http://127.0.0.1:{port + 1}"


BODY = '{"input": "hi"}'


@pytest.mark.parametrize(
    ("headers", "why"),
    [
        ({"origin": "https://evil.example", "content-type": "application/json"}, "origin"),
        ({"origin": "null", "content-type": "application/json"}, "null origin"),
        ({"sec-fetch-site": "cross-site", "content-type": "application/json"}, "fetch site"),
        (
            {"sec-fetch-site": "same-site", "origin": "OTHER", "content-type": "text/plain"},
            "another port",
        ),
        ({"origin": "OTHER", "content-type": "application/json"}, "another port, origin only"),
    ],
)
def test_a_post_from_another_origin_is_403_and_starts_nothing(
    open_server: Server, headers: dict[str, str], why: str
) -> None:
    before = runs_of(open_server)
    headers = {k: v.replace("OTHER", other_port(open_server)) for k, v in headers.items()}
    with httpx.Client(base_url=open_server.base) as page:
        for path in ("/api/agents/chat/runs", "/api/workflows/pipeline/runs", "/api/runs/x/cancel"):
            answer = page.post(path, content=BODY, headers=headers)
            assert answer.status_code == 403, (why, path, answer.text)
            assert answer.json()["error"]["type"] == "cross_origin"
            assert "--cors-origin" in answer.json()["error"]["message"]
        ag_ui = page.post("/api/agents/chat/ag-ui", content=BODY, headers=headers)
        assert ag_ui.status_code == 403
    assert runs_of(open_server) == before


@pytest.mark.parametrize(
    "kind", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; b=x", None]
)
def test_a_body_that_is_not_json_is_415_even_without_an_origin(
    open_server: Server, kind: str | None
) -> None:
    # What an old browser (no Origin) or a form could send cross-site; and no Content-Type.
    before = runs_of(open_server)
    headers = {"content-type": kind} if kind else {}
    with httpx.Client(base_url=open_server.base) as page:
        answer = page.post("/api/agents/chat/runs", content=BODY, headers=headers)
    assert answer.status_code == 415, answer.text
    assert answer.json()["error"]["type"] == "unsupported_media_type"
    assert runs_of(open_server) == before


def test_curl_the_servers_own_pages_and_the_configured_origin_still_work(
    open_server: Server,
) -> None:
    with httpx.Client(base_url=open_server.base) as client:
        curl = client.post("/api/agents/chat/runs", json={"input": "hi"})
        assert curl.status_code == 202, curl.text
        same = client.post(
            "/api/agents/chat/runs",
            json={"input": "hi"},
            headers={"origin": own(open_server), "sec-fetch-site": "same-origin"},
        )
        assert same.status_code == 202, same.text
        listed = client.post(
            "/api/agents/chat/runs",
            json={"input": "hi"},
            headers={"origin": ORIGIN, "sec-fetch-site": "cross-site"},
        )
        assert listed.status_code == 202, listed.text
        assert listed.headers["access-control-allow-origin"] == ORIGIN
        # A bodiless POST (cancel from curl) needs no Content-Type.
        run_id = curl.json()["run_id"]
        cancel = client.post(f"/api/runs/{run_id}/cancel")
        assert cancel.status_code in (202, 409), cancel.text
        # Reads are never refused for their origin (CORS decides who may read them).
        assert (
            client.get("/api/runs", headers={"origin": "https://evil.example"}).status_code == 200
        )


def log_in(browser: httpx.Client, server: Server) -> None:
    login = browser.post("/login", data={"token": TOKEN}, headers={"origin": own(server)})
    assert login.status_code == 303, login.text


def test_a_cookie_post_needs_the_pages_csrf_token(token_server: Server) -> None:
    before = runs_of(token_server)
    same = {"origin": own(token_server), "sec-fetch-site": "same-origin"}
    with httpx.Client(base_url=token_server.base) as browser:
        log_in(browser, token_server)
        refused = browser.post("/api/agents/chat/runs", json={"input": "hi"}, headers=same)
        assert refused.status_code == 403, refused.text
        assert refused.json()["error"]["type"] == "csrf_token_missing"
        wrong = browser.post(
            "/api/agents/chat/runs", json={"input": "hi"}, headers={**same, CSRF_HEADER: "nope"}
        )
        assert wrong.status_code == 403
        assert runs_of(token_server) == before
        page = browser.get("/chat/chat", headers={"accept": "text/html"})
        found = re.search(r'data-csrf="([0-9a-f]{64})"', page.text)
        assert found, page.text
        token = found.group(1)
        assert token != TOKEN and TOKEN not in page.text
        ok = browser.post(
            "/api/agents/chat/runs", json={"input": "hi"}, headers={**same, CSRF_HEADER: token}
        )
        assert ok.status_code == 202, ok.text
    assert runs_of(token_server) == before + 1


def test_a_bearer_post_needs_no_csrf_token(token_server: Server) -> None:
    with token_server.client() as client:
        assert client.post("/api/agents/chat/runs", json={"input": "hi"}).status_code == 202


def test_login_from_another_origin_is_refused(token_server: Server) -> None:
    with httpx.Client(base_url=token_server.base) as page:
        answer = page.post(
            "/login", data={"token": TOKEN}, headers={"origin": other_port(token_server)}
        )
    assert answer.status_code == 403
    assert "set-cookie" not in answer.headers
