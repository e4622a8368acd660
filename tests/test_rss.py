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
from pathlib import Path
from typing import Any

import pytest

from .helpers import FAKE_CODEX, jl

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
elif mode == "parse":  # argv: a transcript on disk, read through its mapped windows
    r = spoolparse.parse(argv[0])
    ok, text, dropped, stdout_bytes = r.ok, r.text, r.dropped, r.stdout_bytes
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
@pytest.mark.parametrize("mode", ["parse", "spoolparse"])
@pytest.mark.parametrize("order", [[], ["--type-last"]])
def test_a_kept_answer_line_of_16_mib_peaks_under_1_5_times_its_size(tmp_path: Path, mode: str,
                                                                    order: list[str]) -> None:
    """Read from a file's mapped windows (parse) or a spool (run), a kept line is decoded a piece at a time into its
    text, never copied whole: its read windows and pieces are a fixed cost beside the text. (It peaked at 1.62
    times its 17 MiB when parsed, with 1 MiB pieces.)"""
    argvs = {}
    for name, size in (("tiny", "1K"), ("big", "16M")):
        path = tmp_path / f"{name}.jsonl"
        with open(path, "wb") as f:
            subprocess.run([*FAKE_CODEX, "--size", "64K", "--prose", "--answer-size", size, *order], stdout=f,
                           check=True)
        argvs[name] = [str(path)] if mode == "parse" else ["cat", str(path)]
    tiny, big = peak(argvs["tiny"], mode), peak(argvs["big"], mode)
    line = big["stdout_bytes"] - tiny["stdout_bytes"]
    growth = big["maxrss"] - tiny["maxrss"]
    print(f"\n{mode}: kept answer line of {line / MiB:.1f} MiB{' (type last)' if order else ''}: peak RSS growth "
          f"{growth / MiB:.1f} MiB ({growth / line:.2f}x the line)")
    assert big["ok"] and len(big["text"]) == 16 * MiB and big["text"].startswith(tiny["text"][:40])
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


# -- a batch's memory does not grow with the number of its tasks ---------------------------------------------

INTAKE = """
import json, os, sys, tempfile
from spoolparse.runner.intake import END, Intake, InvalidTask
from spoolparse.runner.joblog import DoneIds
from spoolparse.runner.tasks import Task
n = int(sys.argv[1])
def tid(i):
    return f"task-{i % n:09d}-" + "x" * 40
# a job log that has the even tasks done: a resumed batch skips them
with tempfile.NamedTemporaryFile("w", suffix=".ndjson", delete=False) as log:
    for i in range(0, n, 2):
        log.write(json.dumps({"id": tid(i), "attempt": 1, "final": True, "verdict": "ok"}) + "\\n")
done = DoneIds(log.name, True)
os.unlink(log.name)
numbers = iter(range(n + 1))
def pull():
    i = next(numbers, None)
    # n tasks, then one more with the first one's id: the duplicate must still be caught
    return END if i is None else Task(argv=["true"], id=tid(i))
intake = Intake(pull, skip=done)
duplicates = 0
while (task := intake.hold_next()) is not None:
    duplicates += isinstance(task, InvalidTask)
    intake.release()
intake.close()
done.close()
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM:")][0]
print(json.dumps({"maxrss": int(hwm.split()[1]) * 1024, "duplicates": duplicates, "skipped": intake.skipped}))
"""


def _intake_peak(n: int) -> dict:  # type: ignore[type-arg]
    p = subprocess.run([sys.executable, "-c", INTAKE, str(n)], capture_output=True, check=True, timeout=600)
    return json.loads(p.stdout)  # type: ignore[no-any-return]


@pytest.mark.slow
def test_a_million_task_ids_take_no_more_memory_than_ten_thousand() -> None:
    """The ids read were kept in a set to catch a duplicate, and those a resumed job log had done in another:
    100,000 tasks peaked at 39 MB, 1,000,000 at 124 MB. The tasks come from a pull function (no process
    starts): what is measured is the intake alone, resuming a job log that has half of them done."""
    few, many = _intake_peak(10_000), _intake_peak(1_000_000)
    growth = many["maxrss"] - few["maxrss"]
    print(f"\npeak RSS of the intake: 10,000 tasks {few['maxrss'] / MiB:.1f} MiB, 1,000,000 tasks "
          f"{many['maxrss'] / MiB:.1f} MiB, growth {growth / MiB:.1f} MiB")
    assert few["duplicates"] == many["duplicates"] == 1
    assert (few["skipped"], many["skipped"]) == (5_000, 500_000)
    assert growth < 16 * MiB


@pytest.mark.slow
def test_batch_check_of_a_million_lines_takes_no_more_memory_than_ten_thousand(tmp_path: Path) -> None:
    def check(n: int) -> int:
        tasks = tmp_path / f"{n}.jsonl"
        with open(tasks, "w") as f:
            for i in range(n):
                f.write(f'{{"id":"task-{i:09d}","cmd":["true"],"timeout":60}}\n')
            f.write('{"id":"task-000000000","cmd":["true"]}\n\n')
        script = ("import resource, sys\nfrom spoolparse.cli import main\nstatus = main(sys.argv[1:])\n"
                  "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM:')][0]\n"
                  "sys.stderr.write(f'VmHWM {int(hwm.split()[1]) * 1024}\\n')\nsys.exit(status)\n")
        p = subprocess.run([sys.executable, "-c", script, "batch", "--check", str(tasks)], capture_output=True,
                           timeout=600)
        assert p.returncode == 1 and json.loads(p.stdout)["line"] == n + 1, p.stderr[-2000:]
        lines = p.stderr.decode().splitlines()
        assert lines[0] == f"spoolparse: check: {n + 1} task lines, 1 bad, 1 blank line", lines
        return int(lines[1].split()[1])

    few, many = check(10_000), check(1_000_000)
    print(f"\npeak RSS of batch --check: 10,000 lines {few / MiB:.1f} MiB, 1,000,000 lines {many / MiB:.1f} MiB, "
          f"growth {(many - few) / MiB:.1f} MiB")
    assert many - few < 16 * MiB


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


# -- what a provider and the engine keep of a stream: flat whatever it holds ----------------------------------------

STREAM_MEASURE = """
import json, sys
import spoolparse
path, provider, max_line = sys.argv[1], sys.argv[2], int(sys.argv[3])
r = spoolparse.parse(path, provider=provider, max_line=max_line)
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM:")][0]
print(json.dumps({"maxrss": int(hwm.split()[1]) * 1024, "ok": r.ok, "text_chars": len(r.text or ""),
                  "error": r.error, "raw_usage_runs": len(r.raw_usage) if isinstance(r.raw_usage, list) else 1}))
"""


def _stream_peak(path: Path, provider: str = "auto", max_line: int = 1 << 20) -> dict:  # type: ignore[type-arg]
    p = subprocess.run([sys.executable, "-c", STREAM_MEASURE, str(path), provider, str(max_line)],
                       capture_output=True, check=True, timeout=600)
    return json.loads(p.stdout)  # type: ignore[no-any-return]


def _write(path: Path, head: bytes, line: Any, n: int, tail: bytes = b"") -> Path:
    """``head``, ``n`` lines made by ``line(i)`` (bytes), ``tail``: written in blocks."""
    with open(path, "wb") as f:
        f.write(head)
        for at in range(0, n, 10_000):
            f.write(b"".join(line(i) for i in range(at, min(n, at + 10_000))))
        f.write(tail)
    return path


@pytest.mark.slow
@pytest.mark.parametrize("cli", ["kimi", "antigravity"])
def test_many_dropped_lines_of_other_types_take_no_more_memory_than_a_few(tmp_path: Path, cli: str) -> None:
    """Lines too long to keep, each of a type of its own that the CLI does not print, in an untyped CLI's stream:
    kimi and antigravity remembered the last dropped line of every type (a million took 193 MiB more)."""
    head = jl({"role": "assistant", "content": "hi"}) if cli == "kimi" else jl(
        {"event": "init", "conversation_id": "c", "init": {}})
    tail = b"" if cli == "kimi" else jl({"event": "result", "result": {"status": "SUCCESS", "response": "hi"}})
    pad = b"x" * 200

    def line(i: int) -> bytes:
        return b'{"type":"t%d","p":"%s"}\n' % (i, pad)

    few = _stream_peak(_write(tmp_path / "few", head, line, 10_000, tail), cli, max_line=128)
    many = _stream_peak(_write(tmp_path / "many", head, line, 400_000, tail), cli, max_line=128)
    growth = many["maxrss"] - few["maxrss"]
    print(f"\n{cli}, 400,000 dropped lines of their own types: peak RSS growth {growth / MiB:.1f} MiB")
    assert few["ok"] and many["ok"], (few, many)
    assert growth < LIMIT


@pytest.mark.slow
def test_a_file_of_small_kept_lines_parses_within_a_read_chunks_records(tmp_path: Path) -> None:
    """Claude Code assistant messages of 400 bytes, every one decoded and folded, 40 MiB of them read through parse's
    mapped windows: the records of a whole 8 MiB window were alive at once, with its mapped pages (57 MiB more than
    a few lines); now a READ_CHUNK of lines at a time, its pages let go once read."""
    head = jl({"type": "system", "subtype": "init", "session_id": "s", "model": "m", "claude_code_version": "2.1"})
    tail = jl({"type": "result", "subtype": "success", "is_error": False, "result": "FINAL", "session_id": "s",
               "total_cost_usd": 0.1})

    def line(i: int) -> bytes:
        return jl({"type": "assistant", "message": {
            "id": f"msg_{i}", "type": "message", "role": "assistant", "model": "claude-opus-4-8",
            "content": [{"type": "tool_use", "id": f"toolu_{i}", "name": "Bash",
                         "input": {"command": f"grep -rn pattern{i} src", "description": "search the sources"}}],
            "stop_reason": None, "usage": {"input_tokens": 1234, "output_tokens": 56}},
            "parent_tool_use_id": None, "session_id": "s", "uuid": f"uuid-{i}"})

    few = _stream_peak(_write(tmp_path / "few", head, line, 100, tail))
    many = _stream_peak(_write(tmp_path / "many", head, line, 100_000, tail))
    growth = many["maxrss"] - few["maxrss"]
    print(f"\n100,000 kept lines of 400 bytes: peak RSS growth {growth / MiB:.1f} MiB")
    assert few["ok"] and many["ok"] and many["text_chars"] == len("FINAL"), (few, many)
    assert growth < 16 * MiB


@pytest.mark.slow
def test_the_usage_of_many_earlier_runs_is_kept_within_a_bound(tmp_path: Path) -> None:
    """200 Gemini runs, each result with a 1 MiB stats object: the usage of every earlier run was kept whole in
    raw_usage (208 MiB more); now within EARLIER_USAGE_BYTES, the rest counted in a warning."""
    from spoolparse import _limits

    init = jl({"type": "init", "session_id": "g", "model": "m"})

    def run(i: int, pad: int) -> bytes:
        return init + jl({"type": "message", "role": "assistant", "content": f"A{i}", "delta": True},
                         {"type": "result", "status": "success", "stats": {"total_tokens": 3, "note": "x" * pad}})

    few = _stream_peak(_write(tmp_path / "few", b"", lambda i: run(i, 10), 200), max_line=2 * MiB)
    many = _stream_peak(_write(tmp_path / "many", b"", lambda i: run(i, MiB), 200), max_line=2 * MiB)
    growth = many["maxrss"] - few["maxrss"]
    print(f"\n200 runs with 1 MiB of usage each: peak RSS growth {growth / MiB:.1f} MiB")
    assert few["ok"] and many["ok"] and few["raw_usage_runs"] == 200
    assert many["raw_usage_runs"] <= 1 + _limits.EARLIER_USAGE_BYTES // MiB
    assert growth < LIMIT


@pytest.mark.slow
@pytest.mark.parametrize("cli", ["gemini", "antigravity"])
def test_an_answer_in_tiny_deltas_costs_about_its_text(cli: str) -> None:
    """An answer in deltas of 2 characters: every delta was kept as a string of its own until the end (about 30
    times the text); pieces are joined as they come. Measured as the peak of Python's allocations while the
    stream is fed in small pieces (what a feed decodes at once would hide it in a peak RSS)."""
    import tracemalloc

    from spoolparse import StreamParser

    n = 60_000
    if cli == "gemini":
        head, tail = jl({"type": "init", "session_id": "g"}), jl({"type": "result", "status": "success"})

        def line(i: int) -> bytes:
            return b'{"type":"message","role":"assistant","content":"%02d","delta":true}\n' % (i % 100)
    else:
        head = jl({"event": "init", "conversation_id": "c", "init": {}})
        tail = jl({"event": "result", "result": {"status": "SUCCESS", "response": ""}})

        def line(i: int) -> bytes:
            return (b'{"event":"step_update","step_update":{"step_index":1,"state":"ACTIVE",'
                    b'"step_type":"agent_response","text_delta":"%02d"}}\n' % (i % 100))

    data = head + b"".join(line(i) for i in range(n)) + tail
    tracemalloc.start()
    try:
        sp = StreamParser(live=False)
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        for at in range(0, len(data), 64 * 1024):
            sp.feed(data[at : at + 64 * 1024])
        r = sp.finish(args=None)
        grown = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    text = 2 * n
    print(f"\n{cli}, {text} characters of answer in 2-character deltas: allocations peaked {grown / MiB:.1f} MiB "
          f"above the start")
    assert r.ok and r.text is not None and len(r.text) == text, r.summary()
    assert grown < 2 * MiB  # (the pieces as strings of their own peaked near 4 MiB)
