"""tether.media: the part helpers, media-type sniffing, and every bad input refused up front."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import pytest

from tether import ConfigError, ContentError, Session, audio, document, image
from tether.media import check_media_part, sniff, user_parts
from tether.session import reduce

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32
JPEG = b"\xff\xd8\xff\xe0" + b"\x00" * 32
GIF = b"GIF89a" + b"\x00" * 32
WEBP = b"RIFF\x00\x00\x00\x00WEBPVP8 " + b"\x00" * 16
PDF = b"%PDF-1.7\n" + b"\x00" * 32
WAV = b"RIFF\x00\x00\x00\x00WAVEfmt " + b"\x00" * 16
MP3 = b"ID3\x04\x00" + b"\x00" * 32
OGG = b"OggS" + b"\x00" * 32
FLAC = b"fLaC" + b"\x00" * 32


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (PNG, "image/png"),
        (JPEG, "image/jpeg"),
        (GIF, "image/gif"),
        (WEBP, "image/webp"),
        (PDF, "application/pdf"),
        (WAV, "audio/wav"),
        (MP3, "audio/mpeg"),
        (b"\xff\xfb\x90\x00" + b"\x00" * 8, "audio/mpeg"),
        (OGG, "audio/ogg"),
        (FLAC, "audio/flac"),
        (b"hello world", None),
        (b"", None),
    ],
)
def test_sniff(data: bytes, expected: str | None) -> None:
    assert sniff(data) == expected


def test_image_from_bytes_is_base64_once_with_its_sniffed_type() -> None:
    part = image(PNG)
    assert part == {
        "type": "image",
        "media_type": "image/png",
        "data": base64.b64encode(PNG).decode(),
    }
    assert image(JPEG, "image/jpg", detail="low")["media_type"] == "image/jpeg"
    assert image(JPEG, detail="high")["detail"] == "high"


def test_from_a_path_names_the_part(tmp_path: Path) -> None:
    path = tmp_path / "contract.pdf"
    path.write_bytes(PDF)
    part = document(path)
    assert (part["media_type"], part["name"]) == ("application/pdf", "contract.pdf")
    assert document(str(path), name="other.pdf")["name"] == "other.pdf"
    (tmp_path / "a.wav").write_bytes(WAV)
    assert audio(tmp_path / "a.wav")["media_type"] == "audio/wav"


def test_from_urls() -> None:
    assert image("https://example.com/cat.png?x=1") == {
        "type": "image",
        "media_type": "image/png",
        "url": "https://example.com/cat.png?x=1",
    }
    assert document("http://example.com/doc", "application/pdf")["url"] == (
        "http://example.com/doc"
    )
    encoded = base64.b64encode(GIF).decode()
    assert image(f"data:image/gif;base64,{encoded}")["data"] == encoded
    assert image(f"data:;base64,{encoded}")["media_type"] == "image/gif"  # sniffed
    text = document("data:text/plain,hello%20there")
    assert base64.b64decode(text["data"]) == b"hello there"


def test_text_documents_need_their_type_declared() -> None:
    assert document(b"plain words", "text/plain")["media_type"] == "text/plain"
    with pytest.raises(ContentError, match="cannot tell the media type of these 11 bytes"):
        document(b"plain words")


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: image(PNG, "image/jpeg"), "the bytes are image/png but media_type='image/jpeg'"),
        (lambda: image(PDF), "application/pdf is a document, not an image: use document()"),
        (lambda: document(PNG), "image/png is an image, not a document: use image()"),
        (lambda: audio(b"RIFF\0\0\0\0AVI LIST"), "cannot tell the media type"),
        (lambda: image(b"<svg/>", "image/svg+xml"), "image/svg+xml is not supported"),
        (lambda: image("ftp://example.com/a.png"), "cannot fetch ftp:// URLs"),
        (lambda: image("file:///etc/passwd"), "cannot fetch file:// URLs"),
        (lambda: image("/no/such/file.png"), "cannot read image file '/no/such/file.png'"),
        (lambda: image("https://example.com/photo"), "cannot tell the media type of"),
        (lambda: image("data:image/png;base64,***"), "is not valid base64"),
        (lambda: image("data:image/png"), "needs a ','"),
        (
            lambda: image(f"data:image/gif;base64,{base64.b64encode(GIF).decode()}", "image/png"),
            "the data: URL says image/gif",
        ),
        (lambda: image(PNG, "png"), "'png' is not a media type"),
        (lambda: image(PNG, detail="max"), "detail must be"),  # type: ignore[arg-type]
        (lambda: image(12), "takes bytes, a path or a URL, not int"),  # type: ignore[arg-type]
    ],
)
def test_bad_input_is_a_content_error(call, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ContentError, match=re.escape(message)) as info:
        call()
    assert isinstance(info.value, ConfigError)


def test_hand_written_parts_are_checked() -> None:
    good = {"type": "image", "media_type": "image/png", "data": base64.b64encode(PNG).decode()}
    assert check_media_part(good) == good
    assert check_media_part({**good, "media_type": "image/PNG"})["media_type"] == "image/png"
    for bad, message in [
        ({**good, "data": "not base64!"}, "not valid base64"),
        ({**good, "media_type": "image/gif"}, "the data is image/png but media_type says"),
        ({**good, "url": "https://x/y.png"}, "exactly one of 'data', 'url' or 'blob'"),
        ({"type": "image", "media_type": "image/png"}, "exactly one of"),
        ({"type": "image", "media_type": "image/png", "url": "ftp://x"}, "must be an http"),
        ({"type": "image", "data": "aGk="}, "needs a media_type"),
        ({"type": "video", "media_type": "video/mp4", "data": "aGk="}, "not a media part"),
    ]:
        with pytest.raises(ContentError, match=message):
            check_media_part(bad)


def test_user_parts() -> None:
    assert user_parts("hi") == ("hi", None)
    part = image(PNG)
    text, parts = user_parts(["What is this?", part, {"type": "text", "text": "Be brief."}])
    assert text == "What is this?\nBe brief."
    assert parts == [
        {"type": "text", "text": "What is this?"},
        part,
        {"type": "text", "text": "Be brief."},
    ]
    with pytest.raises(ContentError, match="at least one"):
        user_parts([])
    with pytest.raises(ContentError, match=r"user\[1\]: not a media part"):
        user_parts(["a", 3])  # type: ignore[list-item]
    with pytest.raises(ContentError, match="a string or a list"):
        user_parts(5)  # type: ignore[arg-type]


def test_a_message_with_parts_folds_into_a_json_safe_session() -> None:
    import json

    part = image(PNG)
    session = reduce(
        Session(id="s"),
        {
            "type": "message",
            "role": "user",
            "text": "look",
            "parts": [{"type": "text", "text": "look"}, part],
        },
    )
    assert session.messages == [
        {"role": "user", "content": [{"type": "text", "text": "look"}, part]}
    ]
    again = Session.from_json(json.dumps(session))
    assert again.messages == session.messages


def test_a_stored_session_with_a_broken_media_part_is_refused() -> None:
    from tether.errors import SessionFormatError

    bad = {
        "id": "s",
        "messages": [{"role": "user", "content": [{"type": "image", "media_type": "image/png"}]}],
    }
    with pytest.raises(
        SessionFormatError,
        match=r"messages\[0\]\.content\[0\]: image part needs one of data, url or blob",
    ):
        Session.from_json(bad)
