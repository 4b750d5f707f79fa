"""Calling a remote A2A agent: its card, then JSON-RPC over httpx (SSE for a streamed message).

`A2AClient(url)` reads the card at ``{url}/.well-known/agent-card.json`` once, picks its JSON-RPC
interface of protocol 1.0, and sends messages there. `send()` yields what the agent says as it
says it (`Delta` for each text piece of an artifact) and ends with the `Reply`: the answer's
text and parts, the task's id, context and state. Every failure is an `A2AError`: a card that is
missing or unusable (`A2ACardError`), a server that cannot be reached or answers an HTTP error
(`A2AConnectionError`), a JSON-RPC error or a reply that is not A2A (`A2AProtocolError`), a task
that did not complete (`A2ATaskError`, which carries what the agent said about it).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from .._sse import SSEDecoder
from ..errors import A2ACardError, A2AConnectionError, A2AError, A2AProtocolError, A2ATaskError
from ._wire import (
    CARD_PATH,
    INTERRUPTED_STATES,
    PROTOCOL_VERSION,
    TERMINAL_STATES,
    VERSION_HEADER,
    a2a_parts,
    new_id,
    short_state,
    tether_parts,
)

__all__ = ["A2AClient", "Delta", "Reply"]

logger = logging.getLogger("tether.a2a")

_CANCELLING: set[asyncio.Task[None]] = set()
"""Cancel requests on their way (kept so they are not collected before they ran)."""


@dataclass(slots=True, frozen=True)
class Delta:
    """A piece of the answer as the agent streams it."""

    text: str


@dataclass(slots=True)
class Reply:
    """What a remote agent answered to one message."""

    text: str
    """The answer's text (its artifacts' text parts, else the agent's message)."""
    parts: list[dict[str, Any]] = field(default_factory=list)
    """The answer as tether parts: text and media (a data part as its JSON text)."""
    task_id: str | None = None
    """The remote task (None when the agent answered with a message, not a task)."""
    context_id: str | None = None
    state: str = "completed"
    """``completed`` ... as `tether.a2a._wire.short_state` writes it."""


class A2AClient:
    """One remote A2A agent.

    Args:
        url: The agent's URL: its card is at ``{url}/.well-known/agent-card.json``.
        headers: Sent with every request (``{"Authorization": "Bearer …"}``).
        timeout: Seconds any one read may wait (a streamed answer: between two events).
        http: An httpx client to use (stays the caller's); default: a new connection for
            each call, closed when it ends (so a client nobody closes leaks nothing).
    """

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float = 120.0,
        http: httpx.AsyncClient | None = None,
    ) -> None:
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise A2ACardError(f"an A2A agent's URL is http(s)://…, not {url!r:.80}", url=None)
        self.url = url.rstrip("/")
        self.headers = {VERSION_HEADER: PROTOCOL_VERSION, **dict(headers or {})}
        self.timeout = timeout
        self._http = http
        self._card: dict[str, Any] | None = None
        self._endpoint: str | None = None

    @contextlib.asynccontextmanager
    async def _session(self) -> AsyncIterator[httpx.AsyncClient]:
        if self._http is not None:
            yield self._http
            return
        async with httpx.AsyncClient(timeout=self.timeout) as http:
            yield http

    async def aclose(self) -> None:
        """Nothing to release: each call closes the connection it opened (a client passed in
        stays the caller's). Kept so the client is an async context manager."""

    async def __aenter__(self) -> A2AClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- the card ---------------------------------------------------------------------------

    async def card(self) -> dict[str, Any]:
        """The agent's card (read once).

        Raises:
            A2ACardError: no card there, not JSON, or no JSON-RPC interface of protocol 1.0.
            A2AConnectionError: the server could not be reached.
        """
        if self._card is not None:
            return self._card
        where = self.url + CARD_PATH
        try:
            async with self._session() as http:
                response = await http.get(where, headers=self.headers)
        except httpx.HTTPError as exc:
            raise A2AConnectionError(
                f"could not reach the A2A agent at {self.url}: {type(exc).__name__}: {exc}; "
                "check the URL and that its server runs",
                url=self.url,
            ) from exc
        if response.status_code != 200:
            raise A2ACardError(
                f"no agent card at {where}: HTTP {response.status_code}"
                + (" (pass its token in headers=)" if response.status_code in (401, 403) else ""),
                url=self.url,
            )
        try:
            card: dict[str, Any] = response.json()
        except ValueError as exc:
            raise A2ACardError(f"the agent card at {where} is not JSON", url=self.url) from exc
        self._endpoint = _jsonrpc_url(card, where, self.url)
        self._card = card
        return card

    @property
    def name(self) -> str:
        """The card's name (read `card()` first)."""
        return str((self._card or {}).get("name") or "agent")

    # -- calls ------------------------------------------------------------------------------

    async def _rpc(self, method: str, params: dict[str, Any]) -> Any:
        await self.card()
        assert self._endpoint is not None
        body = {"jsonrpc": "2.0", "id": new_id(), "method": method, "params": params}
        try:
            async with self._session() as http:
                response = await http.post(self._endpoint, json=body, headers=self.headers)
        except httpx.HTTPError as exc:
            raise self._unreachable(exc) from exc
        return self._result(method, self._json(response))

    def _unreachable(self, exc: Exception) -> A2AConnectionError:
        return A2AConnectionError(
            f"the A2A agent at {self.url} did not answer: {type(exc).__name__}: {exc}",
            url=self.url,
        )

    def _json(self, response: httpx.Response) -> Any:
        if response.status_code >= 400:
            raise A2AConnectionError(
                f"the A2A agent at {self.url} answered HTTP {response.status_code}: "
                f"{response.text[:300]}",
                url=self.url,
                status=response.status_code,
            )
        try:
            return response.json()
        except ValueError as exc:
            raise A2AProtocolError(
                f"the A2A agent at {self.url} answered something that is not JSON", url=self.url
            ) from exc

    def _result(self, method: str, payload: Any) -> Any:
        if not isinstance(payload, dict):
            raise A2AProtocolError(f"{method}: the answer is not a JSON-RPC object", url=self.url)
        error = payload.get("error")
        if isinstance(error, dict):
            code = error.get("code")
            raise A2AProtocolError(
                f"{method} failed at {self.url}: {error.get('message') or error} (code {code})",
                url=self.url,
                code=code if isinstance(code, int) else None,
            )
        if "result" not in payload:
            raise A2AProtocolError(f"{method}: the answer has no result", url=self.url)
        return payload["result"]

    async def get_task(self, task_id: str) -> dict[str, Any]:
        result: dict[str, Any] = await self._rpc("GetTask", {"id": task_id})
        return result

    async def cancel_task(self, task_id: str) -> dict[str, Any]:
        result: dict[str, Any] = await self._rpc("CancelTask", {"id": task_id})
        return result

    async def send(
        self,
        content: str | Sequence[Mapping[str, Any]],
        *,
        context_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> AsyncIterator[Delta | Reply]:
        """Send one user message (text, or tether text and media parts); yield the answer's
        text as it streams (`Delta`, when the card says it streams), then the `Reply`.

        Raises:
            A2ATaskError: the task ended failed, rejected or canceled, or stopped for input.
            A2AError: any other failure (see the module docstring).
        """
        card = await self.card()
        parts = [{"text": content}] if isinstance(content, str) else a2a_parts(content)
        message: dict[str, Any] = {"messageId": new_id(), "role": "ROLE_USER", "parts": parts}
        if context_id:
            message["contextId"] = context_id
        params: dict[str, Any] = {"message": message}
        if metadata:
            params["metadata"] = dict(metadata)
        if (card.get("capabilities") or {}).get("streaming"):
            async for item in self._stream(params):
                yield item
            return
        result = await self._rpc("SendMessage", params)
        yield self._reply(result)

    async def _stream(self, params: dict[str, Any]) -> AsyncIterator[Delta | Reply]:
        assert self._endpoint is not None
        body: dict[str, Any] = {
            "jsonrpc": "2.0",
            "id": new_id(),
            "method": "SendStreamingMessage",
            "params": params,
        }
        headers = {**self.headers, "Accept": "text/event-stream"}
        state = _Task()
        try:
            async with (
                self._session() as http,
                http.stream("POST", self._endpoint, json=body, headers=headers) as response,
            ):
                if "text/event-stream" not in response.headers.get("content-type", ""):
                    await response.aread()
                    yield self._reply(self._result("SendStreamingMessage", self._json(response)))
                    return
                decoder = SSEDecoder()
                async for chunk in response.aiter_bytes():
                    for event in decoder.feed(chunk):
                        for text in state.take(self._stream_result(event.data)):
                            yield Delta(text)
                for event in decoder.flush():
                    for text in state.take(self._stream_result(event.data)):
                        yield Delta(text)
        except httpx.HTTPError as exc:
            raise self._unreachable(exc) from exc
        except (asyncio.CancelledError, GeneratorExit):
            # The caller stopped waiting (its turn was cancelled): the remote task stops too.
            if state.task_id is not None and state.state not in TERMINAL_STATES:
                self._cancel_later(state.task_id)
            raise
        if state.task_id is not None and state.state not in TERMINAL_STATES | INTERRUPTED_STATES:
            # The stream ended before the task did: ask for where it stands.
            state.take({"task": await self.get_task(state.task_id)})
        yield self._finish(state)

    def _cancel_later(self, task_id: str) -> None:
        """Ask the agent to cancel `task_id`, in a task of its own (the caller's is being
        cancelled); a failure is only logged."""

        async def cancel() -> None:
            try:
                await self.cancel_task(task_id)
            except A2AError as exc:
                logger.info("could not cancel task %s at %s: %s", task_id, self.url, exc)

        task = asyncio.get_running_loop().create_task(cancel())
        _CANCELLING.add(task)
        task.add_done_callback(_CANCELLING.discard)

    def _stream_result(self, data: str) -> dict[str, Any]:
        try:
            payload = json.loads(data)
        except ValueError as exc:
            raise A2AProtocolError(
                f"the A2A agent at {self.url} streamed an event that is not JSON", url=self.url
            ) from exc
        result = self._result("SendStreamingMessage", payload)
        if not isinstance(result, dict):
            raise A2AProtocolError("a streamed result is not an object", url=self.url)
        return result

    def _reply(self, result: Any) -> Reply:
        if not isinstance(result, dict):
            raise A2AProtocolError("SendMessage: the result is not an object", url=self.url)
        state = _Task()
        list(state.take(result))
        return self._finish(state)

    def _finish(self, task: _Task) -> Reply:
        state = task.state or "TASK_STATE_COMPLETED"
        said = task.answer_parts()
        text = "".join(p["text"] for p in said if p["type"] == "text")
        if state != "TASK_STATE_COMPLETED":
            why = text or "(the agent said nothing more)"
            raise A2ATaskError(
                f"the A2A agent at {self.url} did not complete task {task.task_id}: it is "
                f"{short_state(state)}: {why}",
                url=self.url,
                task_id=task.task_id,
                context_id=task.context_id,
                state=short_state(state),
            )
        return Reply(text, said, task.task_id, task.context_id, short_state(state))


class _Task:
    """A task as its events build it: artifacts by id, the last status, a direct message."""

    __slots__ = ("artifacts", "context_id", "message", "state", "status_parts", "task_id")

    def __init__(self) -> None:
        self.task_id: str | None = None
        self.context_id: str | None = None
        self.state: str | None = None
        self.artifacts: dict[str, list[Any]] = {}
        self.status_parts: list[Any] = []
        self.message: list[Any] | None = None

    def take(self, result: Mapping[str, Any]) -> list[str]:
        """Fold one result (`{"task"}`, `{"message"}`, `{"artifactUpdate"}`,
        `{"statusUpdate"}`, or a bare task or message); the text it streams."""
        if "artifactUpdate" in result:
            update = result["artifactUpdate"] or {}
            artifact = update.get("artifact") or {}
            key = str(artifact.get("artifactId") or "")
            parts = list(artifact.get("parts") or [])
            if update.get("append") and key in self.artifacts:
                self.artifacts[key].extend(parts)
            else:
                self.artifacts[key] = parts
            self._ids(update)
            return [p["text"] for p in parts if isinstance(p, dict) and p.get("text")]
        if "statusUpdate" in result:
            update = result["statusUpdate"] or {}
            self._ids(update)
            self._status(update.get("status") or {})
            return []
        if "message" in result or "parts" in result:
            message = result.get("message", result)
            self.message = list(message.get("parts") or [])
            self.context_id = message.get("contextId") or self.context_id
            self.state = "TASK_STATE_COMPLETED"
            return []
        task = result.get("task", result)
        self.task_id = task.get("id") or self.task_id
        self.context_id = task.get("contextId") or self.context_id
        self._status(task.get("status") or {})
        for artifact in task.get("artifacts") or []:
            self.artifacts[str(artifact.get("artifactId") or "")] = list(
                artifact.get("parts") or []
            )
        return []

    def _ids(self, update: Mapping[str, Any]) -> None:
        self.task_id = update.get("taskId") or self.task_id
        self.context_id = update.get("contextId") or self.context_id

    def _status(self, status: Mapping[str, Any]) -> None:
        state = status.get("state")
        if isinstance(state, str) and state:
            self.state = state
        message = status.get("message")
        if isinstance(message, dict):
            self.status_parts = list(message.get("parts") or [])

    def answer_parts(self) -> list[dict[str, Any]]:
        """The answer: the artifacts' parts, else the direct message's, else the last status
        message's (what a failed or input-required task says), as tether parts."""
        raw: list[Any] = [p for parts in self.artifacts.values() for p in parts]
        if not raw:
            raw = self.message if self.message else self.status_parts
        if not raw:
            return []
        try:
            return tether_parts(raw, "the answer")
        except A2AError:
            # A file no model takes: its name and type, as text.
            return [{"type": "text", "text": _describe(p)} for p in raw]


def _describe(part: Any) -> str:
    if isinstance(part, dict) and isinstance(part.get("text"), str):
        return str(part["text"])
    if isinstance(part, dict) and "data" in part:
        return json.dumps(part["data"], ensure_ascii=False, sort_keys=True)
    if isinstance(part, dict):
        name = part.get("filename") or part.get("url") or "a file"
        return f"[{name} ({part.get('mediaType') or 'unknown type'})]"
    return str(part)


def _jsonrpc_url(card: Any, where: str, url: str) -> str:
    """The card's JSON-RPC interface of protocol 1.x."""
    if not isinstance(card, dict) or not isinstance(card.get("name"), str):
        raise A2ACardError(f"the document at {where} is not an agent card (no name)", url=url)
    interfaces = card.get("supportedInterfaces")
    if not isinstance(interfaces, list):
        version = card.get("protocolVersion")
        raise A2ACardError(
            f"the agent card at {where} lists no supportedInterfaces"
            + (f" (it speaks A2A {version}; tether speaks {PROTOCOL_VERSION})" if version else ""),
            url=url,
        )
    for item in interfaces:
        if not isinstance(item, dict) or item.get("protocolBinding") != "JSONRPC":
            continue
        version = str(item.get("protocolVersion") or "")
        if version.split(".")[0] == PROTOCOL_VERSION.split(".")[0] and isinstance(
            item.get("url"), str
        ):
            return str(item["url"])
    raise A2ACardError(
        f"the agent card at {where} offers no JSON-RPC interface of A2A {PROTOCOL_VERSION}",
        url=url,
    )
