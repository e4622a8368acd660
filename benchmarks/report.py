#!/usr/bin/env python3
"""How long ``spoolparse report`` takes over many outcomes, and its peak memory.

Made-up outcomes in ``batch``'s shape (``tests/report_support.py``: four CLIs' real summaries, 12% failing
for seven causes) are written to a file first, then one ``spoolparse report FILE --json --html PAGE`` runs
in a fresh interpreter. It prints the outcomes, the seconds the report took, outcomes per second, its peak
RSS (``wait4``'s ``ru_maxrss`` of that process alone) and the page's size.

    python benchmarks/report.py                  # 100,000 outcomes
    python benchmarks/report.py --outcomes 1000000
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.report_support import synthetic_lines  # noqa: E402


def measure(n: int, workdir: Path) -> dict[str, float]:
    src = workdir / "outcomes.ndjson"
    with src.open("wb") as f:
        for line in synthetic_lines(n):
            f.write(line)
    page = workdir / "report.html"
    argv = [sys.executable, "-m", "spoolparse", "report", str(src), "--json", "--html", str(page)]
    start = time.perf_counter()
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, cwd=ROOT)
    _, status, usage = os.wait4(p.pid, 0)
    seconds = time.perf_counter() - start
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise SystemExit(f"report exited {p.returncode}")
    return {"outcomes": n, "input_mib": src.stat().st_size / (1 << 20), "seconds": seconds,
            "per_second": n / seconds, "peak_rss_mib": usage.ru_maxrss / 1024, "page_kib": page.stat().st_size / 1024}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--outcomes", type=int, default=100_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="spoolparse-report-bench-") as d:
        m = measure(args.outcomes, Path(d))
    print(f"{m['outcomes']:,} outcomes ({m['input_mib']:.0f} MiB): {m['seconds']:.1f} s "
          f"({m['per_second']:,.0f}/s), peak RSS {m['peak_rss_mib']:.0f} MiB, page {m['page_kib']:,.0f} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
