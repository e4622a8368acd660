"""The hand-out rule both runners share: an outcome is final in the job log once it was printed."""

from __future__ import annotations

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


def test_a_received_outcome_is_final_only_once_the_next_is_asked_for(tmp_path: Path) -> None:
    path = tmp_path / "jobs.ndjson"
    log = JobLog(path)
    batch = _Received(log, [Outcome(id=i, verdict="ok") for i in "abc"])
    assert done_ids(path, "all") == set()  # all three arrived; none printed yet
    assert next(batch).id == "a"
    assert done_ids(path, "all") == set()  # handed out, maybe not printed: a crash now reruns it
    assert next(batch).id == "b"
    assert done_ids(path, "all") == {"a"}
    closed = batch._left.pop()  # what close() returns: printed by the caller, who says so
    batch.emitted(closed)
    assert done_ids(path, "all") == {"a", "c"}
    with pytest.raises(StopIteration):
        next(batch)
    assert done_ids(path, "all") == {"a", "b", "c"} and batch.all_out
    log.close()
