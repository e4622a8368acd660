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


def _popleft_then_signal(seen: list[str], fired: list[bool]) -> object:
    """A profiler that raises SIGINT as the driver's take pops the second outcome (held, then raised as the
    take's held stretch ends: after the outcome was handed out)."""
    import signal

    def hook(frame: object, event: str, arg: object) -> None:
        if event == "c_return" and getattr(arg, "__name__", "") == "popleft" and len(seen) == 1 and not fired \
                and getattr(getattr(frame, "f_code", None), "co_name", "") == "take":
            fired.append(True)
            signal.raise_signal(signal.SIGINT)

    return hook


def test_a_library_reader_cut_short_by_a_signal_gets_the_outcome_in_hand_from_close(tmp_path: Path) -> None:
    """A reader that knows nothing of unprinted(): the outcome handed out as the signal came is the first of
    what close() returns (it was in the job log as final, and in nobody's hands)."""
    import sys

    from spoolparse.runner.scheduler import Batch

    path = tmp_path / "jobs.ndjson"
    seen: list[str] = []
    fired: list[bool] = []
    batch = Batch([{"id": f"t{i}", "argv": ["true"]} for i in range(4)], joblog=str(path), max_concurrent=1,
                  allow_empty_answer=True, spool_dir=str(tmp_path))
    try:
        with pytest.raises(KeyboardInterrupt):
            for out in batch:
                seen.append(out.id)
                sys.setprofile(_popleft_then_signal(seen, fired))  # type: ignore[arg-type]
        sys.setprofile(None)
        rest = [o.id for o in batch.close()]
    finally:
        sys.setprofile(None)
        batch.close()
    assert fired
    assert len(seen) == 1 and len(seen + rest) == len(set(seen + rest)) == 4
    finals = [r["id"] for r in map(json.loads, path.read_text().splitlines()) if r["final"]]
    assert sorted(finals) == sorted(seen + rest)


def test_an_outcome_whose_job_log_line_cannot_be_written_is_handed_out_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failed job-log write (ENOSPC) while an outcome is handed out: it was both in hand and put back in the
    queue, so the command printed it twice."""
    import errno

    from spoolparse.runner import joblog as jl
    from spoolparse.runner.scheduler import Batch

    path = tmp_path / "jobs.ndjson"
    real = jl.JobLog._append
    finals = [0]

    def append(self: JobLog, data: bytes) -> None:
        if json.loads(data)["final"]:
            finals[0] += 1
            if finals[0] == 1:
                raise OSError(errno.ENOSPC, "No space left on device")
        real(self, data)

    monkeypatch.setattr(jl.JobLog, "_append", append)
    batch = Batch([{"id": f"t{i}", "argv": ["true"]} for i in range(3)], joblog=str(path), max_concurrent=1,
                  allow_empty_answer=True, spool_dir=str(tmp_path))
    seen: list[str] = []
    with pytest.raises(OSError, match="No space"):
        for out in batch:
            seen.append(out.id)
            batch.printed(out)
    printed = seen + [o.id for o in batch.unprinted()] + [o.id for o in batch.close()]  # as the command does
    assert sorted(printed) == sorted(set(printed)) and len(printed) == 3


def test_the_outcomes_a_closed_ray_batch_returns_are_final_in_its_job_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ray's loop closes the job log as it ends: the outcomes that waited for the reader (t2, behind t1 in
    input order) lost their final lines there, before close() returned them, and --resume ran them again. Ray
    itself is stood in for: what is under test is the driver's side."""
    import time
    import types

    from spoolparse.runner import ray_backend as rb
    from spoolparse.runner.options import BatchOptions
    from spoolparse.runner.ray_ledger import Record
    from spoolparse.runner.tasks import Task

    fake = types.SimpleNamespace(is_initialized=lambda: True, kill=lambda *a, **k: None, shutdown=lambda: None)
    monkeypatch.setattr(rb, "_import_ray", lambda: fake)

    def refresh(self: rb.RayBatch) -> None:
        self._actors["n"] = object()
        self.ledger.add_node("n")

    step = [0]

    def receive(self: rb.RayBatch) -> None:  # t0 ends, then t2 (waiting for t1 in order); t1 runs on
        if step[0] == 0:
            for seq, tid in ((0, "t0"), (2, "t2")):
                task = Task(argv=["true"], id=tid)
                self._record(Record(Outcome(id=tid, verdict="ok", attempts=1), task, True, time.time(), seq))
        step[0] += 1
        time.sleep(0.01)

    monkeypatch.setattr(rb.RayBatch, "_refresh_nodes", refresh)
    monkeypatch.setattr(rb.RayBatch, "_send", lambda self: None)
    monkeypatch.setattr(rb.RayBatch, "_finished", lambda self: False)
    monkeypatch.setattr(rb.RayBatch, "_receive", receive)
    log = tmp_path / "jobs.ndjson"
    batch = rb.RayBatch([], address=None, options=BatchOptions.of(None, {"joblog": str(log), "ordered": True},
                                                                   caller="test"))
    first = next(batch)
    batch.printed(first)
    closed = batch.close()
    assert first.id == "t0" and [(o.id, o.verdict) for o in closed] == [("t2", "ok")]
    assert [r["id"] for r in map(json.loads, log.read_text().splitlines()) if r["final"]] == ["t0", "t2"]
