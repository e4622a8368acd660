"""The Ray driver's ledger, without Ray: placement by free memory, the window, requeues, late duplicates."""

from __future__ import annotations

import subprocess
import sys

import pytest

from spoolparse.runner.ray_ledger import Ledger
from spoolparse.runner.ray_wire import decode_task, encode_task, loads
from spoolparse.runner.tasks import Task

GiB = 1 << 30


def status(*, used: int, total: int = 16 * GiB, capacity: int = 4, waiting_est: int = 0) -> dict[str, object]:
    return {"used": used, "total": total, "stop_at": 0.85, "capacity": capacity, "waiting_est": waiting_est}


def wire(seq: int, verdict: str = "ok", attempts: int = 1) -> dict[str, object]:
    return {"id": seq, "verdict": verdict, "attempts": attempts, "wall_s": 0.5, "cpu_s": 0.1, "peak_memory": 1,
            "peak_source": "sampled", "returncode": 0, "signal": None, "enforcement": "none", "error": None,
            "summary": {"text": "done"}}


def fill(ledger: Ledger, name: str, first_seq: int, limit: int = 100) -> int:
    """Dispatch 1 GiB tasks to the node while they fit; returns how many went."""
    n = 0
    while n < limit and ledger.fits(name, GiB):
        ledger.dispatch(name, first_seq + n, Task(argv=["true"], id=f"t{first_seq + n}", memory=GiB))
        n += 1
    return n


def test_a_node_with_less_free_memory_gets_fewer_tasks() -> None:
    ledger = Ledger(retries=2, memory_per_task=GiB)
    ledger.add_node("roomy")
    ledger.add_node("tight")
    assert not ledger.fits("roomy", GiB), "nothing goes to a node before its first report"
    ledger.report("roomy", status(used=2 * GiB))
    ledger.report("tight", status(used=12 * GiB))  # 0.85 * 16 - 12 = 1.6 GiB free
    assert fill(ledger, "roomy", 0) == 8, "the window (twice its concurrency) bounds a roomy node"
    assert fill(ledger, "tight", 100) == 1
    # its next report counts what waits there: still no room for a second one
    ledger.report("tight", status(used=12 * GiB, waiting_est=GiB))
    assert not ledger.fits("tight", GiB)


def test_an_idle_node_takes_one_task_whatever_its_estimate_but_not_when_full() -> None:
    ledger = Ledger(retries=2, memory_per_task=GiB)
    ledger.add_node("n")
    ledger.report("n", status(used=13 * GiB))  # 0.4 GiB free
    assert ledger.fits("n", 8 * GiB)
    ledger.report("n", status(used=14 * GiB))  # above stop_at
    assert not ledger.fits("n", 1)


def test_outcomes_settle_once_and_a_late_duplicate_is_dropped() -> None:
    ledger = Ledger(retries=2, memory_per_task=GiB)
    for name in ("a", "b"):
        ledger.add_node(name)
        ledger.report(name, status(used=0))
    ledger.dispatch("a", 0, Task(argv=["x"], id="job-0"))
    ledger.dispatch("a", 1, Task(argv=["y"], id="job-1"))
    rec = ledger.settle("a", wire(0))
    assert rec is not None and rec.final and rec.outcome.id == "job-0" and rec.outcome.summary == {"text": "done"}
    assert ledger.settle("a", wire(0)) is None, "a second outcome for the same task"
    lost = ledger.lose("a", "node died")
    assert [(r.outcome.id, r.final, r.outcome.attempts) for r in lost] == [("job-1", False, 1)]
    assert "requeued" in (lost[0].outcome.error or "")
    again = ledger.requeue.popleft()
    ledger.dispatch("b", again.seq, again.task, again.before)
    assert ledger.settle("a", wire(1)) is None, "the lost node's late outcome"
    rec = ledger.settle("b", wire(1, attempts=1))
    assert rec is not None and rec.outcome.id == "job-1" and rec.outcome.attempts == 2
    assert ledger.dropped == 2 and ledger.in_flight() == 0


def test_a_task_lost_more_often_than_the_retries_allow_fails() -> None:
    ledger = Ledger(retries=1, memory_per_task=GiB)
    for name in ("a", "b", "c"):
        ledger.add_node(name)
        ledger.report(name, status(used=0))
    ledger.dispatch("a", 0, Task(argv=["x"], id="t"))
    first = ledger.lose("a", "gone")
    assert not first[0].final
    r = ledger.requeue.popleft()
    ledger.dispatch("b", r.seq, r.task, r.before)
    second = ledger.lose("b", "gone too")
    assert second[0].final and second[0].outcome.verdict == "failed" and second[0].outcome.attempts == 2
    assert "on each of 2 attempts" in (second[0].outcome.error or "")
    assert not ledger.requeue and ledger.in_flight() == 0


def test_cancel_all_gives_every_task_in_flight_or_requeued_one_cancelled_outcome() -> None:
    ledger = Ledger(retries=2, memory_per_task=GiB)
    for name in ("a", "b"):
        ledger.add_node(name)
        ledger.report(name, status(used=0))
    ledger.dispatch("a", 0, Task(argv=["x"], id="t0"))
    ledger.dispatch("b", 1, Task(argv=["x"], id="t1"))
    ledger.lose("a", "gone")
    recs = ledger.cancel_all("cancelled")
    assert sorted((r.outcome.id, r.outcome.verdict) for r in recs) == [("t0", "cancelled"), ("t1", "cancelled")]
    assert ledger.in_flight() == 0 and not ledger.requeue


@pytest.mark.parametrize(("data", "allow_empty", "set_all"),
                         [(None, None, False), ("text ✓", True, True), (b"\x00\xffbytes", False, True)])
def test_tasks_cross_the_wire_intact(data: str | bytes | None, allow_empty: bool | None, set_all: bool) -> None:
    import dataclasses

    given = dict(cwd="/tmp", env={"K": "V"}, timeout=5.0, soft_timeout=2.0, memory=3, memory_limit=4,
                 provider="codex", max_line=5, max_retained=6, max_spool_bytes=7)
    task = Task(argv=["a", "b c"], id="ignored", input=data, allow_empty_answer=allow_empty,
                **(given if set_all else {}))  # type: ignore[arg-type]
    from spoolparse.runner.ray_wire import dumps

    back = decode_task(loads(dumps(encode_task(7, task))))
    assert back.id == "7"
    fields = [f.name for f in dataclasses.fields(Task) if f.name != "id"]
    assert set(given) | {"argv", "input", "allow_empty_answer"} == set(fields)  # every field of a task is tried
    for field in fields:
        assert getattr(back, field) == getattr(task, field), field


def test_file_names_python_could_not_decode_cross_the_wire_intact() -> None:
    """Lone surrogates (undecodable bytes of a file name, as ``os.listdir`` gives them) in a task's argv, input,
    directory or environment: JSON cannot carry them, and the driver's encoding raised ``TypeError``."""
    task = Task(argv=["cat", "name-\udcff.txt"], id="x", input="in-\udcfe", cwd="/tmp/dir-\udcfd",
                env={"K": "v-\udcfc", "K-\udcfb": "v"})
    from spoolparse.runner.ray_wire import dumps

    back = decode_task(loads(dumps(encode_task(7, task))))
    for field in ("argv", "input", "cwd", "env"):
        assert getattr(back, field) == getattr(task, field), field


def test_an_outcome_with_integers_past_64_bits_crosses_the_wire_exactly() -> None:
    """A usage count past 64 bits is kept exactly and written exactly by the local runner; over the wire, orjson
    refused to write it (the node's whole reply failed) and would have read it back as a float."""
    from spoolparse.runner.ray_wire import decode_outcome, dumps, encode_outcome
    from spoolparse.runner.tasks import Outcome

    big = 2**70 + 3
    out = Outcome(id="5", verdict="ok", summary={"usage": {"input_tokens": big}})  # type: ignore[typeddict-item]
    back = decode_outcome(loads(dumps({"out": [encode_outcome(out)]}))["out"][0], task_id="t", attempts_before=0)
    assert back.summary is not None and back.summary["usage"]["input_tokens"] == big


def test_importing_spoolparse_and_its_ray_backend_does_not_import_ray() -> None:
    code = (
        "import sys, spoolparse, spoolparse.runner.ray_backend, spoolparse.runner.ray_node; "
        "import spoolparse.runner.cli; assert 'ray' not in sys.modules, 'ray imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_backend_ray_without_ray_installed_is_a_usage_error() -> None:
    code = (
        "import sys; sys.modules['ray'] = None\n"
        "import spoolparse\n"
        "try:\n"
        "    spoolparse.run_many([['true']], backend='ray')\n"
        "except spoolparse.UsageError as e:\n"
        "    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert "pip install 'spoolparse[ray]'" in out


def test_unknown_backend_and_address_without_ray_are_usage_errors() -> None:
    import spoolparse

    with pytest.raises(spoolparse.UsageError, match="backend must be one of"):
        spoolparse.run_many([["true"]], backend="dask")
    with pytest.raises(spoolparse.UsageError, match="address is for backend='ray'"):
        spoolparse.run_many([["true"]], address="auto")
