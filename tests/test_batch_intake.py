"""What ``batch`` reads: every task line read gets exactly one outcome, in bounded memory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import spoolparse

CLI = [sys.executable, "-m", "spoolparse"]


def _outcomes(out: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def _batch(*argv: str, input: bytes | None = None, **kw: Any) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([*CLI, "batch", *argv], input=input, capture_output=True, timeout=120, **kw)


def test_a_duplicate_id_is_an_error_outcome_and_resume_does_not_hide_it(tmp_path: Path) -> None:
    tasks = b'{"id":"a","cmd":["true"]}\n{"id":"a","cmd":["true"]}\n{"id":"b","cmd":["true"]}\n'
    log = tmp_path / "jobs.ndjson"
    p = _batch("-", "--joblog", str(log), input=tasks)
    outs = _outcomes(p.stdout)
    assert sorted(o["id"] for o in outs) == ["a", "a", "b"]
    dup = [o for o in outs if o["error"] and "duplicate task id 'a'" in o["error"]]
    assert len(dup) == 1 and dup[0]["verdict"] == "spawn_error"
    assert p.returncode == 1
    again = _batch("-", "--joblog", str(log), "--resume-failed", input=tasks)
    outs = _outcomes(again.stdout)  # the first "a" and "b" were done; the duplicate is still an error
    assert [(o["id"], o["verdict"]) for o in outs] == [("a", "spawn_error")]


ODD_TASKS = {  # a task that cannot be started, and what its outcome's error says
    "nul-in-cmd": ({"cmd": ["tr\u0000ue"]}, "null byte"),
    "nul-in-env": ({"cmd": ["true"], "env": {"A": "x\u0000y"}}, "null byte"),
    "nul-in-env-name": ({"cmd": ["true"], "env": {"A\u0000B": "x"}}, "null byte"),
    "nul-in-cwd": ({"cmd": ["true"], "cwd": "/tm\u0000p"}, "null byte"),
    "equals-in-env-name": ({"cmd": ["true"], "env": {"A=B": "x"}}, "environment variable name"),
}


@pytest.mark.parametrize("case", sorted(ODD_TASKS))
def test_a_task_that_cannot_start_is_its_own_outcome_not_the_batchs_end(case: str) -> None:
    """A task whose command, environment or directory cannot be passed to a process (a NUL byte) raised a
    ``ValueError`` in the start, which ended the whole batch (``internal error``, exit 125): every task after it
    lost its outcome."""
    task, why = ODD_TASKS[case]
    lines = [{"id": "before", "cmd": ["true"]}, {"id": "odd", **task}, *({"id": f"after{i}", "cmd": ["true"]}
                                                                       for i in range(6))]
    p = _batch("-", "-j", "2", input=b"".join(json.dumps(t).encode() + b"\n" for t in lines))
    outs = {o["id"]: o for o in _outcomes(p.stdout)}
    assert p.returncode == 1, p.stderr[-2000:]
    assert sorted(outs) == sorted(t["id"] for t in lines), p.stderr[-2000:]
    assert outs["odd"]["verdict"] == "spawn_error" and why in outs["odd"]["error"], outs["odd"]
    assert all(o["verdict"] == "ok" for i, o in outs.items() if i != "odd"), outs


def test_a_task_file_that_begins_with_a_byte_order_mark() -> None:
    """Editors and PowerShell on Windows begin UTF-8 files with a byte order mark: its first task was "not JSON"."""
    p = _batch("-", input=b'\xef\xbb\xbf{"id":"first","cmd":["true"]}\n{"id":"second","cmd":["true"]}\n')
    assert p.returncode == 0, p.stdout
    assert [(o["id"], o["verdict"]) for o in _outcomes(p.stdout)] in (
        [("first", "ok"), ("second", "ok")], [("second", "ok"), ("first", "ok")])


def test_an_id_that_is_not_a_string_is_its_json_text() -> None:
    """An id given as a number past 64 bits was read as a float and became "1.2345678901234568e+29"; ``true``
    became Python's "True"."""
    lines = b'{"id":123456789012345678901234567890,"cmd":["true"]}\n{"id":true,"cmd":["true"]}\n{"id":1.5,"cmd":[]}\n'
    outs = sorted(o["id"] for o in _outcomes(_batch("-", input=lines).stdout))
    assert outs == ["1.5", "123456789012345678901234567890", "true"], outs


def test_an_endless_line_is_one_error_outcome_in_bounded_memory() -> None:
    code = (
        "import resource, subprocess, sys;"
        "zero = subprocess.Popen(['head', '-c', '200000000', '/dev/zero'], stdout=subprocess.PIPE);"
        "p = subprocess.run([sys.executable, '-m', 'spoolparse', 'batch', '-', '--max-task-line', '1M'],"
        " stdin=zero.stdout, capture_output=True);"
        "print(p.returncode); print(p.stdout.decode().strip());"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120)
    rc, line, peak_kib = p.stdout.decode().splitlines()
    out = json.loads(line)
    assert rc == "1" and out["verdict"] == "spawn_error"
    assert "200000000 bytes, longer than --max-task-line (1048576)" in out["error"]
    print(f"200 MB task line: batch peak RSS {int(peak_kib) / 1024:.0f} MiB")
    assert int(peak_kib) < 150 * 1024  # the line is never held: far below its 200 MB


@pytest.mark.slow
def test_a_halt_gives_every_task_read_an_outcome(tmp_path: Path) -> None:
    rows = [{"id": "f", "cmd": ["false"]}, {"id": "s", "cmd": ["sleep", "1"]},
            {"id": "n1", "cmd": ["true"]}, {"id": "n2", "cmd": ["true"]}]
    tasks = tmp_path / "t.jsonl"
    tasks.write_text("".join(json.dumps(r) + "\n" for r in rows))
    log = tmp_path / "jobs.ndjson"
    p = _batch(str(tasks), "-j", "1", "--halt", "soon", "--ordered", "--joblog", str(log))
    assert p.returncode == 1
    assert [(o["id"], o["verdict"]) for o in _outcomes(p.stdout)] == [
        ("f", "failed"), ("s", "skipped"), ("n1", "skipped"), ("n2", "skipped")]
    again = _batch(str(tasks), "-j", "1", "--joblog", str(log), "--resume")  # the skipped ones run now
    assert sorted(o["id"] for o in _outcomes(again.stdout)) == ["n1", "n2", "s"]


@pytest.mark.parametrize("kw", [{"timeout": float("nan")}, {"grace": float("nan")}, {"grace": float("inf")},
                                {"soft_timeout": float("nan")}])
def test_times_that_would_never_fire_or_never_end_are_refused(kw: dict[str, float]) -> None:
    with pytest.raises(spoolparse.UsageError):
        list(spoolparse.run_many([["true"]], **kw))


def test_closed_stdout_starts_nothing_and_says_so(tmp_path: Path) -> None:
    flag = tmp_path / "ran"
    p = subprocess.run(
        f'echo \'{{"cmd":["touch","{flag}"]}}\' | "{sys.executable}" -m spoolparse batch - >&-',
        shell=True, capture_output=True, timeout=60,
    )
    assert p.returncode == 2
    expected = "spoolparse: error: standard output is closed: there is nowhere to print the result"
    assert p.stderr.decode().strip() == expected
    assert not flag.exists()


def test_closed_stderr_still_runs_and_prints(tmp_path: Path) -> None:
    p = subprocess.run(f'echo \'{{"cmd":["nonexist-cmd"]}}\' | "{sys.executable}" -m spoolparse batch - 2>&-',
                       shell=True, capture_output=True, timeout=60)
    assert [o["verdict"] for o in _outcomes(p.stdout)] == ["spawn_error"]
    r = subprocess.run(f'"{sys.executable}" -m spoolparse run -- nonexist-cmd 2>&-', shell=True,
                       capture_output=True, timeout=60)
    assert r.returncode == 127


def test_results_keeps_the_transcripts_of_tasks_not_ok_as_links(tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    spool.mkdir()
    out = tmp_path / "out"
    rows = [{"id": "good", "cmd": ["sh", "-c", 'echo \'{"result":"done"}\'']},
            {"id": "bad/../one", "cmd": ["sh", "-c", 'echo \'{"type":"x"}\'; echo oops >&2; exit 3']}]
    tasks = tmp_path / "t.jsonl"
    tasks.write_text("".join(json.dumps(r) + "\n" for r in rows))
    p = _batch(str(tasks), "--results", str(out), "--spool-dir", str(spool))
    assert p.returncode == 1, p.stderr
    assert sorted(os.listdir(out)) == ["bad%2F..%2Fone"]  # only the task that is not ok; a safe name
    kept = out / "bad%2F..%2Fone"
    assert (kept / "stdout").read_text() == '{"type":"x"}\n' and (kept / "stderr").read_text() == "oops\n"
    assert (kept / "stdout").stat().st_nlink == 1 and (kept / "stdout").stat().st_mode & 0o777 == 0o600
    assert os.listdir(spool) == []  # the spools themselves stay nameless
    assert _batch(str(tasks), "--results", str(tmp_path / "all"), "--results-all").returncode == 1
    assert sorted(os.listdir(tmp_path / "all")) == ["bad%2F..%2Fone", "good"]
    assert (tmp_path / "all" / "good" / "stdout").read_text() == '{"result":"done"}\n'


def test_a_kept_transcript_is_a_link_not_a_copy(tmp_path: Path) -> None:
    from spoolparse.runner.results import folder_name, keep
    from spoolparse.spool import open_spool

    f = open_spool(str(tmp_path))
    f.write(b"x" * 4096)
    f.flush()
    try:
        os.link(f"/proc/self/fd/{f.fileno()}", tmp_path / "probe", follow_symlinks=True)
    except OSError as e:  # some sandboxes refuse linkat through /proc (EXDEV): keep() copies there
        folder = keep(tmp_path / "r", "t", {"stdout": f})
        assert os.path.getsize(os.path.join(folder, "stdout")) == 4096
        pytest.skip(f"needs linkat of an O_TMPFILE file through /proc/self/fd, refused here ({e.strerror})")
    folder = keep(tmp_path / "r", "t", {"stdout": f})
    f.write(b"y")  # a link shares the inode: a write after keeping shows in the kept file
    f.flush()
    assert os.path.getsize(os.path.join(folder, "stdout")) == 4097
    f.close()
    assert folder_name("..") == "%2E%2E" and folder_name("a/b") == "a%2Fb" and folder_name("") == "%00"


def test_every_id_keeps_its_transcript_in_a_folder_of_its_own(tmp_path: Path) -> None:
    """Two long ids alike in their first 200 bytes were cut to one folder name: the second task's transcript
    replaced the first's, under the first's id too. An id that is not Unicode (a file name's undecodable bytes)
    lost its transcript to a warning."""
    from spoolparse.runner import Task, run_many
    from spoolparse.runner.results import folder_name

    ids = ["x" * 250 + "1", "x" * 250 + "2", "s-\udcff", "s-\udcfe"]
    say = "echo '{\"text\": \"'\"$0\"'\"}'; exit 1"
    outs = list(run_many([Task(["sh", "-c", say, f"task{i}"], id=tid) for i, tid in enumerate(ids)],
                         results=str(tmp_path)))
    assert len(outs) == 4 and all(o.verdict == "failed" for o in outs)
    names = [folder_name(tid) for tid in ids]
    assert len(set(names)) == 4 and all(len(n.encode()) <= 200 for n in names), names
    for i, name in enumerate(names):
        assert f"task{i}" in (tmp_path / name / "stdout").read_text(), name
    assert folder_name("x" * 250 + "1") == folder_name("x" * 250 + "1")  # the same id, the same folder


def test_a_spool_dir_that_cannot_hold_spools(tmp_path: Path) -> None:
    """Writable by its mode bits is not enough (/proc): the variable falls back, an explicit one stops the batch."""
    task = b'{"cmd":["true"]}\n'
    env = {**os.environ, "PDD_AGENT_SPOOL_DIR": "/proc"}
    p = _batch("-", input=task, env=env)
    assert p.returncode == 0 and [o["verdict"] for o in _outcomes(p.stdout)] == ["ok"]
    assert b"PDD_AGENT_SPOOL_DIR='/proc' cannot hold a spool file" in p.stderr
    flag = tmp_path / "ran"
    p = _batch("-", "--spool-dir", "/proc", input=f'{{"cmd":["touch","{flag}"]}}\n'.encode())
    assert p.returncode == 2 and p.stdout == b"" and not flag.exists()
    assert p.stderr.decode().strip().startswith("spoolparse: error: spool directory '/proc' cannot hold a spool")


@pytest.mark.slow
def test_a_halt_does_not_wait_for_the_end_of_an_endless_input() -> None:
    """``producer | spoolparse batch --halt now -``: the producer writes a failing task and then nothing for a
    minute without closing the pipe. The batch halts, gives what it read its outcomes, and exits — it does not
    wait for an end of input that may never come."""
    import signal

    producer = subprocess.Popen(
        ["sh", "-c", 'echo \'{"id":"f","cmd":["false"]}\'; echo \'{"id":"n","cmd":["true"]}\'; exec sleep 60'],
        stdout=subprocess.PIPE, start_new_session=True,
    )
    try:
        p = subprocess.run([*CLI, "batch", "-j", "1", "--halt", "now", "--ordered", "-"], stdin=producer.stdout,
                           capture_output=True, timeout=40)
    finally:
        os.killpg(producer.pid, signal.SIGKILL)
        producer.wait()
    assert p.returncode == 1, p.stderr[-2000:]
    assert [(o["id"], o["verdict"]) for o in _outcomes(p.stdout)] == [("f", "failed"), ("n", "skipped")]
