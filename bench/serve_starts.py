"""Bursts of simultaneous run starts against `tether serve`: how soon each start gets its 202,
and the server's CPU per start.

    .venv/bin/python bench/serve_starts.py [--clients 500] [--bursts 5] [--delay 0.001]
                                           [--against SRC] [--profile OUT] [--launcher FILE]

A real `tether serve` process (one worker, SQLite in a temporary directory) serves the test
project of tests/serve (its model answers "Hello from turn 1." in three chunks). Each burst opens
`--clients` connections at once, each a bare HTTP/1.1 POST /api/agents/chat/runs; a start's time
is from the burst's beginning to its 202's status line (so it holds the connect and the wait
behind the starts the server read first). Between bursts the server settles: its runs finish
and its CPU goes quiet.

Per burst: p50 / p99 / max of the 202s; the server's CPU (utime + stime of /proc/PID/stat: every
thread) from the burst's beginning to its last 202, per start; and the CPU until the runs have
ended too, per run. The first burst warms the server up (imports, caches) and is left out of the
summary.

`--against SRC` starts a second server importing tether from SRC (e.g. /work/main/src) and
alternates the bursts between the two (A B A B ...), so that both see the same load on a shared
machine. `--profile OUT` runs the server (the first one) under cProfile during the bursts only
and writes the stats to OUT (`python -m pstats OUT`); `--launcher FILE` runs it with the code in
FILE instead (instruments of one's own: it ends with `from tether.cli import main; main()`).

Nothing is asserted; the numbers go in the commit messages.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import selectors
import signal
import socket
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.serve_streams import pct, start_request
from tests.serve.conftest import Server, start_server, write_project

TICK = os.sysconf("SC_CLK_TCK")

PROFILED = """\
import cProfile, signal
profile = cProfile.Profile()
def _on(*_):
    profile.enable()
def _off(*_):
    profile.disable()
    profile.dump_stats({out!r})
signal.signal(signal.SIGUSR1, _on)
signal.signal(signal.SIGUSR2, _off)
from tether.cli import main
main()
"""


def cpu_seconds(pid: int) -> float:
    """utime + stime of the process (all its threads)."""
    raw = Path(f"/proc/{pid}/stat").read_text()
    fields = raw[raw.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def starts(host: str, port: int, request: bytes, clients: int) -> list[float]:
    """`clients` starts at once, each sent as soon as its connection is open (non-blocking
    sockets on one selector, as from that many separate clients); the perf_counter time each
    202's status line came."""
    selector = selectors.DefaultSelector()
    answered: list[float] = []
    try:
        for _ in range(clients):
            sock = socket.socket()
            sock.setblocking(False)
            sock.connect_ex((host, port))
            selector.register(sock, selectors.EVENT_WRITE, b"")
        while len(selector.get_map()):
            for key, events in selector.select(30):
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                if events & selectors.EVENT_WRITE:
                    sock.sendall(request)
                    selector.modify(sock, selectors.EVENT_READ, b"")
                    continue
                data = sock.recv(65536)
                if key.data == b"" and data:
                    if not data.startswith(b"HTTP/1.1 202 "):
                        raise RuntimeError(f"a start answered {data[:40]!r}")
                    answered.append(time.perf_counter())
                    selector.modify(sock, selectors.EVENT_READ, b"answered")
                elif not data:
                    selector.unregister(sock)
                    sock.close()
    finally:
        for key in list(selector.get_map().values()):
            key.fileobj.close()  # type: ignore[union-attr]
        selector.close()
    if len(answered) != clients:
        raise RuntimeError(f"{clients - len(answered)} starts got no answer")
    return answered


async def start(host: str, port: int, request: bytes) -> float:
    """One start on asyncio streams (`--asyncio-client`); the perf_counter time its 202's
    status line came."""
    reader, writer = await asyncio.open_connection(host, port)
    try:
        writer.write(request)
        status = await reader.readline()
        at = time.perf_counter()
        if b" 202 " not in status:
            raise RuntimeError(f"a start answered {status!r}")
        await reader.read()
    finally:
        writer.close()
    return at


@dataclass
class Burst:
    p50_ms: float
    p99_ms: float
    max_ms: float
    cpu_per_start_ms: float
    cpu_per_run_ms: float


@dataclass
class Target:
    name: str
    server: Server
    bursts: list[Burst] = field(default_factory=list)


async def settle(pid: int, quiet: float = 0.005, every: float = 0.25) -> None:
    """Wait until the server spends under `quiet` CPU seconds in `every` seconds."""
    last = cpu_seconds(pid)
    while True:
        await asyncio.sleep(every)
        now = cpu_seconds(pid)
        if now - last < quiet:
            return
        last = now


async def burst(server: Server, clients: int, streams: bool) -> Burst:
    host, port = server.base.removeprefix("http://").split(":")
    request = start_request(host, "hi")
    pid = server.process.pid
    await settle(pid)
    cpu0 = cpu_seconds(pid)
    begin = time.perf_counter()
    if streams:
        answered = await asyncio.gather(*(start(host, int(port), request) for _ in range(clients)))
    else:
        answered = starts(host, int(port), request, clients)
    cpu1 = cpu_seconds(pid)
    await settle(pid)
    cpu2 = cpu_seconds(pid)
    waits = [at - begin for at in answered]
    return Burst(
        statistics.median(waits) * 1000,
        pct(waits, 0.99) * 1000,
        max(waits) * 1000,
        (cpu1 - cpu0) / clients * 1000,
        (cpu2 - cpu0) / clients * 1000,
    )


def line(b: Burst) -> str:
    return (
        f"202 p50 {b.p50_ms:4.0f} ms, p99 {b.p99_ms:4.0f} ms, max {b.max_ms:4.0f} ms; "
        f"server CPU {b.cpu_per_start_ms:.2f} ms per start "
        f"({b.cpu_per_run_ms:.2f} ms per run to its end)"
    )


def summary(bursts: list[Burst]) -> str:
    """The range of each figure over `bursts`."""
    parts = []
    for label, name, digits in (
        ("202 p50", "p50_ms", 0),
        ("p99", "p99_ms", 0),
        ("CPU per start", "cpu_per_start_ms", 2),
        ("per run to its end", "cpu_per_run_ms", 2),
    ):
        values = [getattr(b, name) for b in bursts]
        parts.append(f"{label} {min(values):.{digits}f}-{max(values):.{digits}f} ms")
    return ", ".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bursts", type=int, default=5, help="bursts per server")
    parser.add_argument("--clients", type=int, default=500, help="starts per burst")
    parser.add_argument("--delay", type=float, default=0.001, help="seconds between chunks")
    parser.add_argument(
        "--asyncio-client",
        action="store_true",
        help="clients on asyncio streams (one loop: every request waits for all connects)",
    )
    parser.add_argument("--against", metavar="SRC", help="alternate with tether from SRC")
    parser.add_argument("--profile", metavar="OUT", help="cProfile the server's bursts")
    parser.add_argument(
        "--launcher",
        metavar="FILE",
        help="Python code that runs the (first) server's CLI instead, e.g. with instruments; "
        "it gets SIGUSR2 after the bursts",
    )
    args = parser.parse_args()
    here = str(Path(__file__).resolve().parents[1] / "src")
    # Absolute: the servers run in their project's directory.
    sources = [("this", str(Path(os.environ.get("PYTHONPATH") or here).resolve()))]
    if args.against:
        sources.append(("against", str(Path(args.against).resolve())))
    with tempfile.TemporaryDirectory() as tmp:
        targets: list[Target] = []
        try:
            for n, (name, src) in enumerate(sources):
                root = Path(tmp) / name
                project = write_project(root)
                launcher = (
                    PROFILED.format(out=str(Path(args.profile).resolve()))
                    if args.profile and n == 0
                    else "from tether.cli import main; main()"
                )
                if args.launcher and n == 0:
                    launcher = Path(args.launcher).read_text()
                env = {
                    "TETHER_TEST_STORE": f"sqlite:///{root / 'bench.db'}",
                    "TETHER_TEST_DELAY": str(args.delay),
                    "PYTHONPATH": src,
                }
                server = start_server(
                    project,
                    env,
                    ["--max-client-connections", str(args.clients * 4)],
                    launcher=launcher,
                )
                targets.append(Target(f"{name} ({src})", server))
            print(
                f"{args.clients} simultaneous starts per burst, {args.bursts} bursts per server; "
                f"load {os.getloadavg()[0]:.2f}"
            )
            if args.profile:
                targets[0].server.process.send_signal(signal.SIGUSR1)
            for n in range(args.bursts):
                for target in targets:
                    result = asyncio.run(burst(target.server, args.clients, args.asyncio_client))
                    target.bursts.append(result)
                    print(f"  {n + 1} {target.name}: {line(result)}", flush=True)
            if args.profile or args.launcher:
                targets[0].server.process.send_signal(signal.SIGUSR2)
                time.sleep(1)
            print(f"load {os.getloadavg()[0]:.2f}; without the first burst:")
            for target in targets:
                print(f"  {target.name}: {summary(target.bursts[1:] or target.bursts)}")
        finally:
            for target in targets:
                target.server.stop()


if __name__ == "__main__":
    main()
