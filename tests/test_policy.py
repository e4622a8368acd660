"""A batch's decisions as a sans-I/O policy (spoolparse.runner.policy), driven by tables: no process, no clock.

Each table is a sequence of observations and the action the policy must answer with, as h11's state tests
drive its connection state machine.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import pytest

from spoolparse.runner.halt import parse_halt
from spoolparse.runner.policy import FINAL, Again, Attempt, BatchPolicy, Kill, admits
from spoolparse.runner.verdicts import HALTED_NOW

GiB = 1 << 30


def policy(**kw: Any) -> BatchPolicy:
    o: dict[str, Any] = {"retries": 0, "requeues": 2, "retry_backoff": 1.0, "halt": None, "stop_at": 0.85,
                         "kill_at": 0.95, "window": 4}
    o.update(kw)
    if isinstance(o["halt"], str):
        o["halt"] = parse_halt(o["halt"])
    return BatchPolicy(**o)


# -- admission ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("estimate", "reserved", "running", "used", "expected"),
    [
        (1 * GiB, 0, 0, 0, True),
        (100 * GiB, 0, 0, 0, True),  # alone, any estimate starts: a large one cannot stall the batch
        (1, 0, 0, 850, False),  # at stop_at, nothing starts, not even alone
        (1 * GiB, 0, 3, 84 * GiB // 100, False),
        (1, 0, 1, 84, True),
        (300, 300, 1, 100, True),  # 100 + 300 + 300 <= 850 (of 1000)
        (300, 600, 2, 100, False),  # what GNU parallel's --memfree would start
        (250, 500, 2, 100, True),  # exactly at the budget
    ],
)
def test_admission(estimate: int, reserved: int, running: int, used: int, expected: bool) -> None:
    total = 1000 if used < GiB else 100 * GiB
    assert policy().admits(estimate, reserved=reserved, running=running, used=used, total=total) is expected


def test_admission_matches_its_rule_over_a_grid() -> None:
    for estimate, reserved, running, used, stop_at in itertools.product(
        (0, 1, 50, 400), (0, 100, 500), (0, 1, 7), (0, 300, 849, 850, 999), (0.5, 0.85, 1.0)
    ):
        budget = stop_at * 1000
        expected = used < budget and (running == 0 or used + reserved + estimate <= budget)
        got = admits(estimate, reserved=reserved, running=running, used=used, total=1000, stop_at=stop_at)
        assert got is expected, (estimate, reserved, running, used, stop_at)


@pytest.mark.parametrize(("halted", "ahead", "window", "expected"), [
    (False, 0, 4, True), (False, 3, 4, True), (False, 4, 4, False), (False, 10_000, None, True),
    (True, 0, 4, False), (True, 0, None, False),
])
def test_taking_a_new_task(halted: bool, ahead: int, window: int | None, expected: bool) -> None:
    p = policy(window=window, halt="soon")
    if halted:
        p.final("failed")
    assert p.takes_new(ahead=ahead) is expected


# -- memory kills -------------------------------------------------------------------------------------------


@dataclass(eq=False)
class Task:
    name: str
    started: float
    usage: int = 0
    watchdog_limit: int | None = None
    ending: bool = False


def _kills(p: BatchPolicy, tasks: list[Task], used: int, total: int = 100) -> list[tuple[str, str]]:
    return [(k.ident.name, k.why) for k in p.memory_kills(tasks, used=used, total=total)]


def test_a_task_over_its_watchdog_limit_is_killed_and_one_being_ended_is_spared() -> None:
    tasks = [Task("over", 1, usage=11, watchdog_limit=10), Task("at", 2, usage=10, watchdog_limit=10),
             Task("cgroup", 3, usage=99), Task("ending", 4, usage=99, watchdog_limit=1, ending=True)]
    assert _kills(policy(), tasks, used=10) == [("over", "killed_memory")]


def test_host_pressure_kills_the_youngest_one_at_a_time() -> None:
    p = policy(kill_at=0.95)
    old, young, youngest = Task("old", 1), Task("young", 2), Task("youngest", 3, ending=True)
    running = [old, young, youngest]
    table = [
        # (used of 100, the running tasks, the kills)
        (94, running, []),  # below kill_at
        (95, running, [("young", "requeue")]),  # the youngest not already being ended
        (99, running, []),  # its memory is not back yet: nobody else
        (99, [old, youngest], [("old", "requeue")]),  # it has gone: the next one
        (99, [youngest], []),  # only one being ended is left
        (10, [Task("new", 5)], []),  # the last victim has gone, and memory is back
    ]
    for used, tasks, kills in table:
        assert _kills(p, tasks, used=used) == kills, (used, [t.name for t in tasks])


def test_a_watchdog_kill_and_a_pressure_kill_in_one_sample_name_different_tasks() -> None:
    tasks = [Task("a", 1), Task("b", 2, usage=50, watchdog_limit=10)]
    assert _kills(policy(), tasks, used=96) == [("b", "killed_memory"), ("a", "requeue")]
    assert isinstance(policy().memory_kills([], used=100, total=100), list)


# -- retries and requeues -----------------------------------------------------------------------------------


def _run(p: BatchPolicy, table: list[tuple[int, str, str | None, bool, object]], seq: int = 0) -> None:
    for attempt, verdict, forced, cancelled, expected in table:
        got = p.ended(Attempt(seq, attempt, verdict, forced, cancelled), 100.0)
        assert got == expected, (attempt, verdict, forced, got)


def test_retries_count_the_failures_of_one_task_with_a_doubling_backoff() -> None:
    _run(policy(retries=2, retry_backoff=1.0), [
        (1, "failed", None, False, Again(101.0, True)),
        (2, "timeout", "timeout", False, Again(102.0, True)),
        (3, "killed_memory", "killed_memory", False, FINAL),  # two retries spent
    ])


@pytest.mark.parametrize("verdict", ["ok", "spawn_error", "cancelled", "skipped"])
def test_only_retry_verdicts_run_again(verdict: str) -> None:
    _run(policy(retries=5), [(1, verdict, None, False, FINAL)])


def test_requeues_count_apart_from_retries() -> None:
    _run(policy(retries=1, requeues=2, retry_backoff=0.5), [
        (1, "killed_memory", "requeue", False, Again(100.5, False)),
        (2, "failed", None, False, Again(101.0, True)),  # a retry: its own count
        (3, "killed_memory", "requeue", False, Again(102.0, False)),  # attempts 3 - 1 failure = 2 requeues
        (4, "killed_memory", "requeue", False, FINAL),  # a third requeue: final
    ])


def test_each_task_has_its_own_count_and_a_final_outcome_forgets_it() -> None:
    p = policy(retries=1)
    _run(p, [(1, "failed", None, False, Again(101.0, True))], seq=1)
    _run(p, [(1, "failed", None, False, Again(101.0, True))], seq=2)
    _run(p, [(2, "failed", None, False, FINAL)], seq=1)
    _run(p, [(1, "failed", None, False, Again(101.0, True))], seq=1)  # the same place, a new task: counted anew


def test_nothing_runs_again_after_a_cancel_or_a_halt() -> None:
    _run(policy(retries=3), [(1, "failed", None, True, FINAL)])
    p = policy(retries=3, halt="soon")
    assert p.final("failed") == "soon"
    _run(p, [(1, "failed", None, False, FINAL), (1, "killed_memory", "requeue", False, FINAL)])


# -- halting ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("halt", "verdicts", "halts_at", "how"), [
    (None, ["failed"] * 5, None, None),
    ("soon", ["ok", "ok", "failed", "failed"], 2, "soon"),
    ("now", ["timeout"], 0, "now"),
    ("now,fail=3", ["failed", "ok", "failed", "skipped", "cancelled", "failed"], 5, "now"),
    ("soon,success=2", ["failed", "ok", "failed", "ok"], 3, "soon"),
    ("soon,fail=50%", ["failed", "ok", "ok", "failed"], 1, "soon"),  # counted from the second ended task on
])
def test_the_halt_is_reached_once(halt: str | None, verdicts: list[str], halts_at: int | None, how: str | None) -> None:
    p = policy(halt=halt)
    answers = [p.final(v) for v in verdicts]
    expected: list[str | None] = [None] * len(verdicts)
    if halts_at is not None:
        expected[halts_at] = how
    assert answers == expected
    assert p.halted is (halts_at is not None)
    assert p.cancels_new is (how == "now")
    assert p.tally.done == len(verdicts)


def test_a_cancelled_task_says_why() -> None:
    p = policy(halt="now")
    assert p.cancelled_error(None) == "cancelled (the batch was closed)"
    assert p.cancelled_error("cancelled (SIGTERM to spoolparse)") == "cancelled (SIGTERM to spoolparse)"
    p.final("failed")
    assert p.cancelled_error(None) == HALTED_NOW
    assert p.cancelled_error("cancelled (SIGINT to spoolparse)") == "cancelled (SIGINT to spoolparse)"


def test_kills_name_what_they_were_given() -> None:
    t = Task("x", 1, usage=2, watchdog_limit=1)
    (k,) = policy().memory_kills([t], used=0, total=100)
    assert k == Kill(t, "killed_memory") and k.ident is t


def test_a_cancelled_task_names_the_signal_a_bare_keyboard_interrupt_stands_for() -> None:
    """Ray's waits turn our Interrupted into a bare KeyboardInterrupt: the cancelled tasks' error still names the
    signal spoolparse got, as a local batch's does (not "SIGINT" for a SIGTERM)."""
    import signal

    from spoolparse._signals import Interrupted, interrupts
    from spoolparse.runner.verdicts import cancelled_error

    with interrupts():  # (which forgets a signal an earlier block took)
        assert cancelled_error(KeyboardInterrupt()) == "cancelled (SIGINT to spoolparse)"  # no signal of ours came
        try:
            try:
                signal.raise_signal(signal.SIGTERM)
            except Interrupted:
                raise KeyboardInterrupt from None
        except KeyboardInterrupt as bare:
            assert cancelled_error(bare) == "cancelled (SIGTERM to spoolparse)"
