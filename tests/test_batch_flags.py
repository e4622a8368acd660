"""``spoolparse batch``'s flags as a GNU parallel user reads them, and :class:`BatchOptions`, their one typed home."""

from __future__ import annotations

import dataclasses
import inspect
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import spoolparse
from spoolparse import BatchOptions, UsageError
from spoolparse.runner.halt import Halt

from .helpers import FIXTURES

CLI = [sys.executable, "-m", "spoolparse"]
LIVE_AGENT = [sys.executable, str(FIXTURES / "live_agent.py")]
ANSWER = ["sh", "-c", "echo '{\"text\": \"done\"}'"]  # an answer (the generic provider's), exit 0: ok


def _batch(*argv: str, input: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([*CLI, "batch", *argv], input=input, capture_output=True, timeout=120)


def _tasks(path: Path, rows: list[dict[str, Any]]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def _outcomes(out: bytes) -> dict[str, dict[str, Any]]:
    return {o["id"]: o for o in (json.loads(line) for line in out.splitlines())}


def _log(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _fails_once(flag: Path) -> list[str]:
    """A command that exits 3 the first time (leaving ``flag``) and answers the next."""
    return ["sh", "-c", f"if [ -e {flag} ]; then {ANSWER[2]}; else touch {flag}; exit 3; fi"]


# -- resume vs resume-failed ---------------------------------------------------------------------


def test_resume_skips_any_final_outcome_and_resume_failed_reruns_those_not_ok(tmp_path: Path) -> None:
    log = tmp_path / "jobs.ndjson"
    tasks = _tasks(tmp_path / "t.jsonl", [
        {"id": "good", "cmd": ANSWER},
        {"id": "bad", "cmd": _fails_once(tmp_path / "flag")},
    ])
    first = _batch(tasks, "--joblog", str(log))
    assert first.returncode == 1, first.stderr
    assert {k: o["verdict"] for k, o in _outcomes(first.stdout).items()} == {"good": "ok", "bad": "failed"}

    again = _batch(tasks, "--joblog", str(log), "--resume")  # both have a final outcome: nothing runs
    assert (again.returncode, again.stdout) == (0, b""), again.stderr

    failed = _batch(tasks, "--joblog", str(log), "--resume-failed")  # only the one not ok runs again
    assert failed.returncode == 0, failed.stderr
    assert {k: o["verdict"] for k, o in _outcomes(failed.stdout).items()} == {"bad": "ok"}
    finals = sorted((r["id"], r["verdict"]) for r in _log(log) if r["final"])
    assert finals == [("bad", "failed"), ("bad", "ok"), ("good", "ok")]
    assert _batch(tasks, "--joblog", str(log), "--resume-failed").stdout == b""  # now every one is ok


@pytest.mark.parametrize("cut", ["in its first line", "in the middle", "before its last brace", "before its newline"])
def test_resume_after_a_job_log_cut_mid_line_runs_each_task_once_more_at_most(tmp_path: Path, cut: str) -> None:
    """A job log cut in the middle of its last line (a crash while a long line was written): the next
    ``--resume`` appended its first line onto the fragment, and a third ``--resume`` ran that task again although
    its outcome was printed and logged."""
    log, ran = tmp_path / "jobs.ndjson", tmp_path / "ran"
    rows = [{"id": i, "cmd": ["sh", "-c", f"echo {i} >> {ran}"], "allow_empty_answer": True} for i in "ab"]
    tasks = _tasks(tmp_path / "t.jsonl", rows)
    assert _batch(tasks, "--joblog", str(log), "-j", "1").returncode == 0
    line = {json.loads(raw)["id"]: raw for raw in log.read_bytes().splitlines(keepends=True)}
    at = {"in its first line": 1, "in the middle": len(line["a"]) // 2, "before its last brace": len(line["a"]) - 2,
          "before its newline": len(line["a"]) - 1}[cut]
    log.write_bytes(line["b"] + line["a"][:at])  # b's line whole, a's cut: what a crash mid-write leaves
    torn = cut != "before its newline"
    warning = (f"spoolparse: warning: job log {str(log)!r}: line 2 is cut short or not JSON, ignored (its task runs "
               "again unless another line says it is done)\n")
    second = _batch(tasks, "--joblog", str(log), "--resume")
    assert second.returncode == 0 and second.stderr.decode() == (warning if torn else ""), second.stderr
    assert list(_outcomes(second.stdout)) == (["a"] if torn else [])  # a's outcome is not known: it runs again
    third = _batch(tasks, "--joblog", str(log), "--resume")
    assert (third.returncode, third.stdout) == (0, b""), third.stderr  # both done: nothing runs
    assert ran.read_text().split() == (["a", "b", "a"] if torn else ["a", "b"])
    lines = log.read_bytes().split(b"\n")
    assert lines[:2] == [line["b"].rstrip(b"\n"), line["a"][:at].rstrip(b"\n")]  # the fragment on a line of its own
    assert lines[-1] == b"" and [json.loads(x)["id"] for x in lines[2:-1]] == (["a"] if torn else [])


def test_resume_flags_exclude_each_other_and_need_a_joblog(tmp_path: Path) -> None:
    tasks = _tasks(tmp_path / "t.jsonl", [{"id": "a", "cmd": ANSWER}])
    both = _batch(tasks, "--joblog", str(tmp_path / "j"), "--resume", "--resume-failed")
    assert both.returncode == 2 and b"not allowed with" in both.stderr
    alone = _batch(tasks, "--resume-failed")
    assert alone.returncode == 2 and alone.stderr.strip() == b"spoolparse: error: --resume-failed needs --joblog FILE"


# -- retries ---------------------------------------------------------------------------------------


def test_retries_run_a_failed_task_again_with_each_attempt_logged_and_one_outcome(tmp_path: Path) -> None:
    log = tmp_path / "jobs.ndjson"
    tasks = _tasks(tmp_path / "t.jsonl", [
        {"id": "flaky", "cmd": _fails_once(tmp_path / "flag")},
        {"id": "missing", "cmd": ["/no/such/agent"]},  # spawn_error: never retried
        {"id": "slow", "cmd": ["sleep", "30"], "timeout": "300ms"},  # timeout: retried
    ])
    p = _batch(tasks, "--retries", "2", "--retry-backoff", "50ms", "--grace", "0", "--joblog", str(log))
    assert p.returncode == 1, p.stderr
    out = _outcomes(p.stdout)
    assert sorted(out) == ["flaky", "missing", "slow"]  # one outcome per task
    assert (out["flaky"]["verdict"], out["flaky"]["attempts"]) == ("ok", 2)
    assert (out["missing"]["verdict"], out["missing"]["attempts"]) == ("spawn_error", 1)
    assert (out["slow"]["verdict"], out["slow"]["attempts"]) == ("timeout", 3)
    rows = _log(log)
    attempts = {tid: [(r["attempt"], r["verdict"], r["final"]) for r in rows if r["id"] == tid] for tid in out}
    assert attempts["flaky"] == [(1, "failed", False), (2, "ok", True)]
    assert attempts["missing"] == [(1, "spawn_error", True)]
    assert attempts["slow"] == [(1, "timeout", False), (2, "timeout", False), (3, "timeout", True)]


def test_retries_help_names_the_retryable_verdicts() -> None:
    p = subprocess.run([*CLI, "batch", "--help"], capture_output=True, timeout=60)
    text = " ".join(p.stdout.decode().split())
    assert "failed, timeout, killed_memory" in text and "never a spawn_error" in text


# -- halt --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("spec", ["never", "now,fail=0", "soon,fail=101%", "now,success=x", "now,fail=1.5",
                                  "soon,fail=nan", "later,fail=1", "now,fail=-1", ""])
def test_a_bad_halt_is_a_usage_error_naming_the_forms(tmp_path: Path, spec: str) -> None:
    marker = tmp_path / "ran"
    tasks = _tasks(tmp_path / "t.jsonl", [{"id": "a", "cmd": ["touch", str(marker)]}])
    p = _batch(tasks, f"--halt={spec}")
    assert p.returncode == 2, (spec, p.stderr)
    assert len(p.stderr.splitlines()) == 1 and b"--halt" in p.stderr and b"Traceback" not in p.stderr
    assert not marker.exists()


@pytest.mark.parametrize(("spec", "expected"), [
    ("soon", Halt("soon", "fail", 1)), ("now", Halt("now", "fail", 1)),
    ("now,fail=1", Halt("now", "fail", 1)), ("soon,fail=10%", Halt("soon", "fail", None, 10.0)),
    ("now,success=1", Halt("now", "success", 1)), ("SOON,FAIL=3", Halt("soon", "fail", 3)),
])
def test_halt_grammar_and_its_aliases(spec: str, expected: Halt) -> None:
    assert BatchOptions(halt=spec).halt == expected
    assert str(expected) == (f"{expected.when},{expected.why}=" + (
        f"{expected.percent:g}%" if expected.percent is not None else str(expected.count)))


def test_halt_soon_alias_stops_after_the_first_failure(tmp_path: Path) -> None:
    tasks = _tasks(tmp_path / "t.jsonl", [{"id": "bad", "cmd": ["false"]},
                                           *({"id": f"t{i}", "cmd": ANSWER} for i in range(4))])
    p = _batch(tasks, "-j", "1", "--halt", "soon")
    assert p.returncode == 1, p.stderr
    out = _outcomes(p.stdout)
    assert out["bad"]["verdict"] == "failed"
    assert {o["verdict"] for k, o in out.items() if k != "bad"} == {"skipped"} and len(out) == 5


def test_halt_now_on_success(tmp_path: Path) -> None:
    tasks = _tasks(tmp_path / "t.jsonl", [{"id": "quick", "cmd": ANSWER},
                                           {"id": "long", "cmd": ["sleep", "60"]},
                                           *({"id": f"t{i}", "cmd": ANSWER} for i in range(3))])
    p = _batch(tasks, "-j", "2", "--halt", "now,success=1", "--grace", "0")
    out = _outcomes(p.stdout)
    assert out["quick"]["verdict"] == "ok"
    assert out["long"]["verdict"] == "cancelled"
    assert {out[f"t{i}"]["verdict"] for i in range(3)} == {"skipped"}


# -- units -------------------------------------------------------------------------------------------


def test_durations_and_sizes_take_units(tmp_path: Path) -> None:
    tasks = _tasks(tmp_path / "t.jsonl", [{"id": "slow", "cmd": ["sleep", "30"]},
                                           {"id": "loud", "cmd": ["sh", "-c", "yes '{}' | head -c 200000"]}])
    p = _batch(tasks, "--timeout", "0.5s", "--grace", "100ms", "--memory-per-task", "1.5M", "--max-spool-bytes",
               "64K", "--retry-backoff", "0.1s", "-j", "2")
    assert p.returncode == 1, p.stderr
    out = _outcomes(p.stdout)
    assert out["slow"]["verdict"] == "timeout" and out["slow"]["wall_s"] < 20
    # killed at the cap when a poll sees it first, else the output read up to it: either names 64 KiB
    loud = out["loud"]
    assert loud["verdict"] == "failed", loud
    assert "max_spool_bytes 65536 exceeded" in loud["error"] or "--max-spool-bytes (64 KiB)" in loud["error"], loud


@pytest.mark.parametrize("cmd", ["run", "batch"])
@pytest.mark.parametrize(("flag", "value", "needle"), [
    ("--timeout", "nan", b"not a duration"), ("--timeout", "inf", b"not a duration"),
    ("--timeout", "-5", b"positive"), ("--timeout", "0", b"positive"), ("--grace", "inf", b"not a duration"),
    ("--grace", "9" * 400, b"out of range"), ("--grace", "-1s", b"0 or more"), ("--max-spool-bytes", "0", b"positive"),
    ("--max-spool-bytes", "-2G", b"not a size"), ("--max-spool-bytes", "2X", b"not a size"),
    ("--timeout", "10 parsecs", b"not a duration"),
])
def test_bad_durations_and_sizes_are_usage_errors_in_run_and_batch(
    tmp_path: Path, cmd: str, flag: str, value: str, needle: bytes
) -> None:
    marker = tmp_path / "ran"
    if cmd == "run":
        argv = [*CLI, "run", f"{flag}={value}", "--", "touch", str(marker)]
    else:
        argv = [*CLI, "batch", _tasks(tmp_path / "t.jsonl", [{"cmd": ["touch", str(marker)]}]), f"{flag}={value}"]
    p = subprocess.run(argv, capture_output=True, timeout=60)
    assert p.returncode == 2, (argv, p.stderr)
    assert len(p.stderr.splitlines()) == 1 and needle in p.stderr and flag.encode() in p.stderr
    assert not marker.exists()


def test_memory_per_task_and_batch_options_share_the_size_parser() -> None:
    from spoolparse import _cli_common
    from spoolparse.runner import cli as runner_cli

    assert runner_cli.positive_size is _cli_common.positive_size
    assert runner_cli.parse_duration is _cli_common.parse_duration
    assert _cli_common.parse_size("1.5G") == 3 << 29 and _cli_common.parse_duration("10m") == 600


# -- BatchOptions ------------------------------------------------------------------------------------


def test_batch_options_are_one_frozen_dataclass_exported_at_the_top() -> None:
    assert "BatchOptions" in spoolparse.__all__
    assert dataclasses.is_dataclass(BatchOptions)
    o = BatchOptions()
    with pytest.raises(dataclasses.FrozenInstanceError):
        o.retries = 3  # type: ignore[misc]
    from spoolparse import _limits

    assert (o.stop_at, o.kill_at, o.requeues, o.grace, o.pids_max) == (
        _limits.STOP_AT, _limits.KILL_AT, _limits.REQUEUES, _limits.DEFAULT_GRACE, _limits.PIDS_MAX)


def test_the_option_list_is_written_once() -> None:
    """run_many, arun_many and Batch take a BatchOptions (and its fields as keywords), not a copy of the list."""
    from spoolparse.runner.scheduler import Batch

    names = {f.name for f in dataclasses.fields(BatchOptions)}
    for fn in (spoolparse.run_many, spoolparse.arun_many, Batch.__init__):
        params = set(inspect.signature(fn).parameters)
        assert not params & names, (fn, params & names)
        assert "options" in params


@pytest.mark.parametrize("kwargs", [
    {"retries": -1}, {"requeues": -1}, {"memory_per_task": 0}, {"max_concurrent": 0}, {"timeout": float("nan")},
    {"grace": float("inf")}, {"stop_at": 1.5}, {"stop_at": 0.9, "kill_at": 0.8}, {"enforce": "strict"},
    {"keep_transcript": "some"}, {"resume": True}, {"halt": "sometimes"}, {"max_spool_bytes": 0},
    {"retry_backoff": float("nan")}, {"sample_interval": 0.0}, {"window": 0}, {"resume": "ok", "joblog": "j"},
    {"memory_sample_interval": 0.0}, {"memory_sample_interval": float("nan")},
    {"reserve": -1},  # less than nothing kept free: admission would count on more memory than the host has
    {"retries": 1.5},
])
def test_bad_options_are_refused_when_made_before_anything_starts(kwargs: dict[str, Any], tmp_path: Path) -> None:
    with pytest.raises(UsageError):
        BatchOptions(**kwargs)
    marker = tmp_path / "ran"
    with pytest.raises(UsageError):  # the keyword form builds the same options, with the same checks
        list(spoolparse.run_many([["touch", str(marker)]], **kwargs))
    assert not marker.exists()


def test_keywords_build_options_and_override_a_given_one(tmp_path: Path) -> None:
    from spoolparse.runner import Batch

    base = BatchOptions(max_concurrent=2, retries=1, timeout=30.0)
    batch = spoolparse.run_many([ANSWER], base, retries=0, memory_per_task=None)
    try:
        assert isinstance(batch, Batch)
        assert batch.options == dataclasses.replace(base, retries=0)
        assert [o.verdict for o in batch] == ["ok"]
    finally:
        batch.close()
    with pytest.raises(TypeError, match="retires"):
        spoolparse.run_many([ANSWER], retires=2)
    with pytest.raises(TypeError, match="BatchOptions"):
        spoolparse.run_many([ANSWER], {"retries": 2})  # type: ignore[arg-type]


def test_arun_many_takes_the_same_options() -> None:
    import asyncio

    async def go() -> list[str]:
        return [o.verdict async for o in spoolparse.arun_many([ANSWER, ["false"]], BatchOptions(ordered=True),
                                                              max_concurrent=2)]

    assert asyncio.run(go()) == ["ok", "failed"]


# -- events ------------------------------------------------------------------------------------------


def _ndjson(data: bytes) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in data.splitlines()]  # every line parses, or this fails
    assert all(isinstance(r, dict) for r in rows)
    return rows


def test_batch_events_on_stderr_are_pure_ndjson_with_task_ids(tmp_path: Path) -> None:
    tasks = _tasks(tmp_path / "t.jsonl", [{"id": f"a{i}", "cmd": [*LIVE_AGENT, "--ticks", "2"]} for i in range(2)])
    p = _batch(tasks, "--events", "-j", "2")
    assert p.returncode == 0, p.stderr
    events = _ndjson(p.stderr)
    assert {e["task"] for e in events} == {"a0", "a1"}
    assert {"session", "text", "usage", "turn_end"} <= {e["kind"] for e in events}  # to the last one
    texts = [e["text"] for e in events if e["kind"] == "text" and e["task"] == "a0"]
    assert texts[-1] == "FINAL-ANSWER: live"
    assert {o["verdict"] for o in _outcomes(p.stdout).values()} == {"ok"}


def test_batch_events_carry_its_warnings_and_errors_as_events(tmp_path: Path) -> None:
    results = tmp_path / "results"
    results.mkdir()
    (results / "bad").write_text("")  # where the task's folder should go
    tasks = _tasks(tmp_path / "t.jsonl", [{"id": "bad", "cmd": ["false"]}])
    # a transcript that cannot be kept is the runner's warning: an event, never a plain line
    p = _batch(tasks, "--events", "--results", str(results))
    assert p.returncode == 1
    warnings = [e for e in _ndjson(p.stderr) if e["kind"] == "warning"]
    assert warnings and "cannot keep the transcript of bad" in warnings[0]["message"], p.stderr
    assert warnings[0]["source"].startswith("spoolparse")
    # a usage error, found while reading the options, too
    bad = _batch(tasks, "--events", "--halt", "never")
    assert bad.returncode == 2
    (err,) = _ndjson(bad.stderr)
    assert err["kind"] == "error" and "halt" in err["message"]


def test_batch_events_file_leaves_stderr_quiet_and_refuses_a_drawn_progress_on_stderr(tmp_path: Path) -> None:
    tasks = _tasks(tmp_path / "t.jsonl", [{"id": "a", "cmd": [*LIVE_AGENT, "--ticks", "1"]}])
    out = tmp_path / "events.ndjson"
    p = _batch(tasks, "--events-file", str(out))
    assert (p.returncode, p.stderr) == (0, b"")
    assert {e["task"] for e in _ndjson(out.read_bytes())} == {"a"}
    both = _batch(tasks, "--events", "--progress")
    assert both.returncode == 2 and _ndjson(both.stderr)[0]["kind"] == "error"
    nowhere = _batch(tasks, "--events-file", str(tmp_path / "no" / "dir" / "e.ndjson"))
    assert nowhere.returncode == 125 and nowhere.stdout == b""  # a file of ours could not be written


# -- files named by the user: a link is followed only when it is ours or root's ----------------------------------


@pytest.mark.parametrize("named", ["batch --joblog", "batch --events-file", "run --events-file"])
def test_a_log_named_through_another_users_symlink_is_refused_and_our_own_link_is_followed(
    other_user: tuple[int, int], shared_base: Path, named: str
) -> None:
    """``--joblog`` and ``--events-file`` followed any symbolic link: as root, a link another user planted where
    the file is named (her directory, or a shared one such as /tmp) had root append to or truncate a file of
    root's she chose."""
    command, flag = named.split()
    precious = shared_base / "precious"
    precious.write_text("root's own\n")
    hers, sticky = shared_base / "hers", shared_base / "sticky"
    hers.mkdir()
    os.chown(hers, *other_user)
    sticky.mkdir()
    sticky.chmod(0o1777)
    what = "job log" if flag == "--joblog" else "events file"

    def go(path: Path) -> subprocess.CompletedProcess[bytes]:
        if command == "run":
            return subprocess.run([*CLI, "run", "--allow-empty-answer", flag, str(path), "--", "true"],
                                  capture_output=True, timeout=120)
        return _batch("-", flag, str(path), input=b'{"id":"a","cmd":["true"],"allow_empty_answer":true}\n')

    for link in (hers / "log", sticky / "log"):
        link.symlink_to(precious)
        os.lchown(link, *other_user)
        p = go(link)
        assert p.returncode == 2 and p.stdout == b"", p.stderr
        assert p.stderr.decode() == (f"spoolparse: error: {what} {str(link)!r} is a symbolic link owned by another "
                                     f"user (uid {other_user[0]})\n")
        assert precious.read_text() == "root's own\n"
    through = hers / "sub"  # her link on the way to the file
    through.symlink_to(shared_base)
    os.lchown(through, *other_user)
    p = go(through / "precious")
    assert p.returncode == 2 and f"goes through {str(through)!r}, which is a symbolic link owned".encode() in p.stderr
    assert precious.read_text() == "root's own\n"
    mine = shared_base / "mine"  # our own link to our log: followed
    mine.symlink_to("precious")
    p = go(mine)
    assert p.returncode == 0, p.stderr
    written = precious.read_text()
    if flag == "--joblog":
        assert written.startswith("root's own\n") and json.loads(written.splitlines()[1])["id"] == "a"
    else:
        assert all(isinstance(json.loads(x), dict) for x in written.splitlines())


def test_an_events_file_of_the_kernels_own_links_is_written(tmp_path: Path) -> None:
    """``/dev/stderr`` leads through ``/proc/self/fd/2`` to a pipe: the kernel's own links, followed as before."""
    tasks = _tasks(tmp_path / "t.jsonl", [{"id": "a", "cmd": [*LIVE_AGENT, "--ticks", "1"]}])
    p = _batch(tasks, "--events-file", "/dev/stderr")
    assert p.returncode == 0 and [o["verdict"] for o in _outcomes(p.stdout).values()] == ["ok"], p.stderr
    assert {e["task"] for e in _ndjson(p.stderr)} == {"a"}, p.stderr


@pytest.mark.parametrize("flag", ["--joblog", "--events-file"])
def test_a_log_named_through_a_file_or_a_missing_directory_is_the_kernels_error(tmp_path: Path, flag: str) -> None:
    """Not a refusal: the kernel's words, naming the path as given, exit 125 as before the walk."""
    (tmp_path / "f").write_text("")
    for path, said in ((tmp_path / "f" / "log", "Not a directory"), (tmp_path / "no" / "log", "No such file")):
        p = _batch("-", flag, str(path), input=b'{"id":"a","cmd":["true"],"allow_empty_answer":true}\n')
        assert (p.returncode, p.stdout) == (125, b""), p.stderr
        assert p.stderr.decode().startswith(f"spoolparse: error: {said}") and str(path) in p.stderr.decode()


# -- exit statuses -----------------------------------------------------------------------------------


@pytest.mark.slow
def test_batch_exit_statuses_follow_the_one_table(tmp_path: Path) -> None:
    from spoolparse._cli_common import EXIT_FAILURE, EXIT_NOT_OK, EXIT_OK, EXIT_USAGE

    ok = _tasks(tmp_path / "ok.jsonl", [{"id": "a", "cmd": ANSWER}])
    mixed = _tasks(tmp_path / "mixed.jsonl", [{"id": "a", "cmd": ANSWER}, {"id": "b", "cmd": ["sleep", "9"],
                                                                           "timeout": 0.2}])
    assert _batch(ok).returncode == EXIT_OK
    assert _batch(mixed, "--grace", "0").returncode == EXIT_NOT_OK  # a timed-out task is a task not ok
    assert _batch(ok, "--stop-at", "2").returncode == EXIT_USAGE
    assert _batch(str(tmp_path / "missing.jsonl")).returncode == EXIT_USAGE
    assert _batch(ok, "--joblog", str(tmp_path / "no" / "dir" / "j")).returncode == EXIT_FAILURE
    assert "125" in subprocess.run([*CLI, "batch", "--help"], capture_output=True, timeout=60).stdout.decode()


def test_a_results_dir_that_cannot_be_made_is_a_usage_error_before_anything_starts(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    (tmp_path / "file").write_text("")
    tasks = _tasks(tmp_path / "t.jsonl", [{"id": "a", "cmd": ["touch", str(marker)]}])
    p = _batch(tasks, "--results", str(tmp_path / "file" / "sub"))
    assert p.returncode == 2 and b"results" in p.stderr and len(p.stderr.splitlines()) == 1, p.stderr
    assert not marker.exists()


def test_a_ray_node_runs_its_share_with_the_drivers_options() -> None:
    """The node half of the Ray backend (no Ray needed): options travel pickled, the node keeps its own log."""
    import asyncio
    import pickle

    from spoolparse.runner.ray_node import NodeRunner
    from spoolparse.runner.ray_wire import dumps, encode_task, loads
    from spoolparse.runner.tasks import Task

    options = pickle.loads(pickle.dumps(BatchOptions(max_concurrent=2, retries=1, retry_backoff=0.01, halt="soon",
                                                     ordered=True)))
    assert options.halt == Halt("soon") and options.retries == 1

    async def go() -> list[dict[str, Any]]:
        node = NodeRunner(options)
        try:
            assert (node.capacity, node.opts.halt, node.opts.ordered, node.opts.joblog) == (2, None, False,
                                                                                            node.log_path)
            tasks = [encode_task(i, Task(id=f"n{i}", argv=argv)) for i, argv in enumerate([ANSWER, ["false"]])]
            got: list[dict[str, Any]] = []
            reply = loads(await node.exchange(dumps(tasks), 5.0))
            got += reply["out"]
            for _ in range(100):
                if len(got) == 2:
                    break
                got += loads(await node.exchange(b"", 1.0))["out"]
            return got
        finally:
            await node.cancel()

    saved = dict(os.environ)  # a node marks its environment for its guardian's sweep
    try:
        outs = asyncio.run(go())
    finally:
        os.environ.clear()
        os.environ.update(saved)
    # on the wire a task is its sequence number; the failing one ran twice (retries=1 reached the node)
    assert sorted((o["id"], o["verdict"], o["attempts"]) for o in outs) == [(0, "ok", 1), (1, "failed", 2)]


def test_a_ray_node_makes_its_job_log_only_where_nobody_else_can_rename_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The node's job log was ``mkstemp``'d in the temp dir, then opened again by its name (by the batch the
    node runs, by the node's reader, by the guardian that deletes it): in a temp dir others may write to
    without the sticky bit, another user could put a file or a link of hers in its place meanwhile."""
    import tempfile

    from spoolparse.runner.ray_node import NodeRunner

    open_to_all = tmp_path / "open"
    open_to_all.mkdir()
    open_to_all.chmod(0o777)
    monkeypatch.setenv("TMPDIR", str(open_to_all))
    monkeypatch.setattr(tempfile, "tempdir", None)  # not the one tempfile took from the environment before
    with pytest.warns(spoolparse.SpoolDirWarning), pytest.raises(OSError) as e:
        NodeRunner(BatchOptions(max_concurrent=1))
    assert e.value.strerror == (f"cannot make the node's job log in {str(open_to_all)!r}: it is writable by others "
                                "(mode 0777)")
    assert [n for n in os.listdir(open_to_all) if "node" in n] == []  # (spools may have been tried in it)


# -- progress ----------------------------------------------------------------------------------------


@pytest.mark.slow  # several seconds: kept out of the quick subset
def test_progress_line_counts_done_of_total_running_failed_and_gives_an_eta(tmp_path: Path) -> None:
    rows = [{"id": "bad", "cmd": ["false"]}, *({"id": f"t{i}", "cmd": ["sleep", "0.5"]} for i in range(4))]
    path = tmp_path / "t.jsonl"
    path.write_text("\n" + "".join(json.dumps(r) + "\n\n" for r in rows))  # blank lines: no task, not counted
    p = _batch(str(path), "-j", "1", "--progress", "--allow-empty-answer")  # sleep answers nothing: its exit counts
    assert p.returncode == 1, p.stderr
    err = p.stderr.decode()
    assert "done 5/5 | running 0 | queued 0 | failed 1 | memory " in err
    assert "| ETA " in err  # drawn while tasks were left, from the pace so far
    piped = _batch("-", "-j", "1", "--progress", "--allow-empty-answer", input=path.read_bytes())
    assert "done 5 | running 0" in piped.stderr.decode() and "ETA" not in piped.stderr.decode()  # no total known


def test_counting_task_lines_is_exact_across_read_boundaries(tmp_path: Path) -> None:
    from spoolparse.runner.cli import _count_lines

    path = tmp_path / "t"
    for data in [b"", b"a", b"a\n", b"\n\na\n\n\nb\n\n\n", b"a\nb", b"\n" * 5, b"\n" * (1 << 20) + b"ab\n",
                 b"a" * ((1 << 20) - 1) + b"b\n\n", (b"{}" * 700_000 + b"\n") * 3]:
        path.write_bytes(data)
        assert _count_lines(str(path)) == sum(1 for line in data.split(b"\n") if line), data[:20]
    assert _count_lines("-") is None and _count_lines(str(tmp_path / "missing")) is None


# -- each task's child options: the batch's flags, a task line's keys over them ------------------------------------

#: A Claude Code stream: an assistant text of argv[2] characters, a tool result of argv[1], then the answer.
CLAUDE_STREAM = r"""
import json, sys
tool, text = int(sys.argv[1]), int(sys.argv[2])
for event in (
    {"type": "system", "subtype": "init", "session_id": "s1", "model": "m"},
    {"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": "t" * text}]}},
    {"type": "user", "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "u",
                                                              "content": "y" * tool}]}},
    {"type": "result", "subtype": "success", "is_error": False, "result": "done",
     "usage": {"input_tokens": 1, "output_tokens": 2}},
):
    sys.stdout.write(json.dumps(event) + "\n")
"""


#: One JSON event and no answer.
SAYS_NOTHING = [sys.executable, "-c", "print('{\"type\": \"x\"}')"]


def _claude(tool: int, text: int) -> list[str]:
    return [sys.executable, "-c", CLAUDE_STREAM, str(tool), str(text)]


def _dropped(outcome: dict[str, Any]) -> list[str]:
    return sorted(d["type"] for d in outcome["summary"]["dropped"])


def test_the_batch_flags_apply_to_every_task_and_a_task_line_overrides_each(tmp_path: Path) -> None:
    # --max-line 1K: the 3 KB tool result is drained; --max-retained 8K: the 10 KB assistant text is dropped
    stream = _claude(3000, 10_000)
    tasks = _tasks(tmp_path / "t.jsonl", [
        {"id": "flags", "cmd": stream},
        {"id": "again", "cmd": stream},
        {"id": "line", "cmd": stream, "max_line": "4K"},
        {"id": "retained", "cmd": stream, "max_retained": 16384},
        {"id": "provider", "cmd": stream, "provider": "auto"},
        {"id": "capped", "cmd": stream, "max_spool_bytes": "1K"},
        {"id": "silent", "cmd": SAYS_NOTHING, "provider": "generic"},
        {"id": "strict", "cmd": SAYS_NOTHING, "provider": "generic", "allow_empty_answer": False},
    ])
    p = _batch(tasks, "--provider", "claude", "--max-line", "1K", "--max-retained", "8K", "--allow-empty-answer",
               "--max-spool-bytes", "1M", "-j", "2", "--memory-per-task", "1M")
    out = _outcomes(p.stdout)
    for tid in ("flags", "again"):  # every task: the batch's provider and bounds
        s = out[tid]["summary"]
        assert out[tid]["verdict"] == "ok" and s["detected_by"] == "--provider", out[tid]
        assert _dropped(out[tid]) == ["assistant", "user"], s["dropped"]
    assert _dropped(out["line"]) == ["assistant"]  # its own max_line reads the tool result whole
    assert _dropped(out["retained"]) == ["user"]  # its own max_retained keeps the assistant text
    assert out["provider"]["summary"]["detected_by"] != "--provider"  # detected, as its line asks
    assert out["provider"]["summary"]["provider"] == "claude"
    assert out["capped"]["verdict"] == "failed" and "spool" in out["capped"]["error"], out["capped"]
    assert out["silent"]["verdict"] == "ok", out["silent"]  # --allow-empty-answer, for every task
    assert out["strict"]["verdict"] == "failed", out["strict"]  # its line says an empty answer is not ok
    assert p.returncode == 1, p.stderr


def test_a_task_line_whose_bounds_do_not_fit_the_batch_s_gets_its_own_error(tmp_path: Path) -> None:
    tasks = _tasks(tmp_path / "t.jsonl", [{"id": "small", "cmd": ANSWER, "max_retained": "1K"},
                                           {"id": "zero", "cmd": ANSWER, "max_line": 0},
                                           {"id": "fine", "cmd": ANSWER, "provider": "generic"}])
    p = _batch(tasks, "--max-line", "2K", "--allow-empty-answer", "--memory-per-task", "1M")
    out = _outcomes(p.stdout)
    assert out["small"]["verdict"] == "spawn_error"
    assert out["small"]["error"] == "max_retained (1024) must be at least max_line (2048)", out["small"]
    assert out["zero"]["verdict"] == "spawn_error" and "max_line" in out["zero"]["error"], out["zero"]
    assert out["fine"]["verdict"] == "ok", out["fine"]


@pytest.mark.parametrize(("flag", "value", "needle"), [
    ("--provider", "nope", b"invalid choice"), ("--max-line", "0", b"max_line must be at least 1 byte"),
    ("--max-retained", "1K", b"max_retained (1024) must be at least max_line"), ("--max-line", "x", b"not a size"),
])
def test_bad_per_child_flags_of_batch_are_usage_errors(tmp_path: Path, flag: str, value: str, needle: bytes) -> None:
    tasks = _tasks(tmp_path / "t.jsonl", [{"id": "a", "cmd": ["touch", str(tmp_path / "ran")]}])
    p = _batch(tasks, flag, value)
    assert p.returncode == 2 and needle in p.stderr, p.stderr
    assert not (tmp_path / "ran").exists()


@pytest.mark.slow  # ~400 MB of transcripts
def test_batch_provider_claude_max_line_32m_max_retained_128m(tmp_path: Path) -> None:
    """The flags as written in the docs: a 20 MiB tool result (past the default 16M) is read whole with
    --max-line 32M, a 70 MiB answer text (past the default 64M) is kept with --max-retained 128M; a task line
    that sets each back to the default drops that line again."""
    stream = _claude(20 << 20, 70 << 20)
    tasks = _tasks(tmp_path / "t.jsonl", [
        {"id": "flags", "cmd": stream},
        {"id": "line", "cmd": stream, "max_line": "16M"},
        {"id": "retained", "cmd": stream, "max_retained": "64M"},
        {"id": "provider", "cmd": _claude(10, 10), "provider": "auto"},
    ])
    p = _batch(tasks, "--provider", "claude", "--max-line", "32M", "--max-retained", "128M", "-j", "1",
               "--memory-per-task", "1M")
    out = _outcomes(p.stdout)
    assert out["flags"]["verdict"] == "ok" and _dropped(out["flags"]) == [], out["flags"]["summary"]["warnings"]
    assert out["flags"]["summary"]["detected_by"] == "--provider"
    assert _dropped(out["line"]) == ["user"]
    assert _dropped(out["retained"]) == ["assistant"]
    assert out["provider"]["summary"]["detected_by"] != "--provider" and out["provider"]["verdict"] == "ok"


def test_batch_options_hold_each_tasks_child_options_and_a_task_overrides_them() -> None:
    from spoolparse import ChildOptions, Task

    o = BatchOptions(provider="claude", max_line=32 << 20, max_retained=128 << 20, timeout=60.0, retries=2)
    assert isinstance(o.child, ChildOptions) and type(o.child) is ChildOptions
    assert o.child == ChildOptions(provider="claude", max_line=32 << 20, max_retained=128 << 20, timeout=60.0)
    assert Task(argv=["x"]).child_options(o.child) is o.child  # nothing set: the batch's own
    own = Task(argv=["x"], provider="codex", max_line=1 << 20, timeout=5.0, env={"K": "V"}).child_options(o.child)
    assert (own.provider, own.max_line, own.max_retained, own.timeout) == ("codex", 1 << 20, 128 << 20, 5.0)
    assert own.env is not None and own.env["K"] == "V" and own.env.get("PATH") == os.environ.get("PATH")
    with pytest.raises(UsageError, match="must be at least max_line"):
        Task(argv=["x"], max_retained=1 << 20).child_options(o.child)
