"""The command line: one JSON object on stdout, one-line errors, exit statuses."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from spoolparse import SUMMARY_FIELDS
from spoolparse.cli import parse_size

from .helpers import FAKE_CODEX, jl

CLI = [sys.executable, "-m", "spoolparse"]


def cli(*args: str, input: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([*CLI, *args], input=input, capture_output=True, timeout=120, check=False)


def one_json(out: bytes) -> dict:  # type: ignore[type-arg]
    lines = out.decode().splitlines()
    assert len(lines) == 1, out[:500]
    return json.loads(lines[0])  # type: ignore[no-any-return]


def test_run_prints_one_summary_with_every_field() -> None:
    p = cli("run", "--", *FAKE_CODEX, "--size", "1M")
    assert p.returncode == 0, p.stderr
    s = one_json(p.stdout)
    assert tuple(s) == SUMMARY_FIELDS
    assert s["ok"] is True and s["text"].startswith("FINAL-ANSWER")
    assert s["usage"]["input_tokens"] == 24763
    assert p.stderr == b""


def test_run_options(tmp_path: Path) -> None:
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("hello from a file")
    code = "import sys,json,os; print(json.dumps({'type':'result','result':sys.stdin.read()+'@'+os.getcwd()}))"
    p = cli("run", "--input", str(prompt), "--cwd", str(tmp_path), "--spool-dir", str(tmp_path),
            "--provider", "generic", "--pretty", "--", sys.executable, "-c", code)
    s = json.loads(p.stdout)
    assert s["text"] == f"hello from a file@{tmp_path}"
    assert s["provider"] == "generic"
    p = cli("run", "--input", "-", "--", sys.executable, "-c", code, input=b"from stdin")
    assert one_json(p.stdout)["text"].startswith("from stdin@")


@pytest.mark.parametrize(
    ("args", "status"),
    [
        (["--exit", "3"], 1),  # the child's own code is in the summary, never passed on
        (["--fail", "boom"], 1),
        (["--fail", "boom", "--exit", "0"], 1),
        (["--hang", "30"], 124),
    ],
)
def test_exit_statuses(args: list[str], status: int) -> None:
    extra = ["--timeout", "0.5"] if "--hang" in args else []
    p = cli("run", *extra, "--", *FAKE_CODEX, *args)
    assert p.returncode == status
    s = one_json(p.stdout)
    assert s["ok"] is False
    if "--exit" in args:
        assert s["returncode"] == int(args[args.index("--exit") + 1])
    if status == 124:
        assert s["timed_out"] is True


def test_signal_exit_status_is_128_plus_n() -> None:
    p = cli("run", "--", "sh", "-c", "kill -KILL $$")
    assert p.returncode == 128 + 9
    assert one_json(p.stdout)["returncode"] == -9


@pytest.mark.parametrize(
    ("args", "status", "needle"),
    [
        (["run"], 2, "needs a command"),
        (["run", "--", "no-such-command-xyz"], 127, "no-such-command-xyz"),
        (["run", "--", "/etc/hostname"], 126, "/etc/hostname"),
        (["run", "--max-line", "lots", "--", "true"], 2, "not a size"),
        (["run", "--bogus", "--", "true"], 2, "bogus"),
        (["run", "--provider", "nope", "--", "true"], 2, "nope"),
        (["run", "--max-spool-bytes", "100K", "--", *FAKE_CODEX, "--size", "10M"], 125, "spool full"),
        (["parse", "/no/such/file.jsonl"], 2, "no such file"),
        ([], 2, "a command is needed"),
    ],
)
def test_errors_are_one_line(args: list[str], status: int, needle: str) -> None:
    p = cli(*args)
    err = p.stderr.decode()
    assert p.returncode == status, err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    assert needle in err.lower() or needle in err
    if status == 125:
        assert one_json(p.stdout)["spool_full"] is True


def test_parse_file_and_stdin(tmp_path: Path) -> None:
    data = jl({"type": "thread.started", "thread_id": "t"},
              {"type": "item.completed", "item": {"id": "i", "type": "agent_message", "text": "parsed"}},
              {"type": "turn.completed", "usage": {"input_tokens": 1, "output_tokens": 2}})
    f = tmp_path / "t.jsonl"
    f.write_bytes(data)
    for p in (cli("parse", str(f)), cli("parse", "-", input=data)):
        assert p.returncode == 0
        s = one_json(p.stdout)
        assert (s["text"], s["session_id"], s["returncode"]) == ("parsed", "t", None)
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(jl({"type": "turn.failed", "error": {"message": "nope"}}))
    assert cli("parse", str(bad)).returncode == 1


def test_help_and_version() -> None:
    p = cli("run", "--help")
    assert p.returncode == 0 and b"examples:" in p.stdout and b"codex exec --json" in p.stdout
    p = cli("--version")
    assert p.returncode == 0 and p.stdout.startswith(b"spoolparse ")


def test_console_script_is_installed() -> None:
    import shutil

    # next to this interpreter (a venv used without activating it), else on PATH
    beside = Path(sys.executable).with_name("spoolparse")
    exe = str(beside) if beside.exists() else shutil.which("spoolparse")
    assert exe is not None
    p = subprocess.run([exe, "--version"], capture_output=True, check=False)
    assert p.returncode == 0


def test_parse_size() -> None:
    assert parse_size("16M") == 16 << 20
    assert parse_size("64MiB") == 64 << 20
    assert parse_size("4G") == 4 << 30
    assert parse_size("1024") == 1024
    assert parse_size("1.5k") == 1536


def test_unusable_spool_dir_variable_warns_once_on_stderr(tmp_path: Path) -> None:
    import os

    afile = tmp_path / "not-a-dir"
    afile.write_text("x")
    p = subprocess.run([*CLI, "run", "--", *FAKE_CODEX, "--size", "1K"], capture_output=True, check=False,
                       env={**os.environ, "PDD_AGENT_SPOOL_DIR": str(afile)})
    assert p.returncode == 0
    err = p.stderr.decode().strip().splitlines()
    assert len(err) == 1 and err[0].startswith("spoolparse: warning:") and "not a directory" in err[0]
    assert one_json(p.stdout)["ok"] is True
