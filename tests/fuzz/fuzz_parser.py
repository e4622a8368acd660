#!/usr/bin/env python3
"""Fuzz the line scanner, ``iter_lines``, every provider and :class:`StreamParser` for N minutes.

Each input's first byte picks the provider and the caps, the second the write
chunking, the rest is the stdout stream; :func:`tests.fuzz.harness.fuzz_one`
checks every invariant (never raise, bounded reads, nothing held over the
ceiling, the reference parser's retained events). Usage::

    python tests/fuzz/fuzz_parser.py --minutes 5                      # atheris if installed, else hypothesis
    python tests/fuzz/fuzz_parser.py --minutes 5 --engine hypothesis  # structured streams, no atheris needed
    python tests/fuzz/fuzz_parser.py --minutes 5 -- -jobs=2           # extra libFuzzer flags after --

atheris comes with ``pip install -e '.[fuzz]'``. A crash is saved under
``tests/fuzz/crashes/``; copy it into ``tests/fuzz/regressions/`` (replayed by
``tests/fuzz/test_fuzz.py``) with the fix.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SEEDS = HERE / "seeds"
CRASHES = HERE / "crashes"

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def seed_inputs(n_providers: int) -> list[bytes]:
    """The seed streams, each behind every provider's header byte."""
    out = []
    for path in sorted(SEEDS.glob("*.jsonl")):
        data = path.read_bytes()
        for i in range(n_providers):
            out.append(bytes([i, 0x41]) + data)
            out.append(bytes([i | 0x80, 0x06]) + data)
    return out


def run_atheris(seconds: int, extra: list[str]) -> int:
    import atheris  # type: ignore[import-not-found]

    with atheris.instrument_imports(include=["spoolparse"]):
        import spoolparse._decode.document
        import spoolparse.lines
        import spoolparse.parser
        import spoolparse.providers  # noqa: F401
    from tests.fuzz import harness

    work = Path(tempfile.mkdtemp(prefix="spoolparse-fuzz-"))
    try:
        names = [*harness.provider_names(), "auto"]
        for i, blob in enumerate(seed_inputs(len(names))):
            (work / f"seed{i}").write_bytes(blob)
        CRASHES.mkdir(exist_ok=True)
        argv = [sys.argv[0], str(work), f"-max_total_time={seconds}", f"-artifact_prefix={CRASHES}/",
                "-max_len=4096", "-print_final_stats=1", *extra]
        atheris.Setup(argv, harness.fuzz_one)
        atheris.Fuzz()  # exits the process; libFuzzer prints the run count ("Done N runs")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def run_hypothesis(seconds: int) -> int:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from tests.fuzz import harness

    names = [*harness.provider_names(), "auto"]
    count = 0

    @settings(max_examples=200, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(data=st.data())
    def batch(data: st.DataObject) -> None:
        nonlocal count
        count += 1
        if data.draw(st.integers(0, 3)) == 0:
            blob = data.draw(st.binary(max_size=2048))
        else:
            header = bytes([data.draw(st.integers(0, 255)), data.draw(st.integers(0, 255))])
            blob = header + data.draw(harness.streams(oversize=True))
        harness.fuzz_one(blob)

    start = time.monotonic()
    for blob in seed_inputs(len(names)):
        harness.fuzz_one(blob)
        count += 1
    while time.monotonic() - start < seconds:
        batch()  # a fresh random seed each batch; a failure is shrunk and raised
    print(f"hypothesis fuzz: {count} inputs in {time.monotonic() - start:.0f} s, no failure")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=5.0, help="how long to fuzz (default 5)")
    ap.add_argument("--engine", choices=["auto", "atheris", "hypothesis"], default="auto")
    ap.add_argument("libfuzzer", nargs="*", help="extra libFuzzer flags (after --)")
    args = ap.parse_args()
    seconds = max(1, int(args.minutes * 60))
    engine = args.engine
    if engine == "auto":
        try:
            import atheris  # noqa: F401
        except ImportError:
            engine = "hypothesis"
        else:
            engine = "atheris"
    print(f"fuzzing with {engine} for {seconds} s", flush=True)
    if engine == "atheris":
        return run_atheris(seconds, args.libfuzzer)
    return run_hypothesis(seconds)


if __name__ == "__main__":
    sys.exit(main())
