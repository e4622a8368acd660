#!/usr/bin/env python3
"""Fleet supervision cost: N agents streaming ~2 KB JSON lines 10x/s, then an answer.

Every agent is ``fixtures/fleet_agent.sh`` (bash builtins only, so the agents themselves cost almost
nothing): ~100 lines of ~2 KB over ~10 s, then a final ``agent_message`` carrying the wall-clock time
of its exit. For each supervisor and each N it prints:

- the parent's CPU share (user+sys of the supervising process alone, over its wall time, in % of one core),
- outcome latency (agent exit -> outcome in the caller's hands) p50 / p99 / max,
- the parent's peak RSS (VmHWM),
- that every answer came back.

Supervisors: ``run_many`` and ``arun_many`` (in-process), ``arun`` (one ``spoolparse.arun`` per agent under
``asyncio.gather``, no runner), ``batch`` (the CLI, ``-j N``, outcomes read
from its stdout), and ``asyncio`` — a bare asyncio + ``create_subprocess_exec`` supervisor reading lines
and keeping the last answer, as the reference. Each measurement runs in a fresh interpreter.

    python benchmarks/fleet.py                      # N = 50, 200, 500, 1000; every supervisor
    python benchmarks/fleet.py --agents 200 --only run_many,asyncio --ticks 50
    python benchmarks/fleet.py --spool-dir /mnt/jext4   # spools on another filesystem
    python benchmarks/fleet.py --agents 500 --threads   # where batch's CPU goes, thread by thread

Where the spools live matters on an ext4 *without a journal* (this machine's root filesystem): there
each new inode skips every inode of its block group freed in the last seconds to minutes
(``recently_deleted`` in the kernel's ``fs/ext4/ialloc.c``), so 1,000 spools made in the temp dir right
after another run freed 1,000 there cost 0.4-0.7 ms each instead of 0.01 ms; spoolparse makes them in a
directory of the process's own there (``spoolparse.spool.placement``; ``benchmarks/spool_inodes.py``
measures both). The line printed first names the spool directory and whether its filesystem is ext4
without a journal.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
AGENT = str(ROOT / "fixtures" / "fleet_agent.sh")
SUPERVISORS = ("run_many", "arun_many", "arun", "batch", "asyncio")

# Each child script prints one JSON object: cpu_s, wall_s, hwm_kib, latencies (s), answers.
COMMON = r"""
import json, os, resource, sys, time
n, ticks, interval, agent = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
argv = ["bash", agent, str(ticks), str(interval)]
def exit_time(text):
    return float(text.split()[-1]) if text and text.startswith("EXIT-AT ") else None
def hwm_kib():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0
def report(t0, lat, answers, extra_cpu=0.0, extra_hwm=0):
    ru = resource.getrusage(resource.RUSAGE_SELF)
    print(json.dumps({"cpu_s": ru.ru_utime + ru.ru_stime + extra_cpu, "wall_s": time.monotonic() - t0,
                      "hwm_kib": max(hwm_kib(), extra_hwm), "lat": lat, "answers": answers}))
"""

RUN_MANY = COMMON + r"""
import spoolparse
t0 = time.monotonic(); lat = []; answers = 0
for o in spoolparse.run_many((argv for _ in range(n)), max_concurrent=n, memory_per_task=1 << 20):
    now = time.time()
    t = exit_time((o.summary or {}).get("text"))
    if o.ok and t is not None:
        answers += 1; lat.append(now - t)
report(t0, lat, answers)
"""

ARUN_MANY = COMMON + r"""
import asyncio, spoolparse
async def main():
    t0 = time.monotonic(); lat = []; answers = 0
    async for o in spoolparse.arun_many((argv for _ in range(n)), max_concurrent=n, memory_per_task=1 << 20):
        now = time.time()
        t = exit_time((o.summary or {}).get("text"))
        if o.ok and t is not None:
            answers += 1; lat.append(now - t)
    report(t0, lat, answers)
asyncio.run(main())
"""

# One coroutine per agent (``one(lat)`` returns 1 for an answer), all gathered.
GATHER = r"""
async def main():
    t0 = time.monotonic(); lat = []
    answers = sum(await asyncio.gather(*(one(lat) for _ in range(n))))
    report(t0, lat, answers)
asyncio.run(main())
"""

ARUN = COMMON + r"""
import asyncio, spoolparse
async def one(lat):
    r = await spoolparse.arun(argv)
    t = exit_time(r.text)
    r.close()
    if r.ok and t is not None:
        lat.append(time.time() - t)
        return 1
    return 0
""" + GATHER

# The CLI in its own process: its CPU is read from /proc/<pid>/stat (its own, not its children's).
BATCH = COMMON + r"""
import subprocess, tempfile
tasks = tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False)
for i in range(n):
    tasks.write(json.dumps({"id": str(i), "cmd": argv}) + "\n")
tasks.close()
tick = os.sysconf("SC_CLK_TCK")
t0 = time.monotonic(); lat = []; answers = 0; cpu = 0.0; hwm = 0
p = subprocess.Popen([sys.executable, "-m", "spoolparse", "batch", "-j", str(n), "--memory-per-task", str(1 << 20),
                      "--no-progress", tasks.name], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
def sample():
    global cpu, hwm
    try:
        f = open(f"/proc/{p.pid}/stat").read().rsplit(")", 1)[1].split()
        cpu = (int(f[11]) + int(f[12])) / tick
        for line in open(f"/proc/{p.pid}/status"):
            if line.startswith("VmHWM:"):
                hwm = max(hwm, int(line.split()[1]))
    except (OSError, IndexError):
        pass
for line in p.stdout:
    now = time.time()
    sample()
    o = json.loads(line)
    t = exit_time((o.get("summary") or {}).get("text"))
    if o.get("verdict") == "ok" and t is not None:
        answers += 1; lat.append(now - t)
p.wait(); os.unlink(tasks.name)
ru = resource.getrusage(resource.RUSAGE_SELF)
# Only the batch process counts: report its CPU, not this reader's.
print(json.dumps({"cpu_s": cpu, "wall_s": time.monotonic() - t0, "hwm_kib": hwm, "lat": lat, "answers": answers}))
"""

# The reference: what a careful user writes with asyncio alone (no spool, no memory admission).
ASYNCIO = COMMON + r"""
import asyncio
async def one(lat):
    p = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE, stdin=asyncio.subprocess.DEVNULL,
                                             start_new_session=True, limit=1 << 20)
    last = None
    async for line in p.stdout:
        if b'"agent_message"' in line:
            last = json.loads(line)["item"]["text"]
    await p.wait()
    t = exit_time(last)
    if p.returncode == 0 and t is not None:
        lat.append(time.time() - t)
        return 1
    return 0
""" + GATHER

# ``batch`` run in-process, for where its CPU goes: each thread's CPU time (its clock), read every 50 ms while
# it lives; the spawner threads summed. Outcomes go to /dev/null.
THREADS = COMMON + r"""
import tempfile, threading
from spoolparse.cli import main
tasks = tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False)
for i in range(n):
    tasks.write(json.dumps({"id": str(i), "cmd": argv}) + "\n")
tasks.close()
cpu = {}
stop = threading.Event()
def watch():
    while not stop.wait(0.05):
        for t in threading.enumerate():
            if t is not threading.current_thread():
                try:
                    cpu[t.name] = time.clock_gettime(time.pthread_getcpuclockid(t.ident))
                except (OSError, TypeError):
                    pass
threading.Thread(target=watch, name="watch", daemon=True).start()
real_out = os.dup(1)
os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
t0 = time.monotonic()
main(["batch", "-j", str(n), "--memory-per-task", str(1 << 20), "--no-progress", tasks.name])
wall = time.monotonic() - t0
stop.set()
os.unlink(tasks.name)
by = {}
for name, s in cpu.items():
    key = "spawner threads" if name.startswith("spoolparse-spawn") else name
    by[key] = by.get(key, 0.0) + s
os.write(real_out, (json.dumps({"wall_s": wall, "threads": by}) + "\n").encode())
"""

SCRIPTS = {"run_many": RUN_MANY, "arun_many": ARUN_MANY, "arun": ARUN, "batch": BATCH, "asyncio": ASYNCIO}


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def measure(sup: str, n: int, ticks: int, interval: float) -> dict[str, object]:
    out = subprocess.run([sys.executable, "-c", SCRIPTS[sup], str(n), str(ticks), str(interval), AGENT],
                         capture_output=True, text=True, cwd=ROOT, check=False)
    if out.returncode != 0:
        raise SystemExit(f"{sup} x{n} failed ({out.returncode}): {out.stderr[-2000:]}")
    r = json.loads(out.stdout.strip().splitlines()[-1])
    lat = r["lat"]
    return {"supervisor": sup, "agents": n, "answers": r["answers"],
            "cpu_pct": 100.0 * r["cpu_s"] / r["wall_s"], "wall_s": r["wall_s"],
            "lat_p50_ms": 1000 * pct(lat, 0.5), "lat_p99_ms": 1000 * pct(lat, 0.99),
            "lat_max_ms": 1000 * max(lat, default=float("nan")), "rss_mib": r["hwm_kib"] / 1024}


def threads(n: int, ticks: int, interval: float) -> str:
    """Where ``batch``'s CPU goes with ``n`` agents: seconds of CPU per thread, and their share of a core."""
    out = subprocess.run([sys.executable, "-c", THREADS, str(n), str(ticks), str(interval), AGENT],
                         capture_output=True, text=True, cwd=ROOT, check=False)
    if out.returncode != 0:
        raise SystemExit(f"batch x{n} failed ({out.returncode}): {out.stderr[-2000:]}")
    r = json.loads(out.stdout.strip().splitlines()[-1])
    wall, by = r["wall_s"], r["threads"]
    parts = ", ".join(f"{k} {v:.2f} s ({100 * v / wall:.1f} %)" for k, v in sorted(by.items(), key=lambda kv: -kv[1]))
    return f"{sum(by.values()):.2f} s of CPU over {wall:.1f} s: {parts}"


def spool_fs(path: str) -> str:
    """``path``'s filesystem type, and whether an ext4 one has a journal (``/proc/fs/jbd2`` lists those)."""
    best, fstype, dev = "", "?", ""
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            mount_point = fields[4]
            sep = fields.index("-")
            if (path == mount_point or path.startswith(mount_point.rstrip("/") + "/")) and len(mount_point) > len(best):
                best, fstype, dev = mount_point, fields[sep + 1], fields[sep + 2]
    if fstype != "ext4":
        return fstype
    journals = os.listdir("/proc/fs/jbd2") if os.path.isdir("/proc/fs/jbd2") else []
    name = os.path.basename(os.path.realpath(dev))
    return "ext4 with a journal" if any(j.startswith(name + "-") for j in journals) else "ext4 without a journal"


def raise_fd_limit() -> None:
    """The soft limit on open files up to the hard one: the measured processes inherit it (1,000 agents need
    fds)."""
    import resource

    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def table(rows: list[dict[str, object]]) -> str:
    """The rows as Markdown, each spoolparse row with its parent CPU as a ratio to the bare asyncio
    supervisor's on the same number of agents (the ``asyncio`` row of the same run)."""
    ref = {r["agents"]: r for r in rows if r["supervisor"] == "asyncio"}
    out = ["| supervisor | agents | answers | parent CPU (% of a core) | × asyncio | p50 ms | p99 ms | max ms "
           "| peak RSS MiB | wall s |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        base = ref.get(r["agents"])
        x = f"{float(r['cpu_pct']) / float(base['cpu_pct']):.2f}" if base and r is not base else ""  # type: ignore[arg-type]
        out.append(f"| {r['supervisor']} | {r['agents']} | {r['answers']} | {float(r['cpu_pct']):.1f} | {x} "  # type: ignore[arg-type]
                   f"| {float(r['lat_p50_ms']):.0f} | {float(r['lat_p99_ms']):.0f} | {float(r['lat_max_ms']):.0f} "  # type: ignore[arg-type]
                   f"| {float(r['rss_mib']):.0f} | {float(r['wall_s']):.1f} |")  # type: ignore[arg-type]
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--agents", default="50,200,500,1000", help="comma-separated fleet sizes")
    ap.add_argument("--only", default=",".join(SUPERVISORS), help="comma-separated supervisors")
    ap.add_argument("--ticks", type=int, default=100, help="lines per agent (default 100: ~10 s at 0.1 s)")
    ap.add_argument("--interval", type=float, default=0.1, help="seconds between an agent's lines")
    ap.add_argument("--json", metavar="FILE", help="also write the rows as JSON")
    ap.add_argument("--threads", action="store_true",
                    help="instead: batch's CPU by thread (the loop, the spawner threads, the reader of outcomes...)")
    ap.add_argument("--spool-dir", metavar="DIR", help="where the agents' spools go (default: the temp dir)")
    args = ap.parse_args()
    if args.spool_dir:
        os.environ["PDD_AGENT_SPOOL_DIR"] = args.spool_dir  # the measured processes inherit it
    raise_fd_limit()
    if args.threads:
        for n in (int(x) for x in args.agents.split(",")):
            print(f"batch, {n} agents:", threads(n, args.ticks, args.interval), flush=True)
        return 0
    rows = []
    import tempfile

    spools = os.path.realpath(args.spool_dir or tempfile.gettempdir())
    print(f"{os.cpu_count()} CPUs, {ap.prog}: ticks={args.ticks} interval={args.interval}s, "
          f"spools in {spools} ({spool_fs(spools)})", flush=True)
    print(f"{'supervisor':<10} {'agents':>6} {'answers':>7} {'cpu %':>7} {'p50 ms':>8} {'p99 ms':>8} "
          f"{'max ms':>8} {'rss MiB':>8} {'wall s':>7}", flush=True)
    for n in (int(x) for x in args.agents.split(",")):
        for sup in args.only.split(","):
            t = time.monotonic()
            r = measure(sup, n, args.ticks, args.interval)
            rows.append(r)
            ok = "" if r["answers"] == n else f"  MISSING {n - int(r['answers'])} answers"  # type: ignore[call-overload]
            print(f"{sup:<10} {n:>6} {r['answers']:>7} {r['cpu_pct']:>7.1f} {r['lat_p50_ms']:>8.1f} "
                  f"{r['lat_p99_ms']:>8.1f} {r['lat_max_ms']:>8.1f} {r['rss_mib']:>8.1f} "
                  f"{time.monotonic() - t:>7.1f}{ok}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0 if all(r["answers"] == r["agents"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
