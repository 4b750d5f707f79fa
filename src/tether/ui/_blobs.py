"""`GET /blobs/{sha256}`: media bytes from the runtime's blob store, served inert.

Only the raster images browsers decode without running anything (PNG, JPEG, GIF, WebP) are
served under their own type, for `<img>` thumbnails. Everything else — an SVG, an HTML file,
a PDF, audio — is a download: `Content-Disposition: attachment` and a sandboxing
Content-Security-Policy, and markup types are sent as `application/octet-stream`, so no byte of
a stored file is ever run as this app's page. `X-Content-Type-Options: nosniff` on all of them.
"""

from __future__ import annotations

import re
from typing import Any

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from ..blobs import BlobStore, is_blob_key
from ..errors import BlobCorruptError, BlobNotFoundError

__all__ = ["SAFE_IMAGES", "blob_response", "serve_blob"]

SAFE_IMAGES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
"""Served under their own type, displayable inline."""

DOWNLOAD_POLICY = "sandbox; default-src 'none'"
"""The Content-Security-Policy of a download: opened anyway, it runs nothing and loads nothing."""

_MARKUP = re.compile(r"(html|xml|javascript|ecmascript|svg)", re.I)
_NAME = re.compile(r"[^A-Za-z0-9._-]+")


def blob_response(data: bytes, media_type: str, name: str | None = None) -> Response:
    """The response that serves `data` (stored as `media_type`) inert."""
    headers = {"x-content-type-options": "nosniff"}
    if media_type in SAFE_IMAGES:
        return Response(data, media_type=media_type, headers=headers)
    served = "application/octet-stream" if _MARKUP.search(media_type) else media_type
    filename = _NAME.sub("_", name or "download").strip("._") or "download"
    headers["content-disposition"] = f'attachment; filename="{filename}"'
    headers["content-security-policy"] = DOWNLOAD_POLICY
    return Response(data, media_type=served, headers=headers)


async def serve_blob(request: Request, blobs: Any) -> Response:
    """The blob the path names, or 404 (no such blob, not a key, a store without blobs)."""
    sha = request.path_params["sha"]
    if not is_blob_key(sha) or not isinstance(blobs, BlobStore):
        return PlainTextResponse("no such blob", status_code=404)
    info = await blobs.info(sha)
    if info is None:
        return PlainTextResponse("no such blob", status_code=404)
    try:
        data = await blobs.get(sha)
    except BlobNotFoundError:
        return PlainTextResponse("no such blob", status_code=404)
    except BlobCorruptError as exc:
        return PlainTextResponse(str(exc), status_code=500)
    return blob_response(data, info.media_type, request.query_params.get("name"))
