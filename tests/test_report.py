"""``spoolparse report``: the fold's figures against direct counts, its bounds, its input tolerance, its outputs."""

from __future__ import annotations

import io
import json
import math
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from spoolparse.report import build
from spoolparse.report import fold as fold_module
from spoolparse.report.causes import cause
from spoolparse.report.html import page
from spoolparse.report.reader import MAX_LINE
from spoolparse.report.sketch import ACCURACY, LOWEST, Largest, Quantiles
from spoolparse.report.text import plain, write
from spoolparse.types import REPORT_FIELDS

from .helpers import ROOT
from .report_support import HOSTILE_ERROR, HOSTILE_ID, synthetic


def lines(outcomes: list[dict[str, Any]]) -> io.BytesIO:
    return io.BytesIO(b"".join(orjson.dumps(o) + b"\n" for o in outcomes))


def report_of(outcomes: list[dict[str, Any]], **kw: Any) -> dict[str, Any]:
    r, _ = build(lines(outcomes), **kw)
    return dict(r)


def outcome(i: int, verdict: str = "ok", error: str | None = None, **kw: Any) -> dict[str, Any]:
    return {"id": f"t{i}", "verdict": verdict, "attempts": 1, "wall_s": 1.0 + i, "peak_memory": 1 << 20,
            "peak_source": "sampled", "error": error, "summary": None, **kw}


# -- the figures ---------------------------------------------------------------------------------------


def test_counts_match_a_direct_count_of_the_outcomes() -> None:
    outs = list(synthetic(3000, seed=7))
    r = report_of(outs)
    want = Counter(o["verdict"] for o in outs)
    assert r["outcomes"] == 3000 and r["ok"] == want["ok"] and r["not_ok"] == 3000 - want["ok"]
    assert {k: v for k, v in r["verdicts"].items() if v} == dict(want)
    assert sum(g["count"] for g in r["failures"]) == r["not_ok"] and r["other_failures"] == 0
    walls = sorted(o["wall_s"] for o in outs if o["verdict"] != "skipped")
    assert r["durations"]["max"] == walls[-1] and r["durations"]["min"] == walls[0]
    assert [t["wall_s"] for t in r["slowest"]] == walls[::-1][:10]
    assert r["attempts"]["total"] == sum(o["attempts"] for o in outs)
    assert r["attempts"]["extra"] == sum(o["attempts"] - 1 for o in outs)
    assert r["memory"]["killed"] == want["killed_memory"]
    assert tuple(r) == REPORT_FIELDS


def test_failures_that_differ_only_in_ids_paths_and_numbers_are_one_cause() -> None:
    outs = [outcome(i, "failed", f'API Error: 429 {{"request_id":"req_011CU{i:08d}Xk"}} retry in {i % 7} s')
            for i in range(200)]
    outs += [outcome(1000 + i, "failed", f"cannot open /work/run-{i}/out.json") for i in range(5)]
    outs += [outcome(2000, "failed", "the process exited with status 1"),
             outcome(2001, "failed", "the process exited with status 137")]
    r = report_of(outs)
    assert [(g["count"], g["cause"]) for g in r["failures"]] == [
        (200, 'API Error: 429 {"request_id":"<id>"} retry in N s'),
        (5, "cannot open <path>"),
        (1, "the process exited with status 1"),
        (1, "the process exited with status 137"),
    ]
    assert [t["id"] for t in r["failures"][0]["examples"]] == ["t0", "t1", "t2"]


@pytest.mark.parametrize(("a", "b"), [
    ("HTTP 429 Too Many Requests", "HTTP 500 Internal Server Error"),
    ("model gpt-5.1 not found", "model gpt-4o not found"),
    ("the process was killed by SIGKILL", "the process was killed by SIGTERM"),
    ("exit 1", "exit 2"),
])
def test_what_tells_causes_apart_stays(a: str, b: str) -> None:
    assert cause(a) != cause(b)


@given(st.lists(st.floats(min_value=0, max_value=1e9, allow_nan=False), min_size=1, max_size=400),
       st.sampled_from([0.5, 0.9, 0.99, 1.0]))
def test_quantiles_are_within_their_stated_accuracy(values: list[float], q: float) -> None:
    sk = Quantiles()
    for v in values:
        sk.add(v)
    exact = sorted(values)[max(1, math.ceil(q * len(values))) - 1]
    got = sk.quantile(q)
    assert got is not None
    assert abs(got - exact) <= ACCURACY * exact + 2 * LOWEST  # values below LOWEST count as LOWEST
    assert sk.low == min(values) and sk.high == max(values)
    assert sum(b["count"] for b in sk.histogram()) == len(values)


def test_quantile_buckets_are_bounded_whatever_the_values() -> None:
    sk = Quantiles()
    for i in range(200_000):
        sk.add(1.0001**i * 1e-9)  # 10^-9 to 10^8: every bucket there is
    assert len(sk.buckets) <= math.ceil(math.log(2**50 / 1e-6) / math.log((1 + ACCURACY) / (1 - ACCURACY))) + 2


@given(st.lists(st.integers(0, 1000), max_size=200), st.integers(1, 20))
def test_largest_keeps_the_n_largest(values: list[int], n: int) -> None:
    top: Largest[int] = Largest(n, key=float)
    for v in values:
        top.add(v)
    assert top.items() == sorted(values, reverse=True)[:n]


def test_reported_and_estimated_costs_are_kept_apart_and_summed() -> None:
    outs = list(synthetic(400, seed=3))
    r = report_of(outs)
    want = {"reported": 0.0, "estimated": 0.0}
    unpriced = 0
    for o in outs:
        s = o["summary"]
        if s is None:
            continue
        for per in (s["usage_by_model"] or {"": s}).values():
            if per["cost_source"] in want:
                want[per["cost_source"]] += per["cost_usd"]
        unpriced += s["cost_usd"] is None
    t = r["total"]
    assert t["reported_usd"] == pytest.approx(want["reported"])
    assert t["estimated_usd"] == pytest.approx(want["estimated"])
    assert t["reported_usd"] > 0 and t["estimated_usd"] > 0
    assert t["unpriced_runs"] == unpriced and t["runs"] == sum(o["summary"] is not None for o in outs)
    assert sum(row["runs"] for row in r["spend"] if row["provider"] == "claude") == sum(
        1 for o in outs if o["summary"] and o["summary"]["provider"] == "claude")
    by = {(row["provider"], row["model"]): row for row in r["spend"]}
    assert by[("opencode", None)]["reported_runs"] > 0 and by[("opencode", None)]["estimated_usd"] == 0
    assert by[("gemini", "gemini-3.8-flash")]["estimated_runs"] > 0


def test_outcomes_written_before_summaries_had_a_cost_are_priced_by_the_same_rule() -> None:
    outs = list(synthetic(200, seed=5))
    old = json.loads(json.dumps(outs))
    for o in old:
        s = o["summary"]
        if s is not None:
            for k in ("cost_usd", "cost_source", "cost_note"):
                del s[k]
            for per in (s["usage_by_model"] or {}).values():
                per.pop("cost_source")
                if "costUSD" not in json.dumps(s.get("raw_usage")):
                    per.pop("cost_usd")
    assert report_of(old)["total"] == pytest.approx(report_of(outs)["total"])


def test_retries_and_memory_requeues_are_told_apart_by_the_job_log(tmp_path: Path) -> None:
    log = tmp_path / "jobs.ndjson"
    attempts = [
        {"id": "a", "attempt": 1, "final": False, "verdict": "failed", "error": "exit 1"},
        {"id": "a", "attempt": 2, "final": True, "verdict": "ok", "error": None},
        {"id": "b", "attempt": 1, "final": False, "verdict": "killed_memory",
         "error": "killed: host memory above kill_at"},
        {"id": "b", "attempt": 2, "final": False, "verdict": "killed_memory",
         "error": "killed: process tree over its memory limit 1000 (watchdog)"},
        {"id": "b", "attempt": 3, "final": True, "verdict": "ok", "error": None},
    ]
    log.write_bytes(b"".join(orjson.dumps(a) + b"\n" for a in attempts) + b"cut sho")
    outs = [outcome(0, id="a", attempts=2), outcome(1, id="b", attempts=3)]
    a = report_of(outs, joblog=log)["attempts"]
    assert a == {"source": "joblog", "total": 5, "tasks_retried": 2, "extra": 3, "retries": 2, "requeues": 1}
    assert report_of(outs)["attempts"]["retries"] is None  # the outcomes alone cannot tell them apart


def test_the_job_log_is_read_as_resume_reads_it(other_user: tuple[int, int], shared_base: Path,
                                                  tmp_path: Path) -> None:
    """``report --joblog`` read the log with a reader of its own: a torn line was dropped without a word, a line
    holding a lone surrogate escape (an id that is a file name's undecodable byte) was dropped as not JSON, and a
    log named through another user's symbolic link was followed. The one job-log reader does all three."""
    log = tmp_path / "jobs.ndjson"
    attempts = [{"id": "f\udcff", "attempt": 1, "final": False, "verdict": "failed", "error": "exit 1"},
                {"id": "f\udcff", "attempt": 2, "final": True, "verdict": "ok", "error": None}]
    log.write_bytes(b"".join(json.dumps(a).encode() + b"\n" for a in attempts) + b'{"id": "b", "fin\n')
    outcomes = tmp_path / "outcomes.ndjson"
    outcomes.write_bytes(json.dumps(outcome(0, id="f\udcff", attempts=2)).encode() + b"\n")
    p = subprocess.run([sys.executable, "-m", "spoolparse", "report", "--json", str(outcomes), "--joblog", str(log)],
                       capture_output=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["attempts"]["retries"] == 1 and json.loads(p.stdout)["attempts"]["total"] == 2
    assert p.stderr.decode() == (f"spoolparse: warning: job log {str(log)!r}: line 3 is cut short or not JSON, "
                                 "ignored (its task runs again unless another line says it is done)\n")
    hers = shared_base / "hers"
    hers.mkdir()
    os.chown(hers, *other_user)
    (hers / "log").symlink_to(log)
    os.lchown(hers / "log", *other_user)
    p = subprocess.run([sys.executable, "-m", "spoolparse", "report", str(outcomes), "--joblog", str(hers / "log")],
                       capture_output=True, timeout=60)
    assert p.returncode == 2 and p.stdout == b"", p.stderr
    assert p.stderr.decode() == (f"spoolparse: error: job log {str(hers / 'log')!r} is a symbolic link owned by "
                                 f"another user (uid {other_user[0]})\n")


# -- bounds ----------------------------------------------------------------------------------------------


def test_causes_models_and_table_rows_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fold_module, "MAX_GROUPS", 20)
    monkeypatch.setattr(fold_module, "MAX_MODELS", 5)
    monkeypatch.setattr(fold_module, "MAX_TABLE_ROWS", 30)
    outs = [outcome(i, "failed", f"failure kind {chr(65 + i % 26)}{chr(65 + i // 26 % 26)}",
                    summary={"provider": "claude", "model": f"m{i}", "usage": {"input_tokens": 1}})
            for i in range(100)]
    r, fold = build(lines(outs + [outcome(500 + i) for i in range(50)]), rows=True)
    assert len(r["failures"]) == 20 and r["other_failures"] == 80
    assert len(r["spend"]) == 6 and ("claude", fold_module.OTHER_MODELS) in {(s["provider"], s["model"])
                                                                              for s in r["spend"]}
    assert sum(s["runs"] for s in r["spend"]) == 100
    rows = fold.rows()
    assert len(rows) == 30 and all(row.verdict == "failed" for row in rows)  # not ok first


# -- any input -------------------------------------------------------------------------------------------


ODD = [
    b"not json", b"[1, 2]", b'{"id": "x"}', b'{"verdict": "ok"}', b"null",
    b'{"id": 7, "verdict": "failed", "wall_s": "slow", "attempts": null, "peak_memory": -5, "summary": []}',
    b'{"id": "u", "verdict": "ok", "summary": {"usage": "lots", "usage_by_model": {"m": 3}, "cost_usd": "1"}}',
    b'{"id": "w", "verdict": "weird", "wall_s": -1, "new_field": {"x": 1}, "summary": {"provider": 5}}',
    b"\xef\xbb\xbf" + b'{"id": "bom", "verdict": "ok"}',
]


def test_any_line_is_taken_or_counted_never_an_error() -> None:
    data = b"\n".join([ODD[-1], *ODD[:-1]]) + b"\n\n"
    r = dict(build(io.BytesIO(data))[0])
    assert r["outcomes"] == 4 and r["invalid_lines"] == 5
    assert r["verdicts"]["weird"] == 1 and r["verdicts"]["ok"] == 2 and r["verdicts"]["failed"] == 1
    assert plain(r)  # and every output draws it
    page(r, [], source="odd")


def test_a_line_of_many_mib_is_read_from_its_ends() -> None:
    o = next(synthetic(1, seed=2))
    o["summary"]["text"] = 'a "quoted" \\ line\n' * (3 * MAX_LINE // 16)
    o["summary"]["warnings"] = ["w" * 100]
    small = outcome(9)
    r = dict(build(io.BytesIO(orjson.dumps(small) + b"\n" + orjson.dumps(o) + b"\n" + orjson.dumps(small)))[0])
    assert r["outcomes"] == 3 and r["long_lines"] == 1 and r["invalid_lines"] == 0
    whole = report_of([small, {**o, "summary": {**o["summary"], "text": "short"}}, small])
    assert r["total"] == whole["total"] and r["durations"] == whole["durations"]


# -- outputs ---------------------------------------------------------------------------------------------


def test_the_html_page_escapes_every_task_string_and_fetches_nothing() -> None:
    outs = [outcome(0, "failed", HOSTILE_ERROR, id=HOSTILE_ID,
                    summary={"provider": "<b>cli</b>", "model": '"><svg onload=alert(1)>', "usage": {}})]
    r, fold = build(lines(outs), rows=True)
    html = page(r, fold.rows(), source="<i>file</i>.ndjson")
    assert html.count("<script") == 1 and "<svg onload" not in html and "<img" not in html and "<b>cli" not in html
    assert "&lt;script&gt;document.title=&#x27;pwned-id&#x27;" in html
    assert "Content-Security-Policy" in html and "default-src 'none'" in html
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", html)
    assert "@import" not in html and "url(" not in html


def test_report_command_tables_json_and_html(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from spoolparse.cli import main

    src = tmp_path / "outcomes.ndjson"
    src.write_bytes(b"".join(orjson.dumps(o) + b"\n" for o in synthetic(300, seed=11)))
    assert main(["report", str(src)]) == 0
    text = capsys.readouterr().out
    for title in ("Summary", "Verdicts", "Failures by cause", "Tokens and cost by CLI and model", "Durations",
                  "Slowest tasks", "Attempts", "Peak memory per task"):
        assert f"\n{title}\n" in f"\n{text}"
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(src.read_bytes())))
    assert main(["report", "-", "--json", "--html", str(tmp_path / "r.html")]) == 0
    r = json.loads(capsys.readouterr().out)
    assert tuple(r) == REPORT_FIELDS and r["outcomes"] == 300
    assert (tmp_path / "r.html").read_text().startswith("<!doctype html>")
    assert main(["report", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no such file" in err


def test_rich_tables_where_rich_is_installed() -> None:
    pytest.importorskip("rich")
    r = report_of(list(synthetic(50)))
    out = io.StringIO()
    write(r, out, rich=True)
    assert "Failures by cause" in out.getvalue() and "┃" in out.getvalue()


@pytest.mark.parametrize("use_rich", [False, True])
def test_no_control_sequence_of_an_agent_reaches_the_terminal(use_rich: bool) -> None:
    if use_rich:
        pytest.importorskip("rich")
    hostile = "t\x1b]0;owned\x07\x1b[2J\u009b31m\nnext"
    outs = [outcome(0, "failed", f"agent said {hostile}", id=hostile,
                    summary={"provider": "codex", "model": "m\x1b[2J", "usage": {}}),
            outcome(1, "ok", None)]
    r, _ = build(lines(outs))
    out = io.StringIO()
    write(r, out, rich=use_rich)
    text = out.getvalue()
    assert "\x1b]" not in text and "\x1b[2J" not in text and "\x07" not in text and "\u009b" not in text
    assert "\\x1b]0;owned\\x07" in text  # spelled out, not dropped


#: The most a report of any number of outcomes may hold, the page's rows included (a fresh interpreter with
#: orjson and the report's modules is about 25 MiB of it; the price data, where an outcome needs pricing, 27 MiB).
RSS_BOUND = 100 << 20


@pytest.mark.slow
def test_a_million_outcomes_stay_within_the_memory_bound(tmp_path: Path) -> None:
    # The report's own peak, VmHWM, read by the report's process as it ends: ru_maxrss of a child would carry
    # over the peak of this (forking, long-running) pytest.
    report = (
        "import sys\n"
        "from spoolparse.cli import main\n"
        f"rc = main(['report', '-', '--json', '--html', {str(tmp_path / 'r.html')!r}])\n"
        "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM:')][0]\n"
        "print(int(hwm.split()[1]) * 1024, file=sys.stderr)\n"
        "sys.exit(rc)\n"
    )
    gen = subprocess.Popen([sys.executable, "-m", "tests.report_support", "outcomes", "1000000"],
                           stdout=subprocess.PIPE, cwd=ROOT)
    assert gen.stdout is not None
    rep = subprocess.run([sys.executable, "-c", report], stdin=gen.stdout, capture_output=True, cwd=ROOT,
                         check=False)
    gen.stdout.close()
    assert gen.wait() == 0 and rep.returncode == 0, rep.stderr[-2000:]
    assert json.loads(rep.stdout)["outcomes"] == 1_000_000
    peak = int(rep.stderr.split()[-1])
    assert peak < RSS_BOUND, f"peak RSS {peak >> 20} MiB"


def test_every_report_bound_is_described() -> None:
    sys.path.insert(0, str(ROOT / "docs"))
    import generate

    assert set(fold_module.BOUNDS) == set(generate._REPORT_BOUND_TEXT)
