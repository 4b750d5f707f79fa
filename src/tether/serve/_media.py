"""Media in a run's input: JSON parts (base64 `data` or an http(s) `url`) and
`multipart/form-data` uploads, checked before anything runs.

A client sends the bytes, never a `blob` reference: a reference names bytes already in the
store, and letting a client name them would let it probe (or reuse) what other users sent.
The body as a whole is bounded by the app's `max_body` (413 above it).
"""

from __future__ import annotations

from typing import Any

from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException
from starlette.formparsers import MultiPartException
from starlette.requests import Request

from ..errors import ContentError
from ..media import MEDIA_TYPES, audio, check_media_part, document, image, sniff
from ..web import ApiError

__all__ = ["form_body", "user_input"]

_KINDS = {media: kind for kind, types in MEDIA_TYPES.items() for media in types}


def user_input(value: Any, where: str = "input.user") -> str | list[Any]:
    """The user message of a run's input: a string, or a list of strings, text parts and media
    parts with `data` or `url`.

    Raises:
        ApiError: 400 naming the item that is wrong and why.
    """
    if isinstance(value, str):
        return value
    if not isinstance(value, list) or not value:
        raise ApiError(400, "bad_request", f"{where} must be a string or a non-empty list")
    out: list[Any] = []
    for i, item in enumerate(value):
        at = f"{where}[{i}]"
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, dict) and item.get("type") == "text":
            if not isinstance(item.get("text"), str):
                raise ApiError(400, "bad_request", f"{at}: a text part needs a string 'text'")
            out.append(item)
        elif isinstance(item, dict) and item.get("type") in MEDIA_TYPES:
            if "blob" in item:
                raise ApiError(
                    400,
                    "bad_request",
                    f"{at}: send the bytes as base64 'data' (or a 'url'), not a blob reference",
                )
            try:
                out.append(check_media_part(item, at))
            except ContentError as exc:
                raise ApiError(400, "bad_request", str(exc)) from None
        else:
            raise ApiError(
                400, "bad_request", f"{at} must be a string, a text part or a media part"
            )
    return out


async def form_body(request: Request) -> dict[str, Any]:
    """A `multipart/form-data` run request as the JSON body it stands for: the `input` field is
    the text, each file (any field name) a media part after it, `scope` the memory scope.

    Raises:
        ApiError: 400 for a form without `input` text, or a file that is no media tether sends.
    """
    try:
        form = await request.form()
    except (MultiPartException, HTTPException) as exc:
        detail = getattr(exc, "detail", None) or getattr(exc, "message", None) or exc
        raise ApiError(400, "bad_request", f"the form does not parse: {detail}") from None
    try:
        text = form.get("input")
        if not isinstance(text, str) or not text.strip():
            raise ApiError(400, "bad_request", "the form needs an 'input' field: the message text")
        parts: list[Any] = [text]
        for key, value in form.multi_items():
            if isinstance(value, UploadFile):
                parts.append(await _upload(key, value))
        body: dict[str, Any] = {"input": {"user": parts}}
        scope = form.get("scope")
        if isinstance(scope, str) and scope:
            body["scope"] = scope
    finally:
        await form.close()
    return body


async def _upload(field: str, upload: UploadFile) -> Any:
    data = await upload.read()
    name = upload.filename or field
    declared = (upload.content_type or "").split(";")[0].strip().lower()
    media_type = sniff(data) or (declared if declared == "text/plain" else None)
    kind = _KINDS.get(media_type or "")
    if kind is None:
        raise ApiError(
            400,
            "bad_request",
            f"the upload {name!r} is not an image, a document or audio tether can send "
            "(PNG, JPEG, GIF, WebP, PDF, plain text, WAV, MP3, OGG, FLAC)",
        )
    build = {"image": image, "document": document, "audio": audio}[kind]
    try:
        return build(data, media_type, name=name)
    except ContentError as exc:
        raise ApiError(400, "bad_request", f"the upload {name!r}: {exc}") from None
