"""`tether agent run ID TEXT --attach PATH`: files sent as media parts with the message, stored
once (a large one as a blob reference), and each file that cannot be sent refused up front."""

from __future__ import annotations

import base64
import hashlib
import sqlite3
from pathlib import Path
from typing import Any

from tether.cli import EXIT_USAGE

from .conftest import Project

PHOTO = b"\xff\xd8\xff\xe0" + bytes(range(256)) * 400  # a ~100 KB JPEG: over the 64 KB threshold
CONTRACT = b"%PDF-1.7\n1 0 obj << >> endobj\n%%EOF\n"


def test_attached_files_go_with_the_message_and_a_large_one_is_stored_once(
    project: Project, tmp_path: Path
) -> None:
    photo = tmp_path / "photo.jpg"
    photo.write_bytes(PHOTO)
    contract = tmp_path / "contract.pdf"
    contract.write_bytes(CONTRACT)
    for scope in ("one", "two"):
        result = project.invoke(
            "agent", "run", "echo", "what is this?", "--scope", scope,
            "--attach", str(photo), "--attach", str(contract),
        )  # fmt: skip
        assert result.exit_code == 0, result.output
        user: Any = project.stored(scope)[1]
        assert user["role"] == "user"
        text, image, document = user["content"]
        assert text == {"type": "text", "text": "what is this?"}
        assert image == {
            "type": "image",
            "media_type": "image/jpeg",
            "name": "photo.jpg",
            "blob": hashlib.sha256(PHOTO).hexdigest(),
            "size": len(PHOTO),
        }
        assert document == {
            "type": "document",
            "media_type": "application/pdf",
            "name": "contract.pdf",
            "data": base64.b64encode(CONTRACT).decode(),
        }
    conn = sqlite3.connect(project.db)
    try:
        assert conn.execute("SELECT count(*), sum(size) FROM tether_blobs").fetchone() == (
            1,
            len(PHOTO),
        )
    finally:
        conn.close()


def test_an_unreadable_attachment_is_a_usage_error_and_nothing_runs(
    project: Project, tmp_path: Path
) -> None:
    result = project.invoke(
        "agent", "run", "echo", "hi", "--scope", "s", "--attach", str(tmp_path / "missing.png")
    )
    assert result.exit_code == EXIT_USAGE
    assert "cannot read the attachment" in result.stderr and "missing.png" in result.stderr
    assert project.stored("s") == []


def test_a_file_that_is_no_media_is_refused(project: Project, tmp_path: Path) -> None:
    odd = tmp_path / "data.bin"
    odd.write_bytes(b"\x00\x01\x02 not a known format")
    result = project.invoke("agent", "run", "echo", "hi", "--scope", "s", "--attach", str(odd))
    assert result.exit_code == EXIT_USAGE
    assert "not an image, a document or audio" in result.stderr
    assert project.stored("s") == []


def test_chat_attach_sends_the_file_with_the_next_message_only(
    project: Project, tmp_path: Path
) -> None:
    photo = tmp_path / "photo.jpg"
    photo.write_bytes(PHOTO)
    piped = f"/attach {photo}\n/attach {tmp_path / 'nope.png'}\nwhat is this?\nand now?\n"
    result = project.invoke("chat", "echo", "--scope", "c", input=piped)
    assert result.exit_code == 0, result.output
    assert "Attached" in result.stderr and "image/jpeg" in result.stderr
    assert "cannot read the attachment" in result.stderr  # the chat goes on
    stored: Any = project.stored("c")
    first, second = stored[1], stored[3]
    assert [p["type"] for p in first["content"]] == ["text", "image"]
    assert first["content"][1]["blob"] == hashlib.sha256(PHOTO).hexdigest()
    assert second["content"] == [{"type": "text", "text": "and now?"}]
