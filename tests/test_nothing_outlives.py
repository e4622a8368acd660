"""Every way spoolparse ends ends its agents too, and loses no outcome that was earned.

Real processes throughout: ``spoolparse run`` and ``spoolparse batch`` as
subprocesses, agents that leave a grandchild behind and one that calls
``setsid``, and ``/proc`` read for survivors (every descendant carries a
marker in its environment, escaped ones included).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from .helpers import ANSWERS, as_from_a_terminal
from .runner_support import escapee_tag, escaping, marked_pids, marker, sleeping, wait_for, wait_gone

CLI = [sys.executable, "-m", "spoolparse"]
#: Set by tests/vm/run_cgroup2.py in the v2 kernel's guest, where every step is emulated and slow.
IN_VM = os.environ.get("SPOOLPARSE_VM") == "1"
STARTED = '{"type":"thread.started","thread_id":"t1"}'
#: An agent that has started (one event), with a grandchild in its group and one that escaped it.
AGENT = f"echo '{STARTED}'; sleep 300 & setsid sleep 301 & wait"




def _sleepers(token: str) -> list[int]:
    """The agent's two sleeps (spoolparse and its guardian carry the marker too: they are not counted)."""
    found = []
    for pid in marked_pids(token):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if f.read().startswith(b"sleep\0"):
                    found.append(pid)
        except OSError:
            pass
    return found


def _start_run(env: dict[str, str], *extra: str, agent: str = AGENT) -> subprocess.Popen[bytes]:
    # the signals are sent to spoolparse alone, as a supervisor or `kill PID` would
    return subprocess.Popen(
        [*CLI, "run", *extra, "--", "sh", "-c", agent],
        env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=as_from_a_terminal,
    )


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT])
def test_run_ends_its_agent_prints_the_summary_and_exits_128_plus_n(sig: signal.Signals) -> None:
    token, env = marker()
    p = _start_run(env)
    try:
        assert wait_for(lambda: len(_sleepers(token)) == 2), marked_pids(token)  # the agent is under way
        p.send_signal(sig)
        out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 128 + sig, err
    summary = json.loads(out)
    assert summary["ok"] is False
    assert summary["error"].startswith(f"interrupted by {sig.name}"), summary["error"]
    assert summary["session_id"] == "t1"  # what was read before the signal is kept
    assert err.decode().strip().splitlines()[-1] == f"spoolparse: error: interrupted by {sig.name}"
    assert b"Traceback" not in err
    assert wait_gone(token) == []


def _kill_9_once_the_agent_is_under_way(
    agent: str, start: Callable[[dict[str, str], str], subprocess.Popen[bytes]] | None = None
) -> list[int]:
    """``spoolparse run -- sh -c AGENT`` (or ``start(env, AGENT)``), ``kill -9`` once both its sleeps run;
    what is left of them after 5 s."""
    token, env = marker()
    p = start(env, agent) if start is not None else _start_run(env, agent=agent)
    _kill_9_when(p, lambda: len(_sleepers(token)) == 2, lambda: marked_pids(token))
    return wait_gone(token, timeout=5.0)


def _kill_9_when(p: subprocess.Popen[bytes], ready: Callable[[], bool], seen: Callable[[], object],
                 timeout: float = 30.0) -> None:
    """``kill -9`` of ``p`` once ``ready()`` (``seen()`` says what was there if it never is); never left
    running."""
    try:
        assert wait_for(ready, timeout=timeout), seen()
        p.kill()
        p.wait(10)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_kill_9_of_run_takes_its_agents_with_it() -> None:
    assert _kill_9_once_the_agent_is_under_way(AGENT) == []


@pytest.mark.slow  # several seconds: kept out of the quick subset
def test_ctrl_c_at_any_instant_leaves_no_agent_and_no_noise() -> None:
    rng = random.Random(1234)
    for _ in range(12):
        token, env = marker()
        p = _start_run(env)
        time.sleep(rng.uniform(0.0, 0.6))  # from before the interpreter is up to after the agent started
        p.send_signal(signal.SIGINT)
        try:
            try:
                _, err = p.communicate(timeout=15)
            except subprocess.TimeoutExpired as e:
                # Inside CPython's import machinery, before any of our code runs, a KeyboardInterrupt can land
                # in a weakref callback, which swallows it ("Exception ignored in ..."): that Ctrl-C is lost
                # and the run goes on, as the README says. A second one is then ours to handle.
                lost = e.stderr or b""
                assert _swallowed_while_loading(lost.decode()), lost
                p.send_signal(signal.SIGINT)
                _, err = p.communicate(timeout=30)
                assert p.returncode == 130 and err.endswith(b"spoolparse: error: interrupted by SIGINT\n"), err
                err = b""  # what the second Ctrl-C printed was checked; the lost one's message is CPython's
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        assert wait_gone(token, timeout=5.0) == [], err
        assert b"Exception ignored" not in err, err
        if b"Traceback" in err:  # Python was still loading: its own exit, and nothing of ours had started
            assert _while_loading(err.decode()), err
        elif p.returncode == -signal.SIGINT:  # before Python set its own handler: the default action
            assert err == b""
        else:
            assert p.returncode == 130, (p.returncode, err)


def _swallowed_while_loading(err: str) -> bool:
    """CPython's own report of a KeyboardInterrupt swallowed by an import-machinery weakref callback."""
    return (err.startswith("Exception ignored in: <function ")
            and '  File "<frozen importlib._bootstrap>"' in err and err.rstrip().endswith("KeyboardInterrupt:"))


def _while_loading(err: str) -> bool:
    """A traceback of a Ctrl-C while Python was still loading modules: only import-time frames.

    Until the command's code runs there is no handler of ours (nor anything started to end), and Python
    prints its own traceback; the README says so. A frame inside a function of ours is a failure.
    """
    frames = re.findall(r'^  File "([^"]+)", line \d+, in (\S+)$', err, re.M)
    loading = False  # inside the body of one of our modules being imported (not __main__, the command's)
    for path, fn in frames:
        if "/spoolparse/" not in path:
            continue
        if fn == "<module>":
            loading = loading or not path.endswith("/__main__.py")
        # a class body runs as its module loads (our classes are CamelCase, functions are not); a function
        # is the module's own work as it loads (a table built at import) only below a module being loaded
        elif not fn[:1].isupper() and not loading:
            return False
    return bool(frames)


def _tasks(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _ids(out: bytes) -> list[str]:
    return [json.loads(line)["id"] for line in out.splitlines() if line.strip()]


@pytest.mark.slow
def test_kill_9_of_an_ordered_batch_then_resume_loses_no_outcome(tmp_path: Path) -> None:
    """Tasks that finished while waiting for an earlier one were not printed: resume must run them."""
    token, env = marker()
    flag = tmp_path / "go"
    log = tmp_path / "jobs.ndjson"
    slow = ["sh", "-c", f'test -e "{flag}" || sleep 60; {ANSWERS[2]}']
    ids = [f"t{i}" for i in range(6)]
    rows = [{"id": ids[0], "cmd": slow, "env": env}] + [{"id": i, "cmd": ANSWERS, "env": env} for i in ids[1:]]
    tasks = _tasks(tmp_path / "t.jsonl", rows)
    argv = [*CLI, "batch", str(tasks), "-j", "6", "--ordered", "--joblog", str(log)]
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=as_from_a_terminal)
    try:
        # t0 runs; the quick ones, started beside it, end meanwhile and wait for it to be printed
        assert wait_for(lambda: len(marked_pids(token)) >= 2)
        time.sleep(1.5)
        p.kill()
        first, _ = p.communicate(timeout=10)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert wait_gone(token, timeout=5.0) == []  # t0's agent died with its batch
    flag.touch()
    again = subprocess.run([*argv, "--resume"], capture_output=True, timeout=60)
    assert again.returncode == 0, again.stderr
    printed = _ids(first) + _ids(again.stdout)
    assert sorted(printed) == sorted(ids), (first, again.stdout)  # each exactly once, none lost


def test_resume_skips_exactly_what_was_printed(tmp_path: Path) -> None:
    log = tmp_path / "jobs.ndjson"
    tasks = _tasks(tmp_path / "t.jsonl", [{"id": f"q{i}", "cmd": ANSWERS} for i in range(4)])
    first = subprocess.run([*CLI, "batch", str(tasks), "--joblog", str(log)], capture_output=True, timeout=60)
    assert first.returncode == 0 and len(_ids(first.stdout)) == 4
    again = subprocess.run([*CLI, "batch", str(tasks), "--joblog", str(log), "--resume"],
                           capture_output=True, timeout=60)
    assert again.returncode == 0 and _ids(again.stdout) == []


def test_an_interrupt_caught_inside_exec_still_exits_130(tmp_path: Path) -> None:
    """CPython marks a KeyboardInterrupt raised inside ``exec()`` of a string (dataclasses build their
    methods that way, so a Ctrl-C while a module loads lands there) as unhandled, and at exit kills the
    process with SIGINT, even though the command caught it and printed its message. Run with ``-m``, as
    ``python -m spoolparse`` is (a ``-c`` or script exit takes another path)."""
    (tmp_path / "ctrl_c_in_exec.py").write_text(
        "import spoolparse.cli as c\n"
        "def boom(argv): exec('raise KeyboardInterrupt')\n"
        "c._main = boom\n"
        "raise SystemExit(c.main(['parse', '-']))\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    p = subprocess.run([sys.executable, "-m", "ctrl_c_in_exec"], capture_output=True, timeout=60, env=env,
                       preexec_fn=as_from_a_terminal)
    assert (p.returncode, p.stderr) == (130, b"spoolparse: error: interrupted\n")


def test_kill_9_right_after_the_spawn_takes_the_agents_with_it() -> None:
    """The agent's first act stops spoolparse (as a busy host can leave it unscheduled right after the fork),
    then starts its children; ``kill -9`` then must still take them all, so the agent's group has to be
    known to the guardian before the agent runs anything."""
    assert _kill_9_once_the_agent_is_under_way(f"kill -STOP $PPID; {AGENT}") == []


class _Owner:
    def __init__(self) -> None:
        self.calls: list[tuple[str, int, list[str]]] = []

    def hold(self, pgid: int, cgroups: list[str]) -> None:
        self.calls.append(("hold", pgid, cgroups))

    def release(self, pgid: int | None, cgroups: list[str]) -> None:
        self.calls.append(("release", pgid, cgroups))


@pytest.mark.parametrize("argv", [ANSWERS, ["/nonexistent/agent"]])
def test_the_child_registers_its_own_group_and_a_failed_exec_is_taken_back(argv: list[str]) -> None:
    from typing import cast

    from spoolparse._os.guardian import Guardian, Registration

    r, w = os.pipe()
    owner = _Owner()
    reg = Registration(cast(Guardian, owner), w, ["/sys/fs/cgroup/pids/x"])
    try:
        with reg:
            try:
                proc: subprocess.Popen[bytes] | None = subprocess.Popen(argv, start_new_session=True,
                                                                         preexec_fn=reg)
            except FileNotFoundError:
                proc = None
        reg.done(proc.pid if proc is not None else None)
        message = os.read(r, 4096)
    finally:
        os.close(r)
        os.close(w)
    pid = int(message.split(b"\n")[0].removeprefix(b"+g "))
    assert message == b"+g %d\n+c /sys/fs/cgroup/pids/x\n" % pid  # the group, before the exec
    if proc is not None:
        proc.wait()
        assert pid == proc.pid and owner.calls == []
    else:  # the exec failed: that number is free again, so the guardian must forget it (the cgroup stays held
        # until whoever removes it finds it gone)
        assert owner.calls == [("release", pid, [])]


#: An agent that reports its parent-death signal, its open descriptors, what its stdin is and its owner mark.
_INTROSPECT = [
    sys.executable, "-c",
    "import ctypes, json, os\n"
    "sig = ctypes.c_int(0)\n"
    "ctypes.CDLL(None, use_errno=True).prctl(2, ctypes.byref(sig), 0, 0, 0)\n"  # PR_GET_PDEATHSIG
    "fds = sorted(int(n) for n in os.listdir('/proc/self/fd'))\n"
    "cgroups = open('/proc/self/cgroup').read().splitlines()\n"
    "print(json.dumps({'type': 'result', 'result': json.dumps({'deathsig': sig.value, 'fds': fds,"
    " 'stdin': os.readlink('/proc/self/fd/0'), 'owner': os.environ.get('SPOOLPARSE_OWNER'), 'cgroups': cgroups})}))\n",
]


@pytest.mark.parametrize(
    ("given", "containment"),
    [(None, None), (b"prompt", None), (None, "auto"), (b"prompt", "auto")],
    ids=["direct", "direct-input", "cgroup", "cgroup-input"],
)
def test_every_way_of_starting_marks_the_agent_and_gives_it_nothing_of_ours(
    given: bytes | None, containment: str | None
) -> None:
    """No cgroup to join: the direct start (vfork, one exec, no parent-death signal: the owner mark covers
    the instant before the guardian holds the group). A cgroup v1: the joined start, the same one exec, the
    child born in its cgroup (the guardian holds the cgroup before the fork). A cgroup v2 with stdin
    /dev/null: the gated start (a shell joins it and waits for the guardian to hold it, then execs the
    agent); with input: the preexec_fn start, the one with a parent-death signal."""
    import spoolparse
    from spoolparse._os.guardian import guardian

    calls: list[tuple[list[str], dict[str, Any]]] = []
    real = subprocess.Popen

    def spy(*a: Any, **kw: Any) -> Any:
        if a[0][-1] == _INTROSPECT[-1]:  # the agent's start (the guardian's own may come first)
            calls.append((a[0], kw))
        return real(*a, **kw)

    subprocess.Popen = spy  # type: ignore[misc]  # every start's Popen, wherever it is called from
    try:
        with spoolparse.run(_INTROSPECT, input=given, containment=containment) as r:  # type: ignore[arg-type]
            assert r.ok, r.error
            seen = json.loads(r.text or "")
    finally:
        subprocess.Popen = real  # type: ignore[misc]
    (argv, kw), = calls  # one start of the agent
    own = any(re.search(r"/spoolparse-\d+-\d+$", c) for c in seen["cgroups"])
    if containment is not None and not own:
        pytest.skip("needs a writable cgroup (root, a cgroup v1 or v2 hierarchy) for the cgroup starts")
    v1 = any(c.split(":")[1] == "memory" and "/spoolparse-" in c for c in seen["cgroups"])  # N:memory:PATH
    if kw["preexec_fn"] is not None:
        way = "preexec"
    elif argv == _INTROSPECT:  # the agent is what is exec'd: one exec
        way = "direct" if not own else "joined"
    else:
        way = "gated"
    if containment is None:
        assert way == "direct" and not own
    elif v1:
        assert way == "joined", (argv, kw)
    else:
        assert way == ("gated" if given is None else "preexec")
    assert seen["owner"] == guardian._owner and len(seen["owner"]) == 16
    assert seen["deathsig"] == (signal.SIGKILL if way == "preexec" else 0)
    assert seen["fds"][:3] == [0, 1, 2] and len(seen["fds"]) == 4  # the fourth: listdir's own
    assert (seen["stdin"] == "/dev/null") == (given is None)


_HELD_BY_MARK_ALONE = """
import sys
import spoolparse
from spoolparse._os.guardian import guardian
guardian.hold = lambda *a: None  # as if we were killed after the fork, before telling the guardian
spoolparse.run(["sh", "-c", sys.argv[1]], containment=None)
"""


def test_kill_9_before_a_direct_start_is_held_takes_the_agents_with_it() -> None:
    """A direct start is held by the guardian only after the fork returns; the owner mark covers a child
    the guardian was never told about: its agent, the agent's group and the sleep that left it."""

    def start(env: dict[str, str], agent: str) -> subprocess.Popen[bytes]:
        return subprocess.Popen([sys.executable, "-c", _HELD_BY_MARK_ALONE, agent], env={**os.environ, **env})

    assert _kill_9_once_the_agent_is_under_way(AGENT, start) == []


def test_a_joined_start_leaves_the_starting_thread_where_it_was() -> None:
    """The thread that forks steps into the child's cgroups and back: the child is in its task's cgroup, and
    after the start the thread is where it was."""
    import spoolparse

    def mine() -> str:
        with open("/proc/thread-self/cgroup") as f:
            return f.read()

    before = mine()
    with spoolparse.run(["sh", "-c", "cat /proc/self/cgroup >&2"], containment="auto", allow_empty_answer=True) as r:
        if not any(":memory:" in line and "/spoolparse-" in line for line in r.stderr_tail.splitlines()):
            pytest.skip("needs a task cgroup v1 (root on a cgroup v1 host)")
        assert mine() == before


def test_the_main_thread_never_steps_into_a_tasks_cgroup(monkeypatch: pytest.MonkeyPatch) -> None:
    """cgroup v1 charges the memory of the whole process to its main thread's cgroup: a joined start from the
    main thread (``run``) put all of spoolparse under the task's memory limit while it forked. It is made by
    the spawner thread instead."""
    import threading

    import spoolparse
    from spoolparse._os import joined

    movers: list[bool] = []
    real = joined._move

    def move(tasks: str, tid: bytes) -> None:
        movers.append(threading.current_thread() is threading.main_thread())
        real(tasks, tid)

    monkeypatch.setattr(joined, "_move", move)
    with spoolparse.run(["sh", "-c", "cat /proc/self/cgroup >&2"], containment="auto", allow_empty_answer=True) as r:
        if not any(":memory:" in line and "/spoolparse-" in line for line in r.stderr_tail.splitlines()):
            pytest.skip("needs a task cgroup v1 (root on a cgroup v1 host)")
    assert movers and not any(movers)  # joined and came back, never by the main thread


_JOINED_NOT_HELD = """
import sys
import spoolparse
from spoolparse._os.guardian import guardian
guardian.hold = lambda *a: None  # as if we were killed after the fork, before telling the guardian of the group
spoolparse.run(sys.argv[1:], containment="auto")
"""


@pytest.mark.slow
def test_kill_9_before_a_joined_start_is_held_takes_even_an_unmarked_escapee(tmp_path: Path) -> None:
    """A start with no gate is held by the guardian only after the fork returns: what the agent starts at
    once out of its session with an empty environment (no group, no mark) is caught by its cgroup, which
    the guardian was told of before the fork."""
    _need_a_task_cgroup()
    tag = escapee_tag()
    started = tmp_path / "escapee-pid"
    argv = escaping(tag, "exec sleep 300", started)
    p = subprocess.Popen([sys.executable, "-c", _JOINED_NOT_HELD, *argv], stdout=subprocess.DEVNULL)
    _kill_9_when(p, lambda: started.exists() and sleeping(tag) != [], lambda: sleeping(tag), timeout=60)
    assert wait_for(lambda: not sleeping(tag), timeout=10), sleeping(tag)


def test_a_gate_never_opened_runs_nothing(tmp_path: Path) -> None:
    """We died between the fork and opening the gate: the child reads end of file and runs nothing."""
    from spoolparse._os.spawn import Gate, gated_argv

    marker_file = tmp_path / "ran"
    argv = gated_argv(["touch", str(marker_file)], [])
    if argv is None:
        pytest.skip("needs /bin/sh; without it the preexec_fn start is used")
    gate = Gate()
    proc = subprocess.Popen(argv, stdin=gate.r, start_new_session=True)
    gate.close()
    assert proc.wait(timeout=30) == 126
    assert not marker_file.exists()
    gate = Gate()
    proc = subprocess.Popen(argv, stdin=gate.r, start_new_session=True)
    gate.started()
    time.sleep(0.2)
    assert proc.poll() is None and not marker_file.exists()  # waiting at the gate
    gate.open()
    assert proc.wait(timeout=30) == 0 and marker_file.exists()


def test_a_ctrl_c_while_loading_is_told_from_one_in_our_code() -> None:
    def tb(*frames: tuple[str, str]) -> str:
        body = "".join(f'  File "{path}", line 1, in {fn}\n    x\n' for path, fn in frames)
        return f"Traceback (most recent call last):\n{body}KeyboardInterrupt\n"

    run = ("/usr/lib/python3.11/runpy.py", "_run_module_as_main")
    main = ("/x/spoolparse/__main__.py", "<module>")
    # a table built by a function as its module loads (what a Ctrl-C 0.1 s in once hit)
    assert _while_loading(tb(run, main, ("/x/spoolparse/__init__.py", "<module>"),
                             ("/x/spoolparse/types.py", "<module>"), ("/x/spoolparse/types.py", "_event_fields"),
                             ("/x/spoolparse/types.py", "<genexpr>")))
    assert _while_loading(tb(run, main, ("/x/spoolparse/lines.py", "<module>"), ("/x/spoolparse/lines.py", "Scanner")))
    # the command's own code, and a module it imports lazily from there: ours to handle, never a traceback
    assert not _while_loading(tb(run, main, ("/x/spoolparse/cli.py", "main")))
    assert not _while_loading(tb(run, main, ("/x/spoolparse/cli.py", "main"), ("/x/spoolparse/process.py", "<module>")))


# -- a descendant that leaves its session and clears its environment -------------------------------------------


def _need_a_task_cgroup() -> None:
    """Skip where no task cgroup can be made (what escapes there is the warning's case, tested apart)."""
    from spoolparse._os.cgroup import Placement

    where = Placement.detect()
    if where.kind is None:
        pytest.skip(f"needs a cgroup of its own for a task (root, or a delegated cgroup v2): none here, {where.why}")


def _cli_in_a_fork(argv: list[str], out: Path, err: Path) -> int:
    """``spoolparse ARGV`` in a forked copy of this process (no interpreter start: seconds each under the v2
    VM's emulation), its stdout and stderr in files, the ending signals as a terminal leaves them; its pid."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the command
        code = 99
        try:
            for fd, path in ((1, out), (2, err)):
                os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), fd)
            os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
            sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
            sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
            signal.signal(signal.SIGINT, signal.default_int_handler)
            for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
                signal.signal(sig, signal.SIG_DFL)
            from spoolparse.cli import main

            code = main(argv)
        except BaseException:
            import traceback

            traceback.print_exc()
        finally:
            with contextlib.suppress(Exception):
                sys.stdout.flush()
                sys.stderr.flush()
            os._exit(code)
    return pid


def _wait_status(pid: int, timeout: float) -> int:
    """The exit status of a forked command (128 + N for signal N), killing it after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)
        if time.monotonic() >= deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise AssertionError(f"the batch did not end within {timeout} s")
        time.sleep(0.05)


#: Every way a batch ends: its task's own exit, its --timeout, each ending signal, kill -9.
ENDINGS = ["exit", "timeout", "SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGKILL"]


@pytest.mark.cgroup2
@pytest.mark.parametrize("ending", ENDINGS)
def test_a_descendant_that_leaves_its_session_and_clears_its_environment_ends_with_the_batch(
    ending: str, tmp_path: Path
) -> None:
    """``setsid -f env -i sleep …`` carries neither the group nor any mark: only the task's cgroup (made for
    every task, limit or not) holds it. Gone when the batch is over, whatever ended it."""
    _need_a_task_cgroup()
    tag = escapee_tag()
    started = tmp_path / "escapee-pid"  # written by the escapee before it execs the sleep
    then = "" if ending == "exit" else "exec sleep 300"
    tasks = _tasks(tmp_path / "t.jsonl", [{"id": "t", "cmd": escaping(tag, then, started)}])
    out, err = tmp_path / "out", tmp_path / "err"
    # the timeout is long enough for the escape to happen first (an emulated v2 kernel takes its time)
    extra = ["--timeout", "10" if IN_VM else "1"] if ending == "timeout" else []
    pid = _cli_in_a_fork(["batch", str(tasks), "--grace", "0.5", *extra], out, err)
    try:
        if ending.startswith("SIG"):
            assert wait_for(lambda: sleeping(tag), timeout=120), err.read_text()  # the escapee is under way
            os.kill(pid, getattr(signal, ending))
        status = _wait_status(pid, 120)
    finally:
        with contextlib.suppress(ProcessLookupError, ChildProcessError):
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    assert started.exists(), f"the escapee never started ({ending}): {err.read_text()}"
    if ending == "SIGKILL":
        assert status == 137
        assert wait_for(lambda: not sleeping(tag), timeout=30), sleeping(tag)  # the guardian's kill of its cgroup
        return
    assert sleeping(tag) == [], f"outlived the batch ({ending}): {sleeping(tag)}"
    outcome = json.loads(out.read_text())
    if ending.startswith("SIG"):
        assert status == 128 + getattr(signal, ending), err.read_text()
        assert outcome["verdict"] == "cancelled"
    else:
        assert outcome["verdict"] == ("timeout" if ending == "timeout" else "ok"), outcome
        assert outcome["enforcement"] in ("cgroup1", "cgroup2"), outcome


def test_the_reported_escapee_is_gone_once_the_batch_ends() -> None:
    """The report's own line, piped into ``spoolparse batch -``: the sleep outlived the batch."""
    _need_a_task_cgroup()
    tag = escapee_tag()
    line = json.dumps({"id": "t", "cmd": ["sh", "-c", f"setsid -f env -i sleep {tag}; echo done"]})
    p = subprocess.run([*CLI, "batch", "-"], input=line.encode() + b"\n", capture_output=True, timeout=120)
    assert json.loads(p.stdout)["id"] == "t", p.stderr
    assert sleeping(tag) == []


@pytest.mark.parametrize("api", ["run_many", "arun_many"])
def test_run_many_and_arun_many_end_such_a_descendant_too(api: str) -> None:
    import asyncio

    from spoolparse.runner import Task, arun_many, run_many

    _need_a_task_cgroup()
    tag = escapee_tag()
    tasks = [Task(argv=escaping(tag), id="t")]
    if api == "run_many":
        outs = list(run_many(tasks, grace=0.5))
    else:

        async def collect() -> list[Any]:
            return [o async for o in arun_many(tasks, grace=0.5)]

        outs = asyncio.run(collect())
    assert [o.id for o in outs] == ["t"] and outs[0].enforcement in ("cgroup1", "cgroup2"), outs
    assert sleeping(tag) == []


def test_where_no_cgroup_can_be_made_the_batch_says_once_what_escapes(tmp_path: Path) -> None:
    """As a user with no cgroup of her own to write (not root, no delegation): one warning, before any task,
    naming why and what then outlives a task."""
    if os.geteuid() != 0:
        pytest.skip("runs the batch as another user (nobody): needs root")
    import shutil
    import tempfile

    shared = Path(tempfile.mkdtemp(prefix="spoolparse-test-"))  # pytest's own is its user's alone
    os.chmod(shared, 0o777)
    try:
        _says_once_as_nobody(shared)
    finally:
        shutil.rmtree(shared)


def _says_once_as_nobody(tmp_path: Path) -> None:
    import spoolparse.cli
    from spoolparse.runner import run_many

    # every module the batch loads, loaded now: nobody may not read the interpreter's own (under /root here)
    spoolparse.cli.build_parser("batch")
    assert [o.verdict for o in run_many([ANSWERS])] == ["ok"]
    tasks = _tasks(tmp_path / "t.jsonl", [{"id": f"t{i}", "cmd": ANSWERS} for i in range(3)])
    out, err = tmp_path / "out", tmp_path / "err"
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the batch, as nobody
        try:
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            os.environ["TMPDIR"] = "/tmp"
        finally:
            os._exit(_wait_status(_cli_in_a_fork(["batch", str(tasks), "-j", "1"], out, err), 120))
    assert _wait_status(pid, 180) == 0, err.read_text()
    said = err.read_text()
    assert said.count("no cgroup can be made for the tasks") == 1, said
    assert "setsid, then env -i or sudo" in said and "outlives it" in said, said
    assert sorted(json.loads(line)["id"] for line in out.read_text().splitlines()) == ["t0", "t1", "t2"]
    assert {json.loads(line)["enforcement"] for line in out.read_text().splitlines()} == {"none"}


def test_the_library_warns_once_per_process_not_once_per_batch(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """``calibrate`` runs a batch per level, a service may run many: the warning is said once, per reason."""
    import logging

    from spoolparse._os import cgroup
    from spoolparse.runner import run_many

    why = f"no cgroup here, for {uuid.uuid4().hex}"
    monkeypatch.setattr(cgroup.Placement, "detect", classmethod(lambda cls: cls(None, why=why)))
    with caplog.at_level(logging.WARNING, logger="spoolparse.runner"):
        for _ in range(3):
            assert [o.enforcement for o in run_many([ANSWERS])] == ["none"]
        assert [o.enforcement for o in run_many([ANSWERS], enforce="watchdog")] == ["none"]
    said = [r.getMessage() for r in caplog.records if "no cgroup can be made" in r.getMessage()]
    assert said == [cgroup.uncontained_note(cgroup.Placement(None, why=why))]


def test_handlers_set_by_a_library_call_are_undone_and_its_bare_interrupt_names_our_signal() -> None:
    """What ``ray.init()`` and Ray's waits do, without Ray: a handler of its own for SIGTERM (put back to ours
    after the call), and our Interrupted turned into a bare KeyboardInterrupt (taken back for the signal)."""
    from spoolparse._signals import Interrupted, as_interrupted, handlers_kept, interrupts

    with interrupts():
        ours = signal.getsignal(signal.SIGTERM)
        with handlers_kept():
            signal.signal(signal.SIGTERM, lambda *_: sys.exit(15))
        assert signal.getsignal(signal.SIGTERM) is ours
        assert not isinstance(as_interrupted(KeyboardInterrupt()), Interrupted)  # no signal of ours came
        try:
            try:
                signal.raise_signal(signal.SIGTERM)
            except Interrupted:
                raise KeyboardInterrupt from None  # as Ray's wait does with what a handler raised inside it
        except KeyboardInterrupt as bare:
            found = as_interrupted(bare)
        assert isinstance(found, Interrupted) and found.signum == signal.SIGTERM and str(found).endswith("SIGTERM")
