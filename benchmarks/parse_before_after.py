#!/usr/bin/env python3
"""``spoolparse.parse`` of transcripts against ``cat``, with another copy of the package side by side.

    git archive main spoolparse | tar -x -C /tmp/before
    python benchmarks/parse_before_after.py --before /tmp/before benchmarks/data/claude-1G.jsonl ...

Each repeat runs ``cat FILE``, then ``benchmarks/peers.py spoolparse.parse FILE`` with the copy in
``--before`` first on ``PYTHONPATH``, then with the installed one, each in a fresh process under GNU
``time``: a change's figures come from one run, at one load, since absolute times drift on a shared host.
Prints, per file, the median seconds, MB/s and × ``cat`` of each, and each one's peak RSS.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from measure import machine, timed  # noqa: E402


def parse_row(path: Path, pythonpath: str | None) -> tuple[float, int, str]:
    """One parse in a fresh process: its seconds (timed after imports, as run.py's rows), peak RSS KiB, the
    answer's end."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    m = timed([sys.executable, str(HERE / "peers.py"), "spoolparse.parse", str(path)], env=env)
    got = json.loads(m.stdout)
    return got["seconds"], m.rss_kib, (got.get("tail") or "")[-60:]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+", type=Path)
    ap.add_argument("--before", required=True, help="a directory holding another copy of the spoolparse package")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each; the median is reported (default 3)")
    args = ap.parse_args()
    print(f"machine: {machine()}", flush=True)
    for path in args.files:
        subprocess.run(["cat", str(path)], stdout=subprocess.DEVNULL, check=True)  # page-cached for every run
        secs: dict[str, list[float]] = {"cat": [], "before": [], "after": []}
        rss: dict[str, int] = {"cat": 0, "before": 0, "after": 0}
        answers = set()
        for _ in range(max(1, args.repeat)):
            m = timed(["cat", str(path)], stdout=subprocess.DEVNULL)
            secs["cat"].append(m.wall)
            rss["cat"] = max(rss["cat"], m.rss_kib)
            for name, pythonpath in (("before", args.before), ("after", None)):
                s, kib, tail = parse_row(path, pythonpath)
                secs[name].append(s)
                rss[name] = max(rss[name], kib)
                answers.add(tail)
        if len(answers) != 1:
            raise SystemExit(f"{path.name}: the two copies disagree: {sorted(answers)!r}")
        size = path.stat().st_size
        cat = statistics.median(secs["cat"])
        for name, runs in secs.items():
            s = statistics.median(runs)
            print(f"{path.name:24} {name:6} {s:8.3f} s {size / s / 1e6:7.0f} MB/s {cat / s:6.3f}x cat "
                  f"{rss[name] / 1024:6.1f} MiB  runs {[round(r, 3) for r in runs]}", flush=True)
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
