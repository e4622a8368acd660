#!/usr/bin/env python3
"""Line-to-callback latency and idle wake-ups of the live followers; prints its figures.

Latency: ``fixtures/live_agent.py --stamp`` writes messages whose text is
``time.monotonic_ns()`` at the write (one ``write`` + flush per line, at
random intervals); the ``on_event`` callback subtracts that from its own
clock (CLOCK_MONOTONIC is system-wide on Linux). Median, p99 and max per
driver: ``run`` (sync) and ``arun`` (asyncio), each event-driven (inotify +
pidfd) and with the polling fallback forced.

Idle cost: the child stays silent for ``--idle`` seconds; the follower's
thread is sampled for voluntary context switches (each wake-up from a sleep
is one) between the last event before the silence and the first after it.

    python benchmarks/latency.py                 # ~30 s
    python benchmarks/latency.py --ticks 300 --idle 10
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import spoolparse
from spoolparse import aio
from spoolparse._os import wait as _wait

LIVE_AGENT = [sys.executable, str(Path(__file__).resolve().parents[1] / "fixtures" / "live_agent.py")]


def ctxt_switches() -> int:
    """Voluntary context switches so far of the main thread, the follower's (``run`` calls the listener from
    a thread of its own, so the calling thread's would count the listener's sleeps, not the follower's)."""
    with open(f"/proc/self/task/{threading.main_thread().native_id}/status") as f:
        for line in f:
            if line.startswith("voluntary_ctxt_switches:"):
                return int(line.split()[1])
    raise RuntimeError("no voluntary_ctxt_switches in /proc/thread-self/status")


class Probe:
    """The on_event callback: latencies of stamped messages, and a sample around the silence."""

    def __init__(self) -> None:
        self.latencies_ms: list[float] = []
        self.marks: list[tuple[float, int]] = []

    def __call__(self, ev: spoolparse.LiveEvent) -> None:
        now = time.monotonic_ns()
        if ev.kind == "text" and ev.data["text"].isdigit():
            self.latencies_ms.append((now - int(ev.data["text"])) / 1e6)
        if ev.kind in ("tool_end", "text"):
            self.marks.append((now / 1e9, ctxt_switches()))

    def idle_rate(self) -> float:
        """Wake-ups per second between the last event before the silence and the answer."""
        (t0, c0), (t1, c1) = self.marks[-2], self.marks[-1]
        return (c1 - c0) / (t1 - t0)


@contextlib.contextmanager
def polling_only() -> Iterator[None]:
    saved = _wait._shared_dispatcher, aio.open_inotify
    _wait._shared_dispatcher = aio.open_inotify = lambda: None  # type: ignore[assignment]
    try:
        yield
    finally:
        _wait._shared_dispatcher, aio.open_inotify = saved  # type: ignore[assignment]


def follow(driver: str, argv: list[str]) -> Probe:
    probe = Probe()
    if driver == "run":
        spoolparse.run(argv, on_event=probe, keep_output=False)
    else:
        asyncio.run(spoolparse.arun(argv, on_event=probe, keep_output=False))
    return probe


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ticks", type=int, default=150, help="stamped lines per driver (default 150)")
    ap.add_argument("--interval", type=float, default=0.005, help="least seconds between lines")
    ap.add_argument("--jitter", type=float, default=0.04, help="extra random seconds between lines")
    ap.add_argument("--idle", type=float, default=3.0, help="seconds of silence for the idle measurement")
    args = ap.parse_args()

    stamped = [*LIVE_AGENT, "--stamp", "--ticks", str(args.ticks), "--interval", str(args.interval),
               "--jitter", str(args.jitter)]
    silent = [*LIVE_AGENT, "--ticks", "0", "--idle", str(args.idle)]
    rows: list[dict[str, Any]] = []
    for mode in ("event-driven", "polling"):
        for driver in ("run", "arun"):
            ctx = polling_only() if mode == "polling" else contextlib.nullcontext()
            with ctx:
                lat = follow(driver, stamped).latencies_ms
                idle = follow(driver, silent).idle_rate()
            rows.append({
                "driver": driver, "mode": mode, "lines": len(lat),
                "median_ms": statistics.median(lat), "p99_ms": pct(lat, 0.99), "max_ms": max(lat),
                "idle_wakeups_per_s": idle,
            })
    print(f"line-to-callback latency over {args.ticks} lines each; idle wake-ups over {args.idle:g} s of silence")
    head = ("driver", "mode", "lines", "median ms", "p99 ms", "max ms", "idle wake-ups/s")
    print(f"{head[0]:6} {head[1]:13} {head[2]:>5} {head[3]:>10} {head[4]:>8} {head[5]:>8} {head[6]:>16}")
    for r in rows:
        print(f"{r['driver']:6} {r['mode']:13} {r['lines']:5d} {r['median_ms']:10.3f} {r['p99_ms']:8.3f} "
              f"{r['max_ms']:8.3f} {r['idle_wakeups_per_s']:16.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
