"""MCP tool-result content as the model reads it: text, and media parts (`tether.media`).

``image`` and ``audio`` items become image / audio parts; an embedded ``resource`` with a
``blob`` becomes the part its ``mimeType`` names (images, PDFs, audio; text types decoded to
text), with ``text`` it is text; a ``resource_link`` to an http(s) URL of a media type we take
becomes a URL part (the provider fetches it), any other link a line of text naming it. Content
whose type no provider takes, or whose base64 is broken, is described in the text instead.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from ..errors import ContentError
from ..events import MediaPart
from ..media import MEDIA_TYPES, check_media_part

__all__ = ["content_parts"]

_KIND_OF = {t: kind for kind, types in MEDIA_TYPES.items() for t in types if t != "text/plain"}


def content_parts(items: Any) -> tuple[str, list[MediaPart]]:
    """The text (joined by newlines) and the media parts of an MCP ``content`` list."""
    if not isinstance(items, list):
        return "", []
    texts: list[str] = []
    media: list[MediaPart] = []
    for item in items:
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind in (None, "text") and isinstance(item.get("text"), str):
            texts.append(item["text"])
        elif kind in ("image", "audio"):
            _add(texts, media, item.get("data"), item.get("mimeType"), kind, None)
        elif kind == "resource" and isinstance(item.get("resource"), dict):
            _resource(texts, media, item["resource"])
        elif kind == "resource_link":
            _link(texts, media, item)
    return "\n".join(texts), media


def _resource(texts: list[str], media: list[MediaPart], resource: dict[str, Any]) -> None:
    uri, mime = resource.get("uri") or "", resource.get("mimeType")
    if isinstance(resource.get("text"), str):
        texts.append(resource["text"])
    elif isinstance(resource.get("blob"), str):
        blob = resource["blob"]
        if isinstance(mime, str) and mime.startswith("text/"):
            try:
                texts.append(base64.b64decode(blob, validate=True).decode("utf-8"))
                return
            except (binascii.Error, ValueError, UnicodeDecodeError):
                pass
        name = uri.rsplit("/", 1)[-1] or None
        _add(texts, media, blob, mime, None, name, uri)


def _link(texts: list[str], media: list[MediaPart], item: dict[str, Any]) -> None:
    uri, mime, name = item.get("uri") or "", item.get("mimeType"), item.get("name") or ""
    kind = _KIND_OF.get(mime) if isinstance(mime, str) else None
    web = isinstance(uri, str) and uri.startswith(("http://", "https://"))
    if kind is not None and isinstance(mime, str) and web:
        part: MediaPart = {"type": kind, "media_type": mime, "url": uri}
        if name:
            part["name"] = name
        media.append(part)
    else:
        texts.append(f"[resource link: {name} {uri}]".replace("  ", " "))


def _add(
    texts: list[str],
    media: list[MediaPart],
    data: Any,
    mime: Any,
    kind: str | None,
    name: str | None,
    uri: str = "",
) -> None:
    """A media part from base64 `data` of type `mime`, or a line saying why it is not one."""
    what = kind or "resource"
    chosen = kind or (_KIND_OF.get(mime) if isinstance(mime, str) else None)
    if chosen is None or not isinstance(data, str):
        texts.append(_described(what, mime, data, uri, "a type the model is not sent"))
        return
    raw: dict[str, Any] = {"type": chosen, "media_type": mime, "data": data}
    if name:
        raw["name"] = name
    try:
        media.append(check_media_part(raw, f"MCP {what} content"))
    except ContentError as exc:
        texts.append(_described(what, mime, data, uri, str(exc)))


def _described(what: str, mime: Any, data: Any, uri: str, why: str) -> str:
    size = len(data) if isinstance(data, str) else 0
    at = f" {uri}" if uri else ""
    return (
        f"[{what} content{at}: {mime or 'unknown type'}, {size} base64 characters, left out: {why}]"
    )
