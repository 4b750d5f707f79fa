"""`--attach PATH` and `/attach PATH`: a file on disk as a media part of the user message."""

from __future__ import annotations

from pathlib import Path

from ..errors import ContentError
from ..events import MediaPart
from ..media import MEDIA_TYPES, audio, document, image, sniff
from ._errors import CommandLineError

__all__ = ["attachment", "user_content"]

_KINDS = {media: kind for kind, types in MEDIA_TYPES.items() for media in types}
_TEXT_SUFFIXES = (".txt", ".md", ".text")


def attachment(path: str) -> MediaPart:
    """The media part of the file at `path`: an image, a document or audio, by what its bytes
    are (a `.txt` / `.md` file is a text document).

    Raises:
        CommandLineError: the file cannot be read, or it is no kind of media tether sends.
    """
    p = Path(path).expanduser()
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise CommandLineError(
            f"cannot read the attachment {path!r}: {exc.strerror or exc}",
            hint="Give the path of a readable file.",
        ) from exc
    media_type = sniff(data)
    if media_type is None and p.suffix.lower() in _TEXT_SUFFIXES:
        media_type = "text/plain"
    kind = _KINDS.get(media_type or "")
    if kind is None:
        raise CommandLineError(
            f"the attachment {path!r} is not an image, a document or audio tether can send",
            hint="Attach PNG, JPEG, GIF, WebP, PDF, text, WAV, MP3, OGG or FLAC files.",
        )
    build = {"image": image, "document": document, "audio": audio}[kind]
    try:
        return build(data, media_type, name=p.name)
    except ContentError as exc:
        raise CommandLineError(f"the attachment {path!r}: {exc}") from exc


def user_content(text: str, attach: list[str] | None) -> str | list[str | MediaPart]:
    """The user message with the attached files after its text (just the text without any)."""
    if not attach:
        return text
    return [text, *(attachment(path) for path in attach)]
