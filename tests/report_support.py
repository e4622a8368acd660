"""Outcomes for the report's tests, benchmark and screenshot: a real batch over the fixtures, or many made up.

    python -m tests.report_support outcomes 100000 > outcomes.ndjson   # made-up outcomes, batch's shape
    python -m tests.report_support screenshot docs/images/report.png   # the docs' picture of the HTML page
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"

#: Transcripts the sample batch replays, each as several tasks (ok ones and the agents' own failures).
SAMPLE = [
    ("claude/success.jsonl", 7), ("gemini/success.jsonl", 6), ("opencode/success.jsonl", 5),
    ("amp/success.jsonl", 4), ("kilo/success.jsonl", 3), ("qwen/success.jsonl", 3), ("codex/realcli_A.jsonl", 4),
    ("claude/api_error.jsonl", 3), ("gemini/fatal_error.jsonl", 2), ("opencode/api_error.jsonl", 2),
    ("claude/missing_result.jsonl", 2),
]
#: A task id and an agent's error text that would run as script in a page that did not escape them.
HOSTILE_ID = "<script>document.title='pwned-id'</script>"
HOSTILE_ERROR = "<img src=x onerror=\"document.title='pwned-error'\"><script>document.title='pwned'</script>"


def sample_tasks(tmp: Path, *, hostile: bool = True) -> list[dict[str, Any]]:
    """About 50 tasks: the fixtures replayed after short sleeps, an exit 3, a timeout, a memory kill, and a
    task whose id and error are hostile HTML."""
    bad = tmp / "hostile.jsonl"
    bad.write_text(json.dumps({"type": "system", "subtype": "init", "session_id": "s", "model": "claude-x"})
                       + "\n" + json.dumps({"type": "result", "subtype": "error_during_execution", "is_error": True,
                                            "errors": [HOSTILE_ERROR], "session_id": "s"}) + "\n")
    tasks: list[dict[str, Any]] = []
    n = 0
    for name, times in SAMPLE:
        for _ in range(times):
            n += 1
            delay = f"{(n * 37 % 23) / 50:.2f}"  # 0 to 0.44 s, spread
            tasks.append({"id": f"{name.split('/')[0]}-{n:03d}",
                          "cmd": ["sh", "-c", 'sleep "$1"; cat "$2"', "sh", delay, str(FIXTURES / name)]})
    tasks.append({"id": "exits-3", "cmd": ["sh", "-c", "echo 'no such model' >&2; exit 3"]})
    tasks.append({"id": "too-slow", "cmd": ["sleep", "30"], "timeout": 0.5})
    tasks.append({"id": "hog", "cmd": [sys.executable, str(FIXTURES / "mem_hog.py"), "--mib", "200", "--hold", "5"],
                  "memory_limit": "40M"})
    if hostile:
        tasks.append({"id": HOSTILE_ID, "cmd": ["cat", str(bad)]})
    return tasks


def sample_batch(tmp: Path, *, hostile: bool = True) -> tuple[Path, Path, Path]:
    """Run the sample tasks with ``spoolparse batch`` (the CLI): its outcomes, job log and results folder."""
    tasks = tmp / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(t) + "\n" for t in sample_tasks(tmp, hostile=hostile)))
    outcomes, joblog, results = tmp / "outcomes.ndjson", tmp / "jobs.ndjson", tmp / "results"
    with outcomes.open("wb") as out:
        subprocess.run([sys.executable, "-m", "spoolparse", "batch", str(tasks), "-j", "8", "--joblog", str(joblog),
                        "--results", str(results), "--no-progress"],
                       stdout=out, stderr=subprocess.DEVNULL, cwd=ROOT, timeout=120, check=False)
    return outcomes, joblog, results


# -- made-up outcomes, many -------------------------------------------------------------------------------

_ERRORS = [
    ("failed", 'API Error: 429 {"type":"error","error":{"type":"rate_limit_error","message":"rate limited"},'
               '"request_id":"req_011CU%08dXk"}'),
    ("failed", "stream ended before result; the process exited with status 1"),
    ("failed", "final answer (%d KiB at line 88) exceeded max_retained (1 MiB) and was dropped"),
    ("timeout", "timed out after 1800 s"),
    ("killed_memory", "killed: process tree over its memory limit 3221225472 (cgroup2)"),
    ("killed_memory", "killed: host memory above kill_at"),
    ("spawn_error", "cannot run /opt/agents/bin/agent-%d: No such file or directory"),
]


def _scaled(usage: dict[str, Any], factor: float) -> dict[str, Any]:
    """Counts times ``factor``; a CLI's own cost too; an estimated one left out (priced again)."""
    if usage.get("cost_source") == "estimated":
        usage = {k: v for k, v in usage.items() if k != "cost_usd"}
    return {k: int(v * factor) if type(v) is int else v * factor if k == "cost_usd" and v is not None else v
            for k, v in usage.items() if k != "cost_source"}


def _summaries(variants: int = 40) -> list[dict[str, Any]]:
    """Real summaries of four CLIs, each at ``variants`` sizes, priced as spoolparse prices them."""
    import spoolparse
    from spoolparse import cost

    out = []
    for name in ("claude/success.jsonl", "gemini/success.jsonl", "opencode/success.jsonl", "amp/success.jsonl"):
        base = dict(spoolparse.parse(FIXTURES / name).summary())
        base["text"] = "FINAL-ANSWER " * 20
        for i in range(variants):
            factor = 0.2 + 4.8 * i / variants
            s = dict(base)
            s["usage"] = _scaled(base["usage"], factor)
            by = {m: _scaled(u, factor) for m, u in base["usage_by_model"].items()} if base["usage_by_model"] else None
            priced, s["usage_by_model"] = cost.price(s["provider"], s["model"], s["usage"], by)
            s["cost_usd"], s["cost_source"], s["cost_note"] = priced.usd, priced.source, priced.note
            out.append(s)
    return out


def synthetic(n: int, seed: int = 1) -> Iterator[dict[str, Any]]:
    """``n`` outcomes shaped as ``batch`` prints them: 88% ok, the rest failing for seven causes, lognormal
    durations and peaks, four CLIs' summaries at forty sizes each."""
    rng = random.Random(seed)
    bases = _summaries()
    for i in range(n):
        s = dict(rng.choice(bases))
        s["duration_s"] = wall = round(rng.lognormvariate(3.5, 0.8), 3)
        verdict, error = "ok", None
        if rng.random() > 0.88:
            verdict, error = rng.choice(_ERRORS)
            if "%" in error:
                error = error % rng.randrange(10**6)
        s["ok"], s["error"] = verdict == "ok", error
        yield {"id": f"task-{i:07d}", "verdict": verdict, "attempts": 1 + (rng.random() < 0.05), "wall_s": wall,
               "cpu_s": round(wall / 3, 3), "peak_memory": int(rng.lognormvariate(19.5, 0.5)),
               "peak_source": "cgroup", "returncode": 0 if verdict == "ok" else 1, "signal": None,
               "enforcement": "cgroup2", "error": error, "summary": s if verdict != "spawn_error" else None}


def synthetic_lines(n: int, seed: int = 1) -> Iterator[bytes]:
    for o in synthetic(n, seed):
        yield orjson.dumps(o) + b"\n"


# -- a real browser ---------------------------------------------------------------------------------------

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
                  "--run-all-compositor-stages-before-draw", "--virtual-time-budget=3000"]


def chromium() -> str | None:
    """Debian's ``chromium`` (or another Chromium build on PATH), or ``None``."""
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


def browse(exe: str, url: str, *, screenshot: Path | None = None, width: int = 1280, height: int = 900) -> str:
    """Load ``url`` in headless Chromium with a fresh profile: the DOM after its scripts ran (``--dump-dom``),
    or, with ``screenshot``, a PNG of the first ``height`` pixels written there."""
    with tempfile.TemporaryDirectory(prefix="spoolparse-chromium-") as profile:
        argv = [exe, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}"]
        argv += [f"--screenshot={screenshot}"] if screenshot is not None else ["--dump-dom"]
        p = subprocess.run([*argv, url], capture_output=True, text=True, timeout=120,
                           env={**os.environ, "HOME": profile})
    if p.returncode != 0:
        raise RuntimeError(f"chromium exited {p.returncode}: {p.stderr[-2000:]}")
    return p.stdout


def screenshot(png: Path) -> None:
    """The docs' picture: the sample batch's HTML report, as a laptop shows its first screens."""
    exe = chromium()
    if exe is None:
        raise SystemExit("no chromium on PATH (apt-get install chromium)")
    with tempfile.TemporaryDirectory(prefix="spoolparse-shot-") as d:
        tmp = Path(d)
        outcomes, joblog, results = sample_batch(tmp, hostile=False)
        page = tmp / "report.html"
        subprocess.run([sys.executable, "-m", "spoolparse", "report", str(outcomes), "--joblog", str(joblog),
                        "--results", str(results), "--html", str(page)], check=True, cwd=ROOT,
                       stdout=subprocess.DEVNULL)
        browse(exe, page.as_uri(), screenshot=png.resolve(), width=1280, height=1800)


def main(argv: list[str]) -> int:
    if argv[:1] == ["outcomes"] and len(argv) == 2:
        out = sys.stdout.buffer
        for line in synthetic_lines(int(argv[1])):
            out.write(line)
        return 0
    if argv[:1] == ["screenshot"] and len(argv) == 2:
        screenshot(Path(argv[1]))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
