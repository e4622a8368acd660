"""The hand-out rule both runners share: an outcome is final in the job log before its reader can print it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spoolparse.runner.emission import HandsOut
from spoolparse.runner.joblog import JobLog, done_ids
from spoolparse.runner.tasks import Outcome


class _Received(HandsOut):
    """Outcomes that arrived (their final lines written held, as each runner writes them), handed out in turn."""

    def __init__(self, log: JobLog, outcomes: list[Outcome]) -> None:
        self.joblog = log
        self._left = list(outcomes)
        for o in outcomes:
            log.write(o, argv=["agent"], final=True, started=0.0, hold=True)
        self.all_out = False

    def _take(self) -> Outcome:
        if not self._left:
            raise StopIteration
        return self._left.pop(0)

    def _all_out(self) -> None:
        self.all_out = True


@pytest.mark.parametrize("runner", ["scheduler", "ray_backend"])
def test_both_runners_hand_out_through_the_shared_rule(runner: str) -> None:
    import importlib

    module = importlib.import_module(f"spoolparse.runner.{runner}")
    cls = module.Batch if runner == "scheduler" else module.RayBatch
    assert issubclass(cls, HandsOut) and "__next__" not in vars(cls) and "emitted" not in vars(cls)


def test_an_outcome_is_final_in_the_job_log_as_it_is_handed_out(tmp_path: Path) -> None:
    path = tmp_path / "jobs.ndjson"
    log = JobLog(path)
    batch = _Received(log, [Outcome(id=i, verdict="ok") for i in "abcd"])
    assert done_ids(path, "all") == set()  # all four arrived; none handed out yet
    a = next(batch)
    assert a.id == "a" and done_ids(path, "all") == {"a"}  # in the log before the reader can print it
    assert batch.unprinted() == [a] and batch.unprinted() == []  # in hand until printed: given back once
    b = next(batch)
    batch.printed(b)
    assert batch.unprinted() == [] and done_ids(path, "all") == {"a", "b"}
    assert next(batch).id == "c"
    closed = batch._left.pop()  # what close() returns: the caller says so before it prints it
    batch.emitted(closed)
    batch.emitted(closed)  # once only
    assert done_ids(path, "all") == {"a", "b", "c", "d"}
    with pytest.raises(StopIteration):
        next(batch)
    assert batch.unprinted() == []  # asking for the next says the one before was printed
    assert batch.all_out
    log.close()
    assert [r["id"] for r in map(json.loads, path.read_text().splitlines())] == ["a", "b", "c", "d"]


def test_a_signal_as_the_batch_hands_an_outcome_out_loses_it_nowhere(tmp_path: Path) -> None:
    """A signal the instant the reader's take returns (before the outcome was known to be in hand) lost it: taken
    from the loop, never printed, never in the job log. Now it is handed out, job-log line written, under held
    signals: the reader cut short gets it from ``unprinted``, and every task has its one outcome."""
    import signal
    import sys

    from spoolparse.runner.driver import Driver
    from spoolparse.runner.scheduler import Batch

    path = tmp_path / "jobs.ndjson"
    tasks = [{"id": f"t{i}", "argv": ["true"]} for i in range(4)]
    seen: list[str] = []
    fired = []

    def at_return(frame: object, event: str, arg: object) -> None:
        code = getattr(frame, "f_code", None)
        if event == "return" and code is Driver.take.__code__ and len(seen) == 1 and not fired:
            fired.append(True)
            signal.raise_signal(signal.SIGINT)  # its handler runs as the take returns

    batch = Batch(tasks, joblog=str(path), max_concurrent=1, allow_empty_answer=True, spool_dir=str(tmp_path))
    try:
        with pytest.raises(KeyboardInterrupt):
            for out in batch:
                seen.append(out.id)
                batch.printed(out)
                sys.setprofile(at_return)
        sys.setprofile(None)
        assert fired
        in_hand = batch.unprinted()
        assert len(in_hand) == 1 and in_hand[0].id not in seen  # the outcome the signal came on, still in hand
        closed = batch.close()  # the rest, each final in the job log as it is returned
    finally:
        sys.setprofile(None)
        batch.close()
    ids = seen + [o.id for o in in_hand] + [o.id for o in closed]
    assert len(ids) == len(set(ids)) == 4  # one outcome each, none lost, none twice
    finals = [r["id"] for r in map(json.loads, path.read_text().splitlines()) if r["final"]]
    assert sorted(finals) == sorted(ids)  # and each one final in the job log: --resume runs none again
