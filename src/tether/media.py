"""Images, documents and audio in messages: the part shape and `image()` / `document()` / `audio()`.

A media part is a plain JSON object in a message's ``content``, beside text parts:

```python
{"type": "image" | "document" | "audio", "media_type": "image/png",
 "data": "<base64>"}          # the bytes, inline
 # or "url": "https://…"      (the provider fetches it)
 # or "blob": "<sha256 hex>"  (a reference into a store's blobs; see tether.blobs)
 # optional: "name" (a file name), "detail" (images: "low" | "high" | "auto")
```

The helpers build one from bytes, a path, an ``http(s)`` URL or a ``data:`` URL, sniffing the
media type from the bytes' magic numbers when it is not given (and refusing a declared type the
bytes contradict). The bytes are base64-encoded once, here; nothing re-encodes them per turn.

```python
await agent.run_turn(session, ["What is in this picture?", image("photo.jpg")])
```

Every mistake is a `ContentError` (a `ConfigError`) raised before anything is sent or stored.
"""

from __future__ import annotations

import base64
import binascii
import mimetypes
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, TypeAlias, cast
from urllib.parse import unquote_to_bytes

from ._known_media import KNOWN, decode_base64
from .errors import ContentError
from .events import MediaPart, Part

__all__ = [
    "MEDIA_TYPES",
    "MediaKind",
    "UserContent",
    "audio",
    "check_media_part",
    "document",
    "image",
    "media_size",
    "sniff",
    "user_parts",
]

MediaKind: TypeAlias = Literal["image", "document", "audio"]

MEDIA_TYPES: dict[MediaKind, frozenset[str]] = {
    "image": frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"}),
    "document": frozenset({"application/pdf", "text/plain"}),
    "audio": frozenset({"audio/wav", "audio/mpeg", "audio/ogg", "audio/flac"}),
}
"""The media types each kind of part takes (what at least one provider accepts)."""

_ALIASES = {
    "image/jpg": "image/jpeg",
    "audio/x-wav": "audio/wav",
    "audio/wave": "audio/wav",
    "audio/vnd.wave": "audio/wav",
    "audio/mp3": "audio/mpeg",
    "audio/x-flac": "audio/flac",
}

_KIND_OF = {t: kind for kind, types in MEDIA_TYPES.items() for t in types}

UserContent: TypeAlias = "str | Sequence[str | Part | MediaPart]"
"""What a turn takes as the user's message: text, or a list of strings and parts."""


def sniff(data: bytes) -> str | None:
    """The media type the first bytes of `data` announce (PNG, JPEG, GIF, WebP, PDF, WAV, MP3,
    OGG, FLAC), or None."""
    head = data[:16]
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if head.startswith(b"RIFF") and head[8:12] == b"WEBP":
        return "image/webp"
    if head.startswith(b"RIFF") and head[8:12] == b"WAVE":
        return "audio/wav"
    if head.startswith(b"%PDF-"):
        return "application/pdf"
    if head.startswith(b"ID3") or (len(head) > 1 and head[0] == 0xFF and head[1] & 0xE0 == 0xE0):
        return "audio/mpeg"
    if head.startswith(b"OggS"):
        return "audio/ogg"
    if head.startswith(b"fLaC"):
        return "audio/flac"
    return None


def image(
    src: bytes | str | os.PathLike[str],
    media_type: str | None = None,
    *,
    name: str | None = None,
    detail: Literal["low", "high", "auto"] | None = None,
) -> MediaPart:
    """An image part (PNG, JPEG, GIF or WebP) from bytes, a path, an http(s) URL or a data: URL.

    `detail` goes to the providers that take it (OpenAI); the others ignore it.

    Raises:
        ContentError: the path cannot be read, the URL is not http(s) or data:, the bytes are
            not an image, or they contradict `media_type`.
    """
    part = _part("image", src, media_type, name)
    if detail is not None:
        if detail not in ("low", "high", "auto"):
            raise ContentError(f"image detail must be 'low', 'high' or 'auto', not {detail!r}")
        part["detail"] = detail
    return part


def document(
    src: bytes | str | os.PathLike[str], media_type: str | None = None, *, name: str | None = None
) -> MediaPart:
    """A document part (a PDF, or plain text with ``media_type="text/plain"``).

    Raises:
        ContentError: as `image()`.
    """
    return _part("document", src, media_type, name)


def audio(
    src: bytes | str | os.PathLike[str], media_type: str | None = None, *, name: str | None = None
) -> MediaPart:
    """An audio part (WAV, MP3, OGG or FLAC).

    Raises:
        ContentError: as `image()`.
    """
    return _part("audio", src, media_type, name)


def _part(kind: MediaKind, src: Any, media_type: str | None, name: str | None) -> MediaPart:
    declared = _normal(media_type) if media_type is not None else None
    if isinstance(src, (bytes, bytearray, memoryview)):
        data = bytes(src)
    elif isinstance(src, str) and src.startswith(("http://", "https://")):
        return _url_part(kind, src, declared, name)
    elif isinstance(src, str) and src[:5].lower() == "data:":
        data, in_url = _data_url(src)
        if declared is None:
            declared = in_url
        elif in_url is not None and in_url != declared:
            raise ContentError(
                f"the data: URL says {in_url} but media_type={media_type!r} was given"
            )
    elif isinstance(src, (str, os.PathLike)):
        text = os.fspath(src)
        if isinstance(text, str) and "://" in text:
            scheme = text.split("://", 1)[0]
            raise ContentError(
                f"cannot fetch {scheme}:// URLs for a {kind} part: give an http(s) URL, a "
                "data: URL, a path or the bytes"
            )
        path = Path(text)
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise ContentError(
                f"cannot read {kind} file {text!r}: {exc.strerror or exc}; check the path"
            ) from exc
        if name is None:
            name = path.name
    else:
        raise ContentError(f"{kind}() takes bytes, a path or a URL, not {type(src).__name__}")
    found = sniff(data)
    if declared is not None and found is not None and declared != found:
        raise ContentError(
            f"the bytes are {found} but media_type={media_type!r} was given: "
            "leave media_type out or fix it"
        )
    chosen = declared or found
    if chosen is None:
        raise ContentError(
            f"cannot tell the media type of these {len(data)} bytes: pass media_type= "
            f"(a {kind} takes {', '.join(sorted(MEDIA_TYPES[kind]))})"
        )
    _check_kind(kind, chosen)
    raw = bytes(data)
    text = base64.b64encode(raw).decode("ascii")
    KNOWN.remember(text, raw)  # the stores and the first request need not decode it again
    part: MediaPart = {"type": kind, "media_type": chosen, "data": text}
    if name is not None:
        part["name"] = name
    return part


def _url_part(kind: MediaKind, url: str, declared: str | None, name: str | None) -> MediaPart:
    chosen = declared
    if chosen is None:
        guessed, _ = mimetypes.guess_type(url.split("?", 1)[0].split("#", 1)[0])
        chosen = _normal(guessed) if guessed else None
    if chosen is None:
        raise ContentError(f"cannot tell the media type of {url!r} from its name: pass media_type=")
    _check_kind(kind, chosen)
    part: MediaPart = {"type": kind, "media_type": chosen, "url": url}
    if name is not None:
        part["name"] = name
    return part


def _data_url(url: str) -> tuple[bytes, str | None]:
    header, sep, payload = url[5:].partition(",")
    if not sep:
        raise ContentError("a data: URL needs a ',' before its data")
    params = header.split(";")
    media_type = _normal(params[0]) if params[0] else None
    if "base64" in (p.strip().lower() for p in params[1:]):
        return _b64decode(payload, "the data: URL"), media_type
    return unquote_to_bytes(payload), media_type


def _b64decode(text: str, where: str) -> bytes:
    try:
        return decode_base64(text)
    except (binascii.Error, ValueError) as exc:
        raise ContentError(f"{where} is not valid base64: {exc}") from exc


def _normal(media_type: str) -> str:
    if not isinstance(media_type, str) or "/" not in media_type:
        raise ContentError(f"{media_type!r} is not a media type (like 'image/png')")
    lowered = media_type.split(";", 1)[0].strip().lower()
    return _ALIASES.get(lowered, lowered)


def _check_kind(kind: MediaKind, media_type: str) -> None:
    if media_type in MEDIA_TYPES[kind]:
        return
    other = _KIND_OF.get(media_type)
    if other is not None:
        helper = f"{other}()"
        raise ContentError(f"{media_type} is {_a(other)}, not {_a(kind)}: use {helper}")
    raise ContentError(
        f"{media_type} is not supported in {_a(kind)} part "
        f"(supported: {', '.join(sorted(MEDIA_TYPES[kind]))})"
    )


def _a(kind: str) -> str:
    return f"an {kind}" if kind[0] in "aeiou" else f"a {kind}"


def media_size(part: Any) -> int:
    """The decoded size of a media part's bytes: from its base64 (no decoding), its blob's
    recorded ``size``, or 0 for a URL (the provider fetches it)."""
    data: str | None = part.get("data")
    if data is None:
        return int(part.get("size", 0))
    return len(data) * 3 // 4 - data[-2:].count("=")


def check_media_part(part: Any, where: str = "part") -> MediaPart:
    """`part` when it is a well-formed media part (its base64 checked once); else ContentError.

    Used on parts a caller writes by hand (the helpers' parts are right by construction)."""
    if not isinstance(part, dict) or part.get("type") not in MEDIA_TYPES:
        raise ContentError(f"{where}: not a media part: {part!r:.80}")
    kind = part["type"]
    media_type = part.get("media_type")
    if not isinstance(media_type, str):
        raise ContentError(f"{where}: a {kind} part needs a media_type string")
    normal = _normal(media_type)
    _check_kind(kind, normal)
    sources = [k for k in ("data", "url", "blob") if k in part]
    if len(sources) != 1:
        raise ContentError(
            f"{where}: a {kind} part carries exactly one of 'data', 'url' or 'blob' "
            f"(it has {', '.join(sources) or 'none'})"
        )
    value = part[sources[0]]
    if not isinstance(value, str):
        raise ContentError(f"{where}.{sources[0]} must be a string")
    if sources[0] == "data":
        try:
            found = sniff(KNOWN.decoded(value))  # decoded once, by whoever needs it first
        except (binascii.Error, ValueError) as exc:
            raise ContentError(f"{where}.data is not valid base64: {exc}") from exc
        if found is not None and found != normal:
            raise ContentError(f"{where}: the data is {found} but media_type says {media_type}")
    elif sources[0] == "url" and not value.startswith(("http://", "https://")):
        raise ContentError(f"{where}.url must be an http(s) URL, not {value[:40]!r}")
    if normal != media_type:
        part = {**part, "media_type": normal}
    return cast(MediaPart, part)


def user_parts(content: UserContent) -> tuple[str, list[Part] | None]:
    """A turn's user message as (its text, its parts): parts is None for plain text (the
    common case, kept exactly as before), else the text and media parts in order.

    Raises:
        ContentError: an item that is not a string, a text part or a media part.
    """
    if isinstance(content, str):
        return content, None
    if not isinstance(content, Sequence):
        raise ContentError(
            f"a user message is a string or a list of strings and parts, not "
            f"{type(content).__name__}"
        )
    parts: list[Any] = []
    texts: list[str] = []
    item: Any
    for i, item in enumerate(content):
        if isinstance(item, str):
            parts.append({"type": "text", "text": item})
            texts.append(item)
        elif isinstance(item, dict) and item.get("type") == "text":
            if not isinstance(item.get("text"), str):
                raise ContentError(f"user[{i}]: a text part needs a 'text' string")
            parts.append({"type": "text", "text": item["text"]})
            texts.append(item["text"])
        else:
            parts.append(check_media_part(item, f"user[{i}]"))
    if not parts:
        raise ContentError("a user message needs at least one string or part")
    return "\n".join(texts), parts
