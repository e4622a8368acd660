"""What ``batch`` reads: every task line read gets exactly one outcome, in bounded memory."""

from __future__ import annotations

import json
import os
import re
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
    # what a task line holds is the point here, not its answer: a command that prints none (true) is ok
    return subprocess.run([*CLI, "batch", "--allow-empty-answer", *argv], input=input, capture_output=True,
                          timeout=120, **kw)


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


#: Python's own words for a NUL: "embedded null byte" (os.stat says "embedded null character in path" on 3.13).
NUL = r"embedded null (?:byte|character)"
ODD_TASKS = {  # a task that cannot be started, and what its outcome's error says (a pattern)
    "nul-in-cmd": ({"cmd": ["tr\u0000ue"]}, NUL),
    "nul-in-env": ({"cmd": ["true"], "env": {"A": "x\u0000y"}}, NUL),
    "nul-in-env-name": ({"cmd": ["true"], "env": {"A\u0000B": "x"}}, NUL),
    "nul-in-cwd": ({"cmd": ["true"], "cwd": "/tm\u0000p"}, NUL),
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
    assert outs["odd"]["verdict"] == "spawn_error" and re.search(why, outs["odd"]["error"]), outs["odd"]
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


# -- a task line says what is wrong with it ----------------------------------------------------------------

MISSPELT = {  # a key a task line may hold, misspelt, and the key the error suggests
    "tiemout": "timeout", "timout": "timeout", "soft_timout": "soft_timeout", "memroy": "memory",
    "memory_limt": "memory_limit", "cwdd": "cwd", "evn": "env", "imput": "input", "provder": "provider",
    "cmmd": "cmd", "Id": "id",
}


@pytest.mark.parametrize("key", sorted(MISSPELT))
def test_an_unknown_key_is_that_tasks_error_naming_the_nearest_known_one(key: str, tmp_path: Path) -> None:
    """``{"tiemout": 5}`` ran silently with no timeout at all."""
    flag = tmp_path / "ran"
    line = {"id": "t", "cmd": ["touch", str(flag)], key: 5}
    p = _batch("-", input=json.dumps(line).encode() + b"\n")
    [out] = _outcomes(p.stdout)
    assert p.returncode == 1 and out["verdict"] == "spawn_error" and not flag.exists(), out
    assert f'unknown key "{key}" (did you mean "{MISSPELT[key]}"?)' in out["error"], out["error"]


def test_every_known_key_is_taken_and_a_key_like_none_lists_them() -> None:
    from spoolparse.runner.tasks import TASK_KEYS, Task

    line = {"cmd": ["true"], "argv": ["true"], "id": "x", "input": "", "cwd": "/", "env": {}, "timeout": 1,
            "soft_timeout": 1, "memory": 1, "memory_limit": 1, "provider": "auto", "allow_empty_answer": True,
            "max_line": 1, "max_retained": 1, "max_spool_bytes": 1}
    assert sorted(line) == sorted(TASK_KEYS)
    for name in ("cmd", "argv"):  # one of the two names of the command
        Task.from_json({k: v for k, v in line.items() if k != name}, default_id="1")
    with pytest.raises(spoolparse.UsageError, match=r'unknown keys "zzz", "\\u001b\[2J"; a task\'s keys are cmd,'):
        Task.from_json({"cmd": ["true"], "zzz": 1, "\x1b[2J": 2}, default_id="1")


@pytest.mark.parametrize("argv", [["touch", "{flag}"], ["true"]])
def test_a_line_with_both_cmd_and_argv_is_that_tasks_error(argv: list[str], tmp_path: Path) -> None:
    """``{"cmd": [...], "argv": [...]}`` ran ``cmd`` and said nothing of ``argv``: two names of one key, the
    line does not say which command it means (even when both are the same, one is a slip)."""
    flag = tmp_path / "ran"
    line = {"id": "t", "cmd": ["touch", str(flag)], "argv": [a.format(flag=flag) for a in argv]}
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps(line) + "\n" + json.dumps({"id": "u", "argv": ["touch", str(flag)]}) + "\n")
    want = 'line 1: a task line holds both "cmd" and "argv", two names of its command: keep one'
    p = _batch("--check", str(tasks))
    assert p.returncode == 1 and [(b["line"], b["id"], b["error"]) for b in _outcomes(p.stdout)] == [(1, "t", want)]
    p = _batch("-j", "1", str(tasks))
    outs = {o["id"]: o for o in _outcomes(p.stdout)}
    assert p.returncode == 1 and (outs["t"]["verdict"], outs["t"]["error"]) == ("spawn_error", want), outs
    assert outs["u"]["verdict"] == "ok" and flag.exists()  # the other line ran
    with pytest.raises(spoolparse.UsageError, match="both"):
        from spoolparse.runner.tasks import Task

        Task.from_json(line, default_id="1")


def test_batch_check_reports_every_bad_line_and_runs_nothing(tmp_path: Path) -> None:
    flag = tmp_path / "ran"
    good = json.dumps({"id": "a", "cmd": ["touch", str(flag)]})
    lines = [good, "", "not json", json.dumps({"id": "b", "cmd": ["true"], "tiemout": 1}), "  ",
             json.dumps({"id": "a", "cmd": ["true"]}), json.dumps({"cmd": "true"}), "x" * 2000, json.dumps(["true"])]
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("\n".join(lines) + "\n")
    p = _batch("--check", "--max-task-line", "1000", str(tasks))
    assert p.returncode == 1 and not flag.exists(), p.stderr
    bad = _outcomes(p.stdout)
    assert [(b["line"], b["id"]) for b in bad] == [(3, "3"), (4, "b"), (6, "a"), (7, "7"), (8, "8")], bad
    assert "not JSON" in bad[0]["error"] and 'did you mean "timeout"' in bad[1]["error"]
    assert "duplicate task id 'a'" in bad[2]["error"] and "non-empty list of strings" in bad[3]["error"]
    assert "longer than --max-task-line (1000)" in bad[4]["error"]
    assert p.stderr == b"spoolparse: check: 7 task lines, 5 bad, 2 blank lines\n"
    tasks.write_text(good + "\n\n")
    p = _batch("--check", str(tasks))
    assert (p.returncode, p.stdout) == (0, b"") and not flag.exists()
    assert p.stderr == b"spoolparse: check: 1 task line, 0 bad, 1 blank line\n"
    p = _batch("--check", str(tmp_path / "missing"))
    assert p.returncode == 2 and b"cannot read" in p.stderr


def test_a_task_line_holding_a_lone_surrogate_escape_is_read(tmp_path: Path) -> None:
    r"""Python's ``json.dumps`` writes a file name's undecodable bytes as ``"\udcff"``: such a line was "not JSON"."""
    name = os.fsdecode(b"f\xff")  # 'f\udcff'
    made = tmp_path / "made"
    made.mkdir()
    line = json.dumps({"id": name, "cmd": ["touch", name], "cwd": str(made)})
    assert "\\udcff" in line
    p = _batch("-", input=line.encode() + b"\n")
    [out] = _outcomes(p.stdout)
    assert out["verdict"] == "ok", out
    assert out["id"] == name and os.listdir(os.fsencode(made)) == [b"f\xff"]  # the very bytes, the very id
    for bad in (b'{"cmd": ["\\udcff"], "x": NaN}', b'{"cmd": ["\\udcff"]', b'["\\udcff"' + b"]" * 0):
        [out] = _outcomes(_batch("-", input=bad + b"\n").stdout)
        assert out["verdict"] == "spawn_error" and "not JSON" in out["error"], (bad, out)


# -- kept transcripts nobody can redirect ---------------------------------------------------------------------

FAIL_LOUDLY = ["sh", "-c", "echo TRANSCRIPT; echo ERR >&2; exit 1"]


def _plant(results: Path, kind: str) -> Path:
    """What an agent that can write where results go puts where task ``x``'s folder will be; returns the
    directory that must stay as it is."""
    elsewhere = results.parent / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "stdout").write_text("ORIGINAL")
    results.mkdir()
    if kind == "symlink":
        (results / "x").symlink_to(elsewhere)
        return elsewhere
    if kind == "file":
        (results / "x").write_text("ORIGINAL")
        return elsewhere
    if os.geteuid() != 0:
        pytest.skip("needs root to give a directory to another user (chown)")
    folder = results / "x"
    folder.mkdir()
    (folder / "stdout").write_text("ORIGINAL")
    os.chmod(folder, 0o777)
    os.chown(folder / "stdout", 65534, 65534)
    os.chown(folder, 65534, 65534)  # nobody's
    return folder


@pytest.mark.parametrize("kind", ["symlink", "file", "another user's directory"])
def test_a_task_folder_that_is_not_ours_is_refused_and_nothing_is_written_through_it(
    tmp_path: Path, kind: str
) -> None:
    """With ``DIR/x`` a symlink to another directory, task x's transcript was written there, and the ``stdout``
    already in it was replaced by the task's output."""
    results = tmp_path / "results"
    untouched = _plant(results, kind)
    before = {p.name: (p.read_bytes(), p.stat().st_ino) for p in untouched.iterdir()}
    tasks = b"".join(json.dumps(t).encode() + b"\n" for t in (
        {"id": "x", "cmd": FAIL_LOUDLY}, {"id": "y", "cmd": FAIL_LOUDLY}))
    p = _batch("-", "--results", str(results), input=tasks)
    outs = {o["id"]: o for o in _outcomes(p.stdout)}
    assert p.returncode == 1 and outs["x"]["verdict"] == outs["y"]["verdict"] == "failed", p.stderr
    assert {p.name: (p.read_bytes(), p.stat().st_ino) for p in untouched.iterdir()} == before
    err = p.stderr.decode()
    assert f"spoolparse: warning: cannot keep the transcript of x: {results / 'x'} " in err, err
    assert (results / "y" / "stdout").read_text() == "TRANSCRIPT\n"  # the others are kept as ever


def test_a_results_folder_that_is_a_symlink_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    flag = tmp_path / "ran"
    p = _batch("-", "--results", str(tmp_path / "link"), input=f'{{"cmd":["touch","{flag}"]}}\n'.encode())
    assert p.returncode == 2 and not flag.exists() and os.listdir(tmp_path / "real") == []
    assert b"is a symbolic link or not a directory" in p.stderr


def test_a_kept_transcript_goes_once_a_later_attempt_is_ok(tmp_path: Path) -> None:
    """A task that failed and then succeeded (a retry, or a --resume) kept its failed attempt's transcript."""
    results, log, once = tmp_path / "results", tmp_path / "jobs.ndjson", tmp_path / "failed-once"
    # fails the first time it runs, succeeds after
    flaky = ["sh", "-c", f'if [ -e "{once}" ]; then exit 0; else touch "{once}"; echo no; exit 1; fi']
    task = json.dumps({"id": "flaky", "cmd": flaky}).encode() + b"\n"
    p = _batch("-", "--results", str(results), "--retries", "1", "--retry-backoff", "0", input=task)
    [out] = _outcomes(p.stdout)
    assert out["verdict"] == "ok" and out["attempts"] == 2, p.stderr
    assert os.listdir(results) == []
    once.unlink()
    p = _batch("-", "--results", str(results), "--joblog", str(log), input=task)
    assert [o["verdict"] for o in _outcomes(p.stdout)] == ["failed"]
    assert (results / "flaky" / "stdout").read_text() == "no\n"
    p = _batch("-", "--results", str(results), "--joblog", str(log), "--resume-failed", input=task)
    assert [o["verdict"] for o in _outcomes(p.stdout)] == ["ok"], p.stderr
    assert os.listdir(results) == []


def test_a_folder_not_ours_is_not_removed_for_an_ok_attempt(tmp_path: Path) -> None:
    results = tmp_path / "results"
    untouched = _plant(results, "symlink")
    p = _batch("-", "--results", str(results), input=b'{"id":"x","cmd":["true"]}\n')
    assert p.returncode == 0, p.stderr
    assert (results / "x").is_symlink() and (untouched / "stdout").read_text() == "ORIGINAL"


# -- ids that are hard to carry ---------------------------------------------------------------------------------

#: Pairs of task ids (each as its task line spells it) that were written alike in outcomes and the job log, so a
#: resumed batch skipped the second when the first was done: a lone surrogate (a file name's undecodable byte,
#: as Python's ``json.dumps`` writes it) and the same escape spelled out with a backslash; a number and another
#: spelling of it (the number was written again as Python reads it).
ID_TWINS: list[tuple[str, str]] = [
    (json.dumps("\udcff"), json.dumps("\\udcff")),
    (json.dumps("a\udcfeb"), json.dumps("a\\udcfeb")),
    (json.dumps("\udc80\udcff"), json.dumps("\\udc80\\udcff")),
    (json.dumps("x\udcff"), json.dumps("x\\\udcff")),
    ("1e2", "100.0"),
    ("-0", "0"),
    ("1.50", "1.5"),
]


def _given_id(spelled: str) -> str:
    """The id a task line's ``"id": <spelled>`` names: a string as it is, a number as it is written."""
    value = json.loads(spelled)
    return value if isinstance(value, str) else spelled


@pytest.mark.slow
def test_distinct_ids_stay_distinct_in_outcomes_the_job_log_and_resume(tmp_path: Path) -> None:
    ran = tmp_path / "ran"
    say = "echo '{\"text\": \"done\"}'; echo \"$1\" >> \"$0\""

    def line(n: int, spelled: str) -> str:
        return f'{{"id": {spelled}, "cmd": {json.dumps(["sh", "-c", say, str(ran), str(n)])}}}\n'

    firsts = [a for a, _ in ID_TWINS]
    every = [s for pair in ID_TWINS for s in pair]
    (tmp_path / "firsts").write_text("".join(line(every.index(s), s) for s in firsts))
    (tmp_path / "every").write_text("".join(line(n, s) for n, s in enumerate(every)))
    log = tmp_path / "jobs.ndjson"
    check = _batch("--check", str(tmp_path / "every"))
    assert check.returncode == 0 and check.stdout == b"", check.stderr  # no id is another's duplicate
    p = _batch(str(tmp_path / "firsts"), "--joblog", str(log))
    assert p.returncode == 0, p.stderr
    want = [_given_id(s) for s in firsts]
    assert sorted(o["id"] for o in _outcomes(p.stdout)) == sorted(want)
    assert sorted(json.loads(x)["id"] for x in log.read_bytes().splitlines()) == sorted(want)  # as Python reads it
    ran.unlink()
    p = _batch(str(tmp_path / "every"), "--joblog", str(log), "--resume")
    assert p.returncode == 0, p.stderr
    seconds = [b for _, b in ID_TWINS]
    assert sorted(o["id"] for o in _outcomes(p.stdout)) == sorted(_given_id(s) for s in seconds)
    assert sorted(map(int, ran.read_text().split())) == sorted(every.index(s) for s in seconds)
    ran.unlink()
    p = _batch(str(tmp_path / "every"), "--joblog", str(log), "--resume")
    assert p.returncode == 0 and p.stdout == b"" and not ran.exists(), p.stderr
