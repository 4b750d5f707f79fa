"""stdio: a child process speaking newline-delimited JSON-RPC on its stdin and stdout."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from .._json import dumps
from ._protocol import (
    ChannelError,
    JsonObject,
    ServerRequestHandler,
    SessionLost,
    is_notification,
    is_server_request,
    parse_message,
)

__all__ = ["StdioChannel"]

logger = logging.getLogger("tether.mcp")

_LINE_LIMIT = 32 * 1024 * 1024
"""Bytes one message line may take; a resource body arrives on one line."""
_STDERR_TAIL = 2000
"""Characters of the child's stderr kept to explain an exit."""
_EXIT_GRACE = 2.0
"""Seconds the child gets after stdin closes (and again after SIGTERM) before the next step."""
_NOISE_LINES = 5
"""Non-JSON stdout lines kept (the first ones) to show what a server that never spoke JSON wrote."""
_NOISE_CHARS = 200
"""Seconds the child gets after stdin closes (and again after SIGTERM) before the next step."""


class StdioChannel:
    """One MCP session = one child process. Ending the session ends the child."""

    def __init__(
        self,
        command: str,
        args: Sequence[str],
        env: Mapping[str, str] | None,
        cwd: str | os.PathLike[str] | None,
        on_request: ServerRequestHandler,
    ) -> None:
        self._command = command
        self._args = list(args)
        self._env = None if env is None else {**os.environ, **env}
        self._cwd = cwd
        self._on_request = on_request
        self.protocol_version: str | None = None
        self.cancels_by_closing = False
        self.lost = False
        self._why_lost = "the server process is not running"
        self._explained = False
        self._proc: asyncio.subprocess.Process | None = None
        self._pending: dict[Any, asyncio.Future[JsonObject]] = {}
        self._write_lock = asyncio.Lock()
        self._tasks: list[asyncio.Task[None]] = []
        self._answering: set[asyncio.Task[None]] = set()
        """Answers to the server's own requests (an elicitation may wait on a person)."""
        self._stderr = ""
        self._spoke = False
        """Whether the child ever wrote a JSON-RPC message."""
        self._noise: list[str] = []

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    async def open(self) -> None:
        try:
            self._proc = await asyncio.create_subprocess_exec(
                self._command,
                *self._args,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=self._env,
                cwd=self._cwd,
                limit=_LINE_LIMIT,
                # Its own process group, so close() also ends what a wrapper (npx, uvx) started.
                start_new_session=sys.platform != "win32",
            )
        except OSError as exc:
            self.lost = True
            raise ChannelError(f"cannot start {self._command!r}: {exc}") from exc
        self._tasks = [
            asyncio.create_task(self._read_stdout()),
            asyncio.create_task(self._read_stderr()),
        ]

    async def _read_stdout(self) -> None:
        proc = self._proc
        assert proc is not None and proc.stdout is not None
        reason = "the server process closed its stdout"
        try:
            while True:
                try:
                    line = await proc.stdout.readline()
                except ValueError:  # a line longer than the limit: the stream is unusable
                    reason = f"the server sent a message longer than {_LINE_LIMIT} bytes"
                    break
                if not line:
                    break
                message = parse_message(line)
                if message is None and line.strip():
                    self._note_noise(line)
                for item in message if isinstance(message, list) else [message]:
                    self._dispatch(item)
        finally:
            # Nothing more can be answered: a request from now on reconnects instead of
            # waiting. Then give the exit status (and the last of stderr) a moment to arrive,
            # the most useful thing to tell about a crash, before failing what is in flight.
            self.lost = True
            self._why_lost = reason
            with contextlib.suppress(asyncio.CancelledError):
                await _exited(proc, 1.0)
            self._lose(reason, proc.returncode)

    def _note_noise(self, line: bytes) -> None:
        if len(self._noise) < _NOISE_LINES:
            text = line.decode("utf-8", "replace").strip()
            cut = "..." if len(text) > _NOISE_CHARS else ""
            self._noise.append(text[:_NOISE_CHARS] + cut)

    def silence(self) -> str | None:
        """What explains a child that never answered: the non-JSON it wrote instead, if it
        wrote nothing else."""
        if self._spoke or not self._noise:
            return None
        shown = " | ".join(repr(line) for line in self._noise)
        return f"it wrote only non-JSON to stdout (is it an MCP server?): {shown}"

    def _dispatch(self, item: Any) -> None:
        if not isinstance(item, dict):
            return  # not JSON-RPC (a stray print): the spec forbids it, we skip it
        self._spoke = True
        if "method" not in item and ("result" in item or "error" in item):
            future = self._pending.pop(item.get("id"), None)
            if future is not None and not future.done():
                future.set_result(item)
        elif is_server_request(item) or is_notification(item):
            task = asyncio.ensure_future(self._answer(item))
            self._answering.add(task)
            task.add_done_callback(self._answering.discard)

    async def _read_stderr(self) -> None:
        proc = self._proc
        assert proc is not None and proc.stderr is not None
        with contextlib.suppress(ValueError, OSError):
            while chunk := await proc.stderr.read(4096):
                text = chunk.decode("utf-8", "replace")
                # Servers log to stderr; it is theirs to fill, ours to keep a tail of.
                logger.debug("%s stderr: %s", self._command, text.rstrip())
                self._stderr = (self._stderr + text)[-_STDERR_TAIL:]

    def _lose(self, reason: str, code: int | None = None) -> None:
        self.lost = True
        if self._explained:
            return
        self._explained = True
        why = reason if code is None else f"the server process exited with status {code}"
        tail = self._stderr.strip()
        self._why_lost = f"{why}; its stderr ends: {tail[-500:]}" if tail else why
        silence = self.silence()
        if silence is not None:
            self._why_lost += f"; {silence}"
        # A request in flight may have run: it fails as a call (never resent); the next
        # request finds the channel lost and reconnects.
        pending, self._pending = self._pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(
                    ChannelError(f"the server went away before answering: {self._why_lost}")
                )

    async def listen(self) -> None:
        return None  # the child's stdout already carries whatever the server sends

    async def request(
        self, message: JsonObject, headers: Mapping[str, str] | None = None
    ) -> JsonObject:
        if self.lost:
            raise SessionLost(self._why_lost)
        future: asyncio.Future[JsonObject] = asyncio.get_running_loop().create_future()
        self._pending[message["id"]] = future
        try:
            await self._write(message)
            return await future
        finally:
            self._pending.pop(message["id"], None)

    async def notify(self, message: JsonObject) -> None:
        if self.lost:
            raise SessionLost(self._why_lost)
        await self._write(message)

    async def _write(self, message: JsonObject) -> None:
        proc = self._proc
        assert proc is not None and proc.stdin is not None
        data = dumps(message).encode("utf-8") + b"\n"
        try:
            async with self._write_lock:
                proc.stdin.write(data)
                await proc.stdin.drain()
        except (ConnectionError, RuntimeError) as exc:
            self._lose("the server process stopped reading its stdin")
            raise SessionLost(self._why_lost) from exc
        if proc.stdin.is_closing():
            # A write to a dead child's stdin fails inside the transport, which closes itself;
            # drain() only reports it a few loop iterations later. Nothing was delivered.
            self._lose("the server process stopped reading its stdin")
            raise SessionLost(self._why_lost)

    async def _answer(self, message: JsonObject) -> None:
        """Answer a request the server sent us (an elicitation may wait on a person)."""
        reply = await self._on_request(message)
        if reply and not self.lost:  # a notification answers nothing
            with contextlib.suppress(ChannelError):
                await self._write(reply)

    async def aclose(self) -> None:
        """Close stdin, give the child a moment, then SIGTERM, then SIGKILL. Idempotent."""
        proc = self._proc
        if proc is None:
            return
        self._proc = None
        try:
            if proc.stdin is not None:
                with contextlib.suppress(OSError, RuntimeError):
                    proc.stdin.close()
            if proc.returncode is None and not await _exited(proc, _EXIT_GRACE):
                _signal(proc, signal.SIGTERM)
                if not await _exited(proc, _EXIT_GRACE):
                    _signal(proc, signal.SIGKILL)
                    await proc.wait()
        except BaseException:  # cancelled mid-close: the child must not outlive us
            _signal(proc, signal.SIGKILL)
            raise
        finally:
            tasks, self._tasks = self._tasks + list(self._answering), []
            if tasks:
                # The readers end at EOF; a grandchild holding the pipes open must not hang us.
                _, stuck = await asyncio.wait(tasks, timeout=_EXIT_GRACE)
                for task in stuck:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
            self._lose("the session was closed")


async def _exited(proc: asyncio.subprocess.Process, seconds: float) -> bool:
    try:
        async with asyncio.timeout(seconds):
            await proc.wait()
    except TimeoutError:
        return False
    return True


def _signal(proc: asyncio.subprocess.Process, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if sys.platform != "win32":
            os.killpg(proc.pid, sig)
        else:  # pragma: no cover - no process groups
            proc.send_signal(sig)
