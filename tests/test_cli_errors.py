"""The error surface: one exception hierarchy with the facts as attributes, and a CLI that turns each
failure into one line on stderr and its documented exit status (``spoolparse/cli.py``), never a traceback."""

from __future__ import annotations

import errno
import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import spoolparse
from spoolparse import errors

from .helpers import ROOT

CLI = [sys.executable, "-m", "spoolparse"]


def _cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([*CLI, *args], capture_output=True, cwd=cwd, timeout=120, check=False)


@pytest.fixture
def not_executable(tmp_path: Path) -> Path:
    script = tmp_path / "agent.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(0o644)
    return script


@pytest.fixture
def transcript(tmp_path: Path) -> Path:
    t = tmp_path / "t.jsonl"
    t.write_text('{"type":"result","result":"hi"}\n')
    return t


# (case, argv, exit status, what the one line must say; "{tmp}" is the test's temp dir)
FAILURES = [
    ("unknown option", ["run", "--no-such-option", "--", "true"], 2, "unrecognized arguments: --no-such-option"),
    ("unknown command", ["frobnicate"], 2, "invalid choice: 'frobnicate'"),
    ("missing command", ["run"], 2, "run needs a command"),
    ("missing command after --", ["run", "--"], 2, "run needs a command"),
    ("command not found", ["run", "--", "spoolparse-no-such-command-x"], 127,
     "cannot start 'spoolparse-no-such-command-x': No such file or directory"),
    ("not executable", ["run", "--", "{script}"], 126, "Permission denied"),
    ("missing cwd", ["run", "--cwd", "{tmp}/nowhere", "--", "true"], 2, "--cwd '{tmp}/nowhere': no such directory"),
    ("spool full", ["run", "--max-spool-bytes", "64K", "--", "sh", "-c", "yes '{}'"], 125,
     "max_spool_bytes 65536 exceeded"),
    ("bad --max-line", ["run", "--max-line", "lots", "--", "true"], 2, "not a size: 'lots'"),
    ("zero --max-line", ["parse", "--max-line", "0", "{transcript}"], 2, "max_line must be at least 1 byte"),
    ("--max-retained under --max-line", ["parse", "--max-line", "1M", "--max-retained", "1K", "{transcript}"], 2,
     "max_retained (1024) must be at least max_line (1048576)"),
    ("missing parse file", ["parse", "{tmp}/missing.jsonl"], 2, "no such file: {tmp}/missing.jsonl"),
    ("unknown provider", ["parse", "--provider", "nope", "{transcript}"], 2, "invalid choice: 'nope'"),
    ("bad --timeout", ["run", "--timeout", "-1", "--", "true"], 2, "duration must be positive: '-1'"),
    ("zero --timeout", ["run", "--timeout", "0", "--", "true"], 2, "duration must be positive: '0'"),
    ("--timeout without a number", ["run", "--timeout", "soon", "--", "true"], 2, "not a duration: 'soon'"),
    ("infinite --timeout", ["run", "--timeout", "1e999", "--", "true"], 2, "not a duration: '1e999'"),
    ("negative --grace", ["run", "--grace=-1s", "--", "true"], 2, "duration must be 0 or more: '-1s'"),
    ("zero --max-spool-bytes", ["run", "--max-spool-bytes", "0", "--", "true"], 2, "size must be positive: '0'"),
    ("zero --memory-per-task", ["batch", "--memory-per-task", "0G", "-"], 2, "size must be positive: '0G'"),
    ("bad batch --timeout", ["batch", "--timeout", "10x", "-"], 2, "not a duration: '10x'"),
    ("timeout", ["run", "--timeout", "0.3", "--", "sleep", "30"], 124, "timed out after 0.3 seconds"),
    ("missing spool dir", ["run", "--spool-dir", "{tmp}/nope", "--", "true"], 2, "does not exist"),
    ("missing input", ["run", "--input", "{tmp}/nope.txt", "--", "cat"], 2, "cannot read input"),
]


@pytest.mark.parametrize(("case", "argv", "status", "needle"), FAILURES, ids=[f[0] for f in FAILURES])
def test_each_failure_is_one_line_and_its_exit_status(case: str, argv: list[str], status: int, needle: str,
                                                     tmp_path: Path, not_executable: Path,
                                                     transcript: Path) -> None:
    subs = {"{tmp}": str(tmp_path), "{script}": str(not_executable), "{transcript}": str(transcript)}

    def fill(text: str) -> str:
        for k, v in subs.items():
            text = text.replace(k, v)
        return text

    p = _cli(*(fill(a) for a in argv))
    err = p.stderr.decode()
    assert p.returncode == status, err
    assert "Traceback" not in err
    assert err.endswith("\n") and err.count("\n") == 1, err  # exactly one line
    assert err.startswith(("spoolparse: error: ", "spoolparse run: error: ", "spoolparse parse: error: ",
                           "spoolparse batch: error: ")), err
    assert fill(needle) in err
    if status in (124, 125):  # the run happened: its summary is still the one JSON object on stdout
        summary = json.loads(p.stdout)
        assert summary["timed_out"] is (status == 124) and summary["spool_full"] is (status == 125)
    else:
        assert p.stdout == b""


def test_every_exception_is_one_hierarchy_with_facts() -> None:
    classes = [c for _, c in inspect.getmembers(errors, inspect.isclass)
               if issubclass(c, BaseException) and c.__module__ == errors.__name__]
    raised = [c for c in classes if not issubclass(c, Warning)]
    assert set(raised) >= {errors.Error, errors.UsageError, errors.SpawnError, errors.SpoolFullError,
                           errors.TimeoutExpired, errors.CalledProcessError}
    assert all(issubclass(c, spoolparse.Error) for c in raised)
    assert all(issubclass(c, spoolparse.SpoolWarning) for c in classes if issubclass(c, Warning))
    assert {name for name in errors.__all__} <= set(spoolparse.__all__)
    assert issubclass(errors.UsageError, ValueError) and issubclass(errors.SpawnError, OSError)


def test_spawn_error_facts(tmp_path: Path) -> None:
    with pytest.raises(spoolparse.SpawnError) as e:
        spoolparse.run(["true", "--flag"], cwd=tmp_path / "nowhere")
    err = e.value
    assert err.argv == ["true", "--flag"] and err.errno == 2 and os.fspath(err.filename) == str(tmp_path / "nowhere")
    assert str(err) == f"cannot start 'true': No such file or directory ({tmp_path / 'nowhere'})"


def test_spool_full_error_facts(tmp_path: Path) -> None:
    with pytest.raises(spoolparse.SpoolFullError) as e:
        spoolparse.run(["sh", "-c", "yes '{}'"], spool_dir=tmp_path, max_spool_bytes=4096)
    err = e.value
    assert err.directory == str(tmp_path) and err.bytes_written > 4096
    assert err.reason == "max_spool_bytes 4096 exceeded"
    assert err.result is not None and err.result.spool_full
    assert str(err) == f"spool full in {tmp_path} after {err.bytes_written} bytes ({err.reason})"
    err.result.close()


def test_timeout_and_called_process_error_facts() -> None:
    with pytest.raises(spoolparse.TimeoutExpired) as t:
        spoolparse.run(["sleep", "30"], timeout=0.2, grace=0.5, check=True)
    assert t.value.timeout == 0.2 and t.value.cmd == ["sleep", "30"] and t.value.result.timed_out
    with pytest.raises(spoolparse.CalledProcessError) as c:
        spoolparse.run(["sh", "-c", "exit 7"], check=True)
    assert c.value.returncode == 7 and c.value.cmd == ["sh", "-c", "exit 7"]
    assert str(c.value) == "command ['sh', '-c', 'exit 7'] returned non-zero exit status 7"


def test_check_errors_are_the_stdlib_subprocess_errors_too() -> None:
    # code written for subprocess.run(check=True, timeout=...) catches ours unchanged, attributes included
    with pytest.raises(subprocess.TimeoutExpired) as t:
        spoolparse.run(["sh", "-c", "echo slow >&2; exec sleep 30"], timeout=0.2, grace=0.5, check=True)
    assert isinstance(t.value, spoolparse.TimeoutExpired)
    assert t.value.cmd == ["sh", "-c", "echo slow >&2; exec sleep 30"] and t.value.timeout == 0.2
    assert t.value.output is None and t.value.stdout is None and t.value.stderr == b"slow\n"
    assert "timed out after 0.2 seconds" in str(t.value)
    with pytest.raises(subprocess.CalledProcessError) as c:
        spoolparse.run(["sh", "-c", "echo oops >&2; exit 3"], check=True)
    assert isinstance(c.value, spoolparse.CalledProcessError)
    assert c.value.returncode == 3 and c.value.cmd == ["sh", "-c", "echo oops >&2; exit 3"]
    assert c.value.output is None and c.value.stdout is None and c.value.stderr == b"oops\n"
    assert isinstance(c.value, subprocess.SubprocessError) and isinstance(c.value, spoolparse.Error)


def test_unusable_spool_dir_is_an_os_error(tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("x")
    with pytest.raises(OSError) as e:
        spoolparse.run(["true"], spool_dir=afile)
    assert isinstance(e.value, spoolparse.SpoolDirError) and not isinstance(e.value, spoolparse.UsageError)
    assert e.value.errno == errno.ENOTDIR and e.value.filename == str(afile)
    assert str(e.value) == f"spool directory {str(afile)!r} is not a directory"


@pytest.mark.parametrize("kwargs", [
    {"timeout": -1}, {"grace": -1}, {"max_line": 0}, {"max_line": 10, "max_retained": 5}, {"provider": "nope"},
])
def test_misuse_raises_usage_error_and_starts_nothing(kwargs: dict[str, object], tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    with pytest.raises(spoolparse.UsageError):
        spoolparse.run(["touch", str(marker)], **kwargs)  # type: ignore[arg-type]
    assert not marker.exists()


@pytest.mark.parametrize(("interrupt", "status", "said"), [
    ("Interrupted", 130, "spoolparse: error: interrupted by SIGINT"),
    ("KeyboardInterrupt", 130, "spoolparse: error: interrupted"),
])
def test_a_signal_python_wrapped_as_a_module_loads_is_an_interrupt_not_an_internal_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], interrupt: str, status: int, said: str,
) -> None:
    """A Ctrl-C inside a dataclass being made (as a module loads lazily) reaches the command as Python's
    RuntimeError ("Error calling __set_name__ ..."): it said "internal error" and exited 125."""
    import signal as signal_mod

    from spoolparse import cli
    from spoolparse._signals import Interrupted

    def command(args: object) -> int:
        cause: KeyboardInterrupt = Interrupted(signal_mod.SIGINT) if interrupt == "Interrupted" else KeyboardInterrupt()
        raise RuntimeError("Error calling __set_name__ on 'Field' instance 'usage' in 'Answer'") from cause

    monkeypatch.setattr(cli, "_cmd_parse", command)
    assert cli.main(["parse", "-"]) == status
    assert capsys.readouterr().err.strip() == said
