#!/usr/bin/env python3
"""What making a spool costs right after a fleet's spools were freed: in the spool directory itself, and in the
process's own directory that ``spoolparse.spool.placement`` makes on an ext4 without a journal.

    python benchmarks/spool_inodes.py                 # the temp dir, 1,000 spools, 3 rounds
    python benchmarks/spool_inodes.py --dir /mnt/x --spools 2000

Each round makes N nameless (``O_TMPFILE``) files, writes a byte to each, closes them all — as a fleet
that started and ended does — then, a second later, makes N more and times those: CPU seconds of this
process (almost all kernel time), per spool. On an ext4 without a journal the kernel's inode allocator
skips, one by one, every inode of the block group freed in the last seconds (``recently_deleted`` in
``fs/ext4/ialloc.c``), and a directory's files go to its group; elsewhere both rows should be alike.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from spoolparse import spool


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _churn(make: Callable[[], IO[bytes]], n: int) -> float:
    """CPU seconds per spool for N new spools made by ``make``, a second after N it made were freed."""
    freed = [make() for _ in range(n)]
    for f in freed:
        f.write(b"x")
        f.close()
    time.sleep(1.1)  # the kernel counts an inode freed in the current second as not recent (dtime < now)
    t = _cpu()
    made = [make() for _ in range(n)]
    dt = _cpu() - t
    for f in made:
        f.close()
    return dt / n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", default=tempfile.gettempdir(), help="the spool directory (default: the temp dir)")
    ap.add_argument("--spools", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    if not getattr(os, "O_TMPFILE", 0):
        print("no O_TMPFILE here")
        return 1
    fs = "ext4 without a journal" if spool._ext4_without_journal(args.dir) else "not an ext4 without a journal"
    print(f"{args.dir} ({fs}); {args.spools} spools made right after {args.spools} were freed, "
          f"median of {args.rounds} rounds")
    print("| made in | CPU per spool | CPU for all |")
    print("|---|---:|---:|")
    flags = os.O_TMPFILE | os.O_RDWR | os.O_CLOEXEC
    rows: list[tuple[str, Callable[[], IO[bytes]]]] = [
        ("the spool directory itself (`O_TMPFILE` there)", lambda: os.fdopen(os.open(args.dir, flags, 0o600), "w+b")),
        ("`open_spool` (the process's own directory where that applies)", lambda: spool.open_spool(args.dir)),
    ]
    for name, make in rows:
        per = statistics.median(_churn(make, args.spools) for _ in range(args.rounds))
        print(f"| {name} | {per * 1e6:.1f} µs | {per * args.spools:.3f} s |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
