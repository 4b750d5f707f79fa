"""What the provider adapters share about media parts (`tether.media`): data URLs, inline text
documents, and the `ContentError` for a part a provider cannot take."""

from __future__ import annotations

import base64
from typing import Any, NoReturn

from ..errors import ContentError
from ._kept import Kept

__all__ = ["MEDIA", "data_url", "inline_text", "refuse", "source_of"]

MEDIA = frozenset({"image", "document", "audio"})
"""The part types that carry media."""


def refuse(provider: str, part: Any, why: str = "") -> NoReturn:
    """Raise the ContentError for a part `provider` cannot take (before any request)."""
    kind, media_type = part["type"], part.get("media_type", "?")
    raise ContentError(
        f"{provider} cannot take {kind} parts of type {media_type}{': ' + why if why else ''}; "
        "send it to a model that takes it, or leave it out",
        provider=provider,
        part_type=kind,
        media_type=media_type,
    )


def source_of(provider: str, part: Any) -> tuple[str, str]:
    """("data", base64) or ("url", url): where the part's bytes are. A blob reference that was
    not resolved before the request is a ContentError."""
    if "data" in part:
        return "data", part["data"]
    if "url" in part:
        return "url", part["url"]
    raise ContentError(
        f"a {part['type']} part refers to blob {part.get('blob')!r}, which was not read before "
        f"the {provider} request: give the agent the store's blobs (blobs=) or send the data",
        provider=provider,
        part_type=part["type"],
        media_type=part.get("media_type"),
    )


DATA_URL_CACHE_BYTES = 64 * 1024 * 1024
"""What `data_url` keeps of the long URLs it made (and of the base64 they were made of)."""
_LONG_URL = 32 * 1024
_urls: Kept[str] = Kept(DATA_URL_CACHE_BYTES)


def data_url(part: Any) -> str:
    """The part's bytes as a ``data:`` URL (the base64 is the part's own, not re-encoded).

    A long one is kept (by the identity of the part's base64 string; `tether.llm._kept`) and
    given again for that string: the same URL object turn after turn, which lets the body's
    encoder reuse its JSON (`tether.llm._body`) instead of copying and scanning megabytes."""
    media_type, data = part["media_type"], part["data"]
    if len(data) < _LONG_URL:
        return f"data:{media_type};base64,{data}"
    url = _urls.get(data, media_type)
    if url is None:
        url = f"data:{media_type};base64,{data}"
        _urls.put(data, url, len(data) + len(url), media_type)
    return url


def inline_text(provider: str, part: Any) -> str:
    """A text/plain document's text (for providers that take documents as text)."""
    kind, value = source_of(provider, part)
    if kind == "url":
        refuse(provider, part, "a text document by URL")
    try:
        return base64.b64decode(value).decode("utf-8")
    except (ValueError, UnicodeDecodeError) as exc:
        raise ContentError(
            f"the text/plain document {part.get('name', '')!r} is not UTF-8 text: {exc}",
            provider=provider,
            part_type="document",
            media_type="text/plain",
        ) from exc
