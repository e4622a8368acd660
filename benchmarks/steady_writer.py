#!/usr/bin/env python3
"""One child writing ~3 KB JSON lines at a steady rate, one ``write`` per line: what following it costs.

For ``run`` and ``arun`` (each in a fresh interpreter) it prints the parent's CPU (user+sys of the
following process, over the run's wall time, in % of one core), the follower's wake-ups, the run's wall
time against the producer alone writing to a file (the floor), and that the answer came back.

    python benchmarks/steady_writer.py                       # 50,000 lines (~150 MB) at 10,000 a second
    python benchmarks/steady_writer.py --lines 20000 --rate 0  # as fast as it can
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

PRODUCER = r"""
import sys, time
n, rate = int(sys.argv[1]), float(sys.argv[2])
pad = "x" * 3000
out = sys.stdout
t0 = time.monotonic()
for i in range(n):
    if rate:
        while time.monotonic() < t0 + i / rate:
            time.sleep(0.0001)
    out.write('{"type":"item.completed","item":{"id":"%d","type":"reasoning","text":"%s"}}\n' % (i, pad))
    out.flush()
out.write('{"type":"item.completed","item":{"id":"a","type":"agent_message","text":"done"}}\n')
out.write('{"type":"turn.completed","usage":{"input_tokens":1,"output_tokens":1}}\n')
"""

FOLLOW = r"""
import asyncio, json, resource, sys, time
import spoolparse
mode, n, rate, producer = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
argv = [sys.executable, "-c", producer, n, rate]
t0 = time.monotonic(); r0 = resource.getrusage(resource.RUSAGE_SELF)
wakeups = 0
if mode == "run":
    res = spoolparse.run(argv, keep_output=False)
else:
    async def main():
        async with spoolparse.open_run(argv, keep_output=False) as run:
            res = await run.wait()
            return res, run.wakeups
    res, wakeups = asyncio.run(main())
wall = time.monotonic() - t0
r1 = resource.getrusage(resource.RUSAGE_SELF)
cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
print(json.dumps({"wall": wall, "cpu": cpu, "ok": res.ok, "text": res.text, "wakeups": wakeups}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lines", type=int, default=50_000)
    ap.add_argument("--rate", type=float, default=10_000, help="lines a second (0: as fast as it can)")
    args = ap.parse_args()
    n, rate = str(args.lines), str(args.rate)
    with tempfile.TemporaryFile(dir=os.environ.get("TMPDIR", "/tmp")) as f:
        t0 = time.monotonic()
        subprocess.run([sys.executable, "-c", PRODUCER, n, rate], stdout=f, check=True)
        floor = time.monotonic() - t0
    print(f"{os.cpu_count()} CPUs, {args.lines} lines of ~3 KB at {args.rate:g}/s; producer alone into a file: "
          f"{floor:.2f} s")
    print(f"{'follower':10} {'wall s':>7} {'× floor':>8} {'parent CPU %':>13} {'wake-ups':>9}  answer")
    for mode in ("run", "arun"):
        out = subprocess.run([sys.executable, "-c", FOLLOW, mode, n, rate, PRODUCER], capture_output=True, text=True,
                             check=True)
        r = json.loads(out.stdout)
        wake = str(r["wakeups"]) if mode == "arun" else "-"
        print(f"{mode:10} {r['wall']:7.2f} {r['wall'] / floor:8.2f} {100 * r['cpu'] / r['wall']:13.1f} {wake:>9}  "
              f"{'ok' if r['ok'] and r['text'] == 'done' else 'LOST: ' + repr(r['text'])}")


if __name__ == "__main__":
    main()
