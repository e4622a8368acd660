"""The input both runners read through: numbering, duplicate ids, resume skips, what is left after a halt."""

from __future__ import annotations

from typing import Any

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
