"""What a toolkit call costs: `read_file` against a plain `open().read()`, and a trivial shell
command (`true`) with and without bubblewrap against a bare `bash -c true` subprocess.

Run: .venv/bin/python bench/toolkits.py [--calls N]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from tether import RunContext
from tether.toolkits import bubblewrap_problem, file_tools, shell_tool


def _realpath(path: Path) -> str:
    return os.path.realpath(path)


async def timed(fn: Callable[[], Awaitable[object]], calls: int) -> tuple[float, float]:
    """(median, p95) milliseconds of `calls` awaits of `fn`, after a few warm-up calls."""
    for _ in range(3):
        await fn()
    samples = []
    for _ in range(calls):
        started = time.perf_counter()
        await fn()
        samples.append((time.perf_counter() - started) * 1000)
    samples.sort()
    return statistics.median(samples), samples[int(len(samples) * 0.95) - 1]


async def main(calls: int) -> None:
    ctx = RunContext("bench")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "src").mkdir()
        text = "".join(f"line {i}: some source code here\n" for i in range(300))  # ~10 KB
        (root / "src" / "module.py").write_text(text)
        read = file_tools(root)["read_file"]
        args = {"path": "src/module.py"}

        async def tool_read() -> object:
            return await read.call(args, ctx)

        async def plain_read() -> object:
            return (root / "src" / "module.py").read_text()

        rows = [
            ("read_file (10 KB)", await timed(tool_read, calls * 10)),
            ("  open().read() floor", await timed(plain_read, calls * 10)),
        ]

        async def bare() -> object:
            proc = await asyncio.create_subprocess_exec("/bin/bash", "-c", "true")
            return await proc.wait()

        none = shell_tool(root, isolation="none", network=True, approval=False)["shell"]

        async def shell_none() -> object:
            return await none.call({"command": "true"}, ctx)

        rows += [
            ("shell 'true', isolation=none", await timed(shell_none, calls)),
            ("  bash -c true floor", await timed(bare, calls)),
        ]
        problem = bubblewrap_problem()
        if problem is None:
            sandboxed = shell_tool(root, approval=False)["shell"]

            async def shell_bwrap() -> object:
                return await sandboxed.call({"command": "true"}, ctx)

            # the same sandbox the tool makes, started by a bare subprocess
            real = _realpath(root)
            argv = sandboxed.execute.__self__.argv(real, "true")  # type: ignore[union-attr]

            async def bare_bwrap() -> object:
                proc = await asyncio.create_subprocess_exec(*argv, stdout=subprocess.DEVNULL)
                return await proc.wait()

            rows += [
                ("shell 'true', isolation=bubblewrap", await timed(shell_bwrap, calls)),
                ("  the same bwrap argv, bare", await timed(bare_bwrap, calls)),
            ]
        else:
            print(f"(no bubblewrap rows: {problem})")
    print(f"{'call':38} {'median ms':>10} {'p95 ms':>10}")
    for name, (median, p95) in rows:
        print(f"{name:38} {median:10.3f} {p95:10.3f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=50)
    asyncio.run(main(parser.parse_args().calls))
