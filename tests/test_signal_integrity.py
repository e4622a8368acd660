"""Whatever signals reach spoolparse, and whenever: every agent ends, every output line is whole JSON, every task
gets one outcome, the first signal decides the exit status, and an outcome a reader saw is in the job log.

Real processes throughout: ``spoolparse run`` and ``spoolparse batch`` as subprocesses, agents that ignore
SIGTERM (so the cleanup's grace runs, and a second signal lands inside it), ``/proc`` read for survivors and for
where spoolparse waits.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from .helpers import as_from_a_terminal
from .runner_support import marked_pids, marker, wait_for, wait_gone

CLI = [sys.executable, "-m", "spoolparse"]
STARTED = '{"type":"thread.started","thread_id":"t1"}'
ENDING = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT]
#: Every pair of ending signals: the first starts the cleanup, the second comes during it.
PAIRS = list(itertools.product(ENDING, ENDING))
every_pair = pytest.mark.parametrize(("first", "second"), PAIRS, ids=[f"{a.name}-{b.name}" for a, b in PAIRS])


def _stubborn(flag: Path) -> str:
    """An agent that has started (one event) and ignores SIGTERM, its sleep too: the cleanup's grace runs to its
    end. It notes the TERM in ``flag`` (a builtin: no fork to wait for), so a test knows the cleanup is under way."""
    return (f"trap ': > {flag}' TERM; echo '{STARTED}'; (trap '' TERM; exec sleep 300) & "
            "while :; do wait; done")


def _lines(out: bytes) -> list[dict[str, Any]]:
    """stdout as JSON lines: a line that is not whole JSON fails the test."""
    return [json.loads(line) for line in out.splitlines()]


def _start(argv: list[str], env: dict[str, str], **kw: Any) -> subprocess.Popen[bytes]:
    return subprocess.Popen([*CLI, *argv], env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=as_from_a_terminal, **kw)


def _finish(p: subprocess.Popen[bytes], timeout: float = 60) -> tuple[bytes, bytes]:
    try:
        return p.communicate(timeout=timeout)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def _assert_ended_by(first: signal.Signals, rc: int, err: bytes) -> None:
    assert rc == 128 + first, err
    assert b"Traceback" not in err, err
    assert err.decode().strip().splitlines()[-1] == f"spoolparse: error: interrupted by {first.name}", err


# -- a second signal during the cleanup -----------------------------------------------------------------------


def _signal_twice(p: subprocess.Popen[bytes], first: signal.Signals, second: signal.Signals, *,
                  started: Callable[[], bool], termed: Callable[[], bool]) -> bytes:
    """``first`` once the agents run, ``second`` once the cleanup's TERM reached them (inside its grace); what
    spoolparse printed, once it ended as ``first`` says."""
    try:
        assert wait_for(started), "the agents never started"
        p.send_signal(first)
        assert wait_for(termed, 20)
        p.send_signal(second)
    finally:
        out, err = _finish(p)
    _assert_ended_by(first, p.returncode, err)
    return out


@pytest.mark.slow
@every_pair
def test_batch_second_signal_during_cancel_loses_no_outcome(
    tmp_path: Path, first: signal.Signals, second: signal.Signals
) -> None:
    token, env = marker()
    log = tmp_path / "jobs.ndjson"
    flags = [tmp_path / f"termed-{i}" for i in range(3)]
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"id": f"t{i}", "cmd": ["sh", "-c", _stubborn(f)]}) + "\n"
                             for i, f in enumerate(flags)))
    p = _start(["batch", str(tasks), "-j", "3", "--joblog", str(log)], env)
    out = _signal_twice(p, first, second, started=lambda: len([q for q in marked_pids(token) if _is_sleep(q)]) == 3,
                        termed=lambda: any(f.exists() for f in flags))
    outcomes = _lines(out)
    assert sorted(o["id"] for o in outcomes) == ["t0", "t1", "t2"], outcomes
    for o in outcomes:
        assert o["verdict"] == "cancelled" and o["error"].startswith(f"cancelled ({first.name} to spoolparse)"), o
    finals = [r["id"] for r in map(json.loads, log.read_text().splitlines()) if r["final"]]
    assert sorted(finals) == ["t0", "t1", "t2"]
    assert wait_gone(token) == []


@pytest.mark.slow
@every_pair
def test_run_second_signal_during_cleanup_keeps_the_summary_and_the_first_status(
    tmp_path: Path, first: signal.Signals, second: signal.Signals
) -> None:
    token, env = marker()
    flag = tmp_path / "termed"
    p = _start(["run", "--", "sh", "-c", _stubborn(flag)], env)
    out = _signal_twice(p, first, second, started=lambda: any(_is_sleep(q) for q in marked_pids(token)),
                        termed=flag.exists)
    (summary,) = _lines(out)
    assert summary["ok"] is False and summary["error"].startswith(f"interrupted by {first.name}"), summary
    assert summary["session_id"] == "t1"
    assert wait_gone(token) == []


def _is_sleep(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().startswith(b"sleep\0")
    except OSError:
        return False


# -- a signal while a line is being written -------------------------------------------------------------------

#: An agent whose answer is 4 MiB: its outcome (batch) or summary (run) is far more than a pipe holds.
BIG = ("import json\n"
       "print(json.dumps({'type': 'thread.started', 'thread_id': 'b'}))\n"
       "print(json.dumps({'type': 'item.completed', 'item': {'id': 'i', 'type': 'agent_message', "
       "'text': 'A' * (4 << 20)}}))\n"
       "print(json.dumps({'type': 'turn.completed', 'usage': {'input_tokens': 1, 'output_tokens': 1}}))\n")


def _writing_to_a_full_pipe(pid: int) -> bool:
    """Whether ``pid``'s main thread waits in a write to a pipe (its reader has not read yet)."""
    try:
        with open(f"/proc/{pid}/wchan") as f:
            return f.read() in ("pipe_write", "anon_pipe_write", "pipe_wait")
    except OSError:
        return False


@pytest.mark.slow
@pytest.mark.parametrize("sig", ENDING, ids=[s.name for s in ENDING])
def test_batch_signal_while_an_outcome_is_written_tears_no_line(tmp_path: Path, sig: signal.Signals) -> None:
    token, env = marker()
    (tmp_path / "big.py").write_text(BIG)
    log = tmp_path / "jobs.ndjson"
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"id": "big", "cmd": [sys.executable, str(tmp_path / "big.py")]}) + "\n"
                     + json.dumps({"id": "slow", "cmd": ["sh", "-c", f"echo '{STARTED}'; exec sleep 300"]}) + "\n")
    p = _start(["batch", str(tasks), "-j", "2", "--joblog", str(log)], env)
    try:
        assert wait_for(lambda: _writing_to_a_full_pipe(p.pid)), "never blocked writing the big outcome"
        p.send_signal(sig)
    finally:
        out, err = _finish(p)
    assert p.returncode == 128 + sig, err
    outcomes = {o["id"]: o for o in _lines(out)}
    assert len(outcomes) == len(out.splitlines()) == 2
    assert outcomes["big"]["verdict"] == "ok" and outcomes["slow"]["verdict"] == "cancelled"
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert sorted(r["id"] for r in records if r["final"]) == ["big", "slow"]
    assert wait_gone(token) == []


@pytest.mark.slow
@pytest.mark.parametrize("sig", ENDING, ids=[s.name for s in ENDING])
def test_run_signal_while_the_summary_is_written_tears_nothing(tmp_path: Path, sig: signal.Signals) -> None:
    token, env = marker()
    (tmp_path / "big.py").write_text(BIG)
    p = _start(["run", "--", sys.executable, str(tmp_path / "big.py")], env)
    try:
        assert wait_for(lambda: _writing_to_a_full_pipe(p.pid)), "never blocked writing the summary"
        p.send_signal(sig)
    finally:
        out, err = _finish(p)
    (summary,) = _lines(out)  # whole, and once
    assert summary["ok"] is True and set(summary["text"]) == {"A"}
    assert p.returncode == 128 + sig, err  # the signal came: its status, once the summary is out whole
    assert b"Traceback" not in err
    assert wait_gone(token) == []


# -- kill -9 right after an outcome was read ------------------------------------------------------------------

OK_AGENT = (f"echo '{STARTED}'; "
            "echo '{\"type\":\"item.completed\",\"item\":{\"id\":\"i\",\"type\":\"agent_message\",\"text\":\"hi\"}}'; "
            "echo '{\"type\":\"turn.completed\",\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}'")


@pytest.mark.slow
def test_an_outcome_read_from_stdout_is_already_final_in_the_job_log(tmp_path: Path) -> None:
    """The reader kills spoolparse (SIGKILL: an OOM kill, a CI timeout) the instant it has read a number of
    outcome lines, again and again: each line it read is final in the job log, so ``--resume`` skips it."""
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"id": f"t{i}", "cmd": ["sh", "-c", OK_AGENT]}) + "\n" for i in range(40)))
    missing: dict[int, list[str]] = {}
    for seen in range(1, 31, 3):
        token, env = marker()
        log = tmp_path / f"jobs-{seen}.ndjson"
        p = subprocess.Popen([*CLI, "batch", str(tasks), "-j", "2", "--joblog", str(log)],
                             env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, bufsize=0)
        got = b""
        try:
            assert p.stdout is not None
            while got.count(b"\n") < seen:
                chunk = os.read(p.stdout.fileno(), 65536)
                if not chunk:
                    break
                got += chunk
            p.kill()
        finally:
            _finish(p)
        printed = [json.loads(line)["id"] for line in got[: got.rfind(b"\n")].split(b"\n") if line.strip()]
        assert len(printed) >= seen
        finals = {r["id"] for r in map(json.loads, log.read_text().splitlines()) if r["final"]}
        if lost := [i for i in printed if i not in finals]:
            missing[seen] = lost
        assert wait_gone(token, timeout=5.0) == []
    assert missing == {}


# -- Ctrl-C while the command starts --------------------------------------------------------------------------

#: Ctrl-C after these many milliseconds: from before Python is up to after the command has ended.
STARTUP_DELAYS = [d * 7 for d in range(40)]


@pytest.mark.slow
def test_ctrl_c_while_the_command_starts_prints_no_traceback_of_ours() -> None:
    """A Ctrl-C at any instant of the start: killed by SIGINT before Python is up, then exit 130 with one line
    (or the command's own end, when it came after). A traceback is only ever Python's own start-up (no frame of
    spoolparse's), which happens before any of its code runs."""
    import re
    import time

    seen: dict[tuple[int, str], int] = {}
    for delay in STARTUP_DELAYS:
        p = subprocess.Popen([*CLI, "run", "--", "true"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             preexec_fn=as_from_a_terminal)
        time.sleep(delay / 1000)
        p.send_signal(signal.SIGINT)
        out, err = _finish(p)
        text = err.decode()
        kind = "traceback" if "Traceback" in text else "line" if text else "nothing"
        seen[(p.returncode, kind)] = seen.get((p.returncode, kind), 0) + 1
        if kind == "traceback":  # Python's own start (site, runpy): its exit, or a Ctrl-C it swallowed
            assert [f for f in re.findall(r'File "([^"]+)"', text) if "spoolparse" in f] == [], text
            assert p.returncode in (1, -signal.SIGINT) or text.startswith("Exception ignored"), text
        elif p.returncode == 130:
            assert text.strip().splitlines() in (["spoolparse: error: interrupted"],
                                                 ["spoolparse: error: interrupted by SIGINT"]), text
        elif p.returncode == 1:  # the run was over: `true` gives no answer
            assert json.loads(out)["ok"] is False
        else:
            assert p.returncode == -signal.SIGINT and text == "", (p.returncode, text)
    assert (130, "line") in seen, seen


class _Short:
    """A stream whose ``write`` takes at most ``most`` bytes a call, as CPython's buffered write does when a
    signal cuts a pipe write short (``most`` 0: a stream that would block)."""

    def __init__(self, most: int) -> None:
        self.most = most
        self.got = b""

    def write(self, data: memoryview) -> int:
        self.got += bytes(data[: self.most])
        return min(self.most, len(data))

    def flush(self) -> None:
        pass


@pytest.mark.parametrize("most", [1, 3, 64, 1 << 20])
def test_whole_writes_write_what_a_short_count_left(most: int) -> None:
    from spoolparse._signals import WholeWrites

    short = _Short(most)
    data = bytes(range(256)) * 40
    assert WholeWrites(short).write(data) == len(data)  # type: ignore[arg-type]
    assert short.got == data


def test_whole_writes_do_not_spin_on_a_stream_that_would_block() -> None:
    from spoolparse._signals import WholeWrites

    with pytest.raises(BlockingIOError):
        WholeWrites(_Short(0)).write(b"x")  # type: ignore[arg-type]


def test_a_signal_as_an_outcome_is_taken_loses_it_not() -> None:
    """A signal that comes the instant the reader takes an outcome from the batch's loop: the take is interrupted
    with the outcome put back, and the next take has it (before, it was gone: taken, never handed out)."""
    from collections import deque

    from spoolparse._signals import Interrupted, interrupts
    from spoolparse.runner.driver import Driver

    class SignalAsTaken(deque[str]):
        def popleft(self) -> str:
            item = super().popleft()
            signal.raise_signal(signal.SIGTERM)  # what the kernel does at the worst instant
            return item

    def loop() -> Any:
        yield ["a", "b"]

    driver: Driver[str] = Driver(loop(), name="test-take", room_at=-1, on_room=lambda: None)
    with interrupts():
        driver.take()  # started, "a" taken
        driver._handoff = SignalAsTaken(driver._handoff)
        with pytest.raises(Interrupted):
            driver.take()
        driver._handoff = deque(driver._handoff)
        assert driver.take() == "b"
    driver.join()


def test_a_signal_of_an_ended_interrupts_block_is_not_taken_for_a_later_ctrl_c() -> None:
    """A SIGTERM that ended one ``interrupts()`` block (a command run in-process, a test) is that block's: a bare
    KeyboardInterrupt raised later, with Python's own handler back, stays a Ctrl-C (a batch's cancelled tasks
    said "SIGTERM to spoolparse" for it)."""
    from spoolparse._signals import Interrupted, as_interrupted, interrupts

    with pytest.raises(Interrupted), interrupts():
        signal.raise_signal(signal.SIGTERM)
    later = KeyboardInterrupt()
    assert as_interrupted(later) is later


# A library's process: Python's own SIGINT handler. A timer raises SIGINT at instants it chooses (only while
# ``ARMED``), so a signal lands while the handlers are being changed as often as anywhere else.
_TIMER_SIGINTS = r"""
import random, signal
ARMED = [False]
LEFT = [0]
def fire(*a):
    if ARMED[0] and LEFT[0] > 0:
        LEFT[0] -= 1
        signal.raise_signal(signal.SIGINT)
signal.signal(signal.SIGALRM, fire)
"""

_HANDLERS_AFTER_CUT_BLOCKS = _TIMER_SIGINTS + r"""
import os, time
from spoolparse._signals import deferred
signal.setitimer(signal.ITIMER_REAL, 0.0001, 0.0001)
cut = 0
for _ in range(5000):
    try:
        LEFT[0] = 1
        ARMED[0] = True
        with deferred():
            pass
    except KeyboardInterrupt:
        cut += 1
    finally:
        ARMED[0] = False
signal.setitimer(signal.ITIMER_REAL, 0)
print(cut, flush=True)
os.kill(os.getpid(), signal.SIGTERM)  # the default action: the process ends
time.sleep(2)
print("alive", flush=True)
"""


def test_a_signal_while_a_block_puts_the_handlers_back_leaves_none_of_its_own() -> None:
    """A SIGINT raised by its handler, put back first, cut the putting back of the others short: SIGTERM, SIGHUP
    and SIGQUIT kept the block's handler, and a SIGTERM to the process was swallowed, for good."""
    p = subprocess.run([sys.executable, "-c", _HANDLERS_AFTER_CUT_BLOCKS], capture_output=True, text=True,
                       timeout=120, check=False)
    lines = p.stdout.split()
    assert lines and int(lines[0]) > 100, p.stderr  # many blocks were cut by a signal: the case was there
    assert p.returncode == -signal.SIGTERM and "alive" not in lines, (p.returncode, p.stdout, p.stderr[-2000:])


_TWO_SIGINTS_IN_RUN = _TIMER_SIGINTS + r"""
import os, time
import spoolparse

def sleepers():
    out = []
    for p in os.listdir("/proc"):
        try:
            if p.isdigit() and open(f"/proc/{p}/cmdline", "rb").read().split(b"\0")[:2] == [b"sleep", b"31.5"] \
                    and open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[0] != "Z":
                out.append(int(p))
        except OSError:
            continue
    return out

# everything imported first: a SIGINT raised inside orjson's module init (its first import) crashes the
# interpreter, whoever imports it; the seams under test are the cleanup's
spoolparse.run(["true"], allow_empty_answer=True)
left_running = 0
for _ in range(60):
    LEFT[0] = 2
    signal.setitimer(signal.ITIMER_REAL, 0.05, random.uniform(0.00005, 0.0003))
    try:
        ARMED[0] = True
        spoolparse.run(["sleep", "31.5"], timeout=5)
    except KeyboardInterrupt:
        pass
    finally:
        ARMED[0] = False
        signal.setitimer(signal.ITIMER_REAL, 0)
    time.sleep(0.02)
    pids = sleepers()
    left_running += bool(pids)
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
print(left_running)
"""


@pytest.mark.slow
def test_two_sigints_in_quick_succession_never_leave_a_runs_child_running() -> None:
    """The second SIGINT landed before run()'s cleanup held the signals (as its block began): the cleanup was
    cut short, and the child went on running, unowned (88% of tries with the two 0.05-0.3 ms apart)."""
    p = subprocess.run([sys.executable, "-c", _TWO_SIGINTS_IN_RUN], capture_output=True, text=True, timeout=300,
                       check=False)
    assert p.returncode == 0 and p.stdout.split() == ["0"], (p.stdout, p.stderr[-2000:])


def test_a_signal_held_by_a_block_is_raised_even_when_another_cuts_the_putting_back_short(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A SIGINT taken by its handler the instant it is back cut the putting back of the others short, and the
    SIGTERM the block held was never raised again (the process went on, its SIGTERM swallowed)."""
    import types

    from spoolparse import _signals

    real = signal
    raised_at: list[int] = []

    def put_back_then_sigint(sig: int, handler: Any) -> Any:
        old = real.signal(sig, handler)
        if sig == real.SIGINT and handler is real.default_int_handler and not raised_at:
            raised_at.append(sig)
            real.raise_signal(real.SIGINT)  # comes now: the handler just put back takes it
        return old

    held: list[int] = []
    saved_term = real.signal(real.SIGTERM, lambda signum, frame: held.append(signum))
    others = [real.SIGINT, real.SIGTERM, real.SIGHUP, real.SIGQUIT]
    before = [real.getsignal(s) for s in others]
    try:
        fake = types.SimpleNamespace(**{k: getattr(real, k) for k in dir(real) if not k.startswith("__")})
        fake.signal = put_back_then_sigint
        monkeypatch.setattr(_signals, "signal", fake)
        with pytest.raises(KeyboardInterrupt), _signals.deferred():
            real.raise_signal(real.SIGTERM)  # held by the block
        assert raised_at == [real.SIGINT]
        assert held == [real.SIGTERM]  # raised again, to the handler put back
        assert [real.getsignal(s) for s in others] == before  # every one put back all the same
    finally:
        real.signal(real.SIGTERM, saved_term)


def test_a_ctrl_c_during_runs_cleanup_is_raised_and_the_cleanup_runs_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The cleanup begins again only for a signal that came before it held the signals: one held while it ran
    is raised as before (it was swallowed, the cleanup run twice, when the run failed for another reason)."""
    import spoolparse
    import spoolparse.child as child_mod

    real, calls = child_mod.Child.kill_now, [0]

    def kill_now(self: Any) -> None:
        calls[0] += 1
        if calls[0] == 1:
            signal.raise_signal(signal.SIGINT)  # the user's Ctrl-C, during the held cleanup
        real(self)

    monkeypatch.setattr(child_mod.Child, "kill_now", kill_now)

    def on_start(child: Any) -> None:
        raise ValueError("hook failed")

    with pytest.raises(KeyboardInterrupt) as caught:
        spoolparse.run(["sleep", "5"], on_start=on_start)
    assert isinstance(caught.value.__context__, ValueError) and calls[0] == 1


def test_a_cleanup_that_raises_keyboardinterrupt_itself_is_not_begun_again(monkeypatch: pytest.MonkeyPatch) -> None:
    import spoolparse
    import spoolparse.process as process_mod

    real, calls = process_mod._end, [0]

    def end(*args: Any, **kw: Any) -> None:
        calls[0] += 1
        real(*args, **kw)
        raise KeyboardInterrupt  # a listener's, a provider's: not a signal before the block

    monkeypatch.setattr(process_mod, "_end", end)

    def on_start(child: Any) -> None:
        raise ValueError("hook failed")

    with pytest.raises(KeyboardInterrupt):
        spoolparse.run(["sleep", "5"], on_start=on_start)
    assert calls[0] == 1
