"""What a provider said went wrong, as our errors: a non-2xx answer (`response_error`), an error
event inside a 200 stream (`stream_error`), a body that is not an event stream (`stray_error`) and
an event of a shape its API does not document (`malformed_event`).

The four APIs wrap their errors differently (``{"error": {...}}``, Anthropic's
``{"type": "error", "error": {...}}``, Gemini's list-wrapped form, Ollama's ``{"error": "..."}``,
or a bare object); `error_object` finds the object in each. Failures of the connection itself are
mapped in `_transport`.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ..errors import (
    AuthenticationError,
    ContextLengthError,
    LLMHTTPError,
    LLMStreamError,
    RateLimitError,
)

__all__ = [
    "MALFORMED",
    "context_numbers",
    "error_object",
    "malformed_event",
    "response_error",
    "stray_error",
    "stream_error",
]

MALFORMED = (ValueError, KeyError, TypeError, AttributeError, IndexError)
"""What a parser raises on an event that is not the shape its API documents."""

_RETRY_STATUS = frozenset({408, 409, 429})

_CONTEXT_RE = re.compile(
    r"context.length|context.window|context size|context limit|maximum context|prompt is too long|"
    r"too many (input )?tokens|input token count|exceeds the maximum number of tokens|"
    r"maximum number of tokens|request_too_large|reduce the length|input is too long",
    re.IGNORECASE,
)

# The numbers each provider puts in its refusal: OpenAI "maximum context length is 128000
# tokens. However, your messages resulted in 130000 tokens", Anthropic "prompt is too long:
# 215000 tokens > 200000 maximum" (or "188240 + 21333 > 200000"), Gemini "The input token count
# (1200000) exceeds the maximum number of tokens allowed (1048576)".
_NUMBERS_RE = (
    (re.compile(r"maximum context length is (\d+).*?(?:resulted in|requested) (\d+)", re.S), 2, 1),
    (re.compile(r"(\d+) tokens > (\d+)"), 1, 2),
    (re.compile(r"(\d+) \+ \d+ > (\d+)"), 1, 2),
    (re.compile(r"input token count \((\d+)\) exceeds .*?\((\d+)\)", re.S), 1, 2),
)


def context_numbers(detail: str) -> tuple[int | None, int | None]:
    """(the request's tokens, the model's limit) from a context-length refusal's message."""
    for pattern, tokens, limit in _NUMBERS_RE:
        found = pattern.search(detail)
        if found is not None:
            return int(found.group(tokens)), int(found.group(limit))
    return None, None


_RETRYABLE_KINDS = frozenset(
    {
        "overloaded_error",
        "api_error",
        "rate_limit_error",
        "server_error",
        "internal_error",
        "rate_limit_exceeded",
        "timeout",
        "unavailable",
        "internal",
        "resource_exhausted",
        "deadline_exceeded",
        "cancelled",
        "aborted",
    }
)
_RETRYABLE_CODES = frozenset({408, 409, 429, 499, 500, 502, 503, 504, 529})


def error_object(body: Any) -> dict[str, Any] | None:
    """The error object of the bodies the four APIs send: ``{"error": {...}}``, Anthropic's
    ``{"type": "error", "error": {...}}``, Gemini's list-wrapped form, or the bare object."""
    if isinstance(body, list) and body:
        body = body[0]
    if not isinstance(body, dict):
        return None
    err = body.get("error", body)
    return err if isinstance(err, dict) else None


def _provider_message(body: Any) -> tuple[str | None, str | None]:
    """(message, kind) from a provider's error body (see `error_object`)."""
    if isinstance(body, list) and body:
        body = body[0]
    if isinstance(body, dict) and isinstance(body.get("error"), str):
        return body["error"], None  # Ollama: {"error": "model 'x' not found"}
    err = error_object(body)
    if err is None:
        return None, None
    message = err.get("message")
    kind = err.get("type") or err.get("status") or err.get("code")
    return (
        str(message) if message is not None else None,
        str(kind) if kind is not None else None,
    )


def _error_words(body: Any) -> str:
    """The machine-readable labels of an error (type, status, code, Google's ErrorInfo
    reasons) as one string to search, since the message alone is worded differently by each."""
    err = error_object(body)
    if err is None:
        return ""
    words = [str(err.get(k)) for k in ("type", "status", "code") if err.get(k) is not None]
    for detail in err.get("details") or ():
        if isinstance(detail, dict) and isinstance(detail.get("reason"), str):
            words.append(detail["reason"])
    return " ".join(words)


def _decode_body(raw: bytes) -> Any:
    text = raw.decode("utf-8", "replace")
    try:
        return json.loads(text)
    except ValueError:
        return text


_HTML_RE = re.compile(r"^\s*(<!doctype html|<html|<head|<body|<title)", re.IGNORECASE)
_TITLE_RE = re.compile(r"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL)


def _html_page(text: str) -> str | None:
    """One line for an HTML error page (a proxy's, a web server's 404): "an HTML page" and its
    title, or None when `text` is not HTML. Its markup says nothing a terminal can show."""
    if not _HTML_RE.match(text):
        return None
    title = _TITLE_RE.search(text)
    words = " ".join(title.group(1).split())[:200] if title else ""
    return f"an HTML page ({words})" if words else "an HTML page"


def response_error(
    provider: str,
    status: int,
    raw: bytes,
    *,
    env_var: str | None,
    url: str | None = None,
    hint: str | None = None,
) -> LLMHTTPError:
    """The typed error for a non-2xx answer, carrying status, parsed body and provider message.
    `url` (the request's) is named when the body is not the provider's: a server of another
    kind answered, most often a wrong `base_url`. `hint` replaces the advice on a refused
    credential (a cloud's credential chain, not an API key)."""
    body = _decode_body(raw)
    message, _kind = _provider_message(body)
    # A body of a shape we do not know (a proxy's, a compatible server's) is shown as it came.
    detail = message or raw.decode("utf-8", "replace").strip() or f"HTTP {status}"
    detail = detail[:2000]
    words = _error_words(body)
    retryable = status in _RETRY_STATUS or status >= 500
    text = f"{provider} returned {status}: {detail}"
    page = None if message else _html_page(detail)
    if page is not None:
        where = f" from {url}" if url else ""
        text = f"{provider} returned {status}{where}: {page}; check the model config's base_url"
    # Gemini answers a key it does not accept with 400 INVALID_ARGUMENT, reason API_KEY_INVALID.
    if status in (401, 403) or (status == 400 and "API_KEY_INVALID" in words):
        if hint is None:
            hint = (
                f"check {env_var} or model={{'model': ..., 'api_key': ...}}"
                if env_var
                else "check the API key"
            )
        return AuthenticationError(
            f"{text} ({hint})", status=status, body=body, provider=provider, retryable=False
        )
    if status == 429:
        return RateLimitError(text, status=status, body=body, provider=provider, retryable=True)
    if status in (400, 413, 422) and (_CONTEXT_RE.search(detail) or _CONTEXT_RE.search(words)):
        tokens, limit = context_numbers(detail)
        return ContextLengthError(
            f"{text} (shorten the conversation or the system prompt, or give the agent a "
            "history policy such as keep_tokens or summarize)",
            status=status,
            body=body,
            provider=provider,
            retryable=False,
            tokens=tokens,
            limit=limit,
        )
    return LLMHTTPError(text, status=status, body=body, provider=provider, retryable=retryable)


def stream_error(provider: str, payload: Any, *, what: str = "error event") -> LLMStreamError:
    """An error reported inside a 200 stream. Retryable when the provider calls it transient
    (overloaded, server error, unavailable, rate limit) or gives a 408/429/5xx-like code."""
    message, kind = _provider_message(payload)
    code: Any = None
    inner = payload.get("error") if isinstance(payload, dict) else None
    if isinstance(inner, dict):
        code = inner.get("code")
    retryable = (kind is not None and kind.lower() in _RETRYABLE_KINDS) or (
        isinstance(code, int) and code in _RETRYABLE_CODES
    )
    label = f" ({kind})" if kind else ""
    detail = message if message else repr(payload)
    return LLMStreamError(
        f"{provider} stream {what}{label}: {detail:.500}",
        provider=provider,
        retryable=retryable,
    )


def malformed_event(provider: str, exc: Exception) -> LLMStreamError:
    """A parser could not read an event (one of `MALFORMED`): the stream is not what its API
    documents, so rerunning the step would read the same."""
    return LLMStreamError(
        f"{provider} sent an event we could not read: {exc!r:.300}", provider=provider
    )


def stray_error(provider: str, lines: list[str], done: bool) -> LLMStreamError | None:
    """A body that carried non-SSE text. A JSON error object appended to (or sent instead of)
    the stream is a stream error; other noise after a finished response is ignored (None), and a
    body that was never an event stream says so."""
    text = "\n".join(lines).strip()
    try:
        payload: Any = json.loads(text) if text else None
    except ValueError:
        payload = None
    if isinstance(payload, list) and payload:
        payload = payload[0]
    if isinstance(payload, dict) and "error" in payload:
        return stream_error(provider, payload, what="ended with an error")
    if not done and text:
        return LLMStreamError(
            f"{provider} answered with something that is not an event stream: {text:.300}",
            provider=provider,
        )
    return None
