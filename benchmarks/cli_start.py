"""How long the ``spoolparse`` command takes to start, against a bare ``python -c pass``.

Each command runs ``--runs`` times in turn (interleaved, so a busy moment of
the machine hits all of them alike); the table gives the median and the
fastest wall-clock time of each, the median as a multiple of the bare
interpreter's, and the median CPU time (user + system) the command used: on a
busy host the wall clock mostly measures the wait for a core, the CPU time what
start-up costs. The targets, as multiples of ``python -c pass`` (median wall
clock, and CPU time): ``spoolparse --version`` at most 1.5x, ``spoolparse parse``
of a 3-line transcript at most 3x.

    python benchmarks/cli_start.py              # 21 runs each, this interpreter's install
    python benchmarks/cli_start.py --wheel      # the wheel of this checkout, in a fresh virtualenv
    python benchmarks/cli_start.py --runs 51 --imports   # and the slowest imports of 'parse'
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: The targets: a command's median over the bare interpreter's (``python -c pass``).
TARGETS = {"spoolparse --version": 1.5, "spoolparse parse small.jsonl": 3.0}
ROOT = Path(__file__).resolve().parent.parent
TRANSCRIPT = (
    b'{"type":"thread.started","thread_id":"t-1"}\n'
    b'{"type":"item.completed","item":{"id":"i0","type":"agent_message","text":"done"}}\n'
    b'{"type":"turn.completed","usage":{"input_tokens":10,"cached_input_tokens":0,"output_tokens":2}}\n'
)


def _wrapper(script: Path, tmp: Path) -> list[str]:
    """The console script the installer wrote, calling nothing: what it costs before spoolparse starts (some
    installers' scripts import re and compile a pattern there)."""
    text = script.read_text().replace("from spoolparse.__main__ import entry", "entry = lambda: 0")
    path = tmp / "wrapper.py"
    path.write_text(text)
    return [text.splitlines()[0].removeprefix("#!"), str(path)]


def _command(python: str) -> list[str]:
    """The installed console script next to ``python``, else ``python -m spoolparse``."""
    script = Path(python).with_name("spoolparse")
    if script.exists():
        return [str(script)]
    found = shutil.which("spoolparse") if python == sys.executable else None
    return [found] if found else [python, "-m", "spoolparse"]


def _wheel_venv(tmp: Path) -> str:
    """A fresh virtualenv with this checkout's wheel (and its dependencies) installed: its python."""
    wheels = tmp / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(ROOT)],
                   check=True, stdout=subprocess.DEVNULL)
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    subprocess.run([python, "-m", "pip", "install", "-q", *map(str, wheels.glob("spoolparse-*.whl"))], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return python


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
    ap.add_argument("--wheel", action="store_true",
                    help="build this checkout's wheel and time it installed in a fresh virtualenv (as users get it)")
    ap.add_argument("--json", type=Path, metavar="FILE", help="also write the medians and the targets to FILE")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        python = _wheel_venv(Path(tmp)) if args.wheel else sys.executable
        spoolparse = _command(python)
        small = Path(tmp) / "small.jsonl"
        small.write_bytes(TRANSCRIPT)
        cases = {
            "python -c pass": [python, "-c", "pass"],
            "python -c 'import spoolparse'": [python, "-c", "import spoolparse"],
            # what bounds the rest: the console script's own work, and orjson's import (it loads uuid, datetime,
            # dataclasses, enum and json)
            "python -c 'import orjson'": [python, "-c", "import orjson"],
            "spoolparse --version": [*spoolparse, "--version"],
            "spoolparse --help": [*spoolparse, "--help"],
            "spoolparse parse small.jsonl": [*spoolparse, "parse", str(small)],
            "spoolparse parse --provider codex": [*spoolparse, "parse", "--provider", "codex", str(small)],
            "spoolparse run -- true": [*spoolparse, "run", "--no-progress", "--allow-empty-answer", "--", "true"],
        }
        if len(spoolparse) == 1:  # an installed console script (not python -m spoolparse)
            cases["console script calling nothing"] = _wrapper(Path(spoolparse[0]), Path(tmp))
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
    base_cpu = statistics.median(cpus["python -c pass"])
    how = "the wheel in a fresh virtualenv" if args.wheel else "this interpreter's install"
    print(f"CLI start-up: median of {args.runs} runs ({how}: {' '.join(spoolparse)}; {sys.version.split()[0]})")
    load = os.getloadavg()[0]
    print(f"{'command':<34} {'median ms':>10} {'fastest ms':>11} {'x bare python':>14} {'CPU ms':>8} {'x CPU':>6}")
    for name, values in times.items():
        median = statistics.median(values)
        cpu = statistics.median(cpus[name])
        print(f"{name:<34} {median:10.1f} {min(values):11.1f} {median / base:14.2f} {cpu:8.1f} "
              f"{cpu / base_cpu:6.2f}")
    targets = []
    for name, most in TARGETS.items():
        wall = statistics.median(times[name]) / base
        cpu = statistics.median(cpus[name]) / base_cpu
        targets.append({"command": name, "at_most": most, "wall_x": round(wall, 2), "cpu_x": round(cpu, 2)})
        print(f"target: '{name}' <= {most}x 'python -c pass': {'met' if wall <= most else 'NOT met'} by the wall "
              f"clock ({wall:.2f}x), {'met' if cpu <= most else 'NOT met'} by CPU time ({cpu:.2f}x)")
    print(f"load average {load:.1f} on {os.cpu_count()} CPUs")
    if args.json is not None:
        args.json.write_text(json.dumps({
            "install": "wheel" if args.wheel else "this interpreter's", "runs": args.runs, "load": load,
            "commands": {name: {"median_ms": round(statistics.median(v), 1),
                                "cpu_ms": round(statistics.median(cpus[name]), 1)} for name, v in times.items()},
            "targets": targets,
        }, indent=1))
    if imports:
        print("slowest imports of 'spoolparse parse' (cumulative us, one run):")
        for us, name in imports:
            print(f"  {us:9d}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
