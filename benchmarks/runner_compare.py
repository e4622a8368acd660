#!/usr/bin/env python3
"""Runner overhead: trivial tasks through run_many vs a bare ThreadPoolExecutor + Popen loop.

Prints tasks/s for each at the same concurrency (the bare loop sends output to /dev/null;
the spooled loop does what run_many does per task: two spools, a parser, a result), and the parent's peak RSS
for a long streamed batch. Each measurement runs in a fresh interpreter so
one does not inflate the other's peak RSS.

    python benchmarks/runner_compare.py                 # 2,000 `true` at -j 8, then 10,000 at -j 50
    python benchmarks/runner_compare.py --tasks 500 --rss-tasks 0
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

BARE = r"""
import json, resource, subprocess, sys, time
from concurrent.futures import ThreadPoolExecutor
n, j = int(sys.argv[1]), int(sys.argv[2])
def one(_):
    p = subprocess.Popen(["true"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True)
    return p.wait()
t = time.perf_counter()
with ThreadPoolExecutor(j) as ex:
    codes = list(ex.map(one, range(n)))
dt = time.perf_counter() - t
assert codes.count(0) == n
print(json.dumps({"tasks": n, "seconds": dt, "rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""

SPOOLED = r"""
import json, resource, sys, time
from concurrent.futures import ThreadPoolExecutor
import spoolparse
run = spoolparse.run  # its modules load on first use: an import, before the clock like the others'
n, j = int(sys.argv[1]), int(sys.argv[2])
def one(_):
    return run(["true"], keep_output=False, allow_empty_answer=True).ok  # `true` prints no answer
t = time.perf_counter()
with ThreadPoolExecutor(j) as ex:
    ok = sum(ex.map(one, range(n)))
dt = time.perf_counter() - t
assert ok == n
print(json.dumps({"tasks": n, "seconds": dt, "rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""

RUNNER = r"""
import json, resource, sys, time
import spoolparse
run_many = spoolparse.run_many  # the runner's modules load on first use: an import, before the clock
n, j = int(sys.argv[1]), int(sys.argv[2])
t = time.perf_counter()
ok = sum(o.ok for o in run_many((["true"] for _ in range(n)), max_concurrent=j, allow_empty_answer=True))
dt = time.perf_counter() - t
assert ok == n, ok
print(json.dumps({"tasks": n, "seconds": dt, "rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""


def _measure(code: str, n: int, j: int) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", code, str(n), str(j)], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=2000, help="trivial tasks per throughput run (default 2000)")
    ap.add_argument("-j", type=int, default=8, help="concurrency for the throughput runs (default 8)")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each; the best is reported (default 3)")
    ap.add_argument("--rss-tasks", type=int, default=10_000, help="tasks in the peak-RSS run (0 skips it)")
    ap.add_argument("--rss-j", type=int, default=50, help="concurrency of the peak-RSS run (default 50)")
    args = ap.parse_args()

    bare = min((_measure(BARE, args.tasks, args.j) for _ in range(args.repeat)), key=lambda r: r["seconds"])
    spooled = min((_measure(SPOOLED, args.tasks, args.j) for _ in range(args.repeat)), key=lambda r: r["seconds"])
    ours = min((_measure(RUNNER, args.tasks, args.j) for _ in range(args.repeat)), key=lambda r: r["seconds"])
    b, s, o = (args.tasks / r["seconds"] for r in (bare, spooled, ours))
    print(f"trivial tasks ({args.tasks} x `true`, -j {args.j}, best of {args.repeat}):")
    print(f"  ThreadPoolExecutor({args.j}) + Popen (no spools)  : {b:8.0f} tasks/s")
    print(f"  ThreadPoolExecutor({args.j}) + spoolparse.run      : {s:8.0f} tasks/s   ({s / b:.2f}x the bare loop)")
    print(f"  spoolparse.run_many (one supervisor thread)  : {o:8.0f} tasks/s   ({o / b:.2f}x the bare loop, "
          f"{o / s:.2f}x the spooled loop)")
    if args.rss_tasks:
        big = _measure(RUNNER, args.rss_tasks, args.rss_j)
        print(f"streamed batch ({args.rss_tasks} x `true`, max_concurrent {args.rss_j}):")
        print(f"  parent peak RSS {big['rss_kib'] / 1024:.1f} MiB, {args.rss_tasks / big['seconds']:.0f} tasks/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
