"""Run one command in a fresh process and measure it: wall seconds and peak RSS.

Peak RSS comes from ``/usr/bin/time`` (GNU time's ``%M``) when it is there:
Linux folds the pre-``exec`` address space into a child's ``ru_maxrss``, so a
child forked from a large Python parent would report the parent's size; GNU
time is a small C program, so its child starts small. Without it the
fallback is ``os.wait4`` from this process (an upper bound then).
"""

from __future__ import annotations

import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import IO

GNU_TIME = "/usr/bin/time" if os.access("/usr/bin/time", os.X_OK) else shutil.which("time")


@dataclass
class Measured:
    wall: float  # seconds, from this process
    rss_kib: int  # the command's peak RSS
    stdout: bytes
    returncode: int


class TimedOut(Exception):
    """The command ran longer than its time limit (it was killed)."""


def timed(argv: list[str], *, stdin: bytes | None = None, stdout: IO[bytes] | int | None = None,
          env: dict[str, str] | None = None, timeout: float | None = None) -> Measured:
    """Run ``argv``; capture its stdout unless ``stdout`` is given (a file or ``subprocess.DEVNULL``)."""
    with tempfile.NamedTemporaryFile(prefix="spoolparse-bench-", suffix=".time") as tf:
        cmd = [GNU_TIME, "-f", "%M", "-o", tf.name, *argv] if GNU_TIME else argv
        out_target = subprocess.PIPE if stdout is None else stdout
        t = time.perf_counter()
        p = subprocess.Popen(cmd, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                             stdout=out_target, stderr=subprocess.PIPE, env=env, start_new_session=True)
        try:
            out, err = p.communicate(stdin, timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)  # GNU time's child too, or the pipes stay open
            p.communicate()
            raise TimedOut(f"{argv[:3]} ran over {timeout} s") from None
        wall = time.perf_counter() - t
        if p.returncode != 0:
            raise RuntimeError(f"{argv[:3]} exited {p.returncode}: {err.decode(errors='replace')[-500:]}")
        if GNU_TIME:
            text = open(tf.name).read().split()  # noqa: SIM115 - read once
            rss = int(text[-1])
        else:  # pragma: no cover - only where GNU time is missing
            rss = -1
    return Measured(wall, rss, out or b"", p.returncode)


def machine() -> dict[str, str]:
    """Facts printed with every table: the ratios only mean something next to them."""
    mem = "?"
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    mem = f"{int(line.split()[1]) / (1 << 20):.1f} GiB"
    except OSError:
        pass
    cpu = platform.processor() or "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "cores": str(os.cpu_count()),
        "cpu": cpu,
        "ram": mem,
        "python": sys.version.split()[0],
        "kernel": platform.release(),
        "loadavg": load,
    }
