"""Media data out of records: what every backend does to a record or a run event before it is
written, so the bytes are kept once (in the blobs table, or the memory store's dict) and the
record keeps a reference.

`externalize(value, threshold)` walks a JSON value; each media part (`tether.blobs`) whose
inline base64 `data` decodes to more than `threshold` bytes becomes
`{"type", "media_type", "blob": sha256, "size", ...}` (its other keys kept), and the bytes are
returned beside the new value, keyed by sha256, for the backend to write in the same
transaction as the record. Parts at or under the threshold stay inline; URLs and references
pass as they are. A value with nothing to move out is returned as the same object.
"""

from __future__ import annotations

import binascii
from collections.abc import Iterable, Sequence
from typing import Any, TypeVar, cast

from pydantic_core import to_json

from .._known_media import KNOWN
from ..blobs import DEFAULT_BLOB_THRESHOLD, MEDIA_PART_TYPES
from ..errors import ConfigError, StoreError

__all__ = [
    "NewBlobs",
    "check_threshold",
    "externalize",
    "externalize_events",
    "externalize_records",
]

NewBlobs = dict[str, tuple[bytes, str]]
"""sha256 -> (bytes, media type): what a write must also keep."""

T = TypeVar("T")


def check_threshold(threshold: int) -> int:
    """`threshold` when it is an int >= 0 (`blob_threshold=` of every store).

    Raises:
        ConfigError: it is not.
    """
    if not isinstance(threshold, int) or isinstance(threshold, bool) or threshold < 0:
        raise ConfigError(
            f"blob_threshold must be an int >= 0 (bytes; default {DEFAULT_BLOB_THRESHOLD}), "
            f"not {threshold!r}"
        )
    return threshold


def externalize(value: T, threshold: int, blobs: NewBlobs, where: str = "value") -> T:
    """`value` with its large inline media moved into `blobs` (see the module docstring).

    Raises:
        StoreError: a media part's `data` is not base64, or it has no string `media_type`;
            nothing is written.
    """
    return cast(T, _walk(value, threshold, blobs, where))


def _walk(value: Any, threshold: int, blobs: NewBlobs, where: str) -> Any:
    items: Iterable[tuple[Any, Any]]
    if isinstance(value, list):
        items, path = enumerate(value), "{}[{}]"
    elif not isinstance(value, dict):
        return value
    elif value.get("type") in MEDIA_PART_TYPES:
        data = value.get("data")
        # base64 is 4 characters per 3 bytes: shorter text cannot be over the threshold.
        if isinstance(data, str) and len(data) * 3 // 4 > threshold:
            return _moved(value, data, threshold, blobs, where)
        return value
    else:
        items, path = value.items(), "{}.{}"
    # Copied on the first change only: a branch with nothing to move out stays the same object.
    changed: Any = None
    for key, item in items:
        if isinstance(item, (dict, list)):
            new = _walk(item, threshold, blobs, path.format(where, key))
            if new is not item:
                if changed is None:
                    changed = list(value) if isinstance(value, list) else dict(value)
                changed[key] = new
    return value if changed is None else changed


def _moved(
    part: dict[str, Any], data: str, threshold: int, blobs: NewBlobs, where: str
) -> dict[str, Any]:
    media_type = part.get("media_type")
    if not isinstance(media_type, str) or not media_type:
        raise StoreError(f"{where}: a {part['type']} part needs a string 'media_type'")
    try:
        raw = KNOWN.decoded(data)
    except (binascii.Error, ValueError) as exc:
        raise StoreError(
            f"{where}: the {part['type']} part's 'data' is not base64 ({exc}); nothing was written"
        ) from exc
    if len(raw) <= threshold:
        return part
    sha = KNOWN.sha256(data, raw)
    blobs.setdefault(sha, (raw, media_type))
    out = {k: v for k, v in part.items() if k != "data"}
    out["blob"] = sha
    out["size"] = len(raw)
    return out


def _too_short(value: Any, threshold: int) -> bool:
    """Whether `value` surely holds no media over `threshold`: its JSON (encoded in C) is too
    short to hold such a part's base64 `data`, which JSON spells in full (4 characters per 3
    bytes). Most records and events are, and need no walk. False when it does not encode (the
    walk, then the store's JSON check, say what is wrong)."""
    try:
        return len(to_json(value)) * 3 // 4 <= threshold
    except Exception:
        return False


def externalize_records(records: Sequence[Any], threshold: int) -> tuple[Sequence[Any], NewBlobs]:
    """`records` with large media moved out, and the bytes moved (see `externalize`). A record
    that is not a dict passes as it is, for `encode_records` to refuse."""
    blobs: NewBlobs = {}
    if isinstance(records, (str, bytes, dict)) or _too_short(records, threshold):
        return records, blobs
    out = [
        externalize(r, threshold, blobs, f"records[{i}]") if isinstance(r, dict) else r
        for i, r in enumerate(records)
    ]
    return (out, blobs) if blobs else (records, blobs)


def externalize_events(events: Sequence[Any], threshold: int) -> tuple[Sequence[Any], NewBlobs]:
    """`externalize` for run events to append (their `data`, which keeps its type, so a
    `CheckedJSON` payload stays one)."""
    blobs: NewBlobs = {}
    if isinstance(events, (str, bytes, dict)) or _too_short(events, threshold):
        return events, blobs
    out: list[Any] = []
    for i, ev in enumerate(events):
        data = ev.get("data") if isinstance(ev, dict) else None
        if isinstance(data, dict) and _may_move(data, threshold):
            new = _walk(data, threshold, blobs, f"events[{i}].data")
            if new is not data:
                ev = {**ev, "data": type(data)(new) if type(data) is not dict else new}
        out.append(ev)
    return (out, blobs) if blobs else (events, blobs)


_MEDIA_TOKENS = tuple(f'"type":"{t}"'.encode() for t in sorted(MEDIA_PART_TYPES))


def _may_move(data: dict[str, Any], threshold: int) -> bool:
    """Whether `data` may hold media to move out, judged from its JSON (written in Rust, a
    fraction of what walking it in Python costs, for the events of every turn): text too short
    to hold a string over the threshold, or without a media part holding inline data, has
    nothing to move. Escaping only lengthens a string, so the length is a safe bound."""
    try:
        text = to_json(data)
    except Exception:  # not JSON: walked, and refused later where it is encoded
        return True
    if len(text) * 3 // 4 <= threshold:
        return False
    return b'"data":"' in text and any(token in text for token in _MEDIA_TOKENS)
