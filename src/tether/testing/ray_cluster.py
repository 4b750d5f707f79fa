"""`LocalRayCluster`: a real Ray cluster on this machine for tests and benchmarks.

`ray start --head` plus more nodes (`ray start --address=...`), one CPU each, no dashboard,
every port chosen free, its own temporary directory. Each `ray start` runs in a new session,
so every process it leaves behind (GCS, raylet, workers, agents) is in that session's process
group; `stop()` ends exactly those groups. It never calls `ray stop`, which would stop every
Ray process of the user on the machine.

```python
with LocalRayCluster(nodes=2) as cluster:
    report = await evaluate(lab, "agent", cases, engine="ray", address=cluster.address)
```

The cluster runs without token authentication (loopback tests); a driver joining it needs
`RAY_AUTH_MODE=disabled` in its environment too, which `start()` sets for this process (and
`stop()` puts back).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType

__all__ = ["LocalRayCluster"]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("", 0))
        return int(sock.getsockname()[1])


class LocalRayCluster:
    """A head node and `nodes - 1` more, each with `cpus` CPUs, started with the `ray` command
    next to this Python.

    Args:
        nodes: How many nodes (the head included).
        cpus: CPUs each node offers.
        object_store_memory: Bytes of object store per node (Ray's minimum is about 75 MB).
        timeout: Seconds one `ray start` may take.
    """

    def __init__(
        self,
        nodes: int = 2,
        *,
        cpus: int = 1,
        object_store_memory: int = 100_000_000,
        timeout: float = 120.0,
    ) -> None:
        self.nodes = nodes
        self.cpus = cpus
        self.object_store_memory = object_store_memory
        self.timeout = timeout
        self.address = ""
        """``host:port`` of the head's GCS: what `ray.init(address=...)` takes."""
        self.temp_dir = ""
        self._groups: list[int] = []
        self._auth_mode: str | None = None

    def _ray(self) -> str:
        found = Path(sys.executable).with_name("ray")
        return str(found) if found.exists() else (shutil.which("ray") or "ray")

    def _start(self, args: list[str]) -> None:
        common = [
            self._ray(),
            "start",
            f"--num-cpus={self.cpus}",
            f"--object-store-memory={self.object_store_memory}",
            "--disable-usage-stats",
            f"--node-manager-port={_free_port()}",
            f"--object-manager-port={_free_port()}",
            f"--dashboard-agent-listen-port={_free_port()}",
            f"--dashboard-agent-grpc-port={_free_port()}",
            f"--metrics-export-port={_free_port()}",
            f"--runtime-env-agent-port={_free_port()}",
            f"--temp-dir={self.temp_dir}",
        ]
        # Token authentication off, explicitly: otherwise a token some earlier local
        # `ray.init()` left in ~/.ray turns it on for the head but not for the other nodes.
        env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled"}
        proc = subprocess.Popen(
            [*common, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env,
        )
        # Its daemons stay in its process group after it exits: that group is what stop() ends.
        self._groups.append(proc.pid)
        try:
            out, _ = proc.communicate(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            self.stop()
            raise RuntimeError(f"ray start did not finish within {self.timeout} s") from None
        if proc.returncode != 0:
            self.stop()
            text = out.decode(errors="replace")[-2000:]
            raise RuntimeError(f"ray start failed ({proc.returncode}):\n{text}")

    @property
    def sessions(self) -> list[int]:
        """The session ids of the cluster's processes, one per `ray start`: every process the
        cluster runs (GCS, raylets, agents, the workers, which have process groups of their
        own) is in one of them."""
        return list(self._groups)

    def start(self) -> LocalRayCluster:
        """Start the head, then the other nodes; returns self."""
        self._auth_mode = os.environ.get("RAY_AUTH_MODE")
        os.environ["RAY_AUTH_MODE"] = "disabled"
        # Short: Ray's unix socket paths live under it and have a length limit.
        self.temp_dir = tempfile.mkdtemp(prefix="tray", dir="/tmp")
        port = _free_port()
        self._start(
            [
                "--head",
                f"--port={port}",
                "--include-dashboard=false",
                f"--dashboard-port={_free_port()}",
                f"--ray-client-server-port={_free_port()}",
            ]
        )
        host = socket.gethostbyname(socket.gethostname())
        self.address = f"{host}:{port}"
        for _ in range(self.nodes - 1):
            self._start([f"--address={self.address}"])
        return self

    def stop(self) -> None:
        """End every process the cluster started (TERM, then KILL after 2 s); idempotent."""
        groups, self._groups = self._groups, []
        for sig in (signal.SIGTERM, signal.SIGKILL):
            alive = []
            for group in groups:
                try:
                    os.killpg(group, sig)
                    alive.append(group)
                except ProcessLookupError:
                    pass
            if not alive:
                break
            deadline = time.monotonic() + 2
            while sig == signal.SIGTERM and time.monotonic() < deadline:
                if not any(_group_alive(g) for g in alive):
                    break
                time.sleep(0.1)
            groups = [g for g in alive if _group_alive(g)]
        if self.temp_dir:
            shutil.rmtree(self.temp_dir, ignore_errors=True)
            self.temp_dir = ""
            if self._auth_mode is None:
                os.environ.pop("RAY_AUTH_MODE", None)
            else:
                os.environ["RAY_AUTH_MODE"] = self._auth_mode

    def __enter__(self) -> LocalRayCluster:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def _group_alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A group of zombies still answers signal 0; count only processes that still run.
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[-1].split()
        if len(fields) > 2 and fields[2] == str(group) and fields[0] != "Z":
            return True
    return False
