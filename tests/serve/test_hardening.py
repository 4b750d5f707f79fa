"""The smaller defences of issue 24 against a real `tether serve` process with a token: no open
redirect after login, the token kept out of the access log, JSON nesting bounded before the
parser recurses, wrong tokens limited per client."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tether.web import MAX_JSON_DEPTH
from tether.web.middleware import GUESSES

from .conftest import Server, start_server, write_project

TOKEN = "hardening-token-0123456789"


def serve(tmp: pytest.TempPathFactory, name: str) -> Server:
    root = write_project(tmp.mktemp(name) / "project")
    return start_server(
        root,
        {
            "TETHER_TEST_STORE": f"sqlite:///{root / 'tether.db'}",
            "TETHER_TEST_DELAY": "0",
            "TETHER_SERVE_TOKEN": TOKEN,
        },
        headers={"authorization": f"Bearer {TOKEN}"},
    )


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    server = serve(tmp_path_factory, "hardening")
    yield server
    server.stop()


@pytest.mark.parametrize(
    ("next_path", "location"),
    [
        ("/runs/abc?x=1", "/runs/abc?x=1"),
        ("//evil.example/", "/"),
        ("/\\evil.example", "/"),
        ("/\t/evil.example", "/"),
        ("/\n/evil.example", "/"),
        ("/\r\nset-cookie: x=1", "/"),
        ("/\x00/evil.example", "/"),
        ("https://evil.example/", "/"),
        ("javascript:alert(1)", "/"),
        ("/runs/caf\u00e9", "/runs/caf%C3%A9"),
    ],
)
def test_login_redirects_only_to_a_path_of_this_server(
    server: Server, next_path: str, location: str
) -> None:
    with httpx.Client(base_url=server.base) as browser:
        answer = browser.post("/login", data={"token": TOKEN, "next": next_path})
    assert answer.status_code == 303, answer.text
    assert answer.headers["location"] == location


def test_the_token_never_reaches_the_access_log(server: Server) -> None:
    with httpx.Client(base_url=server.base) as browser:
        link = browser.get("/login", params={"token": TOKEN, "next": "/runs"})
        assert link.status_code == 303
        assert browser.get("/api/runs", headers={"accept": "application/json"}).status_code == 200
    server.stop()  # flushes the log
    # The link printed at start (for the one who started it) holds it; no access line does.
    access = [
        line for line in server.log.read_text(errors="replace").splitlines() if '"GET /' in line
    ]
    assert any("GET /login?token=" in line for line in access)  # the request was logged ...
    assert not [line for line in access if TOKEN in line]  # ... without its token


@pytest.fixture
def live(server: Server, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    # The access-log test stops the module's server; these need one running.
    if server.process.poll() is None:
        yield server
        return
    again = serve(tmp_path_factory, "hardening-again")
    yield again
    again.stop()


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def test_a_deeply_nested_body_is_a_400_not_a_500(live: Server) -> None:
    with live.client() as client:
        for path, body in [
            ("/api/agents/chat/runs", f'{{"input": "hi", "context": {nested(990)}}}'),
            ("/api/workflows/pipeline/runs", f'{{"input": {nested(100_000)}}}'),
            (
                "/api/agents/chat/ag-ui",
                '{"threadId": "t", "runId": "r", "messages": [], "tools": [], "context": [], '
                f'"forwardedProps": {{}}, "state": {{"a": {nested(500)}}}}}',
            ),
        ]:
            answer = client.post(path, content=body, headers={"content-type": "application/json"})
            assert answer.status_code == 400, (path, answer.text[:200])
            assert f"deeper than {MAX_JSON_DEPTH}" in answer.json()["error"]["message"]
        # Brackets inside strings are text, not nesting.
        fine = client.post("/api/agents/chat/runs", json={"input": "[" * 5000})
        assert fine.status_code == 202, fine.text


@pytest.fixture
def guessed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    server = serve(tmp_path_factory, "guesses")
    yield server
    server.stop()


def test_wrong_tokens_are_limited_per_client(guessed: Server) -> None:
    with httpx.Client(base_url=guessed.base) as guesser:
        for i in range(GUESSES):
            wrong = guesser.get("/api/runs", headers={"authorization": f"Bearer guess-{i}"})
            assert wrong.status_code == 401
        # Past the limit even the right token waits: guessing has stopped paying.
        blocked = guesser.get("/api/runs", headers={"authorization": f"Bearer {TOKEN}"})
        assert blocked.status_code == 429
        assert int(blocked.headers["retry-after"]) > 0
        form = guesser.post("/login", data={"token": TOKEN})
        assert form.status_code == 429
        # A request that offers no token at all is told to log in, as before.
        assert guesser.get("/api/runs").status_code == 401
