"""Media in the UI, in headless Chromium: a stored image is shown inline from the store; a
hostile SVG and an HTML file are served inert (headers checked, and no script of theirs runs,
opened directly or as an image); the request view shows the reference and size, not base64."""

from __future__ import annotations

import socket
import struct
import threading
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.browser import chromium, require_chromium, run_in_thread

from tether.blobs import BlobStore
from tether.lab import Runtime
from tether.testing import script_client
from tether.ui._serve import _server

require_chromium()

from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

HOSTILE_SVG = (
    b'<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10">'
    b"<script>document.title='pwned'</script><rect width='10' height='10'/></svg>"
)
HOSTILE_HTML = b"<html><body><script>document.title='pwned'</script>hi</body></html>"


def png(width: int, height: int) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    rows = b"".join(b"\x00" + b"\xcc\x22\x22" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


PHOTO = png(40, 30)


def ref(kind: str, media_type: str, sha: str, size: int, name: str) -> dict[str, Any]:
    return {"type": kind, "media_type": media_type, "blob": sha, "size": size, "name": name}


async def _fill(runtime: Runtime) -> dict[str, str]:
    blobs: BlobStore = runtime.message_store.blobs  # type: ignore[attr-defined]
    shas = {
        "png": await blobs.put(PHOTO, "image/png"),
        "svg": await blobs.put(HOSTILE_SVG, "image/svg+xml"),
        "html": await blobs.put(HOSTILE_HTML, "text/html"),
        "pdf": await blobs.put(b"%PDF-1.7 contract", "application/pdf"),
    }
    user = {
        "role": "user",
        "content": [
            {"type": "text", "text": "what is this?"},
            ref("image", "image/png", shas["png"], len(PHOTO), "photo.png"),
            ref("image", "image/svg+xml", shas["svg"], len(HOSTILE_SVG), "evil.svg"),
            ref("document", "text/html", shas["html"], len(HOSTILE_HTML), "evil.html"),
            ref("document", "application/pdf", shas["pdf"], 17, "contract.pdf"),
        ],
    }
    answer = {"role": "assistant", "content": [{"type": "text", "text": "A red square."}]}
    await runtime.message_store.append("talk", [user, answer])  # type: ignore[list-item]
    return shas


@pytest.fixture
def site(tmp_path: Path) -> Iterator[tuple[str, dict[str, str]]]:
    runtime = Runtime(
        store=f"sqlite:///{tmp_path / 'ui.db'}",
        version=False,
        defaults={"model": script_client([])},
    )
    runtime.create_agent(id="chat", system_prompt="Be brief.")
    shas = run_in_thread(_fill(runtime))
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = _server(runtime, "127.0.0.1", port, None, "warning")
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}", shas
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()
        run_in_thread(runtime.aclose())


def test_blobs_are_served_with_inert_headers(site: tuple[str, dict[str, str]]) -> None:
    url, shas = site
    image = httpx.get(f"{url}/blobs/{shas['png']}")
    assert image.status_code == 200 and image.content == PHOTO
    assert image.headers["content-type"] == "image/png"
    assert image.headers["x-content-type-options"] == "nosniff"
    assert "content-disposition" not in image.headers
    for key, served in (("svg", "application/octet-stream"), ("html", "application/octet-stream")):
        r = httpx.get(f"{url}/blobs/{shas[key]}?name=evil.{key}")
        assert r.headers["content-type"] == served
        assert r.headers["content-disposition"] == f'attachment; filename="evil.{key}"'
        assert r.headers["content-security-policy"].startswith("sandbox")
        assert r.headers["x-content-type-options"] == "nosniff"
    pdf = httpx.get(f"{url}/blobs/{shas['pdf']}")
    assert pdf.headers["content-type"] == "application/pdf"
    assert pdf.headers["content-disposition"].startswith("attachment")
    assert httpx.get(f"{url}/blobs/{'0' * 64}").status_code == 404
    assert httpx.get(f"{url}/blobs/not-a-key").status_code == 404


def test_the_image_is_shown_and_no_stored_script_runs(
    site: tuple[str, dict[str, str]], tmp_path: Path
) -> None:
    url, shas = site
    with chromium(tmp_path / "chromium") as browser:
        browser.get(f"{url}/conversations/talk")
        thumbs = browser.find_elements(By.CSS_SELECTOR, ".media-thumb img")
        assert len(thumbs) == 1  # the PNG; the SVG is a link, never drawn from the page
        # The page is there before its image: wait for the image to have loaded (or failed).
        WebDriverWait(browser, 20).until(
            lambda b: b.execute_script("return arguments[0].complete;", thumbs[0])
        )
        width = browser.execute_script("return arguments[0].naturalWidth;", thumbs[0])
        assert width == 40 and thumbs[0].is_displayed()
        links = {a.text: a for a in browser.find_elements(By.CSS_SELECTOR, "a.media-link")}
        assert set(links) == {"photo.png", "evil.svg", "evil.html", "contract.pdf"}
        main = browser.find_element(By.TAG_NAME, "main").text
        assert "application/pdf, 17 bytes" in main
        title = browser.title
        # Opened directly, the hostile files are downloads: their scripts do not run.
        for key in ("svg", "html"):
            browser.get(f"{url}/blobs/{shas[key]}")
            assert browser.title != "pwned"
        # And drawn as an image, an SVG's script never runs either.
        browser.get(f"{url}/conversations/talk")
        browser.execute_script(
            "const i = new Image(); i.src = arguments[0]; document.body.appendChild(i);",
            f"{url}/blobs/{shas['svg']}",
        )
        time.sleep(0.3)
        assert browser.title == title


async def test_the_run_and_request_views_show_the_reference_and_size_not_base64(
    tmp_path: Path,
) -> None:
    import base64

    from tests.ui.conftest import client_for

    from tether import image

    big = png(300, 300) + bytes(100_000)  # trailing bytes: over the 64 KB threshold
    runtime = Runtime(store=f"sqlite:///{tmp_path / 'ui.db'}", version=False)
    agent = runtime.create_agent(
        id="looker", model=script_client([{"text": "A red square."}]), recording="full"
    )
    result = await agent.run(user=["what is this?", image(big)], memory_scope="look").result
    try:
        async with client_for(runtime) as client:
            page = await client.get(f"/runs/{result.run_id}")
            conversation = await client.get("/conversations/look")
    finally:
        await runtime.aclose()
    encoded = base64.b64encode(big).decode()
    import hashlib

    sha = hashlib.sha256(big).hexdigest()
    for response in (page, conversation):
        assert response.status_code == 200
        assert encoded[:200] not in response.text
        assert f"{len(big)} bytes, blob" in response.text
        assert f"/blobs/{sha}" in response.text
