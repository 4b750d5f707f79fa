"""Startup cost of the package and the command, as ratios to `import httpx` in the same run.

    .venv/bin/python bench/startup.py [REPEATS]

Each subject runs in a fresh interpreter REPEATS times (default 15), interleaved with the floor
so that load on the machine falls on both alike; the figure is the median CPU time (user +
system) of the child. Byte-code is cached once first (in a temporary PYTHONPYCACHEPREFIX), as
an installed package has it. Targets (issue 23): `import tether` and `tether --version` /
`tether --help` at most 1.5x `import httpx`; `tether agent list` on examples/lab at most 0.5 s
of wall time.
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable

SUBJECTS: dict[str, list[str]] = {
    "import httpx (floor)": [PY, "-c", "import httpx"],
    "import tether": [PY, "-c", "import tether"],
    "from tether import create_agent, ...": [
        PY,
        "-c",
        "from tether import create_agent, define_tool, mcp_server, reduce, Session",
    ],
    "tether --version": [PY, "-m", "tether", "--version"],
    "tether --help": [PY, "-m", "tether", "--help"],
}


def child(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one run of `argv`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, env=env, cwd=cwd, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall


def main() -> None:
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    with tempfile.TemporaryDirectory() as cache:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = cache
        env["PYTHONPATH"] = str(ROOT / "src")
        lab = ROOT / "examples" / "lab"
        agent_list = [PY, "-m", "tether", "agent", "list"]
        for argv in [*SUBJECTS.values(), agent_list]:
            child(argv, env, lab)  # warm: byte-code written, files in the page cache
        cpu: dict[str, list[float]] = {name: [] for name in SUBJECTS}
        walls: list[float] = []
        list_cpu: list[float] = []
        for _ in range(repeats):
            for name, argv in SUBJECTS.items():
                cpu[name].append(child(argv, env, lab)[0])
            spent, wall = child(agent_list, env, lab)
            list_cpu.append(spent)
            walls.append(wall)
    floor = statistics.median(cpu["import httpx (floor)"])
    print(f"{'subject':40} {'CPU ms (median)':>16} {'x httpx':>8} {'range x':>14}")
    for name, times in cpu.items():
        ratios = sorted(t / floor for t in times)
        lo, hi = ratios[len(ratios) // 10], ratios[-1 - len(ratios) // 10]
        med = statistics.median(times)
        print(f"{name:40} {med * 1000:16.1f} {med / floor:8.2f} {lo:6.2f}-{hi:<6.2f}")
    walls.sort()
    print(
        f"tether agent list (examples/lab) wall: median {statistics.median(walls):.3f} s, "
        f"best {walls[0]:.3f} s, worst {walls[-1]:.3f} s (target 0.5 s); CPU median "
        f"{statistics.median(list_cpu):.3f} s (wall minus CPU is waiting for a busy machine)"
    )


if __name__ == "__main__":
    main()
