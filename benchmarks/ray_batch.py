#!/usr/bin/env python3
"""The Ray backend on a local three-node cluster: a node killed mid-run, overhead, bytes on the wire, driver RSS.

Prints, in one run on one machine:

1. ``batch --ray`` (the real CLI) running 300 agents (``fake_codex.py --hang 1 --orphan``, each leaving a
   grandchild that ignores SIGTERM) with one node killed (SIGKILL of its raylet) after 100 outcomes: how
   many outcomes, how many distinct ids, how many ids came twice, and the agent processes left on the
   machine afterwards (read from /proc);
2. the same small tasks through the local backend (-j 6) and through Ray (3 nodes × -j 2): wall time,
   tasks/s, the overhead per task, and the bytes of task descriptions and replies per task;
3. the driver's peak RSS while 100,000 streamed ``true`` tasks run on the cluster, and its RSS after the
   first 10,000 (flat means bounded).

Ray must not send anything off the machine: run it as root and it re-executes itself inside a network
namespace that has only loopback (``unshare -n``). Each part's driver is a fresh process.

    sudo python benchmarks/ray_batch.py                    # all of it (~5 minutes on 2 cores)
    sudo python benchmarks/ray_batch.py --rss-tasks 20000  # a shorter RSS part
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.ray_support import RAY_ENV, cannot_unshare, local_cluster, loopback_only  # noqa: E402
from tests.runner_support import FAKE_CODEX, marked_pids, marker, wait_gone  # noqa: E402

SMALL = [*FAKE_CODEX, "--size", "8K"]

DRIVER = r"""
import json, os, resource, sys, time
import psutil
import spoolparse
address, n, j = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
me = psutil.Process()
after = None
done = 0
t = time.perf_counter()
batch = spoolparse.run_many((["true"] for _ in range(n)), backend="ray", address=address, max_concurrent=j,
                            memory_per_task=16 << 20, allow_empty_answer=True)
for o in batch:
    done += 1
    if done == 10_000:
        after = me.memory_info().rss
dt = time.perf_counter() - t
ru = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"tasks": done, "seconds": dt, "rss_after_10k": after, "wire": batch.wire_bytes,
                  "peak_rss_kib": ru.ru_maxrss, "cpu_s": ru.ru_utime + ru.ru_stime}))
"""

COMPARE = r"""
import json, sys, time
import spoolparse
address, backend, n, j = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
argv = json.loads(sys.argv[5])
tasks = [spoolparse.Task(id=f"t{i}", argv=argv) for i in range(n)]
kw = {"backend": "ray", "address": address} if backend == "ray" else {}
t = time.perf_counter()
batch = spoolparse.run_many(tasks, max_concurrent=j, memory_per_task=32 << 20, **kw)
outs = list(batch)
dt = time.perf_counter() - t
assert len(outs) == n and all(o.ok for o in outs), [o for o in outs if not o.ok][:3]
print(json.dumps({"seconds": dt, "wire": getattr(batch, "wire_bytes", None)}))
"""


def env() -> dict[str, str]:
    return {**os.environ, **RAY_ENV, "PYTHONPATH": str(ROOT)}


def done_when(cluster: object, tmp: Path) -> None:
    token, mark = marker()
    tasks = tmp / "tasks.jsonl"
    with tasks.open("w") as f:
        for i in range(300):
            f.write(json.dumps({"id": f"a{i}", "cmd": [*SMALL, "--hang", "1", "--orphan"], "env": mark}) + "\n")
    victim = cluster.list_all_nodes()[1]  # type: ignore[attr-defined]
    t = time.perf_counter()
    p = subprocess.Popen(
        [sys.executable, "-m", "spoolparse", "batch", str(tasks), "--ray", cluster.address,  # type: ignore[attr-defined]
         "-j", "8", "--grace", "0.5", "--joblog", str(tmp / "jobs.ndjson")],
        stdout=subprocess.PIPE, env=env(),
    )
    assert p.stdout is not None
    outs = []
    killed_at = None
    for line in p.stdout:
        outs.append(json.loads(line))
        if len(outs) == 100 and killed_at is None:
            killed_at = len(outs)
            cluster.remove_node(victim, allow_graceful=False)  # type: ignore[attr-defined]
    rc = p.wait()
    wall = time.perf_counter() - t
    ids = Counter(o["id"] for o in outs)
    left = wait_gone(token, timeout=15)
    lost = [json.loads(x) for x in (tmp / "jobs.ndjson").read_text().splitlines() if '"final":false' in x]
    print("## batch --ray: 300 agents, one of 3 nodes killed after 100 outcomes\n")
    print("| outcomes | distinct ids | ids twice | verdicts | requeued (job log) | agents left | exit | wall |")
    print("|---|---|---|---|---|---|---|---|")
    verdicts = dict(Counter(o["verdict"] for o in outs))
    twice = sum(1 for c in ids.values() if c > 1)
    print(f"| {len(outs)} | {len(ids)} | {twice} | {verdicts} | {len(lost)} | {len(left)} | {rc} | {wall:.1f} s |\n")
    for pid in marked_pids(token):
        os.kill(pid, 9)
    cluster.add_node(num_cpus=1)  # type: ignore[attr-defined]
    cluster.wait_for_nodes()  # type: ignore[attr-defined]


def compare(address: str, n: int) -> None:
    res = {}
    for backend, j in (("local", 6), ("ray", 2)):
        out = subprocess.run(
            [sys.executable, "-c", COMPARE, address, backend, str(n), str(j), json.dumps(SMALL)],
            capture_output=True, text=True, env=env(), check=True,
        ).stdout
        res[backend] = json.loads(out.strip().splitlines()[-1])
    loc, ray = res["local"]["seconds"], res["ray"]["seconds"]
    sent, got = res["ray"]["wire"]
    print(f"## {n} small agents (fake_codex --size 8K): local -j 6 vs Ray 3 nodes × -j 2\n")
    print("| backend | wall | tasks/s | overhead per task | task bytes/task | reply bytes/task |")
    print("|---|---|---|---|---|---|")
    print(f"| local | {loc:.2f} s | {n / loc:.0f} | — | — | — |")
    over = (ray - loc) / n * 1000
    print(f"| ray | {ray:.2f} s | {n / ray:.0f} | {over:+.1f} ms | {sent / n:.0f} | {got / n:.0f} |\n")


def driver_rss(address: str, n: int) -> None:
    out = subprocess.run([sys.executable, "-c", DRIVER, address, str(n), "16"], capture_output=True, text=True,
                         env=env(), check=True).stdout
    r = json.loads(out.strip().splitlines()[-1])
    after = r["rss_after_10k"]
    print(f"## driver memory: {r['tasks']:,} streamed `true` tasks on 3 nodes × -j 16\n")
    print("| tasks | wall | tasks/s | driver RSS after 10,000 | driver peak RSS | driver CPU/task "
          "| bytes/task (out + back) |")
    print("|---|---|---|---|---|---|---|")
    mib = 1 << 20
    after_s = f"{after / mib:.0f} MiB" if after else "—"
    per = (r["wire"][0] + r["wire"][1]) / max(1, r["tasks"])
    print(f"| {r['tasks']:,} | {r['seconds']:.0f} s | {r['tasks'] / r['seconds']:.0f} | {after_s} | "
          f"{r['peak_rss_kib'] / 1024:.0f} MiB | {r['cpu_s'] / max(1, r['tasks']) * 1000:.2f} ms | {per:.0f} |\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=300, help="small agents in the overhead part (default 300)")
    ap.add_argument("--rss-tasks", type=int, default=100_000, help="`true` tasks in the RSS part (0: skip)")
    ap.add_argument("--skip-done-when", action="store_true")
    args = ap.parse_args()
    if not loopback_only():
        why = cannot_unshare()
        if why:
            print(f"ray_batch: {why}; it must run in a loopback-only network namespace", file=sys.stderr)
            return 2
        cmd = ["unshare", "-n", "--", "sh", "-c", 'ip link set lo up && exec "$@"', "sh", sys.executable, *sys.argv]
        return subprocess.call(cmd)
    import tempfile

    with local_cluster(3) as cluster, tempfile.TemporaryDirectory() as tmp:
        print(f"python {sys.version.split()[0]}, ray {__import__('ray').__version__}, {os.cpu_count()} CPUs\n")
        if not args.skip_done_when:
            done_when(cluster, Path(tmp))
        if args.tasks:
            compare(cluster.address, args.tasks)
        if args.rss_tasks:
            driver_rss(cluster.address, args.rss_tasks)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
