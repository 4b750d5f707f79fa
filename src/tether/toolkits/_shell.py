"""`shell_tool`: a bash command in a root, under bubblewrap (or, asked for by name, without).

Every call starts a gate (``bash -c 'read; ulimit ...; exec "$@"'``) in a new session: it waits
until it has been put in the call's pids cgroup (when one can be made), sets the resource
limits, and becomes the sandbox. The limits are set by the shell builtin rather than in a
``preexec_fn``, which is unsafe in a threaded process. At the end — the command's exit, the
wall timeout, a cancellation — the whole process group and everything left in the cgroup is
killed with SIGKILL; under bubblewrap the PID namespace ends with its first process, taking every
other one with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import shutil
import signal
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..context import RunContext
from ..errors import ConfigError, ToolError
from ..tools import Approval, ToolResult, define_tool
from ._cgroup import PidsCgroup
from ._toolkit import PathSpec, Toolkit, from_run, one_string_input, trace

__all__ = ["Isolation", "ShellLimits", "bubblewrap_problem", "shell_tool"]

Isolation = Literal["bubblewrap", "none"]

INSTALL_HINT = (
    "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install "
    "bubblewrap; Arch: pacman -S bubblewrap), or pass isolation='none' to run commands without "
    "a sandbox"
)

_GATE = 'read -r _ || exit 125; exec </dev/null; ulimit -S -H {limits} || exit 125; exec "$@"'


@dataclass(frozen=True, slots=True)
class ShellLimits:
    """Resource limits of every process a shell call starts (at every isolation level)."""

    cpu_seconds: int = 60
    """CPU time of each process (RLIMIT_CPU)."""
    memory_bytes: int = 2 * 1024**3
    """Address space of each process (RLIMIT_AS)."""
    processes: int = 256
    """Processes at once: the call's pids cgroup where one can be made, else RLIMIT_NPROC
    (which the kernel does not apply to root)."""
    file_size_bytes: int = 1024**3
    """Largest file a process may write (RLIMIT_FSIZE)."""
    open_files: int = 1024
    """Open descriptors of each process (RLIMIT_NOFILE)."""

    def ulimit_args(self) -> str:
        return (
            f"-t {self.cpu_seconds} -v {max(1, self.memory_bytes // 1024)} -u {self.processes} "
            f"-f {max(1, self.file_size_bytes // 1024)} -n {self.open_files}"
        )


@functools.cache
def bubblewrap_problem(bwrap: str = "bwrap") -> str | None:
    """None when bubblewrap is installed and can make a sandbox here, else why not."""
    path = shutil.which(bwrap)
    if path is None:
        return f"bubblewrap ({bwrap!r}) is not installed: {INSTALL_HINT}"
    try:
        probe = subprocess.run(
            [
                path,
                "--ro-bind",
                "/",
                "/",
                "--unshare-all",
                "--unshare-user",
                "--die-with-parent",
                "--dev",
                "/dev",
                "--proc",
                "/proc",
                "true",
            ],
            capture_output=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap ({path}) could not be run: {exc}"
    if probe.returncode != 0:
        why = probe.stderr.decode(errors="replace").strip()[-300:]
        return (
            f"bubblewrap ({path}) cannot make a sandbox here (user namespaces may be disabled, "
            f"or a container forbids them): {why}"
        )
    return None


class _Capture:
    """The head and the tail of a stream, and how much there was."""

    __slots__ = ("half", "head", "tail", "total")

    def __init__(self, limit: int) -> None:
        self.half = max(1, limit // 2)
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.half - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            if len(self.tail) > 2 * self.half:
                del self.tail[: len(self.tail) - self.half]

    def text(self) -> str:
        tail = self.tail[-self.half :] if self.tail else b""
        cut = self.total - len(self.head) - len(tail)
        body = bytes(self.head)
        if cut > 0:
            body += f"\n[... {cut} bytes cut ...]\n".encode()
        body += bytes(tail)
        return body.decode("utf-8", "replace")


class _Protocol(asyncio.SubprocessProtocol):
    """Feeds the captures, and says when the process exited (asyncio's `Process.wait` also
    waits for the pipes, which a background process may hold open) and when the pipes closed."""

    def __init__(self, out: _Capture, err: _Capture) -> None:
        loop = asyncio.get_running_loop()
        self.captures = {1: out, 2: err}
        self.exited: asyncio.Future[None] = loop.create_future()
        self.closed: asyncio.Future[None] = loop.create_future()

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        self.captures[fd].feed(data)

    def process_exited(self) -> None:
        if not self.exited.done():
            self.exited.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)


@dataclass(slots=True, eq=False)  # compared and hashed by identity, as before
class _Shell:
    root: PathSpec
    timeout: float
    isolation: Isolation
    network: bool
    env: Mapping[str, str] | Callable[[RunContext], Mapping[str, str]] | None
    limits: ShellLimits | Callable[[RunContext], ShellLimits]
    max_output: int
    hide: tuple[str, ...]
    bwrap: str | None

    def resolve_root(self, ctx: RunContext) -> str:
        spec: Any = from_run(self.root, ctx)
        root: str = os.path.realpath(os.fspath(spec))
        if not os.path.isdir(root):
            raise ToolError(f"the shell's root {root!r} is not a directory")
        return root

    def environment(self, root: str, ctx: RunContext) -> dict[str, str]:
        env = {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": root,
            "LANG": "C.UTF-8",
            "TERM": "dumb",
            "TMPDIR": "/tmp",
        }
        extra = from_run(self.env, ctx) if self.env is not None else {}
        for key, value in extra.items():
            if not isinstance(key, str) or not isinstance(value, str):
                raise ToolError(f"shell env must map str to str, got {key!r}: {value!r:.40}")
            env[key] = value
        return env

    def argv(self, root: str, command: str) -> list[str]:
        inner = ["/bin/bash", "-c", command]
        if self.isolation == "none":
            return inner
        assert self.bwrap is not None
        argv = [
            self.bwrap,
            "--die-with-parent",
            "--new-session",
            "--unshare-all",
            "--unshare-user",
            "--cap-drop",
            "ALL",
            "--hostname",
            "sandbox",
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--tmpfs",
            "/tmp",
        ]
        if self.network:
            argv.append("--share-net")
        for hidden in ("/home", "/root", "/run", "/var/tmp", *self.hide):
            if os.path.isdir(hidden):
                argv += ["--tmpfs", hidden]
        return [*argv, "--bind", root, root, "--chdir", root, "--", *inner]

    async def run(self, args: dict[str, Any], ctx: RunContext) -> ToolResult:
        command = args["command"]
        root = self.resolve_root(ctx)
        env = self.environment(root, ctx)
        limits = from_run(self.limits, ctx)
        if not isinstance(limits, ShellLimits):
            raise ToolError(f"the shell's limits must be ShellLimits, got {limits!r:.80}")
        gate = _GATE.format(limits=limits.ulimit_args())
        cgroup = PidsCgroup.create(limits.processes)
        out, err = _Capture(self.max_output), _Capture(self.max_output)
        timed_out = False
        loop = asyncio.get_running_loop()
        started = loop.time()
        code: int | None = None
        try:
            transport, proto = await loop.subprocess_exec(
                lambda: _Protocol(out, err),
                "/bin/bash",
                "-c",
                gate,
                "tether-shell",
                *self.argv(root, command),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=root,
                env=env,
                start_new_session=True,
            )
            pid = transport.get_pid()
            try:
                if cgroup is not None:
                    try:
                        cgroup.add(pid)
                    except OSError:  # made but not joinable: the rlimits are what is left
                        cgroup.remove()
                        cgroup = None
                stdin = transport.get_pipe_transport(0)
                assert isinstance(stdin, asyncio.WriteTransport)
                stdin.write(b"go\n")  # the gate waits for this: it is in the cgroup now
                stdin.close()
                try:
                    async with asyncio.timeout(self.timeout):
                        await proto.exited
                except TimeoutError:
                    timed_out = True
            finally:
                self._kill(pid, cgroup)
                try:
                    async with asyncio.timeout(2):
                        await proto.closed  # the pipes close once every holder is dead
                except TimeoutError:
                    pass  # a process that escaped the group holds a pipe: stop reading
                code = transport.get_returncode()
                transport.close()
        finally:
            if cgroup is not None:
                await cgroup.close()
        ms = round((loop.time() - started) * 1000, 1)
        trace(
            ctx,
            "shell:run",
            {
                "command": command[:500],
                "isolation": self.isolation,
                "exit_code": code,
                "timed_out": timed_out,
                "stdout_bytes": out.total,
                "stderr_bytes": err.total,
                "ms": ms,
            },
        )
        return ToolResult(self._report(code, timed_out, out, err), timed_out)

    def _kill(self, pid: int, cgroup: PidsCgroup | None) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
        if cgroup is not None:
            cgroup.kill_all()

    def _report(self, code: int | None, timed_out: bool, out: _Capture, err: _Capture) -> str:
        lines: list[str] = []
        if timed_out:
            lines.append(
                f"timed out after {self.timeout:g}s: the command and every process it started "
                "were killed"
            )
        elif code is not None and code < 0:
            lines.append(f"killed by {signal.Signals(-code).name}")
        elif code == 125:
            lines.append("exit code: 125 (the sandbox could not start the command)")
        else:
            lines.append(f"exit code: {code}")
        for label, capture in (("stdout", out), ("stderr", err)):
            if capture.total:
                lines.append(f"--- {label} ({capture.total} bytes) ---")
                lines.append(capture.text().rstrip("\n"))
        return "\n".join(lines)


_SCHEMA = one_string_input("command", "A bash command line.")


def shell_tool(
    root: PathSpec,
    *,
    timeout: float = 30.0,
    isolation: Isolation = "bubblewrap",
    network: bool = False,
    env: Mapping[str, str] | Callable[[RunContext], Mapping[str, str]] | None = None,
    approval: Approval = True,
    approval_timeout: float | None = None,
    limits: ShellLimits | Callable[[RunContext], ShellLimits] | None = None,
    max_output: int = 32 * 1024,
    hide: Sequence[str] = (),
    name: str = "shell",
) -> Toolkit:
    """A tool that runs the model's bash commands with `root` as the working directory.

    Args:
        root: The working directory (the only writable place under bubblewrap), or a function
            of the call's `RunContext` returning it.
        timeout: Seconds a command may run; then it and every process it started are killed.
        isolation: ``"bubblewrap"`` (the default): the system read-only, `root` the one writable
            bind, ``/tmp`` private, ``/home``, ``/root``, ``/run`` and `hide` empty, new PID,
            network, IPC, UTS and user namespaces, no capabilities. ``"none"``: the command
            runs as this process, with its access to every file and the network — only the
            limits, the timeout and the environment apply; the tool's description says so.
        network: Let the command use the network (bubblewrap shares the host's; with
            ``isolation="none"`` it cannot be taken away, so it must be True).
        env: Variables added to the command's environment (nothing of this process's is
            passed on but a plain PATH), or a function of the `RunContext` returning them —
            credentials for one run, say.
        approval: True (the default): each command waits for a human's decision (the turn
            pauses, see `tether.approvals`); a function ``(input, ctx) -> bool`` asks only
            when it says True; False runs every command unattended.
        approval_timeout: Seconds a paused lab run waits for the decision before the call
            is denied as "expired" (None: the agent's, else no limit).
        limits: Resource limits of each call (`ShellLimits`), or a function of the
            `RunContext` returning them (a run's own budget).
        max_output: Bytes kept of stdout and of stderr each (the head and the tail; the middle
            is replaced by a marker saying how much was cut).
        hide: More directories to cover with an empty tmpfs under bubblewrap.
        name: The tool's name.

    Raises:
        ConfigError: bubblewrap is missing or cannot sandbox here (with the install hint), an
            option is wrong.
    """
    if isolation not in ("bubblewrap", "none"):
        raise ConfigError(
            f"shell_tool: isolation must be 'bubblewrap' or 'none', not {isolation!r}"
        )
    if isolation == "none" and not network:
        raise ConfigError(
            "shell_tool(isolation='none') cannot keep the command off the network; pass "
            "network=True to accept that, or use isolation='bubblewrap'"
        )
    if not isinstance(timeout, int | float) or timeout <= 0:
        raise ConfigError(f"shell_tool: timeout must be positive seconds, not {timeout!r}")
    if type(max_output) is not int or max_output < 64:
        raise ConfigError(f"shell_tool: max_output must be an int of at least 64: {max_output!r}")
    if not os.path.exists("/bin/bash"):
        raise ConfigError("shell_tool needs /bin/bash")
    if not callable(root) and not os.path.isdir(os.fspath(root)):
        raise ConfigError(f"shell_tool: the root {os.fspath(root)!r} is not a directory")
    bwrap: str | None = None
    if isolation == "bubblewrap":
        problem = bubblewrap_problem()
        if problem is not None:
            raise ConfigError(f"shell_tool: {problem}")
        bwrap = shutil.which("bwrap")
    shell = _Shell(
        root,
        timeout,
        isolation,
        network,
        env,
        limits or ShellLimits(),
        max_output,
        tuple(hide),
        bwrap,
    )
    if isolation == "bubblewrap":
        where = (
            "in a bubblewrap sandbox: the working directory is the only place you can write, "
            "the rest of the system is read-only, /tmp is private and emptied after each call"
            + ("" if network else ", and there is no network")
        )
    else:
        where = (
            "WITHOUT a sandbox (isolation='none'): it runs with this process's access to every "
            "file and to the network"
        )
    description = (
        f"Run a bash command with the workspace as the working directory, {where}. Each call "
        f"starts fresh (no state is kept between calls) and may take {timeout:g}s; background "
        "processes are killed when it ends. Returns the exit code, stdout and stderr "
        f"(at most {max_output} bytes of each)."
    )
    return Toolkit(
        [
            define_tool(
                name=name,
                description=description,
                input_schema=_SCHEMA,
                execute=shell.run,
                approval=approval,
                approval_timeout=approval_timeout,
            )
        ]
    )
