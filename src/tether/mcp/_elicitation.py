"""Elicitation: a server asking the user for input in the middle of a call.

In the handshake era it arrives as an `elicitation/create` request on a stream; in the
stateless revision, inside an input-required result (SEP-2322). Either way it goes to the
source's `on_elicitation` handler, whose answer gets the requested schema's defaults for the
fields it left out (SEP-1034). Without a handler the client declines.

With `elicitation="pause"` a stateless server's form elicitation needs no live handler: the call
stops with `InputPending` holding everything needed to go on (the request, the server's
`requestState`, what it asks), all JSON-safe, and goes on later — in any process — with the
person's answer sent back as `inputResponses` with the same `requestState` (SEP-2322 makes the
request self-contained: the server keeps nothing between the rounds). A server of the handshake
era asks on a live stream, which cannot wait for a person across processes: `on_elicitation`
answers it, or the client declines, as before.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypeAlias

from ._protocol import JsonObject

__all__ = [
    "Elicitation",
    "ElicitationFailed",
    "ElicitationHandler",
    "InputPending",
    "answer_elicitation",
    "check_answer",
    "pending_input",
]

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
    return _result(answer, None if request.mode == "url" else request.schema, "handler")


_REFUSALS: Final = {
    "handler": (
        "the on_elicitation handler must return",
        "the on_elicitation handler accepted with content that is not an object:",
    ),
    "person": (
        "the answer to an elicitation is",
        "an accepted answer's content must be an object:",
    ),
}
"""How an answer that is not one is refused, by who gave it: its shape, its content."""


def _result(answer: Any, schema: Mapping[str, Any] | None, source: str) -> JsonObject:
    """The elicitation result of `answer`, from the on_elicitation handler or from a person
    answering a paused call (`source`): with the schema's defaults filled in (no content for
    a URL-mode request, `schema` None); ElicitationFailed naming what is wrong otherwise."""
    bad_shape, bad_content = _REFUSALS[source]
    if not isinstance(answer, Mapping) or answer.get("action") not in _ACTIONS:
        raise ElicitationFailed(
            f"{bad_shape} {{'action': 'accept'|'decline'|'cancel', 'content': {{...}}}}, "
            f"got {answer!r:.200}"
        )
    action = answer["action"]
    if action != "accept":
        return {"action": action}
    content = answer.get("content")
    if content is None:
        content = {}
    if not isinstance(content, Mapping):
        raise ElicitationFailed(f"{bad_content} {content!r:.200}")
    if schema is None:
        return {"action": "accept"}
    return {"action": "accept", "content": with_defaults(schema, content)}


class InputPending(Exception):
    """A call of the stateless revision that stopped to ask a person (raised by the client in
    `elicitation="pause"` mode, turned into `ToolResult.input_request` by the source)."""

    def __init__(self, request: Elicitation, state: JsonObject) -> None:
        super().__init__(request.message)
        self.request = request
        self.state = state


def pending_input(params: JsonObject, result: JsonObject, server: str) -> InputPending | None:
    """The pause for an input-required `result` of the request `params`: when it asks for one
    form elicitation, else None (anything else is answered as before)."""
    requests = result.get("inputRequests")
    if not isinstance(requests, dict) or len(requests) != 1:
        return None
    [(key, request)] = requests.items()
    if not isinstance(request, dict) or request.get("method") != "elicitation/create":
        return None
    asked = _request(request.get("params"), server)
    if asked.mode != "form":
        return None
    call = {k: v for k, v in params.items() if k != "_meta"}
    state: JsonObject = {"params": call, "key": key, "elicitation": request.get("params")}
    if "requestState" in result:
        state["requestState"] = result["requestState"]
    return InputPending(asked, state)


def check_answer(answer: Any, schema: Mapping[str, Any]) -> JsonObject:
    """A person's answer to a paused elicitation as the elicitation result the server reads
    (defaults filled in); ElicitationFailed naming what is wrong otherwise."""
    return _result(answer, schema, "person")
