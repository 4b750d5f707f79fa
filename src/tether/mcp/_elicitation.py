"""Elicitation: a server asking the user for input in the middle of a call.

In the handshake era it arrives as an `elicitation/create` request on a stream; in the
stateless revision, inside an input-required result (SEP-2322). Either way it goes to the
source's `on_elicitation` handler, whose answer gets the requested schema's defaults for the
fields it left out (SEP-1034). Without a handler the client declines.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from ._protocol import JsonObject

__all__ = ["Elicitation", "ElicitationFailed", "ElicitationHandler", "answer_elicitation"]

_ACTIONS = ("accept", "decline", "cancel")


@dataclass(frozen=True, slots=True)
class Elicitation:
    """What a server asks the user for."""

    message: str
    """Why the server asks, in its words (show it to the person)."""
    server: str
    """Which server asks: its URL or command line."""
    mode: Literal["form", "url"] = "form"
    """'form': fill `schema` in; 'url': open `url` (the data never passes through us)."""
    schema: dict[str, Any] = field(default_factory=dict)
    """The requested schema (form mode): a flat object of primitive properties."""
    url: str | None = None
    """The page to send the person to (url mode)."""
    elicitation_id: str | None = None
    """The server's id of a url-mode elicitation."""


ElicitationHandler: TypeAlias = Callable[[Elicitation], Awaitable[Mapping[str, Any]]]
"""`async def on_elicitation(request) -> {"action": "accept"|"decline"|"cancel", "content": {…}}`"""


class ElicitationFailed(Exception):
    """The handler raised or answered something that is not an elicitation result."""


def _request(params: Any, server: str) -> Elicitation:
    params = params if isinstance(params, dict) else {}
    mode: Literal["form", "url"] = "url" if params.get("mode") == "url" else "form"
    schema = params.get("requestedSchema")
    message = params.get("message")
    url = params.get("url")
    eid = params.get("elicitationId")
    return Elicitation(
        message=message if isinstance(message, str) else "",
        server=server,
        mode=mode,
        schema=schema if isinstance(schema, dict) else {},
        url=url if isinstance(url, str) else None,
        elicitation_id=eid if isinstance(eid, str) else None,
    )


def with_defaults(schema: Mapping[str, Any], content: Mapping[str, Any]) -> dict[str, Any]:
    """`content` with the default of every property it leaves out (SEP-1034)."""
    out = dict(content)
    properties = schema.get("properties")
    if isinstance(properties, dict):
        for name, spec in properties.items():
            if name not in out and isinstance(spec, dict) and "default" in spec:
                out[name] = spec["default"]
    return out


async def answer_elicitation(
    handler: ElicitationHandler | None, params: Any, server: str
) -> JsonObject:
    """The elicitation result for a server's request. Without a handler: a polite decline.
    Raises ElicitationFailed when the handler raises or answers nonsense."""
    if handler is None:
        return {"action": "decline"}
    request = _request(params, server)
    try:
        answer = await handler(request)
    except Exception as exc:
        raise ElicitationFailed(
            f"the on_elicitation handler raised {type(exc).__name__}: {exc}"
        ) from exc
    if not isinstance(answer, Mapping) or answer.get("action") not in _ACTIONS:
        raise ElicitationFailed(
            "the on_elicitation handler must return {'action': 'accept'|'decline'|'cancel', "
            f"'content': {{...}}}}, got {answer!r:.200}"
        )
    action = answer["action"]
    if action != "accept":
        return {"action": action}
    content = answer.get("content")
    if content is None:
        content = {}
    if not isinstance(content, Mapping):
        raise ElicitationFailed(
            f"the on_elicitation handler accepted with content that is not an object: "
            f"{content!r:.200}"
        )
    if request.mode == "url":
        return {"action": "accept"}
    return {"action": "accept", "content": with_defaults(request.schema, content)}
