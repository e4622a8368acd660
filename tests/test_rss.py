"""Peak RSS of the parent stays flat whatever the size of the output.

Each measurement runs in a fresh interpreter and reports its own peak
(``VmHWM``: ``ru_maxrss`` would carry over the peak of the forking pytest
process across ``exec``); the figures are printed (``pytest -s``) as well as
checked.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from .helpers import FAKE_CODEX

MiB = 1 << 20
LIMIT = 32 * MiB

MEASURE = """
import json, sys
import spoolparse
argv = json.loads(sys.argv[1])
mode = sys.argv[2]
if mode == "spoolparse":
    with spoolparse.run(argv) as r:
        ok, text, dropped = r.ok, r.text, r.dropped
        stdout_bytes = r.stdout_bytes
elif mode == "naive":
    import subprocess
    p = subprocess.run(argv, capture_output=True, text=True)
    events = [json.loads(l) for l in p.stdout.strip().splitlines() if l.strip()]
    text = [e["item"]["text"] for e in events if e.get("type") == "item.completed"
            and e["item"].get("type") == "agent_message"][-1]
    ok, dropped, stdout_bytes = p.returncode == 0, [], len(p.stdout)
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM:")][0]
print(json.dumps({"maxrss": int(hwm.split()[1]) * 1024,
                  "ok": ok, "text": text, "dropped": dropped, "stdout_bytes": stdout_bytes}))
"""


def peak(argv: list[str], mode: str = "spoolparse") -> dict:  # type: ignore[type-arg]
    p = subprocess.run([sys.executable, "-c", MEASURE, json.dumps(argv), mode],
                       capture_output=True, check=True, timeout=600)
    return json.loads(p.stdout)  # type: ignore[no-any-return]


@pytest.mark.slow
def test_256_mib_transcript_adds_less_than_32_mib() -> None:
    tiny = peak([*FAKE_CODEX, "--size", "64K"])
    big = peak([*FAKE_CODEX, "--size", "256M"])
    growth = big["maxrss"] - tiny["maxrss"]
    print(f"\npeak RSS: tiny {tiny['maxrss'] / MiB:.1f} MiB, 256 MiB transcript {big['maxrss'] / MiB:.1f} MiB, "
          f"growth {growth / MiB:.1f} MiB")
    assert big["ok"] and big["text"] == tiny["text"]
    assert growth < LIMIT


@pytest.mark.slow
def test_one_200_mib_tool_line_adds_less_than_32_mib() -> None:
    tiny = peak([*FAKE_CODEX, "--size", "64K"])
    blob = peak([*FAKE_CODEX, "--size", "64K", "--blob", "200M"])
    growth = blob["maxrss"] - tiny["maxrss"]
    print(f"\npeak RSS: tiny {tiny['maxrss'] / MiB:.1f} MiB, 200 MiB line {blob['maxrss'] / MiB:.1f} MiB, "
          f"growth {growth / MiB:.1f} MiB")
    assert blob["ok"] and blob["text"] == tiny["text"]
    assert [d["reason"] for d in blob["dropped"]] == ["oversize"]
    assert blob["dropped"][0]["bytes"] > 200 * MiB
    assert growth < LIMIT


@pytest.mark.slow
@pytest.mark.parametrize("order", [[], ["--type-last"]])
def test_a_kept_answer_line_of_60_mib_peaks_under_1_5_times_its_size(order: list[str]) -> None:
    """The answer itself is kept: it costs its decoded text and a few windows, not three copies of the line,
    whatever the order of its keys (with its type last, it is held before anyone knows it is kept)."""
    tiny = peak([*FAKE_CODEX, "--size", "64K", "--prose", "--answer-size", "1K", *order])
    big = peak([*FAKE_CODEX, "--size", "64K", "--prose", "--answer-size", "56M", *order])
    line = big["stdout_bytes"] - tiny["stdout_bytes"]
    growth = big["maxrss"] - tiny["maxrss"]
    print(f"\nkept answer line of {line / MiB:.1f} MiB{' (type last)' if order else ''}: peak RSS growth "
          f"{growth / MiB:.1f} MiB ({growth / line:.2f}x the line)")
    assert big["ok"] and big["text"].startswith(tiny["text"][:200]) and len(big["text"]) == 56 * MiB
    assert line > 56 * MiB
    assert growth < 1.5 * line


@pytest.mark.slow
def test_the_naive_capture_path_grows_by_hundreds_of_mib() -> None:
    """The same measurement catches the failure spoolparse exists to prevent."""
    tiny = peak([*FAKE_CODEX, "--size", "64K"], "naive")
    big = peak([*FAKE_CODEX, "--size", "128M"], "naive")
    growth = big["maxrss"] - tiny["maxrss"]
    print(f"\nnaive capture_output peak RSS growth for 128 MiB: {growth / MiB:.0f} MiB")
    assert big["text"] == tiny["text"]
    assert growth > 8 * LIMIT


PARSE_MEASURE = """
import json, sys
import spoolparse
r = spoolparse.parse(sys.argv[1], max_line=1 << 20, max_retained=int(sys.argv[2]))
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM:")][0]
print(json.dumps({"maxrss": int(hwm.split()[1]) * 1024, "provider": r.provider, "lines": r.lines}))
"""


@pytest.mark.slow
def test_an_undecided_stream_holds_at_most_max_retained_while_detecting(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """An init two CLIs print alike, then 128 MiB of lines no grammar claims: detection holds them (generic may
    need them) only up to max_retained bytes, then decides; the rest is read as it comes."""
    init = json.dumps({"type": "system", "subtype": "init", "session_id": "s", "model": "m"}).encode() + b"\n"
    tick = json.dumps({"kind": "tick", "pad": "x" * 1000}).encode() + b"\n"
    small, big = tmp_path / "small.jsonl", tmp_path / "big.jsonl"
    small.write_bytes(init + tick)
    with open(big, "wb") as f:
        f.write(init)
        block = tick * 1024
        for _ in range(128 * MiB // len(block)):
            f.write(block)
    budget = 8 * MiB

    def measure(path) -> dict:  # type: ignore[no-untyped-def, type-arg]
        p = subprocess.run([sys.executable, "-c", PARSE_MEASURE, str(path), str(budget)], capture_output=True,
                           check=True, timeout=600)
        return json.loads(p.stdout)  # type: ignore[no-any-return]

    tiny, large = measure(small), measure(big)
    growth = large["maxrss"] - tiny["maxrss"]
    print(f"\nundecided 128 MiB, max_retained 8 MiB: peak RSS growth {growth / MiB:.1f} MiB")
    assert large["provider"] == "generic" and large["lines"] > 100_000
    assert growth < LIMIT
