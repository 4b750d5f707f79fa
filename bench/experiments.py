"""Experiment throughput: 1,000 cases with the scripted model, on the local engine and on a
2-node local Ray cluster (one CPU per node).

    .venv/bin/python bench/experiments.py [--cases 1000] [--concurrency 16] [--no-ray]

A throwaway project (tether.toml, an agent on the scripted model, a SQLite store) is written to
a temporary directory. Each case is a real episode: its run record, its transcript and its
`case_finished` result are written to the store, and three evaluators score it.

Prints, for each engine: wall time, cases per second (for the local engine also per CPU second
of this process: steadier than wall time on a shared machine), and memory (the driver's resident
memory growth over the run, and the bytes Python allocated at peak, traced in a separate run).
For Ray also a warm figure: a second experiment on the same runtime (its Ray connection and
actors kept from the first), and the CPU seconds per case of each experiment: the driver's (this
process) and the cluster's (every process of its nodes' sessions: the actors' workers, raylets,
GCS), the machine's load average beside them (on a shared machine the wall figures follow the
load; the CPU figures much less). Also the time to reopen a finished experiment (a rerun with
nothing left to do) and to build its report.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import resource
import sys
import tempfile
import textwrap
import time
import tracemalloc
from pathlib import Path
from typing import Any

from tether.evals import evaluate, show
from tether.lab import load_registry

LAB = """
from tether.lab import Runtime
from tether.testing import script_client


def reply(request):
    text = request["messages"][-1]["content"][-1].get("text", "")
    return {"text": f"answer to {text}", "usage": {"input_tokens": 12, "output_tokens": 5}}


lab = Runtime(version="1.0", defaults={"model": script_client([reply] * 1_000_000)})
bench = lab.create_agent(id="bench", system_prompt="Answer.")
"""

EVALUATORS = [
    {"type": "contains", "value": "answer"},
    {"type": "regex", "pattern": r"^answer to q\d+$"},
    {"type": "max_latency_ms", "value": 5000},
]


def project(root: Path, store: str) -> Path:
    package = f"benchapp_{int(time.time() * 1000) % 10**9}"
    (root / package).mkdir(parents=True)
    (root / package / "__init__.py").write_text("")
    (root / package / "lab.py").write_text(textwrap.dedent(LAB))
    (root / "tether.toml").write_text(
        f'runtime = "{package}.lab:lab"\nagents = ["{package}.lab:bench"]\nstore = "{store}"\n'
    )
    return root


def rss_mb() -> float:
    """This process's resident memory now (Linux), in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def sessions_cpu(sessions: list[int]) -> float:
    """CPU seconds (user + system) of the live processes of `sessions` (Linux)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) in sessions:
            total += int(fields[11]) + int(fields[12])
    return total / tick


async def one_run(
    root: Path,
    cases: list[dict[str, Any]],
    engine: str,
    concurrency: int,
    address: str | None,
    sessions: list[int] | None = None,
) -> dict[str, Any]:
    for name in [m for m in sys.modules if m.startswith("benchapp_")]:
        del sys.modules[name]
    registry = load_registry(root)
    lab = registry.runtime

    cpu: dict[str, float] = {}

    async def timed(experiment: str) -> float:
        """Run `experiment` on `engine`; its wall time (and in `cpu`, its CPU seconds per case:
        the driver's and, on Ray, the cluster's)."""
        cluster = sessions_cpu(sessions) if sessions else 0.0
        driver = time.process_time()
        start = time.perf_counter()
        report = await evaluate(
            lab,
            "bench",
            cases,
            evaluators=EVALUATORS,
            experiment=experiment,
            engine=engine,  # type: ignore[arg-type]
            concurrency=concurrency,
            address=address,
        )
        elapsed = time.perf_counter() - start
        cpu["driver"] = (time.process_time() - driver) / len(cases)
        cpu["cluster"] = (sessions_cpu(sessions) - cluster) / len(cases) if sessions else 0.0
        assert report["summary"]["passed"] == len(cases), report["summary"]
        return elapsed

    async with lab:
        _ = lab.run_store  # open the store before the clock starts
        gc.collect()
        before = rss_mb()
        load = os.getloadavg()[0]
        elapsed = await timed(f"bench-{engine}")
        cold_cpu = dict(cpu)
        grown = rss_mb() - before
        # A second experiment on the same runtime: its Ray connection and actors are up.
        warm = len(cases) / await timed(f"bench-{engine}-warm") if engine == "ray" else None
        start = time.perf_counter()
        await evaluate(
            lab,
            "bench",
            cases,
            evaluators=EVALUATORS,
            experiment=f"bench-{engine}",
            engine="local",
            concurrency=concurrency,
        )
        reopen = time.perf_counter() - start
        start = time.perf_counter()
        await show(lab, f"bench-{engine}")
        shown = time.perf_counter() - start
    return {
        "elapsed": elapsed,
        "rate": len(cases) / elapsed,
        "warm_rate": warm,
        "cpu_rate": 1 / cold_cpu["driver"],
        "cold_cpu_ms": {k: v * 1000 for k, v in cold_cpu.items()},
        "warm_cpu_ms": {k: v * 1000 for k, v in cpu.items()},
        "load": load,
        "rss_growth_mb": grown,
        "reopen_s": reopen,
        "show_s": shown,
    }


async def traced_peak(root: Path, cases: list[dict[str, Any]], concurrency: int) -> float:
    for name in [m for m in sys.modules if m.startswith("benchapp_")]:
        del sys.modules[name]
    lab = load_registry(root).runtime
    async with lab:
        _ = lab.run_store
        tracemalloc.start()
        await evaluate(
            lab, "bench", cases, evaluators=EVALUATORS, experiment="traced", concurrency=concurrency
        )
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return peak / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--no-ray", action="store_true")
    args = parser.parse_args()
    cases = [{"id": f"q{i}", "input": f"q{i}"} for i in range(args.cases)]
    with tempfile.TemporaryDirectory(prefix="tether-bench-") as tmp:
        local = project(Path(tmp) / "local", "sqlite:///.tether/bench.db")
        result = asyncio.run(one_run(local, cases, "local", args.concurrency, None))
        print(
            f"local engine, SQLite: {args.cases} cases in {result['elapsed']:.2f} s = "
            f"{result['rate']:.0f} cases/s ({result['cpu_rate']:.0f} per CPU second of this "
            f"process); driver RSS +{result['rss_growth_mb']:.1f} MB; "
            f"rerun with nothing left {result['reopen_s'] * 1000:.0f} ms; "
            f"report {result['show_s'] * 1000:.0f} ms"
        )
        memory = project(Path(tmp) / "memory", "memory")
        result = asyncio.run(one_run(memory, cases, "local", args.concurrency, None))
        print(
            f"local engine, memory: {args.cases} cases in {result['elapsed']:.2f} s = "
            f"{result['rate']:.0f} cases/s ({result['cpu_rate']:.0f} per CPU second of this "
            f"process); driver RSS +{result['rss_growth_mb']:.1f} MB"
        )
        traced = project(Path(tmp) / "traced", "sqlite:///.tether/traced.db")
        peak = asyncio.run(traced_peak(traced, cases, args.concurrency))
        print(f"local engine, SQLite: Python allocations at peak {peak:.1f} MB (tracemalloc)")
        if args.no_ray:
            return
        from tether.testing.ray_cluster import LocalRayCluster

        ray_root = project(Path(tmp) / "ray", "sqlite:///.tether/ray.db")
        started = time.perf_counter()
        with LocalRayCluster(nodes=2, cpus=1) as cluster:
            boot = time.perf_counter() - started
            result = asyncio.run(
                one_run(ray_root, cases, "ray", args.concurrency, cluster.address, cluster.sessions)
            )

        def per_case(cpu: dict[str, float]) -> str:
            return f"CPU per case: driver {cpu['driver']:.2f} ms, cluster {cpu['cluster']:.2f} ms"

        print(
            f"ray engine, 2 nodes x 1 CPU, SQLite: {args.cases} cases in "
            f"{result['elapsed']:.2f} s = {result['rate']:.0f} cases/s (actor start-up included; "
            f"cluster start-up {boot:.1f} s not); {per_case(result['cold_cpu_ms'])}; "
            f"driver RSS +{result['rss_growth_mb']:.1f} MB; load {result['load']:.1f}"
        )
        print(
            f"ray engine, 2 nodes x 1 CPU, SQLite, warm (a second experiment on the same "
            f"runtime, its connection and actors up): {result['warm_rate']:.0f} cases/s; "
            f"{per_case(result['warm_cpu_ms'])}"
        )


if __name__ == "__main__":
    main()
