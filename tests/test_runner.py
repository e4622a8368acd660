"""The runner: one outcome per task, admission, requeue, caps, timeouts, job log, interrupts."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import orjson
import psutil
import pytest

import spoolparse
from spoolparse import _limits
from spoolparse._os.cgroup import Placement
from spoolparse.runner import Admission, Task, auto_concurrency, default_reserve, run_many
from spoolparse.runner.joblog import done_ids, finished_ok
from spoolparse.runner.memory import HostMemory, sample_trees
from spoolparse.runner.scheduler import Batch, InvalidTask
from spoolparse.spool import empty_pool

from .helpers import ANSWERS
from .runner_support import FAKE_CODEX, HOG, FixedProbe, MiB, TreeProbe, marker, one_each, wait_gone

BIG = 1 << 40  # a fake total so large that admission never holds anything back


def test_argv_lists_get_index_ids_and_one_outcome_each() -> None:
    tasks = [ANSWERS, ["false"], [*FAKE_CODEX, "--size", "64K"]]
    outs = one_each(spoolparse.run_many(tasks, max_concurrent=2, memory_probe=FixedProbe(BIG)), ["0", "1", "2"])
    assert outs["0"].verdict == "ok" and outs["0"].returncode == 0
    assert outs["1"].verdict == "failed" and outs["1"].returncode == 1
    assert outs["2"].ok and outs["2"].summary is not None
    assert outs["2"].summary["text"].startswith("FINAL-ANSWER")
    assert outs["2"].enforcement == (Placement.detect().enforcement or "none") and outs["2"].attempts == 1


def test_spawn_errors_and_bad_items_do_not_stop_the_batch() -> None:
    tasks: list[object] = [
        Task(argv=["/nonexistent/cmd"], id="missing"),
        InvalidTask("bad", "line 2: not JSON"),
        "not a task",
        Task(argv=ANSWERS, id="fine"),
        # fails while its child is made ready (its input is opened in the spawner thread), before any fork
        Task(argv=["cat"], input=Path("/nonexistent/input.txt"), id="noinput"),
    ]
    list(run_many([ANSWERS]))  # the guardian's pipe is open from here on
    empty_pool()
    fds = len(os.listdir("/proc/self/fd"))
    outs = one_each(
        run_many(tasks, max_concurrent=2, memory_probe=FixedProbe(BIG)), ["missing", "bad", "2", "fine", "noinput"]
    )
    empty_pool()  # the spools kept for reuse
    assert len(os.listdir("/proc/self/fd")) == fds  # none left by the starts that failed
    assert outs["noinput"].verdict == "spawn_error" and "cannot read input" in (outs["noinput"].error or "")
    assert outs["noinput"].attempts == 1
    assert outs["missing"].verdict == "spawn_error" and "nonexistent" in (outs["missing"].error or "")
    assert outs["bad"].verdict == "spawn_error" and outs["bad"].attempts == 0
    assert outs["2"].verdict == "spawn_error"
    assert outs["fine"].ok


@pytest.mark.slow
def test_ordered_outcomes_come_in_input_order() -> None:
    delays = [1.0, 0.0, 0.2, 0.0, 0.1, 0.0]  # t0 ends last by far, even on a loaded machine
    tasks = [Task(argv=["sleep", str(d)], id=f"t{i}") for i, d in enumerate(delays)]
    outs = list(run_many(tasks, max_concurrent=3, ordered=True, memory_probe=FixedProbe(BIG)))
    assert [o.id for o in outs] == [f"t{i}" for i in range(len(delays))]
    unordered = list(run_many(tasks, max_concurrent=6, memory_probe=FixedProbe(BIG)))
    one_each(unordered, [f"t{i}" for i in range(len(delays))])
    assert unordered[-1].id == "t0"  # the slowest ends last when all run at once


def test_admission_counts_reservations_not_yet_touched() -> None:
    probe = FixedProbe(total=1000, used=100)
    a = Admission(probe, stop_at=0.85, kill_at=0.95)
    assert a.may_start(300, [], running=0)
    assert a.may_start(300, [300], running=1)  # 100 + 300 + 300 <= 850
    assert not a.may_start(300, [300, 300], running=2)  # GNU parallel's --memfree would start it
    assert a.may_start(300, [300, 0], running=2)  # the second one has touched its estimate already
    probe.value = 860
    assert not a.may_start(1, [], running=0)
    assert not a.must_kill()
    probe.value = 950
    assert a.must_kill()


def test_an_estimate_larger_than_the_budget_still_runs_alone() -> None:
    a = Admission(FixedProbe(total=1000, used=0))
    assert a.may_start(10_000, [], running=0)
    assert not a.may_start(10_000, [0], running=1)


def test_auto_concurrency_and_reserve() -> None:
    gib = 1 << 30
    assert default_reserve(24 * gib) == int(2.4 * gib)
    assert default_reserve(8 * gib) == 2 * gib
    assert default_reserve(2 * gib) == gib  # never more than half
    assert auto_concurrency(24 * gib, 4 * gib, cap=100) == 5  # (24 - 2.4) / 4
    assert auto_concurrency(24 * gib, 64 * gib, cap=100) == 1
    assert auto_concurrency(240 * gib, 1 * gib, cap=7) == 7
    with pytest.raises(spoolparse.UsageError):
        auto_concurrency(gib, 0)


def test_no_max_concurrent_uses_the_memory_formula() -> None:
    batch = run_many([], memory_per_task=300 * MiB, memory_probe=FixedProbe(total=2000 * MiB))
    assert batch.max_concurrent == (2000 - 1000) // 300  # reserve: half of a small total
    assert list(batch) == []


def test_host_memory_reads_a_total_no_larger_than_the_host() -> None:
    m = HostMemory()
    assert 0 < m.total() <= psutil.virtual_memory().total
    assert 0 < m.used() < m.total()


def test_tree_sampling_sees_a_hog() -> None:
    _, env = marker()
    p = psutil.Popen([*HOG, "--mib", "30", "--hold", "5"], env={**os.environ, **env})
    try:
        deadline = time.monotonic() + 5
        size = 0
        while time.monotonic() < deadline and size < 30 * MiB:
            size = sample_trees([p.pid])[p.pid]
            time.sleep(0.05)
        assert size >= 30 * MiB
        assert sample_trees([999_999_999]) == {999_999_999: 0}
    finally:
        p.kill()
        p.wait()


@pytest.mark.slow
def test_hogs_are_held_below_kill_at() -> None:
    # 8 hogs of ~40 MiB (30 touched + the interpreter) against a fake 200 MiB total: all at once
    # would be ~320 MiB, past kill_at (180 MiB). Admission must keep them below it.
    probe = TreeProbe(total=200 * MiB)
    tasks = [Task(argv=[*HOG, "--mib", "30", "--hold", "0.4"], id=f"h{i}", memory=45 * MiB) for i in range(8)]
    seen_running = 0
    batch = run_many(tasks, max_concurrent=8, stop_at=0.6, kill_at=0.9, memory_probe=probe, sample_interval=0.05,
                     memory_sample_interval=0.05)

    def tick(b: spoolparse.runner.Batch) -> None:
        nonlocal seen_running
        seen_running = max(seen_running, b.running)

    batch.on_tick = tick
    outs = one_each(batch, [f"h{i}" for i in range(8)])
    assert all(o.ok for o in outs.values()), {k: o.verdict for k, o in outs.items()}
    assert probe.max_seen < 0.9 * 200 * MiB
    assert 1 <= seen_running <= 3
    # each hog's own peak (30 MiB touched and the interpreter), not this process's size
    peaks = {k: o.peak_memory for k, o in outs.items()}
    assert all(p is not None and 30 * MiB <= p < 100 * MiB for p in peaks.values()), peaks


@pytest.mark.slow
def test_memory_pressure_kills_the_youngest_and_requeues_it(tmp_path: Path) -> None:
    once = tmp_path / "once"
    log = tmp_path / "jobs.ndjson"
    probe = TreeProbe(total=100 * MiB)

    def tasks() -> Iterator[Task]:
        yield Task(argv=[*HOG, "--mib", "1", "--hold", "1.5"], id="old", memory=1)
        time.sleep(0.3)  # the input is pulled lazily: the hog starts clearly later, so it is the youngest
        yield Task(argv=[*HOG, "--mib", "80", "--step", "10", "--hold", "5", "--once-file", str(once)],
                   id="big-once", memory=1)

    outs = one_each(
        run_many(tasks(), max_concurrent=2, stop_at=0.4, kill_at=0.6, retry_backoff=0.05, joblog=log,
                 memory_probe=probe, sample_interval=0.03),
        ["old", "big-once"],
    )
    assert outs["old"].ok and outs["old"].attempts == 1  # the older task is left alone
    o = outs["big-once"]
    assert o.ok and o.attempts == 2, o
    recs = [orjson.loads(x) for x in log.read_bytes().splitlines()]
    big = [(r["attempt"], r["final"], r["verdict"]) for r in recs if r["id"] == "big-once"]
    assert big == [(1, False, "killed_memory"), (2, True, "ok")]


def test_memory_pressure_gives_up_after_the_requeues(tmp_path: Path) -> None:
    probe = TreeProbe(total=100 * MiB)
    task = Task(argv=[*HOG, "--mib", "80", "--step", "10", "--hold", "5"], id="always-big")
    outs = one_each(
        run_many([task], max_concurrent=1, stop_at=0.4, kill_at=0.6, requeues=1, retry_backoff=0.05,
                 memory_probe=probe, sample_interval=0.03),
        ["always-big"],
    )
    o = outs["always-big"]
    assert o.verdict == "killed_memory" and o.attempts == 2
    assert o.signal == signal.SIGKILL and "kill_at" in (o.error or "")


def test_watchdog_caps_a_task_without_a_cgroup() -> None:
    tasks = [
        Task(argv=[*HOG, "--mib", "120", "--step", "8", "--hold", "5"], id="over", memory_limit=48 * MiB),
        Task(argv=[*HOG, "--mib", "5"], id="under", memory_limit=48 * MiB),
    ]
    outs = one_each(
        run_many(tasks, max_concurrent=2, enforce="watchdog", memory_probe=FixedProbe(BIG), sample_interval=0.03),
        ["over", "under"],
    )
    assert outs["over"].verdict == "killed_memory" and outs["over"].enforcement == "watchdog"
    assert outs["over"].peak_memory is not None and outs["over"].peak_memory > 48 * MiB
    assert outs["under"].ok and outs["under"].enforcement == "watchdog"


@pytest.mark.slow
def test_soft_timeout_signals_and_hard_timeout_kills_an_ignoring_grandchild() -> None:
    token, env = marker()
    # Deadlines leave a loaded machine time to start Python and install the handlers (a signal that arrives
    # before them ends the child by its default action, which is not what is under test).
    soft = Task(argv=[*HOG, "--mib", "1", "--hold", "3.0"], id="soft", soft_timeout=1.5, env=env)
    hard = Task(
        argv=[*FAKE_CODEX, "--orphan", "--ignore-term", "--size", "4K", "--hang", "60"],
        id="hard", timeout=1.5, env=env,
    )
    t0 = time.monotonic()
    outs = one_each(
        run_many([soft, hard], max_concurrent=2, grace=0.3, memory_probe=FixedProbe(BIG)), ["soft", "hard"]
    )
    assert outs["soft"].ok  # the hog handles SIGUSR1 and finishes
    assert outs["soft"].summary is not None and outs["soft"].summary["text"] == "held 1.0 MiB (soft signal seen)"
    assert outs["hard"].verdict == "timeout"
    assert outs["hard"].signal == signal.SIGKILL  # it ignored SIGTERM: killed after the grace
    assert outs["hard"].summary is not None and outs["hard"].summary["timed_out"] is True
    assert time.monotonic() - t0 < 10
    assert wait_gone(token) == []


def test_default_soft_signal_ends_a_child_that_does_not_handle_it() -> None:
    outs = one_each(
        run_many([Task(argv=["sleep", "30"], id="s", soft_timeout=0.1)], memory_probe=FixedProbe(BIG)), ["s"]
    )
    assert outs["s"].verdict == "timeout" and outs["s"].signal == signal.SIGUSR1
    own = one_each(
        run_many([Task(argv=["sleep", "30"], id="t", soft_timeout=0.1)], soft_signal=signal.SIGTERM,
                 memory_probe=FixedProbe(BIG)), ["t"]
    )
    assert own["t"].verdict == "timeout" and own["t"].signal == signal.SIGTERM


def test_joblog_resume_failed_skips_only_tasks_that_ended_ok(tmp_path: Path) -> None:
    log = tmp_path / "jobs.ndjson"
    flag = tmp_path / "ok-now"
    flaky = ["sh", "-c", f'test -e "{flag}"']
    tasks = [Task(argv=ANSWERS, id="a"), Task(argv=flaky, id="b"), Task(argv=ANSWERS, id="c")]
    kw: dict[str, Any] = {"memory_probe": FixedProbe(BIG), "allow_empty_answer": True}  # b: its exit is its verdict
    first = one_each(run_many(tasks, max_concurrent=2, joblog=log, **kw), ["a", "b", "c"])
    assert [first[k].verdict for k in "abc"] == ["ok", "failed", "ok"]
    assert finished_ok(log) == {"a", "c"}
    flag.touch()
    second = one_each(run_many(tasks, max_concurrent=2, joblog=log, resume="failed", **kw), ["b"])
    assert second["b"].ok
    assert finished_ok(log) == {"a", "b", "c"}
    for rec in map(orjson.loads, log.read_bytes().splitlines()):
        assert set(rec) >= {"id", "attempt", "final", "verdict", "wall_s", "peak_memory", "cmd"}
        assert "env" not in rec and "input" not in rec


def test_resume_keeps_the_index_ids_of_bare_argv_lists(tmp_path: Path) -> None:
    log = tmp_path / "jobs.ndjson"
    flag = tmp_path / "ok-now"
    tasks = [ANSWERS, ["sh", "-c", f'test -e "{flag}"'], ANSWERS]
    kw: dict[str, Any] = {"memory_probe": FixedProbe(BIG), "allow_empty_answer": True}  # 1: its exit is its verdict
    one_each(run_many(tasks, joblog=log, max_concurrent=1, **kw), ["0", "1", "2"])
    flag.touch()
    again = one_each(run_many(tasks, joblog=log, resume="failed", **kw), ["1"])
    assert again["1"].ok


def test_joblog_reader_skips_a_torn_last_line(tmp_path: Path) -> None:
    log = tmp_path / "jobs.ndjson"
    log.write_bytes(
        b'{"id":"x","final":true,"verdict":"ok"}\n{"id":"y","final":false,"verdict":"killed_memory"}\n'
        b'{"id":"z","final":true,"verdict":"failed"}\n{"id":"z","final":true,"verdict":"ok"}\n{"id":"w","fin'
    )
    assert finished_ok(log) == {"x", "z"}
    assert finished_ok(tmp_path / "missing") == set()


def test_a_job_log_cut_anywhere_in_its_last_line_is_ended_before_the_next_line_and_read_as_torn(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A job log ending mid-line (a crash while a long line was written): the next run's first line was appended
    onto the fragment, the merged line did not parse, and a later ``--resume`` ran that task again although its
    outcome was printed and logged. Every cut of the last line: the readers count the fragment as torn (one
    warning naming it) and never merge, and a new :class:`JobLog` ends it before it writes."""
    import logging

    from spoolparse.runner.joblog import DoneIds, JobLog

    log = tmp_path / "jobs.ndjson"
    first = b'{"id":"x","attempt":1,"final":true,"verdict":"ok"}\n'
    last = b'{"id":"y","attempt":1,"final":true,"verdict":"failed","cmd":["sh","-c","exit 3"]}\n'
    for cut in range(len(first), len(first) + len(last) + 1):
        log.write_bytes((first + last)[:cut])
        whole = cut >= len(first) + len(last) - 1  # at most its newline lost: the line is all there
        torn = not whole and cut > len(first)
        done = {"x", "y"} if whole else {"x"}
        caplog.clear()
        with caplog.at_level(logging.WARNING, "spoolparse.runner"):
            assert done_ids(log, True) == done, cut
            resumed = DoneIds(log, True)
            assert {i for i in ("x", "y", "z") if i in resumed} == done, cut
            resumed.close()
        said = [r.getMessage() for r in caplog.records]
        assert said == ([f"job log {str(log)!r}: line 2 is cut short or not JSON, ignored (its task runs again "
                         "unless another line says it is done)"] * 2 if torn else []), (cut, said)
        j = JobLog(log)
        j.write(spoolparse.Outcome(id="z", verdict="ok"), argv=ANSWERS, final=True, started=0.0)
        j.close()
        lines = log.read_bytes().split(b"\n")
        assert lines[-1] == b"" and orjson.loads(lines[-2])["id"] == "z", cut  # whole, on a line of its own
        assert lines[:-2] == (first + last)[:cut].rstrip(b"\n").split(b"\n"), cut  # nothing else changed
        assert done_ids(log, True) == done | {"z"}, cut


def test_resume_skips_every_final_outcome_but_cancelled_resume_failed_only_the_ok_ones(tmp_path: Path) -> None:
    log = tmp_path / "jobs.ndjson"
    log.write_bytes(
        b'{"id":"ok","final":true,"verdict":"ok"}\n{"id":"bad","final":true,"verdict":"failed"}\n'
        b'{"id":"gone","final":true,"verdict":"cancelled"}\n{"id":"half","final":false,"verdict":"killed_memory"}\n'
        b'{"id":"late","final":true,"verdict":"timeout"}\n'
    )
    assert done_ids(log, True) == {"ok", "bad", "late"}  # GNU parallel's --resume
    assert done_ids(log, "failed") == {"ok"}  # --resume-failed
    assert done_ids(log, False) == set()


def test_retries_run_a_failed_task_again_and_each_attempt_is_logged(tmp_path: Path) -> None:
    log = tmp_path / "jobs.ndjson"
    count = tmp_path / "count"
    # fails twice, then succeeds; a missing command is never retried
    flaky = ["sh", "-c", f'echo x >> "{count}"; test "$(wc -l < "{count}")" -ge 3']
    tasks = [Task(argv=flaky, id="flaky"), Task(argv=["no-such-command-here"], id="missing"),
             Task(argv=["false"], id="hopeless")]
    outs = one_each(run_many(tasks, max_concurrent=1, retries=2, retry_backoff=0.01, joblog=log,
                             memory_probe=FixedProbe(BIG), allow_empty_answer=True),  # exits are the verdicts
                    ["flaky", "missing", "hopeless"])
    assert outs["flaky"].ok and outs["flaky"].attempts == 3
    assert outs["missing"].verdict == "spawn_error" and outs["missing"].attempts == 1
    assert outs["hopeless"].verdict == "failed" and outs["hopeless"].attempts == 3
    recs = [orjson.loads(line) for line in log.read_bytes().splitlines()]
    assert [(r["attempt"], r["final"]) for r in recs if r["id"] == "flaky"] == [(1, False), (2, False), (3, True)]


@pytest.mark.parametrize(("spec", "verdicts", "started"), [
    ("now,fail=2", ["ok", "failed", "failed"], 3),
    ("soon,success=2", ["ok", "ok"], 2),
    ("soon,fail=50%", ["failed", "ok"], 2),
])
def test_halt_conditions_as_in_gnu_parallel(spec: str, verdicts: list[str], started: int) -> None:
    codes = [0, 1, 1, 0, 0, 0] if spec.startswith("now") else [0, 0, 0, 0] if "success" in spec else [1, 0, 0, 0]
    tasks = [Task(argv=["sh", "-c", f"exit {c}"], id=f"t{i}") for i, c in enumerate(codes)]
    outs = list(run_many(tasks, max_concurrent=1, halt=spec, ordered=True, memory_probe=FixedProbe(BIG),
                         allow_empty_answer=True))  # the exit statuses are the verdicts
    assert [o.verdict for o in outs[:started]] == verdicts
    assert [o.verdict for o in outs[started:]] == ["skipped"] * (len(codes) - started)


def test_keyboard_interrupt_cancels_started_tasks_and_leaves_nothing(tmp_path: Path) -> None:
    token, env = marker()
    log = tmp_path / "jobs.ndjson"
    tasks = (Task(argv=[*FAKE_CODEX, "--orphan", "--size", "4K", "--hang", "60"], id=f"k{i}", env=env)
             for i in range(100))
    batch = run_many(tasks, max_concurrent=3, joblog=log, memory_probe=FixedProbe(BIG))
    timer = threading.Timer(0.8, os.kill, (os.getpid(), signal.SIGINT))
    from spoolparse._os.guardian import guardian

    guardian.start()  # one per process, for its life (started by the first spawn): not the batch's to close
    empty_pool()
    timer.start()
    fds_before = len(os.listdir("/proc/self/fd"))
    with pytest.raises(KeyboardInterrupt):
        for _ in batch:
            pass
    timer.cancel()
    assert sorted(o.id for o in batch.cancelled) == ["k0", "k1", "k2"]
    assert all(o.verdict == "cancelled" for o in batch.cancelled)
    assert {o.error for o in batch.cancelled} == {"cancelled (SIGINT to spoolparse)"}  # not "killed by SIGTERM"
    assert wait_gone(token) == []
    finals = [orjson.loads(x) for x in log.read_bytes().splitlines()]
    assert sorted(r["id"] for r in finals if r["final"]) == ["k0", "k1", "k2"]
    empty_pool()  # spools kept for reuse are closed first: what is left open is a leak
    assert len(os.listdir("/proc/self/fd")) <= fds_before


def test_closing_a_batch_early_cancels_the_rest() -> None:
    token, env = marker()
    tasks = [Task(argv=ANSWERS, id="quick")] + [Task(argv=["sleep", "60"], id=f"s{i}", env=env) for i in range(2)]
    batch = run_many(tasks, max_concurrent=3, memory_probe=FixedProbe(BIG))
    first = next(batch)
    assert first.id == "quick"
    cancelled = batch.close()
    assert sorted(o.id for o in cancelled) == ["s0", "s1"]
    assert {o.error for o in cancelled} == {"cancelled (the batch was closed)"}
    assert wait_gone(token) == []
    assert batch.close() is cancelled  # idempotent


def test_halt_now_cancels_the_running_tasks() -> None:
    token, env = marker()
    tasks = [Task(argv=["sleep", "60"], id=f"s{i}", env=env) for i in range(2)] + [Task(argv=["false"], id="bad")]
    tasks += [Task(argv=ANSWERS, id="never")]
    outs = list(run_many(tasks, max_concurrent=3, halt="now", memory_probe=FixedProbe(BIG)))
    got = one_each(outs, ["s0", "s1", "bad", "never"])
    assert got["bad"].verdict == "failed"
    assert got["s0"].verdict == got["s1"].verdict == "cancelled"
    assert got["s0"].error == got["s1"].error == "cancelled: the batch halted (--halt now)"
    assert got["never"].verdict == "skipped" and got["never"].attempts == 0
    assert wait_gone(token) == []


def test_halt_soon_lets_running_tasks_finish_and_starts_nothing_new() -> None:
    pulled = []

    def tasks() -> Iterator[Task]:
        for t in (Task(argv=["false"], id="bad"), Task(argv=["sleep", "0.5"], id="slow")):
            pulled.append(t.id)
            yield t
        for i in range(5):
            pulled.append(f"later{i}")
            yield Task(argv=ANSWERS, id=f"later{i}")

    later = [f"later{i}" for i in range(5)]
    outs = one_each(run_many(tasks(), max_concurrent=2, halt="soon", memory_probe=FixedProbe(BIG),
                             allow_empty_answer=True), ["bad", "slow", *later])  # exits are the verdicts
    assert outs["bad"].verdict == "failed" and outs["slow"].ok
    # the rest is read only to give each task its outcome: none of them started
    assert all(outs[i].verdict == "skipped" and outs[i].attempts == 0 for i in later)


def test_usage_errors() -> None:
    for kwargs in ({"max_concurrent": 0}, {"stop_at": 0.9, "kill_at": 0.8}, {"enforce": "x"}, {"halt": "later"},
                   {"resume": True}, {"retries": -1}, {"requeues": -1}, {"timeout": -1.0}, {"halt": "soon,fail=0"}):
        with pytest.raises(spoolparse.UsageError):
            run_many([], memory_probe=FixedProbe(BIG), **kwargs)  # type: ignore[arg-type]


def test_arun_many_with_an_async_source_in_order() -> None:
    async def source() -> AsyncIterator[Task]:
        for i in range(6):
            await asyncio.sleep(0.01)
            yield Task(argv=["sh", "-c", f"sleep 0.{5 - i}; exit {i % 2}"], id=f"a{i}", allow_empty_answer=True)

    async def main() -> list[spoolparse.Outcome]:
        return [o async for o in spoolparse.arun_many(source(), max_concurrent=3, ordered=True,
                                                      memory_probe=FixedProbe(BIG))]

    outs = asyncio.run(main())
    assert [o.id for o in outs] == [f"a{i}" for i in range(6)]
    assert [o.verdict for o in outs] == ["ok", "failed"] * 3


def test_arun_many_raises_what_the_async_source_raised() -> None:
    async def source() -> AsyncIterator[list[str]]:
        yield ANSWERS
        raise RuntimeError("source broke")

    async def main() -> list[str]:
        return [o.id async for o in spoolparse.arun_many(source(), max_concurrent=2, memory_probe=FixedProbe(BIG))]

    with pytest.raises(RuntimeError, match="source broke"):
        asyncio.run(main())


def test_arun_many_leaving_early_kills_the_rest() -> None:
    token, env = marker()

    def tasks() -> Iterator[Task]:
        yield Task(argv=ANSWERS, id="quick")
        for i in range(5):
            yield Task(argv=["sleep", "60"], id=f"s{i}", env=env)

    async def main() -> list[str]:
        got = []
        agen = spoolparse.arun_many(tasks(), max_concurrent=3, memory_probe=FixedProbe(BIG))
        async for o in agen:
            got.append(o.id)
            break
        await agen.aclose()  # type: ignore[attr-defined]
        return got

    assert asyncio.run(main()) == ["quick"]
    assert wait_gone(token) == []


@pytest.mark.slow
def test_ten_thousand_streamed_tasks_keep_parent_memory_and_fds_bounded() -> None:
    n = 10_000
    produced = 0

    def tasks() -> Iterator[list[str]]:
        nonlocal produced
        for _ in range(n):
            produced += 1
            yield ANSWERS

    me = psutil.Process()
    batch = run_many(tasks(), max_concurrent=50, memory_probe=FixedProbe(BIG))
    rss0 = me.memory_info().rss
    fds0 = len(os.listdir("/proc/self/fd"))
    peak_rss, peak_fds, ahead = rss0, fds0, 0
    seen: set[str] = set()
    for i, o in enumerate(batch):
        assert o.ok, o
        assert o.id not in seen
        seen.add(o.id)
        ahead = max(ahead, produced - len(seen))
        if i % 100 == 0:
            peak_rss = max(peak_rss, me.memory_info().rss)
            peak_fds = max(peak_fds, len(os.listdir("/proc/self/fd")))
    assert len(seen) == n
    # pulled lazily: never more than the running ones, the ended ones waiting for this loop, the one held and
    # the -j read ahead by the input's thread
    assert ahead <= 50 + 50 + 1 + 50
    # pidfd + two spools per running child, and the emptied spools kept for reuse
    assert peak_fds - fds0 <= 50 * 3 + _limits.SPOOL_POOL + 10
    assert peak_rss - rss0 < 40 * MiB, (peak_rss - rss0) / MiB


@pytest.mark.slow
def test_a_timeout_fires_on_time_behind_another_tasks_large_backlog(tmp_path: Path) -> None:
    """Parsing one task's backlog (here 512 MiB written at once) never holds back another task's timeout."""
    big = tmp_path / "big.jsonl"
    with big.open("wb") as f:
        subprocess.run([*FAKE_CODEX, "--size", "512M"], stdout=f, check=True)
    tasks = [Task(argv=["sh", "-c", "sleep 0.5; exec sleep 30"], id="slow", timeout=1.0),
             Task(argv=["sh", "-c", f"sleep 0.6; cat {big}"], id="big")]
    t0 = time.monotonic()
    seen: dict[str, float] = {}
    outs = []
    for o in run_many(tasks, max_concurrent=2, memory_probe=FixedProbe(BIG)):
        seen[o.id] = time.monotonic() - t0
        outs.append(o)
    got = one_each(outs, ["slow", "big"])
    print(f"timeout at {seen['slow']:.2f} s (deadline 1.0 s), the backlog's outcome at {seen['big']:.2f} s")
    assert got["slow"].verdict == "timeout" and got["big"].ok
    assert got["slow"].wall_s < 2.5  # generous for a loaded machine; it fired at ~1.07 s unloaded


@pytest.mark.slow
def test_a_slow_reader_does_not_hold_back_supervision() -> None:
    """The loop runs in its own thread: a timeout fires on time while the reader dwells on an outcome."""
    tasks = [Task(ANSWERS, id="quick"), Task(["sleep", "30"], id="stuck", timeout=0.5)]
    with run_many(tasks, max_concurrent=2, grace=0.2, memory_probe=FixedProbe(BIG)) as batch:
        first = next(batch)
        time.sleep(3)  # the reader is busy with the first outcome
        second = next(batch)
    assert (first.id, second.id) == ("quick", "stuck")
    assert second.verdict == "timeout"
    # ended at about its 0.5 s deadline, not when the reader came back 3 s later
    assert second.wall_s < 2.0, second.wall_s


@pytest.mark.slow
def test_quiet_children_cost_a_look_at_their_spools_not_a_read_or_a_proc_walk_each_tick(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Memory of tasks with no limit is read once a second; a spool that did not grow is not read."""
    from spoolparse.child import Child
    from spoolparse.runner import slot

    walks = pumps = 0
    real_walk, real_pump = slot.sample_trees, Child.pump

    def walk(roots: Any) -> dict[int, int]:
        nonlocal walks
        walks += 1
        return real_walk(roots)

    def pump(self: Child, limit: int = 1 << 20) -> Any:
        nonlocal pumps
        pumps += 1
        return real_pump(self, limit)

    monkeypatch.setattr(slot, "sample_trees", walk)
    monkeypatch.setattr(Child, "pump", pump)
    n, interval = 10, 0.05
    tasks = [Task(["sh", "-c", "echo '{\"type\":\"thread.started\",\"thread_id\":\"t\"}'; sleep 2"], id=f"q{i}")
             for i in range(n)]
    outs = list(run_many(tasks, max_concurrent=n, sample_interval=interval, memory_probe=FixedProbe(BIG)))
    assert len(outs) == n
    ticks = 2 / interval  # about 40 sample ticks while they sleep
    assert walks <= 4, walks  # once a second (was: every tick)
    assert pumps <= n * 6, (pumps, n * ticks)  # the first line, a look once a second, the end


@pytest.mark.parametrize(("forced", "ok", "oom", "soft", "cancelled", "want"), [
    (None, True, False, False, False, "ok"),
    (None, False, False, False, False, "failed"),
    ("cancelled", True, False, False, False, "cancelled"),
    (None, True, False, False, True, "cancelled"),  # cancelled comes first
    ("requeue", False, False, False, False, "killed_memory"),
    (None, False, True, False, False, "killed_memory"),  # the kernel's OOM kill in its cgroup
    ("timeout", False, True, False, False, "killed_memory"),  # memory before time
    ("timeout", True, False, False, False, "timeout"),
    (None, False, False, True, False, "timeout"),  # the soft signal ended it
    ("failed", True, False, False, False, "failed"),  # a full spool, whatever the run said
])
def test_the_runner_verdict_has_one_order(forced: str | None, ok: bool, oom: bool, soft: bool, cancelled: bool,
                                          want: str) -> None:
    from spoolparse.runner.verdicts import runner_verdict

    assert runner_verdict(forced=forced, ok=ok, oom=oom, soft_ended=soft, cancelled=cancelled) == want


@pytest.mark.slow  # several seconds: kept out of the quick subset
def test_the_deadline_heap_stays_bounded_when_tasks_end_long_before_their_timeouts() -> None:
    # each task is armed for an hour and ends at once: its heap entry goes stale; behind the live entry of
    # the long task started first, stale entries must not pile up for the hour (they hold finished slots)
    tasks = [Task(argv=["sleep", "4"], id="long", timeout=3600)]
    tasks += [Task(argv=ANSWERS, id=str(i), timeout=3600) for i in range(300)]
    batch = run_many(tasks, max_concurrent=4, memory_probe=FixedProbe(BIG))
    assert isinstance(batch, Batch)
    peak = 0
    for _ in batch:
        peak = max(peak, len(batch._timers))
    assert peak <= 2 * 4 + 64, peak


class _SlowToClose:
    """A spool whose ``close`` blocks until ``release`` is set once it holds more than 1 MiB (as freeing a
    large file's blocks can keep ``close`` busy); everything else is the real file's."""

    def __init__(self, f: Any, release: threading.Event, closing: threading.Event) -> None:
        self._f, self._release, self._closing = f, release, closing

    def __getattr__(self, name: str) -> Any:
        return getattr(self._f, name)

    def close(self) -> None:
        if not self._f.closed and os.fstat(self._f.fileno()).st_size > 1 * MiB:
            self._closing.set()
            self._release.wait(60)
        self._f.close()


def test_a_large_spool_closing_does_not_hold_up_the_other_tasks(monkeypatch: pytest.MonkeyPatch) -> None:
    from spoolparse import child as child_mod
    from spoolparse.spool import wait_closed

    release, closing = threading.Event(), threading.Event()
    real_open = child_mod.open_spool
    monkeypatch.setattr(child_mod, "open_spool", lambda d: _SlowToClose(real_open(d), release, closing))
    big = [*FAKE_CODEX, "--size", "2M"]  # a 2 MiB transcript
    later = ["sh", "-c", 'sleep 1; echo \'{"type":"item.completed","item":{"id":"a","type":"agent_message",'
             '"text":"later"}}\'; echo \'{"type":"turn.completed","usage":{}}\'']
    timer = threading.Timer(30, release.set)  # the test must end even when the close blocks the loop
    timer.start()
    seen: list[tuple[str, bool]] = []
    try:
        with run_many([Task(big, id="big"), Task(later, id="later")], max_concurrent=2) as batch:
            for o in batch:
                seen.append((o.id, release.is_set()))
                assert o.ok, o.error
                if o.id == "later":
                    release.set()
    finally:
        release.set()
        timer.cancel()
        wait_closed()
    assert closing.is_set()  # the big spool was closed through the slow close
    # "later" ended while the big spool's close was still blocked: the loop went on without it
    assert seen == [("big", False), ("later", False)]


@pytest.mark.slow
def test_a_wake_with_nothing_starting_does_not_make_the_loop_spin() -> None:
    """The reader making room wakes the loop (its wake pipe) when no child is starting: the pipe must be
    drained all the same, or every wait after it returns at once and the loop spins until the batch ends."""
    ticks = 0

    def count(_batch: Batch) -> None:
        nonlocal ticks
        ticks += 1

    with run_many([["sleep", "1.5"]], max_concurrent=1) as batch:
        batch.on_tick = count
        it = iter(batch)
        wake = threading.Timer(0.5, batch._waker.wake)  # as the reader's making room does
        wake.start()
        outcomes = list(it)
        wake.cancel()
    assert [o.id for o in outcomes] == ["0"]
    # a sleeping loop ticks every TICK (50 ms) and on its few events: ~40 ticks in 1.5 s; a spinning one, thousands
    assert ticks < 400, ticks


@pytest.mark.parametrize("driver", ["run_many", "arun_many", "arun_many of an async source"])
def test_the_next_task_starts_when_the_reader_takes_an_outcome_not_at_the_next_tick(
    driver: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At ``max_concurrent=1`` the batch waits for its reader to take each outcome before the next start; with
    nothing running, that wait must still be woken by the reader (the wake pipe), not sit out a tick — and by
    an async source's next task, when the batch found none there yet.

    Ticks of 5 s make a missed wake plain: four tasks would take 15 s or more."""
    from spoolparse.runner import scheduler

    monkeypatch.setattr(scheduler, "TICK", 5.0)
    got: list[str] = []

    def read() -> None:
        if driver == "run_many":
            got.extend(o.id for o in run_many([ANSWERS] * 4, max_concurrent=1))
        else:
            async def source() -> AsyncIterator[list[str]]:
                for _ in range(4):
                    await asyncio.sleep(0)
                    yield ANSWERS

            async def main() -> None:
                tasks: Any = source() if driver.endswith("source") else [ANSWERS] * 4
                got.extend([o.id async for o in spoolparse.arun_many(tasks, max_concurrent=1)])

            asyncio.run(main())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(9.0)
    assert got == ["0", "1", "2", "3"]


def test_an_input_slow_to_give_its_next_task_holds_up_no_timeout() -> None:
    """The input is pulled off the supervising thread: a generator that blocks (a queue, a socket, a pipe) does
    not keep a running task's timeout from firing. Here the next task comes only once the first has timed
    out — pulled on the loop's thread, it would wait out its 20 s and the timeout with it."""
    timed_out = threading.Event()
    released: list[bool] = []

    def tasks() -> Iterator[Task]:
        yield Task(["sleep", "30"], id="slow", timeout=0.5)
        released.append(timed_out.wait(20))
        yield Task(ANSWERS, id="after")

    got = []
    for o in run_many(tasks(), max_concurrent=2):
        got.append((o.id, o.verdict))
        if o.id == "slow":
            timed_out.set()
    assert got == [("slow", "timeout"), ("after", "ok")]
    assert released == [True]


def test_an_input_that_fails_fails_the_batch_after_the_tasks_it_gave() -> None:
    """An exception from the input's iterator (pulled in a thread of its own) is raised to the reader of the
    batch, as it was raised: after the outcomes of the tasks read before it, with the children ended."""

    def tasks() -> Iterator[Any]:
        yield ANSWERS
        yield ANSWERS
        raise LookupError("the task source broke")

    got: list[str] = []
    with pytest.raises(LookupError, match="the task source broke"):
        for o in run_many(tasks(), max_concurrent=1):
            got.append(o.id)
    assert got == ["0", "1"]


@pytest.mark.slow
@pytest.mark.parametrize("ordered", [False, True])
def test_keeping_a_transcript_holds_up_no_timeout_and_its_outcome_comes_once_it_is_kept(
    ordered: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Keeping a transcript (``results=``) may copy it (the results folder on another filesystem): that work
    happens off the supervising thread. Here the keep of the first task to fail waits until the other task's
    timeout has killed it — on the loop's thread it would wait out its 20 s, and the timeout with it. Its
    outcome reaches the reader only once its transcript is in place."""
    from spoolparse.runner.results import ResultsDir

    from .runner_support import marked_pids, marker

    token, env = marker()
    released: list[bool] = []
    real_keep = ResultsDir.keep

    def slow_keep(self: ResultsDir, task_id: str, spools: Any) -> str | None:
        if task_id == "failing":
            released.append(wait_gone(token, timeout=20.0) == [])
        return real_keep(self, task_id, spools)

    monkeypatch.setattr(ResultsDir, "keep", slow_keep)
    tasks = [Task(["sh", "-c", "echo kept-text; exit 3"], id="failing"),
             Task(["sleep", "30"], id="slow", timeout=0.5, env=env)]
    got = []
    batch = run_many(tasks, max_concurrent=2, results=str(tmp_path), ordered=ordered)
    for o in batch:
        got.append((o.id, o.verdict))
        if o.id == "failing":
            assert (tmp_path / "failing" / "stdout").read_bytes() == b"kept-text\n"
        else:
            assert o.wall_s < 10, o.wall_s
    assert released == [True]
    assert sorted(got) == [("failing", "failed"), ("slow", "timeout")]
    assert not marked_pids(token)


@pytest.mark.slow
def test_a_large_backlog_left_at_exit_is_parsed_in_slices_and_holds_up_no_timeout() -> None:
    """A child that writes tens of MB of small events and exits at once leaves all of it unparsed: parsing it
    takes seconds, and it is done a slice per turn of the loop, so another task's timeout fires on time
    meanwhile. Its outcome is whole: every line counted, the last message what it said last (no turn ended)."""
    line = b'{"type":"item.completed","item":{"type":"agent_message","text":"hello world"}}\n'
    count = 40 * MiB // len(line)
    writer = [sys.executable, "-c", f"import sys; sys.stdout.buffer.write({line!r} * {count})"]
    tasks = [Task(writer, id="flood"), Task(["sleep", "30"], id="slow", timeout=0.5)]
    got = {}
    for o in run_many(tasks, max_concurrent=2):
        got[o.id] = o
    assert got["slow"].verdict == "timeout"
    assert got["slow"].wall_s < 3.0, got["slow"].wall_s  # unsliced, it waited for the whole parse
    flood = got["flood"].summary
    assert flood is not None
    assert flood["stdout_bytes"] == count * len(line) and flood["lines"] == count
    assert flood["partial_text"] == "hello world" and not flood["ok"]


@pytest.mark.slow
def test_a_slow_event_listener_holds_up_no_timeout_and_each_outcome_follows_its_events() -> None:
    """``on_event`` is called from a thread of its own: a listener that takes its time (or blocks on a full
    pipe) delays only the events, never a timeout — the loop parses no more output while EVENT_BACKLOG
    events wait. A task's outcome still reaches the reader after all of its events."""
    code = (
        "import time\n"
        "for i in range(20):\n"
        "    print('{\"type\":\"item.completed\",\"item\":{\"type\":\"agent_message\",\"text\":\"m%d\"}}' % i,"
        " flush=True)\n"
        "    time.sleep(0.02)\n"
        "print('{\"type\":\"turn.completed\",\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}')\n"
    )
    seen: list[tuple[str, str]] = []
    outcomes_at: dict[str, int] = {}

    def slow(task: Task, ev: Any) -> None:
        time.sleep(0.2)
        seen.append((str(task.id), ev.kind))

    batch = run_many([Task([sys.executable, "-c", code], id="talker"),
                      Task(["sleep", "30"], id="slow", timeout=0.5)], max_concurrent=2)
    assert isinstance(batch, Batch)
    batch.on_event = slow
    for o in batch:
        outcomes_at[o.id] = len(seen)
        if o.id == "slow":
            assert o.verdict == "timeout" and o.wall_s < 2.0, o  # while the listener is still at it
        else:
            assert o.ok and o.summary is not None and o.summary["text"] == "m19"
    talker = [kind for tid, kind in seen if tid == "talker"]
    assert len(talker) >= 21 and talker[-1] == "turn_end", talker  # 20 messages, the usage, the turn's end
    # every event of the talker was delivered before its outcome was handed out
    assert outcomes_at["talker"] >= len([x for x in seen if x[0] == "talker"])


@pytest.mark.slow
def test_a_cancel_ends_the_running_agents_before_it_parses_a_done_ones_backlog() -> None:
    """A cancel while one task is done with seconds of output left to parse, and another still runs: the
    running agent gets its TERM at once; the done task's backlog is parsed after, for its own outcome."""
    token, env = marker()
    line = b'{"type":"item.completed","item":{"type":"agent_message","text":"hello world"}}\n'
    count = 40 * MiB // len(line)
    writer = [sys.executable, "-c", f"import sys; sys.stdout.buffer.write({line!r} * {count})"]
    batch = run_many([Task(writer, id="flood"), Task(["sleep", "300"], id="running", env=env)], max_concurrent=2)
    assert isinstance(batch, Batch)
    reader = threading.Thread(target=lambda: list(batch), daemon=True)
    reader.start()
    deadline = time.monotonic() + 20
    while not batch._draining and time.monotonic() < deadline:
        time.sleep(0.01)
    assert batch._draining, "the flood's backlog was parsed before it could be seen draining"
    closer = threading.Thread(target=batch.close, daemon=True)
    closer.start()
    assert wait_gone(token, timeout=3.0) == []  # not after the flood's whole parse
    closer.join(120)
    outs = {o.id: o for o in batch.cancelled}
    assert outs["running"].verdict == "cancelled"
    assert outs["flood"].summary is not None and outs["flood"].summary["lines"] == count


@pytest.mark.slow
def test_events_waiting_for_a_stalled_listener_stay_within_their_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """While the listener is stalled, at most ``EVENT_BACKLOG`` events wait, plus what one parse slice gave
    and the last slice parsed with the outcome; the rest stays in the spool until the listener takes some.
    (A parse budget of 5 s makes a pump that ignored the bound take the whole output at once.) Every event
    still arrives, in order."""
    monkeypatch.setattr(_limits, "PARSE_BUDGET", 5.0)
    line = b'{"type":"item.completed","item":{"type":"agent_message","text":"hello world"}}\n'
    count = 40_000
    end = b'{"type":"turn.completed","usage":{"input_tokens":1,"output_tokens":1}}\n'
    writer = [sys.executable, "-c", f"import sys; sys.stdout.buffer.write({line!r} * {count} + {end!r})"]
    gate = threading.Event()
    waiting: list[int] = []
    texts = 0

    batch = run_many([Task(writer, id="flood")], max_concurrent=1)
    assert isinstance(batch, Batch)

    def listener(task: Task, ev: Any) -> None:
        nonlocal texts
        gate.wait(20)
        waiting.append(len(batch._relay._q))
        texts += ev.kind == "text"

    batch.on_event = listener
    threading.Timer(1.5, gate.set).start()  # stalled while the child writes and exits
    (o,) = list(batch)
    assert o.ok and o.summary is not None and o.summary["lines"] == count + 1
    per_slice = _limits.PARSE_SLICE // len(line) + 1
    assert max(waiting) <= _limits.EVENT_BACKLOG + 2 * per_slice, max(waiting)
    assert texts == count


def test_a_batch_left_unfinished_ends_its_children_once_nobody_holds_it() -> None:
    """``for o in run_many(...): break`` keeping no reference to the batch: it is ended as by ``close()`` —
    every child it had started killed — and its loop thread ends."""
    from .runner_support import wait_for

    token, env = marker()
    tasks = [Task([*FAKE_CODEX, "--size", "4K"], id="quick")]
    tasks += [Task(["sleep", "300"], id=f"slow{i}", env=env) for i in range(3)]
    tasks += [Task(["sleep", "301"], id=f"later{i}", env=env) for i in range(3)]  # started or not
    for o in run_many(tasks, max_concurrent=4):
        assert o.id == "quick"
        break
    assert wait_gone(token, timeout=10.0) == []
    assert wait_for(lambda: not any(t.name == "spoolparse-batch" for t in threading.enumerate()))


class _BlockingClose:
    """A large file (sparse: its size is all there is) whose ``close`` waits for ``release``."""

    def __init__(self, tmp: Path, release: threading.Event) -> None:
        self._f = tempfile.TemporaryFile(dir=tmp)  # noqa: SIM115 - closed by close()
        self._f.truncate(2 * MiB)
        self._release = release

    def fileno(self) -> int:
        return self._f.fileno()

    def close(self) -> None:
        self._release.wait(30)
        self._f.close()


def test_a_close_backlog_never_makes_the_closer_wait_and_holds_back_new_tasks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Handing a spool to the background close never waits, past any backlog (the supervising loop hands
    them over); a batch starts no task while CLOSING_MAX wait, and starts it once the closer catches up."""
    import queue

    from spoolparse import spool

    from .runner_support import wait_for

    bound = 3
    monkeypatch.setattr(_limits, "CLOSING_MAX", bound)
    monkeypatch.setattr(spool, "_closing", queue.Queue())
    monkeypatch.setattr(spool, "_closer", None)  # a closer thread of its own, on this queue
    release = threading.Event()
    files = [_BlockingClose(tmp_path, release) for _ in range(bound + 2)]
    started = tmp_path / "started"
    outcomes: list[Any] = []
    try:
        t0 = time.monotonic()
        for f in files:
            spool.close_spool(f)  # type: ignore[arg-type]
        assert time.monotonic() - t0 < 1.0  # past the bound too: nobody waited
        assert spool.closing() == len(files)
        task = Task(["sh", "-c", f"touch {started}; echo '{{}}'"], id="t")
        reader = threading.Thread(target=lambda: outcomes.extend(run_many([task], max_concurrent=1)))
        reader.start()
        time.sleep(1.0)
        assert not started.exists() and outcomes == []  # held back while the backlog is past the bound
    finally:
        release.set()
    assert wait_for(lambda: spool.closing() == 0, timeout=10)
    reader.join(30)
    assert started.exists() and [o.id for o in outcomes] == ["t"]
    assert all(f._f.closed for f in files)


def test_an_input_that_waits_to_be_opened_holds_up_no_other_task(tmp_path: Path) -> None:
    # opening a FIFO for reading waits for a writer: that wait is a spawner thread's, never the loop's
    fifo = tmp_path / "in.fifo"
    os.mkfifo(fifo)
    tasks = [
        Task(argv=["cat"], input=fifo, id="fifo"),
        Task(argv=["sleep", "30"], timeout=0.5, id="sleeper"),
        Task(argv=ANSWERS, id="quick"),
    ]
    once = threading.Lock()
    written: list[bool] = []

    def write() -> None:  # the writer the open waits for (once): the fifo task can then start and end
        with once:
            if not written:
                written.append(True)
                with open(fifo, "wb") as w:
                    w.write(b'{"type":"result","result":"late"}\n')

    fallback = threading.Timer(8.0, write)  # a loop that waited on the open would be freed here, late
    fallback.start()
    batch = run_many(tasks, max_concurrent=3, memory_probe=FixedProbe(BIG))
    t0 = time.monotonic()
    got = {}
    for _ in range(2):
        o = next(batch)
        got[o.id] = (o.verdict, time.monotonic() - t0)
    fallback.cancel()
    write()
    fallback.join()
    rest = list(batch)
    assert set(got) == {"quick", "sleeper"}, got  # both ended before the fifo had a writer
    assert got["quick"][0] == "ok" and got["sleeper"][0] == "timeout"
    assert got["sleeper"][1] < 5.0  # its timeout fired while the fifo's open still waited
    assert [o.id for o in rest] == ["fifo"] and rest[0].ok


@pytest.mark.slow
def test_a_large_parent_does_not_lend_its_size_to_its_tasks_peaks() -> None:
    """A task's peak is its own. The kernel's ``ru_maxrss`` of a child started by ``vfork`` (or ``fork``)
    begins at the parent's own high-water mark, so from a parent of 300 MiB a ``true`` reported 311 MiB and
    a task of 20 MiB the same: a figure the parent's, and the one ``calibrate`` would learn."""
    code = (
        "import json, sys\n"
        "big = bytearray(300 << 20)\n"
        "for i in range(0, len(big), 4096): big[i] = 1\n"
        "from spoolparse.runner import Task, run_many\n"
        f"hog = {HOG!r} + ['--mib', '20', '--hold', '1.5']\n"
        "outs = run_many([Task(['true'], id='true'), Task(hog, id='hog')], max_concurrent=2, sample_interval=0.1,\n"
        "                allow_empty_answer=True)\n"  # (`true` answers nothing: its peak is the point)
        "print(json.dumps({o.id: [o.verdict, o.peak_memory, o.peak_source] for o in outs}))\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120, check=False)
    assert p.returncode == 0, p.stderr[-2000:]
    outs = json.loads(p.stdout)
    assert outs["true"][0] == "ok" and outs["hog"][0] == "ok", outs
    true_peak, hog_peak = outs["true"][1], outs["hog"][1]
    assert true_peak is None or true_peak < 64 * MiB, outs  # `true` is a few MiB; the parent 300
    assert hog_peak is not None and 20 * MiB <= hog_peak < 150 * MiB, outs


@pytest.mark.slow
def test_a_runner_started_by_a_large_parent_still_knows_its_tasks_peaks() -> None:
    """Our own ``ru_maxrss`` begins at *our* parent's high-water mark too: a runner started by a process of
    300 MiB (a service, a Ray worker) took every task under that size for one whose figure was ours, and
    reported no peak. Our own high-water mark (``VmHWM``) is what a child's figure must be compared with."""
    runner = (
        "import json\n"
        "from spoolparse.runner import Task, run_many\n"
        f"hog = {HOG!r} + ['--mib', '60', '--hold', '0.3']\n"
        # no sample lands while the hog is large: its peak can only be the kernel's figure at its reaping
        "outs = run_many([Task(hog, id='hog')], memory_sample_interval=60)\n"
        "print(json.dumps({o.id: [o.verdict, o.peak_memory, o.peak_source] for o in outs}))\n"
    )
    code = (
        "import subprocess, sys\n"
        "big = bytearray(300 << 20)\n"
        "for i in range(0, len(big), 4096): big[i] = 1\n"
        f"sys.exit(subprocess.run([sys.executable, '-c', {runner!r}]).returncode)\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120, check=False)
    assert p.returncode == 0, p.stderr[-2000:]
    outs = json.loads(p.stdout)
    assert outs["hog"][0] == "ok", outs
    assert outs["hog"][1] is not None and 60 * MiB <= outs["hog"][1] < 200 * MiB, outs


@pytest.mark.slow
@pytest.mark.parametrize("api", ["run_many", "run"])
def test_ctrl_c_delivered_to_another_thread_still_interrupts_the_caller(api: str) -> None:
    """The kernel hands a process's SIGINT to any thread that does not block it, not always the main one; the
    handler then only sets a flag the main thread sees when it next runs. A caller waiting for an outcome (or
    for its listener to take the last events) must still see it soon, and the agent must end — not sleep on
    until the agent's own end (here a minute away)."""
    token, env = marker()
    agent_code = """print('{"type":"thread.started","thread_id":"t"}')"""
    code = (
        "import os, signal, sys, threading, time\n"
        "import spoolparse\n"
        f"env = {env!r}\n"
        "def poke():\n"
        "    time.sleep(1.0)\n"
        "    signal.pthread_kill(threading.get_ident(), signal.SIGINT)  # lands in this thread, not the main one\n"
        "threading.Thread(target=poke, daemon=True).start()\n"
        "try:\n"
        f"    if {api!r} == 'run_many':\n"
        "        for o in spoolparse.run_many([spoolparse.Task(['sleep', '60'], env=env)]):\n"
        "            print('outcome', o.verdict, flush=True)\n"
        "    else:\n"
        f"        agent = [sys.executable, '-c', {agent_code!r}]\n"
        "        # the agent is done at once; the run waits for its listener, busy with the first event for a minute\n"
        "        def slow(ev): time.sleep(60)\n"
        "        spoolparse.run(agent, env={**os.environ, **env}, on_event=slow)\n"
        "except KeyboardInterrupt:\n"
        "    print('interrupted', flush=True)\n"
    )
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = p.communicate(timeout=30)
    finally:
        p.kill()
        p.wait()
    assert b"interrupted" in out, (out, err[-2000:])
    assert wait_gone(token) == []


@pytest.mark.parametrize("odd", [{"memory": "2G"}, {"memory": -5}, {"memory": float("nan")}, {"memory_limit": "x"},
                                 {"memory_limit": 0}])
def test_a_task_whose_memory_is_not_a_byte_count_is_its_own_spawn_error(odd: dict[str, Any]) -> None:
    """A ``Task`` given to ``run_many`` directly skips the batch file's checks: a ``memory`` of ``"2G"`` raised a
    ``TypeError`` out of the loop (every other task lost its outcome), and a negative one reserved less than
    nothing, so admission let more tasks start than memory allows."""
    outs = {o.id: o for o in run_many([Task(ANSWERS, id="odd", **odd), Task(ANSWERS, id="fine")])}
    assert sorted(outs) == ["fine", "odd"]
    assert outs["odd"].verdict == "spawn_error" and "must be a positive number of bytes" in str(outs["odd"].error)
    assert outs["fine"].ok
    floats = list(run_many([Task(ANSWERS, id="f", memory=1.5 * 2**30)]))  # a float of bytes is a byte count
    assert floats[0].ok


def test_a_task_of_the_wrong_shape_is_its_own_outcome() -> None:
    """An id that is no string was compared, as given, with a set of ids: a list raised ``TypeError`` out of
    ``run_many``. An argv that is a string ran its first letter."""
    outs = {o.id: o for o in run_many([Task(ANSWERS, id=["x"]),  # type: ignore[arg-type]
                                       Task("true", id="string-argv"), Task(ANSWERS, id="fine")])}
    assert sorted(outs) == ['["x"]', "fine", "string-argv"], outs  # its JSON text, as a task line's id is
    assert outs['["x"]'].ok and outs["fine"].ok
    assert outs["string-argv"].verdict == "spawn_error" and "not a string" in str(outs["string-argv"].error)


def test_text_that_is_not_unicode_is_written_not_a_crash(tmp_path: Path) -> None:
    """Python hands undecodable bytes of a file name as lone surrogates (``os.listdir``: ``'\\udcff'``): such an
    argument, or id, made the job log's writer raise ``TypeError`` out of ``run_many``, and every outcome after
    it was lost. Written as Python's ``json.dumps`` writes them, and a resumed batch still knows those tasks done."""
    log = tmp_path / "jobs.ndjson"
    say = ["sh", "-c", "echo '{\"text\": \"read\"}'"]
    tasks = [Task([*say, "name-\udcff.txt"], id="arg"), Task(say, id="id-\udcff"), Task(say, id="fine")]
    outs = {o.id: o for o in run_many(tasks, joblog=str(log))}
    assert sorted(outs) == sorted(t.id for t in tasks if t.id) and all(o.ok for o in outs.values()), outs
    lines = [json.loads(line) for line in log.read_bytes().splitlines()]
    assert len(lines) == 3 and any(line["cmd"][-1] == "name-\udcff.txt" for line in lines), lines
    assert {line["id"] for line in lines} == {"arg", "id-\udcff", "fine"}
    again = list(run_many([Task(list(t.argv), id=t.id) for t in tasks], joblog=str(log), resume=True))
    assert again == [], again


@pytest.mark.parametrize("enforce", ["auto", "watchdog"])
def test_spools_and_cgroups_are_made_off_the_supervising_loop(enforce: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A new spool is an inode and a cgroup v1 a millisecond of kernel work: both are made in the spawner
    threads, never in the thread that supervises the batch, with a cgroup or without."""
    import spoolparse.child as child_mod

    made: list[tuple[str, str]] = []
    real_spool, real_create = child_mod.open_spool, Placement.create

    def spool(directory: str) -> Any:
        made.append(("spool", threading.current_thread().name))
        return real_spool(directory)

    def create(self: Placement, **kw: Any) -> Any:
        made.append(("cgroup", threading.current_thread().name))
        return real_create(self, **kw)

    monkeypatch.setattr(child_mod, "open_spool", spool)
    monkeypatch.setattr(Placement, "create", create)
    tasks = [Task(argv=["sh", "-c", f"echo '{{\"type\":\"result\",\"result\":\"{i}\"}}'"], id=str(i)) for i in range(6)]
    outs = list(run_many(tasks, max_concurrent=3, enforce=enforce, memory_probe=FixedProbe(BIG)))
    assert sorted(o.verdict for o in outs) == ["ok"] * 6, outs
    assert len([k for k, _ in made if k == "spool"]) == 12  # stdout and stderr of each
    assert all(name.startswith("spoolparse-spawn_") for _, name in made), made
