"""The input both runners read through: numbering, duplicate ids, resume skips, what is left after a halt."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from spoolparse.runner.intake import END, LATER, Intake, InvalidTask
from spoolparse.runner.tasks import Task


def test_tasks_are_numbered_in_the_order_that_runs_and_resumed_ones_take_no_place() -> None:
    intake = Intake([Task(id="a", argv=["x"]), Task(id="done", argv=["x"]), ["true"]], skip={"done"})
    got = []
    while (task := intake.hold_next()) is not None:
        got.append((intake.held_seq, str(task.id)))
        intake.release()
    assert got == [(0, "a"), (1, "2")]  # a bare argv's id is its input position, stable across resumes
    assert intake.skipped == 1 and intake.exhausted


def test_a_duplicate_id_becomes_its_own_invalid_task_and_is_never_skipped_for_the_first() -> None:
    intake = Intake([Task(id="a", argv=["x"]), Task(id="a", argv=["y"])], skip={"a"})
    first = intake.hold_next()
    assert isinstance(first, InvalidTask) and "duplicate" in first.error and intake.skipped == 1


def test_a_held_task_stays_held_until_released_and_a_bad_item_is_invalid() -> None:
    intake = Intake([{"cmd": ["true"]}, 42, ["echo", 1], Task(id="b", argv=["x"])], skip=set())
    bad = intake.hold_next()
    assert isinstance(bad, InvalidTask) and bad.id == "0" and "not dict" in bad.error
    assert intake.hold_next() is bad  # not consumed until released
    intake.release()
    for why in ("not int", "an argv item is a string or a path, not int"):
        bad = intake.hold_next()
        assert isinstance(bad, InvalidTask) and why in bad.error
        intake.release()
    held = intake.hold_next()
    assert held is not None and held.id == "b"


def test_after_a_halt_the_held_task_and_the_unread_ones_are_skipped_in_order() -> None:
    intake = Intake([Task(id=i, argv=["x"]) for i in "abcd"], skip=set())
    intake.hold_next()
    intake.release()  # "a" started
    intake.hold_next()  # "b" held, not started
    rest = list(intake.skip_rest())
    assert [(seq, o.id) for seq, o in rest] == [(1, "b"), (2, "c"), (3, "d")]
    assert all(o.verdict == "skipped" for _, o in rest)
    assert all(o.error == "not started: the batch halted (--halt)" and o.attempts == 0 for _, o in rest)
    assert intake.held is None and intake.exhausted


def test_a_pull_that_has_nothing_yet_is_not_the_end() -> None:
    items: list[Any] = [LATER, Task(id="a", argv=["x"]), END]
    intake = Intake(lambda: items.pop(0), skip=set())
    assert intake.hold_next() is None and not intake.exhausted
    held = intake.hold_next()
    assert held is not None and held.id == "a"
    intake.release()
    assert intake.hold_next() is None and intake.exhausted


def _settled(read: Callable[[], int]) -> int:
    """``read()`` once it stopped changing (the input's thread has topped up)."""
    last = -1
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        now = read()
        if now == last:
            return now
        last = now
        time.sleep(0.05)
    return last


def test_an_iterator_is_read_by_a_thread_of_its_own_at_most_depth_ahead_and_stops_when_closed() -> None:
    produced = 0
    pulling = set()

    def tasks() -> Iterator[Task]:
        nonlocal produced
        for i in itertools.count():
            pulling.add(threading.current_thread().name)
            produced += 1
            yield Task(id=str(i), argv=["x"])

    intake = Intake(tasks(), skip=set(), depth=4)
    got: list[str] = []
    while len(got) < 10:
        task = intake.hold_next()
        if task is None:
            time.sleep(0.001)
            continue
        got.append(str(task.id))
        intake.release()
        assert produced <= len(got) + 4
    assert got == [str(i) for i in range(10)]
    assert pulling == {"spoolparse-input"}  # never the caller's thread
    assert _settled(lambda: produced) <= 10 + 4
    intake.close()
    assert _settled(lambda: sum(t.name == "spoolparse-input" for t in threading.enumerate())) == 0
    assert produced <= 10 + 4


def test_a_task_that_comes_after_a_pull_found_none_wakes_the_runner_once() -> None:
    gate = threading.Event()
    woken = []

    def tasks() -> Iterator[Task]:
        gate.wait(10)
        yield Task(id="late", argv=["x"])

    intake = Intake(tasks(), skip=set(), depth=2, wake=lambda: woken.append(time.monotonic()))
    assert intake.hold_next() is None and not intake.exhausted  # nothing there yet: LATER, not the end
    gate.set()
    assert _settled(lambda: len(woken)) == 1
    held = intake.hold_next()
    assert held is not None and held.id == "late"
    intake.release()
    while not intake.exhausted:
        assert intake.hold_next() is None
        time.sleep(0.01)
    assert intake.hold_next() is None


def test_what_the_iterator_raises_comes_after_the_tasks_it_gave() -> None:
    def tasks() -> Iterator[Any]:
        yield Task(id="a", argv=["x"])
        raise LookupError("broken source")

    intake = Intake(tasks(), skip=set(), depth=8)
    got = []
    with pytest.raises(LookupError, match="broken source"):
        while True:
            task = intake.hold_next()
            if task is not None:
                got.append(task.id)
                intake.release()
    assert got == ["a"]


def test_after_a_halt_a_threaded_input_is_read_to_its_end_for_the_skipped_outcomes() -> None:
    def tasks() -> Iterator[Task]:
        for i in "abcd":
            time.sleep(0.02)  # slower than a pull: the skipped outcomes must wait for each one
            yield Task(id=i, argv=["x"])

    intake = Intake(tasks(), skip=set(), depth=1)
    while intake.hold_next() is None:
        time.sleep(0.001)
    intake.release()  # "a" started
    rest = list(intake.skip_rest())
    assert [(seq, o.id) for seq, o in rest] == [(1, "b"), (2, "c"), (3, "d")]
    assert intake.exhausted


@pytest.mark.slow  # it waits HALT_INPUT_WAIT
def test_after_a_halt_an_input_that_pauses_is_not_waited_for() -> None:
    """What the input gives without a pause gets its skipped outcomes; an input that then waits (an endless
    producer, a pipe whose writer has nothing more for now) is read no further: the batch is not held until
    it ends, which it may never do."""
    from spoolparse import _limits

    stop = threading.Event()

    def tasks() -> Iterator[Task]:
        for i in "abc":
            yield Task(id=i, argv=["x"])
        stop.wait(60)  # a producer with nothing more for a long while
        yield Task(id="late", argv=["x"])

    intake = Intake(tasks(), skip=set(), depth=1)
    while intake.hold_next() is None:
        time.sleep(0.001)
    intake.release()  # "a" started
    began = time.monotonic()
    rest = list(intake.skip_rest())
    waited = time.monotonic() - began
    stop.set()
    intake.close()
    assert [(seq, o.id) for seq, o in rest] == [(1, "b"), (2, "c")]
    assert not intake.exhausted
    assert waited < 30, f"waited {waited:.1f} s for a paused input (HALT_INPUT_WAIT {_limits.HALT_INPUT_WAIT} s)"


@pytest.mark.parametrize("seed", range(20))
def test_the_bounded_resume_table_skips_what_the_job_log_rule_skips(seed: int, tmp_path: Path) -> None:
    """``DoneIds`` (a spill-file table) and ``done_ids`` (a set) answer alike for any job log: the last final
    verdict of an id decides, a cancelled one never skips, ``--resume-failed`` skips only ``ok``."""
    import json
    import random

    from spoolparse.runner.joblog import DoneIds, done_ids

    rnd = random.Random(seed)
    ids = [f"t{i}" for i in range(rnd.randint(1, 40))] + ["\udcff", "x" * 300]
    log = tmp_path / "jobs.ndjson"
    with open(log, "w") as f:
        for _ in range(rnd.randint(0, 200)):
            rec = {"id": rnd.choice(ids), "final": rnd.random() < 0.7,
                   "verdict": rnd.choice(["ok", "failed", "timeout", "cancelled", "spawn_error"])}
            f.write(json.dumps(rec) + "\n")
            if rnd.random() < 0.05:
                f.write('{"id": "cut short\n')
    for resume in (True, "failed"):
        table = DoneIds(log, resume)
        try:
            assert {i for i in ids if i in table} == done_ids(log, resume), resume
        finally:
            table.close()


def test_ids_are_told_apart_by_themselves_not_by_their_fingerprints(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fingerprints that collide all the time (a 3-bit one here) and tables that fill and grow: each id is
    confirmed against the spill file, so no new id is taken for a duplicate and no duplicate for a new id."""
    from spoolparse.runner import ids as ids_mod

    monkeypatch.setattr(ids_mod, "FIRST_SLOTS", 16)
    monkeypatch.setattr(ids_mod, "_fingerprint", lambda raw: 1 + (ids_mod.hashlib.md5(raw).digest()[0] & 7))
    seen = ids_mod.SeenIds()
    try:
        names = [f"id-{i}" for i in range(300)] + ["\udcff", ""]
        assert all(seen.add(n, i % 7) for i, n in enumerate(names))
        assert len(seen._tables) > 2  # grown past the table in memory, into the spill file
        assert not any(seen.add(n) for n in names)
        assert [seen.get(n) for n in names] == [i % 7 for i in range(len(names))]
        assert seen.get("id-300") is None and "id-300" not in seen
        seen.put("id-3", 99)
        assert seen.get("id-3") == 99 and seen.get("id-4") == 4
    finally:
        seen.close()
