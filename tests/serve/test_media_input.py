"""`tether serve` takes media in a run's input: JSON parts with base64 data, or a
multipart/form-data upload; bad parts are 400 and a body over the limit 413, before anything
runs. A real server process on loopback, as a client sees it."""

from __future__ import annotations

import base64
import hashlib
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from .conftest import Server, start_server, stream_all, write_project

PHOTO = b"\xff\xd8\xff\xe0" + bytes(range(256)) * 400  # a ~100 KB JPEG, over the 64 KB threshold
CONTRACT = b"%PDF-1.7\n%%EOF\n"


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_project(tmp_path_factory.mktemp("serve") / "project")


@pytest.fixture(scope="module")
def server(root: Path) -> Iterator[Server]:
    server = start_server(root, {"TETHER_TEST_STORE": f"sqlite:///{root / 'tether.db'}"})
    yield server
    server.stop()


@pytest.fixture
def client(server: Server) -> Iterator[httpx.Client]:
    # An upload carries the Origin a browser page sends (or a token): see the next test.
    with server.client() as client:
        client.headers["origin"] = server.base
        yield client


def stored_user(root: Path, scope: str) -> Any:
    """The last user record of `scope`, read straight from the server's SQLite file."""
    conn = sqlite3.connect(root / "tether.db")
    try:
        rows = conn.execute(
            "SELECT record FROM tether_messages WHERE scope = ? ORDER BY seq", (scope,)
        ).fetchall()
    finally:
        conn.close()
    users = [r for r in (json.loads(raw) for (raw,) in rows) if r["role"] == "user"]
    assert users, rows
    return users[-1]


def test_a_multipart_upload_is_the_message_with_its_files(client: httpx.Client, root: Path) -> None:
    response = client.post(
        "/api/agents/chat/runs",
        data={"input": "what is this?", "scope": "uploads"},
        files=[
            ("file", ("photo.jpg", PHOTO, "image/jpeg")),
            ("file", ("contract.pdf", CONTRACT, "application/pdf")),
        ],
    )
    assert response.status_code == 202, response.text
    stream_all(client, response.json()["run_id"])
    user = stored_user(root, "uploads")
    text, photo, contract = user["content"]
    assert text == {"type": "text", "text": "what is this?"}
    assert photo["blob"] == hashlib.sha256(PHOTO).hexdigest() and photo["name"] == "photo.jpg"
    assert contract["data"] == base64.b64encode(CONTRACT).decode()
    assert contract["media_type"] == "application/pdf"


def test_json_parts_with_base64_data(client: httpx.Client, root: Path) -> None:
    part = {"type": "image", "media_type": "image/jpeg", "data": base64.b64encode(PHOTO).decode()}
    response = client.post(
        "/api/agents/chat/runs",
        json={"input": {"user": ["what is this?", part]}, "scope": "json-parts"},
    )
    assert response.status_code == 202, response.text
    stream_all(client, response.json()["run_id"])
    photo = stored_user(root, "json-parts")["content"][1]
    assert photo["blob"] == hashlib.sha256(PHOTO).hexdigest() and "data" not in photo


@pytest.mark.parametrize(
    ("part", "says"),
    [
        ({"type": "image", "media_type": "image/png", "data": "!!not base64!!"}, "base64"),
        ({"type": "image", "media_type": "image/png", "blob": "ab" * 32}, "not a blob reference"),
        ({"type": "image", "media_type": "image/png", "url": "file:///etc/passwd"}, "http(s)"),
        ({"type": "video", "media_type": "video/mp4", "data": ""}, "media part"),
    ],
)
def test_bad_parts_are_refused_before_anything_runs(
    client: httpx.Client, part: dict[str, Any], says: str
) -> None:
    before = client.get("/api/runs").json()
    response = client.post("/api/agents/chat/runs", json={"input": {"user": ["hi", part]}})
    assert response.status_code == 400, response.text
    assert says in response.text
    assert client.get("/api/runs").json() == before


def test_an_upload_without_origin_or_token_is_refused_as_a_cross_site_form_would_be(
    server: Server,
) -> None:
    with server.client() as client:
        response = client.post(
            "/api/agents/chat/runs",
            data={"input": "hi"},
            files=[("file", ("photo.jpg", PHOTO, "image/jpeg"))],
        )
    assert response.status_code == 415


def test_an_upload_that_is_no_media_is_refused(client: httpx.Client) -> None:
    response = client.post(
        "/api/agents/chat/runs",
        data={"input": "hi"},
        files=[("file", ("tool.exe", b"MZ\x90\x00 program", "application/octet-stream"))],
    )
    assert response.status_code == 400
    assert "not an image, a document or audio" in response.text


def test_a_body_over_the_limit_is_413(client: httpx.Client) -> None:
    big = b"\xff\xd8\xff\xe0" + bytes(2 * 1024 * 1024)
    response = client.post(
        "/api/agents/chat/runs",
        data={"input": "hi"},
        files=[("file", ("big.jpg", big, "image/jpeg"))],
    )
    assert response.status_code == 413
    assert "larger than" in response.text
