"""What an episode loads of its scope under a history policy, and the summaries it stores.

Without a policy an episode loads the whole scope (as always). With one, it reads the scope
backwards from its tail (`MessageStore.tail`, then `load(start=, end=)` a page at a time, on the
(scope, index) key) and stops as soon as what it has is all the policy could keep:

- at the newest ``summary`` record: the summary stands for the records it `covers`, so the
  episode loads the pin, that summary and the records after what it covers;
- with `keep_last(turns=N)`: once N turns (user messages) are loaded;
- with `keep_tokens(max_input_tokens)`: once the loaded characters are well over that budget;
- else (no bound: `summarize` before its first summary, `clear_tool_results` or a custom
  processor alone): at the start of the scope.

A summary record is ``{"role": "summary", "content": [{"type": "text", "text": ...}],
"covers": [a, b], "model": ...}``: it is appended, never edited into what it covers, so the full
transcript stays in the store (and in the UI). The loaded list is checked as it is assembled:
the store validated every record when it wrote it, so the cost is that of what was loaded.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from ..errors import SessionFormatError, StoreCorruptError
from ..history import CHARS_PER_TOKEN, keep_last, keep_tokens, with_summary
from ..session import Message, _message_problem
from ..stores.message_store import MessageStore, StoredRecord, SystemRecord

__all__ = ["PAGE", "Loaded", "load_kept", "summary_record"]

PAGE = 64
"""Records read per step backwards."""

_SAFE_CPT = max(CHARS_PER_TOKEN.values()) * 1.5
"""Characters per token assumed when bounding a keep_tokens load (more than any provider)."""


@dataclass(slots=True)
class Loaded:
    """What an episode starts from: the pin, the transcript to send, and where it came from."""

    pin: SystemRecord | None
    messages: list[Message]
    seqs: list[int]
    """The store index of each of `messages` (the first may carry the summary in its head)."""
    length: int
    """The scope's length when it was read."""
    summary: dict[str, Any] | None = None
    """The newest summary record it started from, if any."""
    records_read: int = 0
    chars_read: int = 0
    extra: list[str] = field(default_factory=list)


def summary_record(text: str, covers: tuple[int, int], model: str) -> dict[str, Any]:
    """The stored form of a summary of records ``covers[0]..covers[1]`` (inclusive)."""
    return {
        "role": "summary",
        "content": [{"type": "text", "text": text}],
        "covers": [covers[0], covers[1]],
        "model": model,
    }


def _bounds(processors: Sequence[Any]) -> tuple[int | None, int | None]:
    turns = [p.turns for p in processors if isinstance(p, keep_last)]
    tokens = [p.max_input_tokens for p in processors if isinstance(p, keep_tokens)]
    return (min(turns) if turns else None, min(tokens) if tokens else None)


def _summary_covers(record: StoredRecord) -> int | None:
    covers: Any = cast(dict[str, Any], record).get("covers")
    if (
        isinstance(covers, list)
        and len(covers) == 2
        and all(isinstance(c, int) and not isinstance(c, bool) for c in covers)
    ):
        return int(covers[1])
    return None


def _chars(record: StoredRecord) -> int:
    n = 0
    for p in cast(dict[str, Any], record).get("content") or ():
        if isinstance(p, dict):
            n += sum(len(v) for v in p.values() if isinstance(v, str))
    return n


async def load_kept(store: MessageStore, scope: str, processors: Sequence[Any]) -> Loaded:
    """Read what the policy can keep of `scope` (see the module's docstring).

    Raises:
        StoreCorruptError: what was loaded is not a transcript a provider accepts.
    """
    scan = _Scan(*_bounds(processors))
    tail = getattr(store, "tail", None)
    if tail is None:  # a store without tail(): the whole scope
        start, window = 0, await store.load(scope)
    else:
        start, window = await tail(scope, PAGE)
    length = start + len(window)
    scan.read = len(window)
    i = len(window) - 1
    while not scan.walk(window, i) and start > 0:
        page_start = max(start - PAGE, 0)
        older = await store.load(scope, start=page_start, end=start)
        scan.read += len(older)
        i = len(older) - 1
        window = older + window
        start = page_start
    summary: dict[str, Any] | None = None
    keep_from = scan.cut if scan.cut is not None else 0
    if scan.summary_at is not None:
        summary = cast(dict[str, Any], window[scan.summary_at])
        first = (_summary_covers(window[scan.summary_at]) or 0) + 1
        if first < start:  # the kept turns before the summary record: bounded, read now
            before = await store.load(scope, start=first, end=start)
            scan.read += len(before)
            window = before + window
            start = first
        keep_from = first - start
    pin = await _pin(store, scope, start, window, scan)
    messages: list[Message] = []
    seqs: list[int] = []
    for k in range(keep_from, len(window)):
        record = window[k]
        if record.get("role") in ("system", "summary"):
            continue
        messages.append(cast(Message, record))
        seqs.append(start + k)
    _check(scope, messages, seqs)
    if summary is not None:
        text = str(summary["content"][0].get("text", "")) if summary.get("content") else ""
        messages = with_summary(text, messages)
        if len(messages) > len(seqs):  # the summary came as a message of its own
            seqs.insert(0, seqs[0] - 1 if seqs else length)
    return Loaded(pin, messages, seqs, length, summary, scan.read, scan.chars)


@dataclass(slots=True)
class _Scan:
    """The backward walk over what was read, from the newest record."""

    turns: int | None
    tokens: int | None
    summary_at: int | None = None
    cut: int | None = None
    """The index (in the window) of the first record kept."""
    chars: int = 0
    users: int = 0
    read: int = 0

    def walk(self, window: list[StoredRecord], i: int) -> bool:
        """Walk from `window[i]` back; True once the policy's bound or a summary is reached."""
        turns, tokens = self.turns, self.tokens
        while i >= 0:
            record = cast(dict[str, Any], window[i])
            role = record.get("role")
            if role == "summary" and _summary_covers(window[i]) is not None:
                self.summary_at = i
                return True
            self.chars += _chars(window[i])
            if role == "user":
                self.users += 1
                if (turns is not None and self.users >= turns) or (
                    tokens is not None and self.chars >= tokens * _SAFE_CPT
                ):
                    self.cut = i
                    return True
            i -= 1
        return False


async def _pin(
    store: MessageStore, scope: str, start: int, window: list[StoredRecord], scan: _Scan
) -> SystemRecord | None:
    """The pinned prompt (record 0), read on its own when the window does not reach it."""
    if start == 0:
        head = window[:1]
    else:
        head = await store.load(scope, start=0, end=1)
        scan.read += len(head)
    if head and head[0].get("role") == "system":
        return cast(SystemRecord, head[0])
    return None


def _check(scope: str, messages: list[Message], seqs: list[int]) -> None:
    """What was loaded is a transcript: valid records, and no tool result before its call."""
    calls: set[str] = set()
    for m, seq in zip(messages, seqs, strict=True):
        problem = _message_problem(m)
        if problem is None:
            for part in m["content"]:
                if part["type"] == "tool_call":
                    calls.add(part["id"])
                elif part["type"] == "tool_result" and part["id"] not in calls:
                    problem = f": the result of tool call {part['id']!r} comes without its call"
        if problem is not None:
            exc = SessionFormatError(f"record {seq}{problem}")
            raise StoreCorruptError(f"memory scope {scope!r}: {exc}") from exc
