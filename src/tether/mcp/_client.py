"""The MCP client: which revision the server speaks, timed requests, cancellation on the wire,
multi round-trip requests, and the one quiet reconnect after the server lost the session."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Literal, TypeVar

from ..errors import McpAuthError, McpCallError
from ._elicitation import (
    ElicitationFailed,
    ElicitationHandler,
    InputPending,
    answer_elicitation,
    pending_input,
)
from ._protocol import (
    HANDSHAKE_VERSIONS,
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_PROTOCOL_VERSION,
    META_SERVER_INFO,
    MODERN_ERRORS,
    MODERN_VERSION,
    NAMED_METHODS,
    PROTOCOL_VERSIONS,
    UNSUPPORTED_VERSION,
    Channel,
    ChannelError,
    JsonObject,
    RpcError,
    ServerRequestHandler,
    SessionLost,
    method_not_found,
    paused_clock,
    request_clock,
)

if TYPE_CHECKING:
    from ..signals import AbortSignal
    from ..tracing import Tracer

_LOG_LEVEL = "io.modelcontextprotocol/logLevel"
"""The request `_meta` key that asks for the request's log messages, from this level up."""

ProgressHandler = Callable[[float, float | None, str | None], None]
"""Takes one progress notification: progress, total, message."""

__all__ = ["Aborted", "McpClient", "VersionRefused", "abortable"]

T = TypeVar("T")

_CANCEL_TIMEOUT = 5.0
"""Seconds a `notifications/cancelled` may take; it is a courtesy, never worth a hang."""
_MAX_INPUT_ROUNDS = 16
"""Input-required answers one request may give before we call the server broken."""
_PROBE_STATUSES = frozenset(range(400, 500)) - {401, 403, 407, 408, 429}
"""HTTP statuses without a modern error body that mark a server of the handshake era (a
refusal to authorize, a timeout or a rate limit says nothing about the era)."""


class Aborted(Exception):
    """The caller's abort signal fired while we waited."""


class VersionRefused(Exception):
    """The server speaks no protocol version we do."""

    def __init__(self, version: object) -> None:
        super().__init__(
            f"the server answered protocol version {version!r}, which tether does not speak "
            f"(it speaks {', '.join(PROTOCOL_VERSIONS)})"
        )
        self.version = version


async def abortable(aw: Awaitable[T], signal: AbortSignal | None) -> T:
    """Await `aw`, raising `Aborted` (after cancelling it) if `signal` fires first.

    Runs `aw` as its own task so an abort cancels exactly that work; cancelling the caller
    cancels it too (asyncio forwards a cancel to the awaited task).
    """
    if signal is None:
        return await aw
    if signal.aborted:
        if asyncio.iscoroutine(aw):
            aw.close()
        raise Aborted
    task = asyncio.ensure_future(aw)
    fired = False

    def on_abort() -> None:
        nonlocal fired
        fired = True
        task.cancel()

    remove = signal.add_callback(on_abort)
    try:
        return await task
    except asyncio.CancelledError:
        current = asyncio.current_task()
        if fired and (current is None or current.cancelling() == 0):
            raise Aborted from None
        raise
    finally:
        remove()


class McpClient:
    """One connection to one server. It speaks the stateless revision to a server that does
    and the `initialize` handshake to one that does not (the verdict is kept for the
    connection's reconnects). A lost session is replaced, once per request, by a fresh
    handshake on a fresh channel."""

    def __init__(
        self,
        make_channel: Callable[[ServerRequestHandler], Channel],
        *,
        timeout: float | None,
        timeout_ms: int,
        client_info: JsonObject,
        handshake_timeout: float | None,
        handshake_timeout_ms: int,
        label: str = "the MCP server",
        on_elicitation: ElicitationHandler | None = None,
        probe_timeout: float | None = None,
        on_close: Callable[[], Awaitable[None]] | None = None,
        pause_elicitation: bool = False,
    ) -> None:
        self._make_channel = make_channel
        self.timeout = timeout
        self._timeout_ms = timeout_ms
        self.handshake_timeout = handshake_timeout
        self.handshake_timeout_ms = handshake_timeout_ms
        self._client_info = client_info
        self._label = label
        self._on_elicitation = on_elicitation
        self._pause_elicitation = pause_elicitation and on_elicitation is None
        """A form elicitation of a 2026-07-28 server stops the call (`InputPending`) instead
        of going to a live handler: the caller keeps what it needs to go on later."""
        self._probe_timeout = probe_timeout
        """stdio only: how long the `server/discover` probe may go unanswered before the server
        is taken for one of the handshake era (which may ignore what it does not know)."""
        self._on_close = on_close
        self._channel: Channel | None = None
        self._ids = itertools.count(1)
        self._reconnect_lock = asyncio.Lock()
        self._reconnecting: asyncio.Future[Channel] | None = None
        """The handshake of a reconnect in flight; `aclose()` cancels it."""
        self._background: set[asyncio.Task[None]] = set()
        self._listening: dict[str, tuple[ProgressHandler, Tracer | None]] = {}
        """The calls in flight that asked for progress, by progressToken (their logs go to
        the latest one's tracer)."""
        self._closed = False
        self.era: Literal["modern", "legacy"] | None = None
        self.stage = "server/discover"
        """The step of connecting in progress (what a failure to connect names)."""
        self.protocol_version: str | None = None
        self.capabilities: JsonObject = {}
        self.server_info: JsonObject = {}
        self.instructions: str | None = None
        self.reconnects = 0

    @property
    def channel(self) -> Channel | None:
        return self._channel

    @property
    def client_capabilities(self) -> JsonObject:
        if self._on_elicitation is None:
            return {}
        return {"elicitation": {"form": {}, "url": {}}}

    def _modern_capabilities(self) -> JsonObject:
        """What a 2026-07-28 request declares: a paused call can take a form's answer later."""
        if self._pause_elicitation:
            return {"elicitation": {"form": {}}}
        return self.client_capabilities

    # -- connecting --------------------------------------------------------------------------

    async def open(self) -> None:
        """Connect: the stateless revision if the server speaks it, else the `initialize`
        handshake. Raises ChannelError / RpcError / TimeoutError / VersionRefused /
        McpAuthError and leaves nothing open when it does."""
        self._channel = await self._handshake()

    async def _handshake(self) -> Channel:
        channel = self._make_channel(self._serve)
        try:
            await channel.open()
            if self.era == "modern":
                channel.protocol_version = MODERN_VERSION  # stateless: nothing to set up
                return channel
            if self.era is None:
                discovered = await self._probe(channel)
                if discovered is not None:
                    self._adopt(channel, discovered)
                    return channel
            try:
                await self._initialize(channel)
            except RpcError as exc:
                # A server that names its versions on `initialize` is of the stateless era
                # after all (a probe that timed out on a slow start, say): probe once more.
                if self.era is not None or exc.code != UNSUPPORTED_VERSION:
                    raise
                discovered = await self._probe(channel, final=True)
                if discovered is None:
                    raise
                self._adopt(channel, discovered)
                return channel
            await channel.listen()
        except TimeoutError as exc:
            silence = channel.silence()
            await channel.aclose()
            if silence is None:
                raise
            why = f"no answer within {self.handshake_timeout_ms} ms; {silence}"
            raise ChannelError(why) from exc
        except BaseException:
            await channel.aclose()
            raise
        return channel

    def _envelope(self) -> JsonObject:
        return {
            META_PROTOCOL_VERSION: MODERN_VERSION,
            META_CLIENT_INFO: self._client_info,
            META_CLIENT_CAPABILITIES: self._modern_capabilities(),
        }

    async def _probe(self, channel: Channel, *, final: bool = False) -> JsonObject | None:
        """`server/discover` in the stateless revision: its result when the server speaks the
        revision, None when it is of the handshake era. Only positive evidence (a result that
        lists 2026-07-28, or an error only the stateless era defines) counts as modern."""
        self.stage = "server/discover"
        channel.protocol_version = MODERN_VERSION
        timeout = self.handshake_timeout
        if self._probe_timeout is not None and not final:
            timeout = self._probe_timeout if timeout is None else min(timeout, self._probe_timeout)
        for attempt in range(2):
            message = self._message("server/discover", {"_meta": self._envelope()})
            try:
                async with request_clock(timeout):
                    response = await channel.request(message)
            except TimeoutError:
                if self._probe_timeout is None or final:
                    raise
                self._legacy(channel)
                return None  # stdio: a server of that era may stay silent
            except ChannelError as exc:
                if exc.status in _PROBE_STATUSES:
                    self._legacy(channel)
                    return None
                raise
            error = response.get("error")
            if not attempt and isinstance(error, dict) and _names_ours(error):
                continue  # the server names 2026-07-28 among its versions: ask once more
            break
        error = response.get("error")
        if isinstance(error, dict):
            code = error.get("code")
            if code == UNSUPPORTED_VERSION and _names_ours(error):
                raise RpcError(code, str(error.get("message", "")), error.get("data"))
            if code == UNSUPPORTED_VERSION:
                data = error.get("data")
                supported = data.get("supported") if isinstance(data, dict) else None
                if isinstance(supported, list) and not any(
                    v in HANDSHAKE_VERSIONS for v in supported
                ):
                    raise VersionRefused(supported)
                self._legacy(channel)
                return None
            if code in MODERN_ERRORS:
                raise RpcError(code, str(error.get("message", "")), error.get("data"))
            self._legacy(channel)
            return None
        result = response.get("result")
        if not isinstance(result, dict):
            self._legacy(channel)
            return None
        versions = result.get("supportedVersions")
        if isinstance(versions, list) and MODERN_VERSION in versions:
            return result
        self._legacy(channel)
        return None

    def _legacy(self, channel: Channel) -> None:
        channel.protocol_version = None

    def _adopt(self, channel: Channel, discovered: JsonObject) -> None:
        channel.protocol_version = MODERN_VERSION
        self.era = "modern"
        self.protocol_version = MODERN_VERSION
        caps = discovered.get("capabilities")
        self.capabilities = caps if isinstance(caps, dict) else {}
        meta = discovered.get("_meta")
        info = meta.get(META_SERVER_INFO) if isinstance(meta, dict) else None
        if not isinstance(info, dict):
            info = discovered.get("serverInfo")  # where servers before spec PR #3002 put it
        self.server_info = info if isinstance(info, dict) else {}
        instructions = discovered.get("instructions")
        self.instructions = instructions if isinstance(instructions, str) else None

    async def _initialize(self, channel: Channel) -> None:
        self.stage = "initialize"
        result = await self._round_trip(
            channel,
            "initialize",
            {
                "protocolVersion": HANDSHAKE_VERSIONS[0],
                "capabilities": self.client_capabilities,
                "clientInfo": self._client_info,
            },
            cancellable=False,  # the spec forbids cancelling initialize
            handshake=True,
        )
        version = result.get("protocolVersion")
        if version not in HANDSHAKE_VERSIONS:
            raise VersionRefused(version)
        channel.protocol_version = version
        await self._timed(channel.notify({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        self.era = "legacy"
        self.protocol_version = version
        caps = result.get("capabilities")
        self.capabilities = caps if isinstance(caps, dict) else {}
        info = result.get("serverInfo")
        self.server_info = info if isinstance(info, dict) else {}
        instructions = result.get("instructions")
        self.instructions = instructions if isinstance(instructions, str) else None

    # -- what the server asks of us ----------------------------------------------------------

    def _notified(self, message: JsonObject) -> None:
        """A notification from the server: progress goes to the call that asked for it (by
        its token), a log message becomes an `mcp` trace record of the latest such call."""
        method = message.get("method")
        params = message.get("params")
        if not isinstance(params, dict):
            return
        if method == "notifications/progress":
            listener = self._listening.get(str(params.get("progressToken")))
            progress = params.get("progress")
            if listener is None or not isinstance(progress, int | float):
                return
            total = params.get("total")
            note = params.get("message")
            listener[0](
                float(progress),
                float(total) if isinstance(total, int | float) else None,
                note if isinstance(note, str) else None,
            )
        elif method == "notifications/message" and self._listening:
            tracer = next(reversed(self._listening.values()))[1]
            if tracer is not None:
                data = {"server": self._label, "level": params.get("level")}
                data.update(logger=params.get("logger"), data=params.get("data"))
                tracer.record("mcp", "log", data, buffer=True)

    async def _serve(self, message: JsonObject) -> JsonObject:
        """Answer a request the server sent on a stream (the handshake era): ping, an
        elicitation, and a JSON-RPC "method not found" for anything else. A notification
        (no id) is read and answers nothing (an empty dict)."""
        if "id" not in message:
            self._notified(message)
            return {}
        method = message.get("method")
        if method == "ping":
            return {"jsonrpc": "2.0", "id": message.get("id"), "result": {}}
        if method == "elicitation/create":
            try:
                async with paused_clock():  # the call waits on a person, not on the server
                    result = await answer_elicitation(
                        self._on_elicitation, message.get("params"), self._label
                    )
            except ElicitationFailed as exc:
                error = {"code": -32603, "message": str(exc)}
                return {"jsonrpc": "2.0", "id": message.get("id"), "error": error}
            return {"jsonrpc": "2.0", "id": message.get("id"), "result": result}
        return method_not_found(message)

    async def _fulfil(self, requests: object) -> JsonObject | None:
        """Our answers to an input-required result's `inputRequests` (the stateless revision)."""
        if requests is None:
            return None
        if not isinstance(requests, dict):
            raise ChannelError("the server asked for input with an inputRequests that is not a map")
        answers: JsonObject = {}
        for key, request in requests.items():
            method = request.get("method") if isinstance(request, dict) else None
            if method != "elicitation/create":
                raise ChannelError(
                    f"the server asked for {method!r}, which tether does not provide (it "
                    "declares only elicitation, and only with on_elicitation=)"
                )
            answers[key] = await answer_elicitation(
                self._on_elicitation, request.get("params"), self._label
            )
        return answers

    # -- requests ----------------------------------------------------------------------------

    async def _timed(self, aw: Awaitable[T], *, handshake: bool = False) -> T:
        async with request_clock(self.handshake_timeout if handshake else self.timeout):
            return await aw

    def _message(self, method: str, params: JsonObject | None) -> JsonObject:
        message: JsonObject = {"jsonrpc": "2.0", "id": next(self._ids), "method": method}
        if params is not None:
            message["params"] = params
        return message

    async def _round_trip(
        self,
        channel: Channel,
        method: str,
        params: JsonObject | None,
        *,
        headers: Mapping[str, str] | None = None,
        cancellable: bool = True,
        handshake: bool = False,
    ) -> JsonObject:
        if channel.protocol_version == MODERN_VERSION:
            params = dict(params or {})
            given = params.get("_meta")
            params["_meta"] = {**(given if isinstance(given, dict) else {}), **self._envelope()}
        for attempt in range(2):
            message = self._message(method, params)
            request_id = message["id"]
            try:
                response = await self._timed(channel.request(message, headers), handshake=handshake)
            except TimeoutError:
                if cancellable:
                    await self._cancel_on_wire(channel, request_id, "timed out")
                raise
            except asyncio.CancelledError:
                if cancellable:
                    # We are being cancelled: tell the server from a task of its own.
                    task = asyncio.ensure_future(
                        self._cancel_on_wire(channel, request_id, "cancelled by the client")
                    )
                    self._background.add(task)
                    task.add_done_callback(self._background.discard)
                raise
            error = response.get("error")
            if error is not None:
                if not isinstance(error, dict):
                    raise RpcError(None, str(error))
                if (
                    not attempt
                    and channel.protocol_version == MODERN_VERSION
                    and _names_ours(error)
                ):
                    continue  # refused unread, naming our version among its own: once more
                raise RpcError(error.get("code"), str(error.get("message", "")), error.get("data"))
            result = response.get("result")
            if not isinstance(result, dict):
                raise ChannelError(f"the answer to {method} has no result object")
            return result
        raise AssertionError("unreachable")  # pragma: no cover

    async def _exchange(
        self,
        channel: Channel,
        method: str,
        params: JsonObject,
        headers: Mapping[str, str] | None,
    ) -> JsonObject:
        """One request, with the rounds of input the server asks for (SEP-2322): the same
        request again, with our answers and the server's state echoed unchanged."""
        current = params
        # A paused call goes on with its answers and the server's state in `params`; the
        # rounds after it carry the new ones only.
        base = {k: v for k, v in params.items() if k not in ("inputResponses", "requestState")}
        for _ in range(_MAX_INPUT_ROUNDS):
            result = await self._round_trip(channel, method, current, headers=headers)
            kind = result.get("resultType")
            if kind is None or kind == "complete":
                return result
            if kind != "input_required" or method not in NAMED_METHODS:
                raise ChannelError(
                    f"the answer to {method} has resultType {kind!r}, which tether does not read"
                )
            if self._pause_elicitation:
                pending = pending_input(base, result, self._label)
                if pending is not None:
                    raise pending
            answers = await self._fulfil(result.get("inputRequests"))
            current = dict(base)
            if answers is not None:
                current["inputResponses"] = answers
            if "requestState" in result:
                current["requestState"] = result["requestState"]
        raise ChannelError(f"the server still asked for input after {_MAX_INPUT_ROUNDS} rounds")

    async def _cancel_on_wire(self, channel: Channel, request_id: int, reason: str) -> None:
        if channel.lost or channel.cancels_by_closing:
            return  # over HTTP in the stateless revision, the closed stream is the cancel
        message = {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": request_id, "reason": reason},
        }
        try:
            async with asyncio.timeout(_CANCEL_TIMEOUT):
                await channel.notify(message)
        except (ChannelError, McpAuthError, TimeoutError):
            pass

    async def request(self, method: str, params: JsonObject | None = None) -> JsonObject:
        """A request on the connection `open()` made; no reconnect (used while connecting)."""
        if self._channel is None:
            raise ChannelError("the session is not open")
        return await self._round_trip(self._channel, method, params)

    async def call(
        self,
        method: str,
        params: JsonObject,
        *,
        what: str,
        signal: AbortSignal | None = None,
        tracer: Tracer | None = None,
        headers: Mapping[str, str] | None = None,
        progress: ProgressHandler | None = None,
    ) -> JsonObject:
        """A request for a turn. Reconnects once, quietly, when the server lost the session;
        every failure is an `McpCallError` naming `what` failed. With `progress`, the request
        asks for progress notifications (a `progressToken`) and each goes to `progress`."""
        if progress is None:
            return await self._call(method, params, what, signal, tracer, headers)
        token = f"tether-{next(self._ids)}"
        given = params.get("_meta")
        meta = {**(given if isinstance(given, dict) else {}), "progressToken": token}
        if tracer is not None:
            # 2026-07-28 sends a request's log messages only when asked (SEP-2577); they
            # become trace records, so they are asked for only when something records them.
            meta[_LOG_LEVEL] = "info"
        params = {**params, "_meta": meta}
        self._listening[token] = (progress, tracer)
        try:
            return await self._call(method, params, what, signal, tracer, headers)
        finally:
            del self._listening[token]

    async def _call(
        self,
        method: str,
        params: JsonObject,
        what: str,
        signal: AbortSignal | None,
        tracer: Tracer | None,
        headers: Mapping[str, str] | None,
    ) -> JsonObject:
        for attempt in range(2):
            channel = await self._ready(what, signal, tracer)
            try:
                return await abortable(self._exchange(channel, method, params, headers), signal)
            except InputPending:
                raise  # the call waits for a person: the caller pauses it
            except SessionLost as exc:
                if attempt:
                    raise McpCallError(
                        f"{what} failed: the server dropped the session again right after "
                        f"reconnecting ({exc})"
                    ) from exc
            except TimeoutError as exc:
                raise McpCallError(
                    f"{what} timed out after {self._timeout_ms} ms without an answer"
                ) from exc
            except Aborted as exc:
                raise McpCallError(f"{what} was aborted") from exc
            except RpcError as exc:
                raise McpCallError(f"{what} failed: the server answered {exc}") from exc
            except (ChannelError, ElicitationFailed, McpAuthError) as exc:
                raise McpCallError(f"{what} failed: {exc}") from exc
        raise AssertionError("unreachable")  # pragma: no cover

    async def _ready(self, what: str, signal: AbortSignal | None, tracer: Tracer | None) -> Channel:
        if self._closed:
            raise McpCallError(f"{what} failed: the MCP session was closed")
        channel = self._channel
        if channel is not None and not channel.lost:
            return channel
        async with self._reconnect_lock:
            if self._closed:  # closed while this call waited for another one's reconnect
                raise McpCallError(f"{what} failed: the MCP session was closed")
            channel = self._channel
            if channel is not None and not channel.lost:
                return channel
            self._channel = None
            if channel is not None:
                await channel.aclose()
            self._reconnecting = handshake = asyncio.ensure_future(self._handshake())
            try:
                channel = await abortable(handshake, signal)
            except Aborted as exc:
                raise McpCallError(f"{what} was aborted while reconnecting") from exc
            except asyncio.CancelledError:
                current = asyncio.current_task()
                if self._closed and (current is None or current.cancelling() == 0):
                    # aclose() cancelled the handshake (which closed what it had opened).
                    raise McpCallError(f"{what} failed: the MCP session was closed") from None
                raise
            except (ChannelError, RpcError, TimeoutError, VersionRefused, McpAuthError) as exc:
                if tracer is not None:
                    tracer.record("mcp", "reconnect:failed", {"error": str(exc)}, buffer=True)
                why = "timed out" if isinstance(exc, TimeoutError) else str(exc)
                raise McpCallError(
                    f"{what} failed: the server lost the session and reconnecting failed: {why}"
                ) from exc
            finally:
                self._reconnecting = None
            if self._closed:  # closed as the handshake finished: the late arrival does not stay
                await channel.aclose()
                raise McpCallError(f"{what} failed: the MCP session was closed")
            self._channel = channel
            self.reconnects += 1
            if tracer is not None:
                tracer.record(
                    "mcp", "reconnect", {"protocol_version": self.protocol_version}, buffer=True
                )
            return channel

    # -- closing -----------------------------------------------------------------------------

    async def aclose(self) -> None:
        """End the session (and whatever the transport owns). Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            reconnecting = self._reconnecting
            if reconnecting is not None:
                # close() wins over a reconnect in flight: cancelled, the handshake ends the
                # session it opened, while the transport it needs is still open. One that
                # finished but is not yet adopted is ended here (closing twice is harmless).
                if not reconnecting.done():
                    reconnecting.cancel()
                await asyncio.gather(reconnecting, return_exceptions=True)
                if not reconnecting.cancelled() and reconnecting.exception() is None:
                    await reconnecting.result().aclose()
            if self._background:
                await asyncio.gather(*self._background, return_exceptions=True)
            channel, self._channel = self._channel, None
            if channel is not None:
                await channel.aclose()
        finally:
            if self._on_close is not None:
                await self._on_close()


def _names_ours(error: JsonObject) -> bool:
    """Whether an error is "unsupported protocol version" listing the version we asked in."""
    data = error.get("data")
    supported = data.get("supported") if isinstance(data, dict) else None
    return (
        error.get("code") == UNSUPPORTED_VERSION
        and isinstance(supported, list)
        and MODERN_VERSION in supported
    )
