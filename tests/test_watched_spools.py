"""Between its once-a-second looks at every child, a batch looks only at spools that were written.

A child that has run ``WATCH_AFTER`` has its spool watched (inotify); a sample then costs nothing for it
unless it wrote. Real processes; each look is counted by wrapping ``Child.has_news`` (one ``fstat``).
"""

from __future__ import annotations

import collections
import errno
import json
import os
import sys
import time
from typing import Any

import pytest

import spoolparse
from spoolparse import _limits
from spoolparse._os.wait import Inotify, open_inotify
from spoolparse.child import Child
from spoolparse.runner import Task, looks, run_many
from spoolparse.runner import scheduler as sched

from .runner_support import FixedProbe

BIG = 1 << 40
ANSWER = 'printf \'{"type":"result","result":"%s"}\\n\' '

# a line now and then, each carrying the time it was written
TICKER = r"""
import json, sys, time
for i in range(int(sys.argv[1])):
    time.sleep(float(sys.argv[2]))
    print(json.dumps({"type": "item.completed", "item": {"type": "agent_message", "text": repr(time.time())}}),
          flush=True)
print(json.dumps({"type": "turn.completed", "usage": {"input_tokens": 1, "output_tokens": 1}}), flush=True)
"""


def _inotify_here() -> None:
    ino = open_inotify()
    if ino is None:
        pytest.skip("needs inotify (Linux, with an inotify instance to spare under fs.inotify.max_user_instances)")
    ino.close()


def _count_looks(monkeypatch: pytest.MonkeyPatch) -> dict[int, list[float]]:
    looks: dict[int, list[float]] = collections.defaultdict(list)
    real = Child.has_news

    def has_news(self: Child) -> bool:
        looks[self.pid].append(time.monotonic())
        return real(self)

    monkeypatch.setattr(Child, "has_news", has_news)
    return looks


def _quiet(n: int, seconds: float) -> list[Task]:
    return [Task(argv=["sh", "-c", f"sleep {seconds}; " + ANSWER + f"q{i}"], id=f"q{i}") for i in range(n)]


@pytest.mark.slow  # several seconds: kept out of the quick subset
def test_a_quiet_child_is_looked_at_every_sample_until_watched_then_once_a_second(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _inotify_here()
    seen = _count_looks(monkeypatch)
    outs = list(run_many(_quiet(6, 3.5), max_concurrent=6, memory_probe=FixedProbe(BIG)))
    assert sorted(o.summary["text"] for o in outs if o.ok and o.summary) == [f"q{i}" for i in range(6)]
    for ts in seen.values():
        start = ts[0]
        young = [t for t in ts if t - start < looks.WATCH_AFTER - 0.2]
        watched = [t for t in ts if looks.WATCH_AFTER + 0.5 < t - start < 3.3]
        assert len(young) >= 3, young  # every sample (0.1 s) while unwatched: 7-8 of them unloaded
        # ~1.8 s watched and silent: the once-a-second looks only (every sample would be 18)
        assert len(watched) <= 3, [round(t - start, 2) for t in watched]


def _no_inotify(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(looks, "open_inotify", lambda: None)


def _refused(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(self: Inotify, fd: int) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")  # what max_user_watches reached gives

    monkeypatch.setattr(Inotify, "watch", refuse)


@pytest.mark.slow
@pytest.mark.parametrize("how", [_no_inotify, _refused], ids=["no inotify", "refused"])
def test_without_watches_every_spool_is_looked_at_every_sample(how: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    if how is not _no_inotify:
        _inotify_here()
    seen = _count_looks(monkeypatch)
    how(monkeypatch)
    outs = list(run_many(_quiet(3, 2.5), max_concurrent=3, memory_probe=FixedProbe(BIG)))
    assert all(o.ok for o in outs)
    for ts in seen.values():
        start = ts[0]
        assert len([t for t in ts if looks.WATCH_AFTER + 0.3 < t - start < 2.3]) >= 6


@pytest.mark.slow
def test_a_lost_inotify_event_queue_takes_every_running_child_as_written() -> None:
    _inotify_here()
    seen: list[tuple[int, int, int]] = []

    def on_tick(batch: Any) -> None:
        spools = batch._looks
        if spools.watched and not seen:
            spools.ino.overflowed = True  # as the kernel says when its queue (fs.inotify.max_queued_events) is full
            taken = spools.changed(True, time.monotonic())  # a sample that reads: every running child is looked at
            spools.ino.overflowed = True
            spools.behind.clear()
            # one between reads: every running child is noted as holding unread bytes
            spools.changed(False, time.monotonic())
            seen.append((len({id(s) for s in taken}), len(spools.behind), len(batch._running)))

    batch = run_many(_quiet(4, 2.5), max_concurrent=4, memory_probe=FixedProbe(BIG))
    batch.on_tick = on_tick
    outs = list(batch)
    assert all(o.ok for o in outs)
    assert seen and seen[0] == (4, 4, 4), seen


@pytest.mark.slow
def test_a_watched_spools_lines_reach_on_event_within_a_sample() -> None:
    _inotify_here()
    tasks = [Task(argv=[sys.executable, "-c", TICKER, "5", "0.6"], id=f"t{i}") for i in range(3)]
    batch = run_many(tasks, max_concurrent=3, memory_probe=FixedProbe(BIG))
    delays: list[tuple[float, float]] = []  # (age of the child when written, delay to the listener)
    first: dict[str, float] = {}

    def on_event(task: Task, ev: spoolparse.LiveEvent) -> None:
        if ev.kind == "text":
            written = float(ev.data["text"])
            first.setdefault(str(task.id), written - 0.6)
            delays.append((written - first[str(task.id)], time.time() - written))

    batch.on_event = on_event
    outs = list(batch)
    assert all(o.ok for o in outs)
    assert len(delays) == 15
    late = [(round(age, 2), round(d, 3)) for age, d in delays if age > looks.WATCH_AFTER]
    assert late, delays  # lines written while watched
    # a sample interval (0.1 s) and scheduling: never the once-a-second look
    assert max(d for _, d in late) < 0.5, late


@pytest.mark.slow
def test_a_spool_cap_holds_for_a_watched_child_writing_to_stderr(tmp_path: Any) -> None:
    _inotify_here()
    script = "sleep 1.6; " + ANSWER + "early; head -c 3000000 /dev/zero >&2; sleep 30"
    t0 = time.monotonic()
    outs = list(run_many([Task(argv=["sh", "-c", script], id="cap")], max_concurrent=1,
                         memory_probe=FixedProbe(BIG), max_spool_bytes=1_000_000))
    assert time.monotonic() - t0 < 10
    (o,) = outs
    assert not o.ok and o.error is not None and "max_spool_bytes" in o.error, json.dumps(o.error)


BURST = r"""
import json, sys, time
time.sleep(1.6)
line = json.dumps({"type": "item.completed", "item": {"type": "command_execution", "aggregated_output": "x" * 1000}})
sys.stdout.write((line + "\n") * 20000)  # ~21 MiB at once: six PUMP_PER_TICK reads
sys.stdout.flush()
time.sleep(2.5)
print(json.dumps({"type": "item.completed", "item": {"type": "agent_message", "text": "done"}}))
print(json.dumps({"type": "turn.completed", "usage": {"input_tokens": 1, "output_tokens": 1}}), flush=True)
"""


@pytest.mark.slow
def test_a_watched_spool_found_far_behind_is_read_at_every_sample_until_caught_up() -> None:
    _inotify_here()
    seen: list[tuple[int, int]] = []  # (the reader's offset, the spool's size) at each turn after the burst

    def on_tick(batch: Any) -> None:
        for s in batch._running.values():
            size = os.fstat(s.child.stdout.fileno()).st_size
            if size > 10_000_000 and s.wds:  # watched after WATCH_AFTER, long before the burst unless starved
                seen.append((s.child.offset, size))

    batch = run_many([Task(argv=[sys.executable, "-c", BURST], id="burst")], max_concurrent=1,
                     memory_probe=FixedProbe(BIG))
    batch.on_tick = on_tick
    (o,) = list(batch)
    assert o.ok and o.summary is not None and o.summary["text"] == "done"
    # once noticed (the first read after the burst), every turn of the loop reads on while the spool is
    # UNWATCHED_BACKLOG behind; read only every UNWATCHED_READ_INTERVAL, turns in between would not move it
    first = next(i for i, (off, _) in enumerate(seen) if off > seen[0][0])
    turns = zip(seen[first:], seen[first + 1:], strict=False)
    far = [(a, b) for a, b in turns if a[1] - a[0] >= _limits.UNWATCHED_BACKLOG]
    assert len(far) >= 3, seen
    assert all(b[0] > a[0] for a, b in far), [off for off, _ in seen]


@pytest.mark.slow
def test_the_once_a_second_spool_checks_share_one_look_at_the_filesystem(monkeypatch: pytest.MonkeyPatch) -> None:
    # every child's spool is checked for a full disk once a second; the children of one pass share the
    # filesystem's free space and the file size limit (one fstatvfs a pass, not one per child)
    from spoolparse import spool as spool_mod

    calls: list[float] = []
    real = os.fstatvfs

    def fstatvfs(fd: int) -> os.statvfs_result:
        calls.append(time.monotonic())
        return real(fd)

    monkeypatch.setattr(spool_mod.os, "fstatvfs", fstatvfs)
    t0 = time.monotonic()
    outs = list(run_many(_quiet(8, 2.6), max_concurrent=8, memory_probe=FixedProbe(BIG)))
    assert all(o.ok for o in outs)
    # while all eight run (after their first pass, before the first ends): ~2 passes; one look each
    while_running = [t for t in calls if t0 + 0.5 < t < t0 + 2.4]
    assert 1 <= len(while_running) <= 3, [round(t - t0, 2) for t in calls]
    # and each outcome takes one fresh look of its own (a full disk must not be a cached answer there)
    assert len(calls) >= 8


@pytest.mark.slow
def test_between_reads_a_sample_does_not_visit_the_watched_children_that_wrote(monkeypatch: pytest.MonkeyPatch) -> None:
    # agents writing a line every 0.05 s: once watched, a sample between two reads (every 0.5 s) only notes
    # that their spools grew, and visits none of them (a visit costs per agent, and all of them wrote)
    _inotify_here()
    visits: dict[str, list[float]] = collections.defaultdict(list)
    real = sched.Batch._look_at_spools

    def look(self: Any, s: Any, **kw: Any) -> None:
        visits[str(s.task.id)].append(time.monotonic())
        real(self, s, **kw)

    monkeypatch.setattr(sched.Batch, "_look_at_spools", look)
    tasks = [Task(argv=[sys.executable, "-c", TICKER, "60", "0.05"], id=f"w{i}") for i in range(4)]
    outs = list(run_many(tasks, max_concurrent=4, memory_probe=FixedProbe(BIG)))
    assert all(o.ok for o in outs)
    for ts in visits.values():
        start = ts[0]
        watched = [t for t in ts if looks.WATCH_AFTER + 0.3 < t - start < looks.WATCH_AFTER + 1.8]
        # 1.5 s watched: the reads (every 0.5 s) and the once-a-second looks, ~3-5; every sample would be 15
        assert 1 <= len(watched) <= 7, [round(t - start, 2) for t in watched]
