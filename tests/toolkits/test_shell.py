"""shell_tool: the honest command works, and escapes and floods are refused or contained.

The bubblewrap tests run wherever bubblewrap can make a sandbox (`bubblewrap_problem()` says why
not, and they skip saying so); the fork bomb runs only where a limit on processes applies.
"""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tether import RunContext, Session, create_agent
from tether.errors import ConfigError
from tether.testing import collect, script_client
from tether.toolkits import ShellLimits, Toolkit, bubblewrap_problem, shell_tool
from tether.toolkits._cgroup import PidsCgroup
from tether.toolkits._shell import _Capture
from tether.tools import ToolResult

SECRET = "SHELL-SECRET-91c2"
NO_BWRAP = bubblewrap_problem()
needs_bwrap = pytest.mark.skipif(NO_BWRAP is not None, reason=f"no sandbox here: {NO_BWRAP}")


def _processes_are_limited() -> str | None:
    if os.geteuid() != 0:
        return None  # RLIMIT_NPROC applies
    cgroup = PidsCgroup.create(10)
    if cgroup is None:
        return (
            "running as root without a writable pids cgroup: RLIMIT_NPROC does not apply to "
            "root, so a fork bomb would run unchecked until the timeout"
        )
    cgroup.remove()
    return None


NO_PROCESS_LIMIT = _processes_are_limited()


def _no_pids_cgroup() -> bool:
    cgroup = PidsCgroup.create(10)
    if cgroup is None:
        return True
    cgroup.remove()
    return False


NO_PIDS_CGROUP = _no_pids_cgroup()


@pytest.fixture
def dirs(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    root = tmp_path / "root"
    outside = tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET)
    yield root, outside


def sandboxed(root: Path, **kwargs: Any) -> Toolkit:
    return shell_tool(root, approval=False, **kwargs)


def unsandboxed(root: Path, **kwargs: Any) -> Toolkit:
    return shell_tool(root, approval=False, isolation="none", network=True, **kwargs)


async def run(tk: Toolkit, command: str, ctx: RunContext | None = None) -> ToolResult:
    return await tk["shell"].call({"command": command}, ctx or RunContext("test"))


def exists(path: str) -> bool:
    return os.path.exists(path)


def leftover_cgroups() -> list[str]:
    """The pids cgroups this process made and did not remove (cgroup v1's hierarchy)."""
    base = "/sys/fs/cgroup/pids"
    mine = f"tether-shell-{os.getpid()}-"
    return [d for d in os.listdir(base) if d.startswith(mine)] if os.path.isdir(base) else []


def survivors(marker: str) -> list[int]:
    """Processes on this machine whose command line holds `marker`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if marker.encode() in f.read():
                    found.append(int(entry))
        except OSError:
            continue
    return found


@pytest.fixture
def listener() -> Iterator[int]:
    """A TCP server on loopback that accepts connections; yields its port."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            conn.sendall(b"hello from the host\n")
            conn.close()

    thread = threading.Thread(target=serve)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join()
    server.close()


# -- definition ------------------------------------------------------------------------------


async def test_a_shell_tool_asks_before_each_command_by_default(tmp_path: Path) -> None:
    from tether import approve, deny

    shell = shell_tool(tmp_path, isolation="none", network=True)
    assert shell["shell"].approval is True
    client = script_client(
        [
            {"tool_use": [{"id": "c1", "name": "shell", "input": {"command": "echo hi > f"}}]},
            {"tool_use": [{"id": "c2", "name": "shell", "input": {"command": "rm f"}}]},
            {"text": "done"},
        ]
    )
    agent = create_agent(model=client, tools=[*shell])
    session = Session()
    res = await agent.run_turn(session, "write f")
    assert res.finish_reason == "paused" and not (tmp_path / "f").exists()
    res = await agent.run_turn(session, decisions={"c1": approve()})
    assert (tmp_path / "f").read_text() == "hi\n"  # approved: it ran, and the next one asks
    assert [p["id"] for p in res.pending] == ["c2"]
    res = await agent.run_turn(session, decisions={"c2": deny("keep it")})
    assert (tmp_path / "f").exists() and res.text == "done"
    with pytest.raises(ConfigError, match="approval= must be"):
        shell_tool(tmp_path, approval="always", isolation="none", network=True)  # type: ignore[arg-type]


def test_isolation_none_is_asked_for_by_name_and_says_so(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot keep the command off the network"):
        shell_tool(tmp_path, approval=False, isolation="none")
    with pytest.raises(ConfigError, match="isolation must be"):
        shell_tool(tmp_path, approval=False, isolation="docker")  # type: ignore[arg-type]
    tool = unsandboxed(tmp_path)["shell"]
    assert "WITHOUT a sandbox (isolation='none')" in tool.description


def test_missing_bubblewrap_fails_the_definition_with_the_install_hint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    bubblewrap_problem.cache_clear()
    try:
        with pytest.raises(ConfigError, match=r"apt-get install bubblewrap"):
            shell_tool(tmp_path, approval=False)
    finally:
        bubblewrap_problem.cache_clear()


def test_bad_options_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="timeout"):
        unsandboxed(tmp_path, timeout=0)
    with pytest.raises(ConfigError, match="not a directory"):
        unsandboxed(tmp_path / "nowhere")
    with pytest.raises(ConfigError, match="max_output"):
        unsandboxed(tmp_path, max_output=1)


def test_the_capture_keeps_head_and_tail_and_counts_the_rest() -> None:
    capture = _Capture(10)
    for chunk in (b"01234", b"56789", b"abcdefghij", b"KLMNO"):
        capture.feed(chunk)
    assert capture.total == 25
    assert capture.text() == "01234\n[... 15 bytes cut ...]\nKLMNO"


# -- honest calls ----------------------------------------------------------------------------


@pytest.mark.parametrize("isolation", ["bubblewrap", "none"])
async def test_a_command_runs_in_the_root_with_its_exit_code(
    dirs: tuple[Path, Path], isolation: str
) -> None:
    if isolation == "bubblewrap" and NO_BWRAP:
        pytest.skip(NO_BWRAP)
    root, _ = dirs
    tk = sandboxed(root) if isolation == "bubblewrap" else unsandboxed(root)
    result = await run(tk, "pwd; echo made > made.txt; echo oops >&2; exit 3")
    assert result == ToolResult(
        f"exit code: 3\n--- stdout ({len(str(root)) + 1} bytes) ---\n{root}\n"
        "--- stderr (5 bytes) ---\noops"
    )
    assert (root / "made.txt").read_text() == "made\n"


@needs_bwrap
async def test_env_is_clean_and_what_is_given_comes_from_the_run(
    dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, _ = dirs
    monkeypatch.setenv("TETHER_PARENT_SECRET", SECRET)
    tk = sandboxed(root, env=lambda ctx: {"API_TOKEN": ctx.services["token"]})
    ctx = RunContext("s", services={"token": "run-token"})
    result = await run(tk, "env | sort", ctx)
    assert "API_TOKEN=run-token" in result.output
    assert SECRET not in result.output
    assert f"HOME={root}" in result.output
    plain = await run(unsandboxed(root, env={"A": "1"}), "env")
    assert "A=1" in plain.output and SECRET not in plain.output


@needs_bwrap
async def test_network_is_off_unless_asked_for(dirs: tuple[Path, Path], listener: int) -> None:
    root, _ = dirs
    connect = f"exec 3<>/dev/tcp/127.0.0.1/{listener} && head -1 <&3"
    off = await run(sandboxed(root), connect)
    assert "hello from the host" not in off.output and "exit code: 1" in off.output
    on = await run(sandboxed(root, network=True), connect)
    assert "hello from the host" in on.output


async def test_an_agent_runs_it_and_the_call_is_traced(dirs: tuple[Path, Path]) -> None:
    root, _ = dirs
    records: list[Any] = []
    client = script_client(
        [{"tool_use": [{"name": "shell", "input": {"command": "echo 42"}}]}, {"text": "done"}]
    )
    agent = create_agent(llm=client, tools=[*unsandboxed(root)], trace=records.append)
    events = await collect(agent, Session(), "run it")
    result = next(e for e in events if e["type"] == "tool_result")
    assert result["output"] == "exit code: 0\n--- stdout (3 bytes) ---\n42"
    shell = [r for r in records if r["name"] == "shell:run"]
    assert len(shell) == 1
    data = shell[0]["data"]
    assert data["command"] == "echo 42" and data["exit_code"] == 0 and data["isolation"] == "none"
    assert data["stdout_bytes"] == 3 and data["timed_out"] is False


# -- escapes ---------------------------------------------------------------------------------


@needs_bwrap
async def test_writing_outside_the_root_fails(dirs: tuple[Path, Path]) -> None:
    root, outside = dirs
    (root / "link").symlink_to(outside, target_is_directory=True)
    tk = sandboxed(root)
    for command in (
        f"echo pwned > {outside}/pwned",
        "echo pwned > link/pwned",
        f"rm -f {outside}/secret.txt",
        f"mv {outside}/secret.txt {root}/",
        "echo pwned > /etc/tether-pwned",
        "echo pwned > /usr/tether-pwned",
        "echo pwned > /var/tether-pwned",
    ):
        await run(tk, command)  # (outside is under /tmp, which the sandbox does not even show)
    for target in ("/etc", "/usr", "/var"):
        result = await run(tk, f"echo pwned > {target}/tether-pwned")
        assert "Read-only file system" in result.output
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert not any(exists(f"{t}/tether-pwned") for t in ("/etc", "/usr", "/var"))
    assert not (root / "secret.txt").exists()


@needs_bwrap
async def test_tmp_is_private_and_gone_after_the_call(dirs: tuple[Path, Path]) -> None:
    root, _ = dirs
    marker = f"tether-tmp-{os.getpid()}"
    tk = sandboxed(root)
    assert "exit code: 0" in (await run(tk, f"echo x > /tmp/{marker}")).output
    assert not exists(f"/tmp/{marker}")
    assert "exit code: 1" in (await run(tk, f"cat /tmp/{marker}")).output


@needs_bwrap
async def test_homes_and_hidden_directories_are_empty(dirs: tuple[Path, Path]) -> None:
    root, outside = dirs
    tk = sandboxed(root, hide=[str(outside)])
    result = await run(tk, f"ls -A /root /home {outside}; cat ~/.ssh/id_rsa /root/.ssh/id_rsa")
    assert SECRET not in result.output
    assert "secret.txt" not in result.output
    assert "No such file or directory" in result.output


@needs_bwrap
async def test_host_processes_and_capabilities_are_out_of_reach(dirs: tuple[Path, Path]) -> None:
    root, _ = dirs
    tk = sandboxed(root)
    result = await run(tk, "ls /proc | grep -c '^[0-9]'; grep CapEff /proc/self/status")
    count, caps = result.output.splitlines()[-2:]
    assert int(count) < 10  # a new PID namespace: only the sandbox's own processes
    assert caps == "CapEff:\t0000000000000000"
    mount = await run(tk, "mount -t tmpfs none /mnt")
    assert "exit code: 0" not in mount.output
    raise_limit = await run(tk, "ulimit -v unlimited")
    assert "exit code: 0" not in raise_limit.output


@needs_bwrap
async def test_devices_are_a_minimal_set(dirs: tuple[Path, Path]) -> None:
    root, _ = dirs
    result = await run(sandboxed(root), "ls /dev")
    names = set(result.output.splitlines()[2:])
    assert {"null", "zero", "urandom"} <= names
    assert not {n for n in names if n.startswith(("sd", "nvme", "vd", "mem", "kmsg"))}


@pytest.mark.skipif(NO_PROCESS_LIMIT is not None, reason=str(NO_PROCESS_LIMIT))
@pytest.mark.parametrize("isolation", ["bubblewrap", "none"])
async def test_a_fork_bomb_is_contained_and_nothing_survives(
    dirs: tuple[Path, Path], isolation: str
) -> None:
    if isolation == "bubblewrap" and NO_BWRAP:
        pytest.skip(NO_BWRAP)
    root, _ = dirs
    limits = ShellLimits(processes=32)
    kwargs: dict[str, Any] = {"timeout": 2, "limits": limits}
    tk = sandboxed(root, **kwargs) if isolation == "bubblewrap" else unsandboxed(root, **kwargs)
    started = time.monotonic()
    bomb = f"forkbomb{os.getpid()}"  # named after this process: no other command line has it
    result = await run(tk, f"{bomb}() {{ {bomb} | {bomb} & }}; {bomb}; sleep 30")
    assert time.monotonic() - started < 10
    assert result.is_error and "timed out after 2s" in result.output
    assert survivors(bomb) == []
    assert leftover_cgroups() == []
    assert "exit code: 0" in (await run(tk, "echo still fine")).output


@needs_bwrap
@pytest.mark.parametrize("isolation", ["bubblewrap", "none"])
async def test_a_memory_bomb_fails_inside_its_limit(
    dirs: tuple[Path, Path], isolation: str
) -> None:
    root, _ = dirs
    limits = ShellLimits(memory_bytes=256 * 1024**2)
    tk = (
        sandboxed(root, limits=limits)
        if isolation == "bubblewrap"
        else unsandboxed(root, limits=limits)
    )
    result = await run(tk, "python3 -c 'x = bytearray(1024**3)'")
    assert "MemoryError" in result.output and "exit code: 1" in result.output


@pytest.mark.parametrize("isolation", ["bubblewrap", "none"])
async def test_a_gigabyte_of_output_is_cut_to_head_and_tail(
    dirs: tuple[Path, Path], isolation: str
) -> None:
    if isolation == "bubblewrap" and NO_BWRAP:
        pytest.skip(NO_BWRAP)
    root, _ = dirs
    tk = (
        sandboxed(root, max_output=1000, timeout=50)
        if isolation == "bubblewrap"
        else unsandboxed(root, max_output=1000, timeout=50)
    )
    result = await run(tk, "echo START; head -c 1000000000 /dev/zero; echo; echo END")
    assert "--- stdout (1000000011 bytes) ---" in result.output
    assert "\nSTART\n\x00\x00" in result.output and result.output.endswith("\x00\nEND")
    assert "[... 1000000011" not in result.output and "bytes cut ...]" in result.output
    assert len(result.output) < 1200


async def test_limits_can_come_from_the_run(dirs: tuple[Path, Path]) -> None:
    root, _ = dirs
    tk = unsandboxed(root, limits=lambda ctx: ShellLimits(open_files=ctx.services["files"]))
    result = await run(tk, "ulimit -n", RunContext("s", services={"files": 77}))
    assert result.output.endswith("\n77")


@needs_bwrap
async def test_a_file_cannot_outgrow_the_file_size_limit(dirs: tuple[Path, Path]) -> None:
    root, _ = dirs
    tk = sandboxed(root, limits=ShellLimits(file_size_bytes=1024**2))
    result = await run(tk, "head -c 20000000 /dev/zero > big")
    assert "exit code: 0" not in result.output
    assert (root / "big").stat().st_size <= 1024**2


@needs_bwrap
async def test_a_cpu_burner_is_stopped_by_its_cpu_limit(dirs: tuple[Path, Path]) -> None:
    root, _ = dirs
    tk = sandboxed(root, timeout=50, limits=ShellLimits(cpu_seconds=1))
    started = time.monotonic()
    result = await run(tk, "while :; do :; done")
    assert time.monotonic() - started < 45
    assert not result.is_error  # not the wall timeout: the kernel's SIGXCPU
    assert "exit code: 0" not in result.output


@pytest.mark.parametrize("isolation", ["bubblewrap", "none"])
async def test_a_process_that_ignores_sigterm_dies_at_the_timeout(
    dirs: tuple[Path, Path], isolation: str
) -> None:
    if isolation == "bubblewrap" and NO_BWRAP:
        pytest.skip(NO_BWRAP)
    root, _ = dirs
    marker = "271.828"
    tk = sandboxed(root, timeout=1) if isolation == "bubblewrap" else unsandboxed(root, timeout=1)
    started = time.monotonic()
    result = await run(tk, f"trap '' TERM INT HUP; sleep {marker}; echo never")
    assert time.monotonic() - started < 5
    assert (
        result.is_error and "timed out after 1s" in result.output and "never" not in result.output
    )
    assert survivors(marker) == []


@pytest.mark.parametrize("isolation", ["bubblewrap", "none"])
@pytest.mark.parametrize(
    "how",
    [
        "sleep {m} &",
        "nohup sleep {m} >/dev/null 2>&1 &",
        "setsid sleep {m} &",
        "(trap '' HUP; exec sleep {m}) &",
    ],
)
async def test_no_background_process_survives_the_call(
    dirs: tuple[Path, Path], isolation: str, how: str
) -> None:
    if isolation == "bubblewrap" and NO_BWRAP:
        pytest.skip(NO_BWRAP)
    if isolation == "none" and "setsid" in how and NO_PIDS_CGROUP:
        pytest.skip("a setsid process leaves the group; without a pids cgroup nothing finds it")
    root, _ = dirs
    marker = f"{os.getpid() % 1000}.{len(how)}31"
    tk = sandboxed(root) if isolation == "bubblewrap" else unsandboxed(root)
    result = await run(tk, how.format(m=marker) + " echo started")
    assert "exit code: 0" in result.output
    assert survivors(marker) == []


@pytest.mark.parametrize("isolation", ["bubblewrap", "none"])
async def test_a_cancelled_call_leaves_nothing_running(
    dirs: tuple[Path, Path], isolation: str
) -> None:
    if isolation == "bubblewrap" and NO_BWRAP:
        pytest.skip(NO_BWRAP)
    root, _ = dirs
    marker = f"{os.getpid() % 1000}.77"
    tk = sandboxed(root) if isolation == "bubblewrap" else unsandboxed(root)
    task = asyncio.ensure_future(run(tk, f"sleep {marker} & sleep {marker}"))
    for _ in range(100):  # until the command runs
        await asyncio.sleep(0.02)
        if survivors(marker):
            break
    assert survivors(marker)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert survivors(marker) == []
    assert leftover_cgroups() == []
