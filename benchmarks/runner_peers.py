#!/usr/bin/env python3
"""Many trivial tasks at a fixed concurrency: ``run_many`` and what people use instead.

    python benchmarks/runner_peers.py                # 2,000 `true` at -j 8, median of 3
    python benchmarks/runner_peers.py --tasks 300 --json

Approaches: ``spoolparse.run_many`` (when the runner is installed), a bare
``ThreadPoolExecutor`` + ``Popen`` loop, ``asyncio`` subprocesses under a
``Semaphore``, ``xargs -P`` and GNU ``parallel -j`` (installed with apt-get
when missing and possible). Each run is a fresh process; Python approaches
time themselves after imports, the command-line tools are timed by wall clock
from here (their start-up is part of them).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measure import timed

RUN_MANY = r"""
import json, resource, sys, time
import spoolparse
run_many = spoolparse.run_many  # the runner's modules load on first use: an import, before the clock like the others'
n, j = int(sys.argv[1]), int(sys.argv[2])
t = time.perf_counter()
ok = sum(o.ok for o in run_many((["true"] for _ in range(n)), max_concurrent=j, allow_empty_answer=True))
dt = time.perf_counter() - t
assert ok == n, ok
print(json.dumps({"seconds": dt, "rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""

THREADPOOL = r"""
import json, resource, subprocess, sys, time
from concurrent.futures import ThreadPoolExecutor
n, j = int(sys.argv[1]), int(sys.argv[2])
def one(_):
    return subprocess.Popen(["true"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True).wait()
t = time.perf_counter()
with ThreadPoolExecutor(j) as ex:
    codes = list(ex.map(one, range(n)))
dt = time.perf_counter() - t
assert codes.count(0) == n
print(json.dumps({"seconds": dt, "rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""

ASYNCIO = r"""
import asyncio, json, resource, sys, time
n, j = int(sys.argv[1]), int(sys.argv[2])
async def main():
    sem = asyncio.Semaphore(j)
    async def one():
        async with sem:
            p = await asyncio.create_subprocess_exec("true", stdin=asyncio.subprocess.DEVNULL,
                                                     stdout=asyncio.subprocess.DEVNULL,
                                                     stderr=asyncio.subprocess.DEVNULL)
            return await p.wait()
    return await asyncio.gather(*(one() for _ in range(n)))
t = time.perf_counter()
codes = asyncio.run(main())
dt = time.perf_counter() - t
assert codes.count(0) == n
print(json.dumps({"seconds": dt, "rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""


def _python(code: str, n: int, j: int) -> dict[str, float]:
    m = timed([sys.executable, "-c", code, str(n), str(j)])
    got: dict[str, float] = json.loads(m.stdout)
    got["rss_kib"] = m.rss_kib  # GNU time's figure for the process itself
    return got


def _tool(argv: list[str], n: int) -> dict[str, float]:
    """Feed ``1..n`` to a command-line scheduler; wall clock and its peak RSS (KiB)."""
    m = timed(argv, stdin="".join(f"{i}\n" for i in range(1, n + 1)).encode(), stdout=subprocess.DEVNULL)
    return {"seconds": m.wall, "rss_kib": m.rss_kib}


def ensure_parallel() -> str | None:
    """GNU parallel's path, installing it with apt-get when it is missing and that is possible."""
    found = shutil.which("parallel")
    if found is None and shutil.which("apt-get") and os.geteuid() == 0:
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "install", "-y", "-q", "parallel"], env=env, capture_output=True, check=False)
        found = shutil.which("parallel")
        if found is None:
            subprocess.run(["apt-get", "update", "-q"], env=env, capture_output=True, check=False)
            subprocess.run(["apt-get", "install", "-y", "-q", "parallel"], env=env, capture_output=True, check=False)
            found = shutil.which("parallel")
    return found


def has_run_many() -> bool:
    try:
        import spoolparse
    except ImportError:
        return False
    return hasattr(spoolparse, "run_many")


def measure(n: int, j: int, repeat: int) -> list[dict[str, Any]]:
    plans: list[tuple[str, Any]] = []
    if has_run_many():
        plans.append(("spoolparse.run_many", lambda: _python(RUN_MANY, n, j)))
    plans.append(("ThreadPoolExecutor+Popen", lambda: _python(THREADPOOL, n, j)))
    plans.append((f"asyncio+Semaphore({j})", lambda: _python(ASYNCIO, n, j)))
    plans.append((f"xargs -P {j}", lambda: _tool(["xargs", "-P", str(j), "-n", "1", "true"], n)))
    par = ensure_parallel()
    if par is not None:
        plans.append((f"GNU parallel -j {j}", lambda: _tool([par, "--will-cite", "-j", str(j), "true"], n)))
    rows: list[dict[str, Any]] = []
    for name, fn in plans:
        runs = [fn() for _ in range(repeat)]
        sec = statistics.median(r["seconds"] for r in runs)
        rows.append({
            "approach": name,
            "tasks": n,
            "concurrency": j,
            "seconds": sec,
            "tasks_per_s": n / sec,
            "rss_mib": max(r["rss_kib"] for r in runs) / 1024,
            "runs": [r["seconds"] for r in runs],
        })
    if par is None:
        rows.append({"approach": f"GNU parallel -j {j}", "skipped": "not installed and apt-get unavailable"})
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    base = {r["approach"]: r for r in rows if "seconds" in r}
    ref = base.get("ThreadPoolExecutor+Popen")
    out = [
        "| approach | tasks | s (median) | tasks/s | × ThreadPool+Popen | peak RSS MiB |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        if "seconds" not in r:
            out.append(f"| {r['approach']} | skipped: {r['skipped']} | | | | |")
            continue
        ratio = f"{r['tasks_per_s'] / ref['tasks_per_s']:.2f}" if ref else "–"
        out.append(
            f"| {r['approach']} | {r['tasks']} | {r['seconds']:.2f} | {r['tasks_per_s']:.0f} | {ratio} "
            f"| {r['rss_mib']:.0f} |"
        )
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=2000, help="trivial tasks per run (default 2000)")
    ap.add_argument("-j", type=int, default=8, help="concurrency (default 8)")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each; the median is reported (default 3)")
    ap.add_argument("--json", action="store_true", help="print the rows as JSON instead of a table")
    args = ap.parse_args()
    rows = measure(args.tasks, args.j, args.repeat)
    print(json.dumps(rows) if args.json else table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
