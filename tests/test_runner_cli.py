"""``spoolparse batch`` and ``spoolparse calibrate`` as a user runs them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from spoolparse.runner.joblog import finished_ok

from .helpers import ANSWERS, as_from_a_terminal
from .runner_support import HOG, MiB, marked_pids, marker, wait_for, wait_gone

CLI = [sys.executable, "-m", "spoolparse"]


def _write_tasks(path: Path, tasks: list[Any]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(t) + b"\n" if not isinstance(t, bytes) else t for t in tasks))
    return path


def _outcomes(stdout: bytes) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in stdout.splitlines()]




def test_batch_prints_one_outcome_per_line_and_exits_1_on_a_failure(tmp_path: Path) -> None:
    tasks = _write_tasks(tmp_path / "t.jsonl", [
        {"id": "ok", "cmd": [*HOG, "--mib", "1"], "memory": "50M"},
        {"id": "bad", "cmd": ["false"]},
        b"{not json\n",
        b"\n",
        {"id": "nocmd"},
        ANSWERS,
    ])
    p = subprocess.run([*CLI, "batch", str(tasks), "-j", "2", "--memory-per-task", "10M"], capture_output=True)
    assert p.returncode == 1, p.stderr
    outs = {o["id"]: o for o in _outcomes(p.stdout)}
    assert len(outs) == len(_outcomes(p.stdout)) == 5
    assert outs["ok"]["verdict"] == "ok" and outs["ok"]["summary"]["text"] == "held 1.0 MiB"
    assert outs["bad"]["verdict"] == "failed"
    assert outs["3"]["verdict"] == "spawn_error" and "not JSON" in outs["3"]["error"]
    assert outs["nocmd"]["verdict"] == "spawn_error"
    assert outs["6"]["verdict"] == "ok"
    assert p.stderr == b""


def test_batch_reads_stdin_and_exits_0_when_all_ok() -> None:
    lines = b"".join(orjson.dumps({"cmd": ANSWERS}) + b"\n" for _ in range(5))
    p = subprocess.run([*CLI, "batch", "-", "-j", "3", "--ordered"], input=lines, capture_output=True)
    assert p.returncode == 0, p.stderr
    assert [o["id"] for o in _outcomes(p.stdout)] == ["1", "2", "3", "4", "5"]


def test_batch_supervises_while_stdin_is_slow_to_give_the_next_task() -> None:
    """``producer | spoolparse batch -``: while the producer is slow to write its next line, the running task's
    timeout still fires on time (stdin is read off the supervising thread). The next line is written only
    once the first task's timeout outcome is out."""
    import select

    p = subprocess.Popen([*CLI, "batch", "-", "-j", "2"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    assert p.stdin is not None and p.stdout is not None
    try:
        p.stdin.write(orjson.dumps({"id": "slow", "cmd": ["sleep", "30"], "timeout": 0.5}) + b"\n")
        p.stdin.flush()
        ready, _, _ = select.select([p.stdout], [], [], 20)
        assert ready, "no outcome while stdin stayed open"
        first = orjson.loads(p.stdout.readline())
        assert (first["id"], first["verdict"]) == ("slow", "timeout")
        p.stdin.write(orjson.dumps({"id": "after", "cmd": ANSWERS}) + b"\n")
        p.stdin.close()
        assert p.stderr is not None
        rest, err = p.stdout.read(), p.stderr.read()
        p.wait(30)
    finally:
        p.kill()
        p.wait()
    assert [(o["id"], o["verdict"]) for o in _outcomes(rest)] == [("after", "ok")]
    assert p.returncode == 1, err


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.parametrize("source", ["stdin", "fifo"])
def test_an_interrupt_while_the_input_is_still_open_ends_cleanly(
    tmp_path: Path, source: str, sig: signal.Signals
) -> None:
    """The input's thread is blocked in a read of the open pipe (or FIFO) when the interrupt comes: the
    batch still ends as interrupted (its outcomes out, exit 128 + N), without hanging on that read nor
    aborting the interpreter at exit over a stream the thread holds."""
    token, env = marker()
    line = orjson.dumps({"id": "a", "cmd": ["sleep", "60"], "env": env}) + b"\n"
    fifo = tmp_path / "tasks.fifo"
    argv = [*CLI, "batch", "-" if source == "stdin" else str(fifo), "-j", "2"]
    if source == "fifo":
        os.mkfifo(fifo)
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         preexec_fn=as_from_a_terminal)
    assert p.stdin is not None
    stdin, writer = p.stdin, None
    try:
        if source == "stdin":
            p.stdin.write(line)
            p.stdin.flush()
        else:
            writer = open(fifo, "wb", buffering=0)  # noqa: SIM115 - kept open, as a producer would
            writer.write(line)
        assert wait_for(lambda: len(marked_pids(token)) >= 1), marked_pids(token)
        p.send_signal(sig)
        stdin, p.stdin = p.stdin, None  # held open through the end, as a producer would (communicate closes it)
        out, err = p.communicate(timeout=20)
    finally:
        stdin.close()
        if writer is not None:
            writer.close()
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 128 + sig, err
    assert [(o["id"], o["verdict"]) for o in _outcomes(out)] == [("a", "cancelled")]
    name = signal.Signals(sig).name
    assert err.decode().strip().splitlines() == [f"spoolparse: error: interrupted by {name}"]
    assert wait_gone(token) == []


def test_batch_usage_errors_are_one_line() -> None:
    for argv in (["batch", "missing.jsonl"], ["batch", "-", "--resume"], ["batch", "-", "--stop-at", "150%"],
                 ["batch", "-", "-j", "0"]):
        p = subprocess.run([*CLI, *argv], input=b"", capture_output=True)
        assert p.returncode == 2, (argv, p.stderr)
        assert len(p.stderr.splitlines()) == 1 and b"Traceback" not in p.stderr


def _interrupt_batch(tmp_path: Path, sig: int) -> None:
    token, env = marker()
    spool = tmp_path / "spool"
    spool.mkdir()
    log = tmp_path / "jobs.ndjson"
    tasks = _write_tasks(tmp_path / "t.jsonl", [
        {"id": f"long{i}", "cmd": [*HOG, "--escape", "--mib", "1", "--hold", "60"], "env": env} for i in range(5)
    ])
    p = subprocess.Popen(
        [*CLI, "batch", str(tasks), "-j", "3", "--enforce", "cgroup", "--joblog", str(log), "--spool-dir", str(spool)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=as_from_a_terminal,
    )
    try:
        # three hogs and their three escaped grandchildren
        assert wait_for(lambda: len(marked_pids(token)) >= 6), marked_pids(token)
        p.send_signal(sig)
        out, err = p.communicate(timeout=20)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 128 + sig, err
    outs = _outcomes(out)
    assert sorted(o["id"] for o in outs) == ["long0", "long1", "long2"]
    assert {o["verdict"] for o in outs} == {"cancelled"}
    name = signal.Signals(sig).name
    # why they were cancelled: the signal spoolparse got, not the SIGTERM it sent them ("killed by SIGTERM")
    assert {o["error"] for o in outs} == {f"cancelled ({name} to spoolparse)"}, outs
    assert err.strip().splitlines()[-1] == f"spoolparse: error: interrupted by {name}".encode()
    assert wait_gone(token) == []
    assert os.listdir(spool) == []
    finals = [json.loads(x) for x in log.read_text().splitlines()]
    assert sorted(r["id"] for r in finals if r["final"]) == ["long0", "long1", "long2"]
    assert {r["error"] for r in finals if r["final"]} == {f"cancelled ({name} to spoolparse)"}
    from spoolparse._os.cgroup import Placement

    where = Placement.detect()
    for parent in {where.memory_parent, where.pids_parent} - {None}:
        assert parent is not None
        assert not [n for n in os.listdir(parent) if n.startswith(f"spoolparse-{p.pid}-")]


def test_ctrl_c_leaves_no_process_no_spool_no_cgroup(tmp_path: Path) -> None:
    _interrupt_batch(tmp_path, signal.SIGINT)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT])
def test_sigterm_hup_and_quit_are_handled_like_ctrl_c(tmp_path: Path, sig: signal.Signals) -> None:
    _interrupt_batch(tmp_path, sig)


def test_resume_after_an_interrupted_batch(tmp_path: Path) -> None:
    flag = tmp_path / "fast-now"
    log = tmp_path / "jobs.ndjson"
    slow = ["sh", "-c", f'test -e "{flag}" || sleep 60; {ANSWERS[2]}']
    tasks = _write_tasks(tmp_path / "t.jsonl", [
        {"id": "q1", "cmd": ANSWERS}, {"id": "s1", "cmd": slow}, {"id": "q2", "cmd": ANSWERS},
        {"id": "s2", "cmd": slow}, {"id": "q3", "cmd": ANSWERS},
    ])
    p = subprocess.Popen([*CLI, "batch", str(tasks), "-j", "5", "--joblog", str(log)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=as_from_a_terminal)
    try:
        assert wait_for(lambda: finished_ok(log) == {"q1", "q2", "q3"})
        p.send_signal(signal.SIGINT)
        out, _ = p.communicate(timeout=20)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 130
    first = {o["id"]: o["verdict"] for o in _outcomes(out)}
    assert first == {"q1": "ok", "q2": "ok", "q3": "ok", "s1": "cancelled", "s2": "cancelled"}
    flag.touch()
    again = subprocess.run([*CLI, "batch", str(tasks), "-j", "5", "--joblog", str(log), "--resume"],
                           capture_output=True, timeout=60)
    assert again.returncode == 0, again.stderr
    assert sorted(o["id"] for o in _outcomes(again.stdout)) == ["s1", "s2"]
    assert finished_ok(log) == {"q1", "q2", "q3", "s1", "s2"}


def test_progress_line_on_request(tmp_path: Path) -> None:
    tasks = _write_tasks(tmp_path / "t.jsonl", [{"cmd": ["sleep", "0.3"]} for _ in range(3)])
    p = subprocess.run([*CLI, "batch", str(tasks), "-j", "2", "--progress", "--allow-empty-answer"],
                       capture_output=True)
    assert p.returncode == 0
    assert b"done 3/3 | running 0 | queued 0 | failed 0 | memory " in p.stderr  # the total: tasks from a file
    assert b"spoolparse: batch: -j 2" in p.stderr


def test_calibrate_measures_the_peak_and_recommends(tmp_path: Path) -> None:
    p = subprocess.run([*CLI, "calibrate", "--max-concurrency", "2", "--", *HOG, "--mib", "20"], capture_output=True)
    assert p.returncode == 0, p.stderr
    report = json.loads(p.stdout)
    assert [lv["concurrency"] for lv in report["levels"]] == [1, 2]
    assert report["per_task_peak"] >= 20 * MiB
    assert report["memory_per_task"] >= report["per_task_peak"] * 1.25 - 1
    assert report["jobs"] >= 1
    assert report["batch_args"] == f"-j {report['jobs']} --memory-per-task {report['memory_per_task'] // MiB}M"
    assert report["levels"][1]["verdicts"] == {"ok": 2}


def test_calibrate_stops_before_pressure_and_reports_failures() -> None:
    from spoolparse.runner.calibrate import calibrate

    from .runner_support import FixedProbe

    # a 100 MiB total: after a ~30 MiB peak, concurrency 4 could pass 85 % and is not tried
    report = calibrate([*HOG, "--mib", "20"], max_concurrency=8, memory_probe=FixedProbe(100 * MiB, 0))
    assert [lv["concurrency"] for lv in report["levels"]] == [1, 2]
    assert "could pass stop_at" in report["stopped"]
    failing = calibrate(["false"], max_concurrency=4, memory_probe=FixedProbe(1 << 40))
    assert failing["failures"] and failing["levels"][0]["verdicts"] == {"failed": 1}


def test_calibrate_records_its_estimate_and_batch_reserves_it_for_that_command(tmp_path: Path) -> None:
    """The estimate was recorded under the program's name: one ``python`` calibration applied to every later
    Python task, whatever the script."""
    from spoolparse.runner import Batch, Task
    from spoolparse.runner.calibrations import command_key, recorded

    from .runner_support import FixedProbe

    path = tmp_path / "calibrations.json"
    env = {**os.environ, "SPOOLPARSE_CALIBRATIONS": str(path)}
    p = subprocess.run([*CLI, "calibrate", "--max-concurrency", "1", "--", *HOG, "--mib", "20"],
                       capture_output=True, env=env)
    assert p.returncode == 0, p.stderr
    report = json.loads(p.stdout)
    key = f"{os.path.basename(HOG[0])} {os.path.basename(HOG[1])} --mib"  # the program, its script, its mode
    assert command_key([*HOG, "--mib", "20"]) == key
    assert report["recorded"] == str(path)
    assert recorded(str(path)) == {key: report["memory_per_task"]}
    # --no-record leaves the file as it was
    again = subprocess.run([*CLI, "calibrate", "--no-record", "--max-concurrency", "1", "--", *ANSWERS],
                           capture_output=True, env=env)
    assert again.returncode == 0 and "recorded" not in json.loads(again.stdout)
    assert set(recorded(str(path))) == {key}
    listed = subprocess.run([*CLI, "calibrate", "--list"], capture_output=True, env=env)
    assert listed.returncode == 0 and listed.stderr == b""
    shown = json.loads(listed.stdout)
    assert shown["path"] == str(path) and list(shown["calibrations"]) == [key]
    assert shown["calibrations"][key]["memory_per_task"] == report["memory_per_task"]

    os.environ["SPOOLPARSE_CALIBRATIONS"], saved = str(path), os.environ["SPOOLPARSE_CALIBRATIONS"]
    try:
        probe = FixedProbe(1 << 40)
        with Batch([], memory_probe=probe) as b:  # no memory_per_task: the record counts
            assert b.estimate_for(Task([*HOG, "--mib", "1"])) == report["memory_per_task"]
            assert b.estimate_for(Task([HOG[0], "other_script.py"])) == 1 << 30  # the same python, another CLI
            assert b.estimate_for(Task(["sleep", "1"])) == 1 << 30  # not calibrated: the default
            assert b.estimate_for(Task(["sleep", "1"], memory=5 << 20)) == 5 << 20  # the task's own first
        with Batch([], memory_per_task=64 << 20, memory_probe=probe) as b:  # given: it wins over the record
            assert b.estimate_for(Task([*HOG, "--mib", "1"])) == 64 << 20
    finally:
        os.environ["SPOOLPARSE_CALIBRATIONS"] = saved


IDENTITIES = {  # a command line, and the identity its calibration is recorded under
    ("/usr/local/bin/codex", "exec", "--json", "fix the bug"): "codex exec",
    ("codex", "exec", "summarise"): "codex exec",
    ("claude", "-p", "--output-format", "stream-json", "--verbose", "…"): "claude -p",
    ("gemini", "-o", "stream-json", "-p", "…"): "gemini -o",
    ("opencode", "run", "--format", "json", "…"): "opencode run",
    ("codex", "What is wrong here?"): "codex",
    ("python3", "-u", "fixtures/fake_codex.py", "--size", "64M"): "python3 fake_codex.py --size",
    ("python", "-m", "agent.cli", "go"): "python -m agent.cli",
    ("sh", "-c", "codex exec …"): "sh -c",
    ("npx", "-y", "@openai/codex", "exec", "…"): "npx codex exec",
    ("env", "-i", "HOME=/h", "claude", "-p", "…"): "env claude -p",
}


@pytest.mark.parametrize("argv", sorted(IDENTITIES))
def test_a_commands_identity_is_its_program_and_the_arguments_that_pick_its_cli(argv: tuple[str, ...]) -> None:
    from spoolparse.runner.calibrations import command_key

    assert command_key(list(argv)) == IDENTITIES[argv]


def test_a_record_of_an_older_spoolparse_is_read_under_its_commands_identity(tmp_path: Path) -> None:
    from spoolparse.runner.calibrations import recorded

    path = tmp_path / "calibrations.json"
    path.write_text(json.dumps({"codex": {"memory_per_task": 5 << 20, "command": ["codex", "exec", "x"]},
                                "bad": {"memory_per_task": -1}, "odd": 7}))
    assert recorded(str(path)) == {"codex exec": 5 << 20}


def _hostile(path: Path, kind: str) -> None:
    if kind == "deep":
        path.write_text("[" * 100_000 + "]" * 100_000)
    elif kind == "deep object":
        path.write_text('{"a":' * 100_000 + "1" + "}" * 100_000)
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "symlink":
        (path.parent / "real.json").write_text(json.dumps({"x": {"memory_per_task": 1 << 20}}))
        path.symlink_to(path.parent / "real.json")
    elif kind == "large":
        path.write_text(json.dumps({"x": {"memory_per_task": 1 << 20, "pad": "x" * (2 << 20)}}))
    elif kind == "not JSON":
        path.write_bytes(b"\xff{")
    elif kind == "another user's":
        if os.geteuid() != 0:
            pytest.skip("needs root to give the file to another user (chown)")
        path.write_text(json.dumps({"x": {"memory_per_task": 1 << 20}}))
        os.chown(path, 65534, 65534)
    elif kind == "directory":
        path.mkdir()


HOSTILE = {"deep": "is not JSON", "deep object": "is not JSON", "fifo": "is not a regular file",
           "symlink": "is a symbolic link", "large": "is larger than 1048576 bytes", "not JSON": "is not JSON",
           "another user's": "is owned by another user (uid 65534)", "directory": "is not a regular file"}


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_a_hostile_calibrations_file_is_a_warning_and_no_calibration(tmp_path: Path, kind: str) -> None:
    """100,000 nested brackets ended the batch with "internal error: RecursionError" (exit 125, nothing run);
    a FIFO in the file's place hung the batch before anything started."""
    path = tmp_path / "calibrations.json"
    _hostile(path, kind)
    env = {**os.environ, "SPOOLPARSE_CALIBRATIONS": str(path)}
    p = subprocess.run([*CLI, "batch", "-"], input=b'{"id":"a","cmd":["true"],"allow_empty_answer":true}\n',
                       capture_output=True, env=env, timeout=60)
    assert p.returncode == 0 and [o["verdict"] for o in _outcomes(p.stdout)] == ["ok"], p.stderr
    err = p.stderr.decode()
    assert err.startswith(f"spoolparse: warning: calibrations file {str(path)!r} {HOSTILE[kind]}"), err
    assert err.endswith(": no calibration is used\n") and err.count("\n") == 1, err
    listed = subprocess.run([*CLI, "calibrate", "--list"], capture_output=True, env=env, timeout=60)
    assert listed.returncode == 0 and json.loads(listed.stdout)["calibrations"] == {}
    assert HOSTILE[kind] in listed.stderr.decode()
    from spoolparse.runner.calibrations import record

    report = {"memory_per_task": 1 << 20, "per_task_peak": 1 << 20, "peak_source": "cgroup", "command": ["x"]}
    if kind in ("not JSON", "deep", "deep object", "large"):  # a regular file of ours that is no record: replaced
        assert record(report, str(path)) == str(path)
        assert json.loads(path.read_text())["x"]["memory_per_task"] == 1 << 20
    else:  # not ours to replace
        with pytest.raises(OSError, match=HOSTILE[kind].replace("(", r"\(").replace(")", r"\)")):
            record(report, str(path))


# -- where calibrations are read and recorded: nobody else can change the way there ------------------------------

#: A directory on the way to the calibrations file, and why it is refused (``None``: read and recorded through):
#: every link and directory on the way must be ours or root's, and a directory not writable by others (or
#: sticky, as /tmp is: then what is ours in it stays ours).
WAY: dict[str, str | None] = {
    "our directory": None,
    "our symlink": None,
    "sticky, writable by all": None,
    "writable by all": "is writable by others (mode 0777)",
    "writable by its group": "is writable by others (mode 0775)",
    "another user's directory": "is owned by another user (uid 65534)",
    "another user's symlink": "is a symbolic link owned by another user (uid 65534)",
}


def _way(base: Path, kind: str) -> Path:
    """``base/way``, of that kind (a symlink leads to ``base/elsewhere``, a directory of ours)."""
    if kind.startswith("another") and os.geteuid() != 0:
        pytest.skip("needs root to give a file to another user (chown)")
    way = base / "way"
    if kind.endswith("symlink"):
        (base / "elsewhere").mkdir()
        way.symlink_to(base / "elsewhere")
        if kind.startswith("another"):
            os.lchown(way, 65534, 65534)
        return way
    way.mkdir()
    way.chmod({"sticky, writable by all": 0o1777, "writable by all": 0o777, "writable by its group": 0o775}.get(
        kind, 0o755))
    if kind.startswith("another"):
        os.chown(way, 65534, 65534)
    return way


@pytest.mark.parametrize("depth", ["parent", "grandparent"])
@pytest.mark.parametrize("kind", sorted(WAY))
def test_calibrations_are_read_and_recorded_only_where_nobody_else_can_change_the_way(
    tmp_path: Path, kind: str, depth: str, caplog: pytest.LogCaptureFixture
) -> None:
    """``SPOOLPARSE_CALIBRATIONS=<her dir>/spoolparse/calibrations.json``, ``spoolparse`` her symlink to a
    directory of root's: the file was opened ``O_NOFOLLOW``, but every directory above it was followed (and made,
    and written in by path), so ``calibrate`` as root replaced the calibrations.json of root's there."""
    import logging

    from spoolparse.runner.calibrations import listing, record

    way = _way(tmp_path, kind)
    path = way / "calibrations.json" if depth == "parent" else way / "spoolparse" / "calibrations.json"
    real = Path(os.path.realpath(path))  # where the file is when the way is followed
    real.parent.mkdir(exist_ok=True)
    real.write_text(json.dumps({"old": {"memory_per_task": 1 << 20}}))
    before = (real.stat().st_ino, real.read_bytes())
    why = WAY[kind]
    report = {"memory_per_task": 2 << 20, "per_task_peak": 1 << 20, "peak_source": "cgroup", "command": ["x"]}
    with caplog.at_level(logging.WARNING, "spoolparse.runner"):
        listed = listing(str(path))
    if why is None:
        assert list(listed) == ["old"] and not caplog.records
        assert record(report, str(path)) == str(path)
        assert sorted(json.loads(real.read_text())) == ["old", "x"]
    else:
        said = f"goes through {str(way)!r}, which {why}"
        assert listed == {}
        assert [r.getMessage() for r in caplog.records] == [
            f"calibrations file {str(path)!r} {said}: no calibration is used"]
        with pytest.raises(OSError) as e:
            record(report, str(path))
        assert e.value.strerror == f"{path} {said}"
        assert (real.stat().st_ino, real.read_bytes()) == before
    assert sorted(os.listdir(real.parent)) == ["calibrations.json"]  # no temp file left either


@pytest.mark.slow
@pytest.mark.parametrize("planted", ["her link in her directory", "her link in a sticky directory", "nothing yet"])
def test_calibrate_as_root_never_writes_where_another_user_points_it(
    other_user: tuple[int, int], shared_base: Path, planted: str
) -> None:
    """A directory of hers (or a shared cache) named by ``SPOOLPARSE_CALIBRATIONS``: with ``spoolparse`` in it
    her symlink to a directory of root's, ``calibrate`` created and replaced calibrations.json there; with
    nothing there yet, root made the directory in hers, for her to swap later."""
    target, cache = shared_base / "target", shared_base / "cache"
    target.mkdir()
    (target / "calibrations.json").write_text('{"precious": true}')
    before = (target / "calibrations.json").stat().st_ino
    cache.mkdir()
    if planted == "her link in a sticky directory":
        cache.chmod(0o1777)  # /tmp's mode: anyone may add a name, nobody may take another's
    else:
        os.chown(cache, *other_user)
    if planted != "nothing yet":
        (cache / "spoolparse").symlink_to(target)
        os.lchown(cache / "spoolparse", *other_user)
    path = cache / "spoolparse" / "calibrations.json"
    env = {**os.environ, "SPOOLPARSE_CALIBRATIONS": str(path)}
    p = subprocess.run([*CLI, "calibrate", "--max-concurrency", "1", "--", *ANSWERS], capture_output=True, env=env,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["recorded"] is None
    said = (f"goes through {str(cache / 'spoolparse')!r}, which is a symbolic link owned by another user "
            f"(uid {other_user[0]})" if "sticky" in planted else
            f"goes through {str(cache)!r}, which is owned by another user (uid {other_user[0]})")
    assert p.stderr.decode() == f"spoolparse: warning: cannot record the calibration in {path}: {path} {said}\n"
    assert sorted(os.listdir(target)) == ["calibrations.json"]
    assert (target / "calibrations.json").stat().st_ino == before
    assert (target / "calibrations.json").read_text() == '{"precious": true}'
    assert sorted(os.listdir(cache)) == ([] if planted == "nothing yet" else ["spoolparse"])
    listed = subprocess.run([*CLI, "calibrate", "--list"], capture_output=True, env=env, timeout=60)
    assert listed.returncode == 0 and json.loads(listed.stdout)["calibrations"] == {}
    assert said in listed.stderr.decode()


def test_the_progress_header_says_what_bounds_the_concurrency(tmp_path: Path) -> None:
    tasks = tmp_path / "t.jsonl"
    tasks.write_text('{"id": "a", "cmd": ["true"], "allow_empty_answer": true}\n')
    for extra, bounds in ((["-j", "3"], ["-j 3 (-j)"]), ([], ["(CPUs: ", "(memory: ("])):
        p = subprocess.run([*CLI, "batch", str(tasks), "--progress", *extra], capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
        assert any(b in p.stderr.splitlines()[0] for b in bounds), p.stderr


@pytest.mark.parametrize(("argv", "least"), [
    (["batch", "-", "-j"], 1), (["batch", "-", "--pids-max"], 1), (["calibrate", "--max-concurrency"], 1),
    (["batch", "-", "--retries"], 0), (["batch", "-", "--requeues"], 0),
])
@pytest.mark.parametrize("value", ["-2", "-1", "0", "1", "7", "x", "2.5", ""])
def test_whole_number_flags_take_their_least_and_more(argv: list[str], least: int, value: str,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    from spoolparse.cli import build_parser

    parser = build_parser(argv[0])
    if value.lstrip("-").isdigit() and int(value) >= least:
        args = parser.parse_args([*argv, value])
        assert int(value) in vars(args).values(), (argv, value)
        return
    with pytest.raises(SystemExit) as stop:
        parser.parse_args([*argv, value])
    assert stop.value.code == 2
    why = (f"not a whole number: {value!r}" if not value.lstrip("-").isdigit() else
           f"must be at least 1: {value!r}" if least == 1 else f"must not be negative: {value!r}")
    assert why in capsys.readouterr().err.strip().splitlines()[-1], (argv, value)
