"""The MCP client session: the handshake, timed requests, cancellation on the wire, and the one
quiet reconnect after the server lost the session."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

from ..errors import McpCallError
from ._protocol import (
    LATEST_PROTOCOL_VERSION,
    PROTOCOL_VERSIONS,
    Channel,
    ChannelError,
    JsonObject,
    RpcError,
    SessionLost,
)

if TYPE_CHECKING:
    from ..signals import AbortSignal
    from ..tracing import Tracer

__all__ = ["Aborted", "McpClient", "VersionRefused", "abortable"]

T = TypeVar("T")

_CANCEL_TIMEOUT = 5.0
"""Seconds a `notifications/cancelled` may take; it is a courtesy, never worth a hang."""


class Aborted(Exception):
    """The caller's abort signal fired while we waited."""


class VersionRefused(Exception):
    """The server answered `initialize` with a protocol version we do not speak."""

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
    """One connection to one server: a channel plus what the handshake told us. A lost session
    is replaced (once per request) by a fresh handshake on a fresh channel."""

    def __init__(
        self,
        make_channel: Callable[[], Channel],
        *,
        timeout: float | None,
        timeout_ms: int,
        client_info: JsonObject,
        handshake_timeout: float | None,
        handshake_timeout_ms: int,
        on_close: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self._make_channel = make_channel
        self.timeout = timeout
        self._timeout_ms = timeout_ms
        self.handshake_timeout = handshake_timeout
        self.handshake_timeout_ms = handshake_timeout_ms
        self._client_info = client_info
        self._on_close = on_close
        self._channel: Channel | None = None
        self._ids = itertools.count(1)
        self._reconnect_lock = asyncio.Lock()
        self._reconnecting: asyncio.Future[Channel] | None = None
        """The handshake of a reconnect in flight; `aclose()` cancels it."""
        self._background: set[asyncio.Task[None]] = set()
        self._closed = False
        self.init_result: JsonObject = {}
        self.protocol_version: str | None = None
        self.reconnects = 0

    @property
    def channel(self) -> Channel | None:
        return self._channel

    @property
    def capabilities(self) -> JsonObject:
        caps = self.init_result.get("capabilities")
        return caps if isinstance(caps, dict) else {}

    # -- the handshake -----------------------------------------------------------------------

    async def open(self) -> None:
        """Initialize a session. Raises ChannelError / RpcError / TimeoutError / VersionRefused
        and leaves nothing open when it does."""
        self._channel = await self._handshake()

    async def _handshake(self) -> Channel:
        channel = self._make_channel()
        try:
            await channel.open()
            result = await self._round_trip(
                channel,
                "initialize",
                {
                    "protocolVersion": LATEST_PROTOCOL_VERSION,
                    "capabilities": {},
                    "clientInfo": self._client_info,
                },
                cancellable=False,  # the spec forbids cancelling initialize
                handshake=True,
            )
            version = result.get("protocolVersion")
            if version not in PROTOCOL_VERSIONS:
                raise VersionRefused(version)
            channel.protocol_version = version
            await self._timed(
                channel.notify({"jsonrpc": "2.0", "method": "notifications/initialized"})
            )
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
        self.init_result = result
        self.protocol_version = version
        return channel

    # -- requests ----------------------------------------------------------------------------

    async def _timed(self, aw: Awaitable[T], *, handshake: bool = False) -> T:
        async with asyncio.timeout(self.handshake_timeout if handshake else self.timeout):
            return await aw

    async def _round_trip(
        self,
        channel: Channel,
        method: str,
        params: JsonObject | None,
        *,
        cancellable: bool = True,
        handshake: bool = False,
    ) -> JsonObject:
        request_id = next(self._ids)
        message: JsonObject = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        try:
            response = await self._timed(channel.request(message), handshake=handshake)
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
            raise RpcError(error.get("code"), str(error.get("message", "")), error.get("data"))
        result = response.get("result")
        if not isinstance(result, dict):
            raise ChannelError(f"the answer to {method} has no result object")
        return result

    async def _cancel_on_wire(self, channel: Channel, request_id: int, reason: str) -> None:
        if channel.lost:
            return
        message = {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": request_id, "reason": reason},
        }
        try:
            async with asyncio.timeout(_CANCEL_TIMEOUT):
                await channel.notify(message)
        except (ChannelError, TimeoutError):
            pass

    async def request(self, method: str, params: JsonObject | None = None) -> JsonObject:
        """A request in the session opened by `open()`; no reconnect (used while connecting)."""
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
    ) -> JsonObject:
        """A request in a live session, for a turn. Reconnects once, quietly, when the server
        lost the session; every failure is an `McpCallError` naming `what` failed."""
        for attempt in range(2):
            channel = await self._ready(what, signal, tracer)
            try:
                return await abortable(self._round_trip(channel, method, params), signal)
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
            except ChannelError as exc:
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
            except (ChannelError, RpcError, TimeoutError, VersionRefused) as exc:
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
