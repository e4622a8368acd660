"""How long the ``spoolparse`` command takes to start, against a bare ``python -c pass``.

Each command runs ``--runs`` times in turn (interleaved, so a busy moment of
the machine hits all of them alike); the table gives the median and the
fastest wall-clock time of each, the median over the bare interpreter, and
the median CPU time (user + system) the command used: on a busy host the wall
clock mostly measures the wait for a core, the CPU time what start-up costs.
The target: ``spoolparse parse`` on a small transcript in at most 80 ms (wall
clock on an idle host; CPU time where the host is busy).

    python benchmarks/cli_start.py              # 21 runs each
    python benchmarks/cli_start.py --runs 51 --imports   # and the slowest imports of 'parse'
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_MS = 80.0
TRANSCRIPT = (
    b'{"type":"thread.started","thread_id":"t-1"}\n'
    b'{"type":"item.completed","item":{"id":"i0","type":"agent_message","text":"done"}}\n'
    b'{"type":"turn.completed","usage":{"input_tokens":10,"cached_input_tokens":0,"output_tokens":2}}\n'
)


def _command() -> list[str]:
    """The installed console script next to this interpreter, else ``python -m spoolparse``."""
    script = Path(sys.executable).with_name("spoolparse")
    if script.exists():
        return [str(script)]
    found = shutil.which("spoolparse")
    return [found] if found else [sys.executable, "-m", "spoolparse"]


#: The commands run with bytecode caching on, as after ``pip install`` (which compiles every module):
#: with PYTHONDONTWRITEBYTECODE set, each start would compile spoolparse's sources again.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _time(argv: list[str]) -> tuple[float, float]:
    """(wall, CPU) milliseconds of one run of ``argv``."""
    cpu = _cpu()
    started = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, env=ENV)
    return (time.perf_counter() - started) * 1000, (_cpu() - cpu) * 1000


def _slowest_imports(argv: list[str], count: int) -> list[tuple[int, str]]:
    env = {**ENV, "PYTHONPROFILEIMPORTTIME": "1"}
    err = subprocess.run(argv, capture_output=True, env=env, check=True).stderr.decode()
    rows = []
    for line in err.splitlines():
        if line.startswith("import time:") and "|" in line and "cumulative" not in line:
            _, cumulative, name = line.split("|", 2)
            rows.append((int(cumulative), name.rstrip()))
    return sorted(rows, reverse=True)[:count]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=21, help="runs of each command (default: 21)")
    ap.add_argument("--imports", action="store_true", help="also list the slowest imports of 'spoolparse parse'")
    args = ap.parse_args()

    spoolparse = _command()
    with tempfile.TemporaryDirectory() as tmp:
        small = Path(tmp) / "small.jsonl"
        small.write_bytes(TRANSCRIPT)
        cases = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "python -c 'import spoolparse'": [sys.executable, "-c", "import spoolparse"],
            "spoolparse --version": [*spoolparse, "--version"],
            "spoolparse parse small.jsonl": [*spoolparse, "parse", str(small)],
            "spoolparse run -- true": [*spoolparse, "run", "--no-progress", "--allow-empty-answer", "--", "true"],
            "spoolparse --help": [*spoolparse, "--help"],
        }
        times: dict[str, list[float]] = {name: [] for name in cases}
        cpus: dict[str, list[float]] = {name: [] for name in cases}
        for argv in cases.values():  # warm the page cache and write the bytecode caches
            _time(argv)
        for _ in range(args.runs):
            for name, argv in cases.items():
                wall, cpu = _time(argv)
                times[name].append(wall)
                cpus[name].append(cpu)
        imports = _slowest_imports(cases["spoolparse parse small.jsonl"], 12) if args.imports else []

    base = statistics.median(times["python -c pass"])
    print(f"CLI start-up: median of {args.runs} runs ({' '.join(spoolparse)}; {sys.version.split()[0]})")
    load = os.getloadavg()[0]
    print(f"{'command':<32} {'median ms':>10} {'fastest ms':>11} {'over bare python':>17} {'CPU ms':>8}")
    for name, values in times.items():
        median = statistics.median(values)
        cpu = statistics.median(cpus[name])
        print(f"{name:<32} {median:10.1f} {min(values):11.1f} {median - base:+16.1f} {cpu:8.1f}")
    parse_ms = statistics.median(times["spoolparse parse small.jsonl"])
    parse_cpu = statistics.median(cpus["spoolparse parse small.jsonl"])
    verdict = "met" if parse_ms <= TARGET_MS else "NOT met"
    print(f"target: 'spoolparse parse' on a small file in <= {TARGET_MS:.0f} ms: {verdict} by the wall clock "
          f"({parse_ms:.1f} ms), {'met' if parse_cpu <= TARGET_MS else 'NOT met'} by CPU time ({parse_cpu:.1f} ms); "
          f"load average {load:.1f} on {os.cpu_count()} CPUs")
    if imports:
        print("slowest imports of 'spoolparse parse' (cumulative us, one run):")
        for us, name in imports:
            print(f"  {us:9d}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
