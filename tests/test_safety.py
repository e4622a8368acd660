"""Safety: nameless 0600 spools, unsafe spool directories warned about, secrets kept out of summaries and
events, no shell unless asked, commands shown as quoted argv."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

import spoolparse
from spoolparse import SpoolDirWarning, UsageError
from spoolparse import spool as spool_mod

from .helpers import ANSWERS, ROOT, named_files

# The child reports what its own fds 0-2 point at and their modes, as its answer.
FD_REPORT = [sys.executable, "-c", "import json,os,sys; sys.stdin.buffer.read(); fds=(0,1,2); print(json.dumps("
             "{'type':'result','result':json.dumps([[os.readlink(f'/proc/self/fd/{i}') for i in fds],"
             "[os.fstat(i).st_mode & 0o7777 for i in fds]])}))"]


@pytest.fixture(autouse=True)
def _fresh_warnings() -> Iterator[None]:
    spool_mod._warned.clear()
    yield
    spool_mod._warned.clear()


def _nameless(target: str) -> bool:
    """An unlinked file (``(deleted)``) or an O_TMPFILE one (``/dir/#inode``): no path reaches it."""
    return target.endswith(" (deleted)") or os.path.basename(target).startswith("#")


def test_spools_have_no_name_and_mode_0600(tmp_path: Path) -> None:
    seen_during: list[list[str]] = []

    def look(ev: spoolparse.LiveEvent) -> None:
        seen_during.append(named_files(tmp_path))

    with spoolparse.run(FD_REPORT, input=b"a prompt", spool_dir=tmp_path, on_event=look) as r:
        assert r.text is not None
        targets, modes = json.loads(r.text)
        assert r.stdout is not None and r.stderr is not None
        ours = [os.readlink(f"/proc/self/fd/{f.fileno()}") for f in (r.stdout, r.stderr)]
        assert all(_nameless(t) for t in ours), ours
        assert all(os.fstat(f.fileno()).st_mode & 0o7777 == 0o600 for f in (r.stdout, r.stderr))
    assert all(t.startswith(str(tmp_path)) and _nameless(t) for t in targets), targets  # stdin, stdout, stderr
    assert modes == [0o600] * 3
    assert seen_during and all(entries == [] for entries in seen_during)  # no file ever visible in the dir
    assert named_files(tmp_path) == []


@pytest.mark.parametrize("via", ["argument", "env"])
def test_world_writable_spool_dir_without_sticky_bit_warns(via: str, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    unsafe = tmp_path / "open"
    unsafe.mkdir()
    unsafe.chmod(0o777)
    kwargs: dict[str, Any] = {}
    if via == "argument":
        kwargs["spool_dir"] = unsafe
    else:
        monkeypatch.setenv(spool_mod.ENV_VAR, str(unsafe))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            with spoolparse.run(ANSWERS, **kwargs) as r:
                assert r.ok
    mine = [w for w in caught if issubclass(w.category, SpoolDirWarning)]
    assert len(mine) == 1 and "world-writable without the sticky bit" in str(mine[0].message)
    assert str(unsafe) in str(mine[0].message)


def test_sticky_world_writable_spool_dir_is_fine(tmp_path: Path) -> None:
    sticky = tmp_path / "sticky"
    sticky.mkdir()
    sticky.chmod(0o1777)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SpoolDirWarning)
        with spoolparse.run(ANSWERS, spool_dir=sticky) as r:
            assert r.ok


SECRET_ENV = "spoolparse-env-secret-7f3a91"
SECRET_INPUT = "spoolparse-input-secret-c0ffee"
QUIET_CHILD = [sys.executable, "-c", "import sys; sys.stdin.read(); print('{\"type\":\"result\",\"result\":\"done\"}')"]


def test_env_and_input_never_reach_summaries_or_events() -> None:
    live: list[dict[str, Any]] = []
    env = {**os.environ, "API_KEY": SECRET_ENV}
    with spoolparse.run(QUIET_CHILD, env=env, input=SECRET_INPUT, on_event=lambda ev: live.append(ev.as_dict())) as r:
        assert r.text == "done"
        blob = orjson.dumps([r.summary(), live], option=orjson.OPT_NON_STR_KEYS, default=str).decode() + repr(r)
    assert live
    assert SECRET_ENV not in blob and SECRET_INPUT not in blob


def test_cli_keeps_env_and_input_out_of_its_output(tmp_path: Path) -> None:
    prompt = tmp_path / "prompt.txt"
    prompt.write_text(SECRET_INPUT)
    events = tmp_path / "events.ndjson"
    cmd = [sys.executable, "-m", "spoolparse", "run", "--input", str(prompt), "--events-file", str(events),
           "--", *QUIET_CHILD]
    proc = subprocess.run(cmd, capture_output=True, cwd=ROOT, env={**os.environ, "API_KEY": SECRET_ENV},
                          timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["text"] == "done"
    everything = proc.stdout + proc.stderr + events.read_bytes()
    assert events.read_bytes()
    assert SECRET_ENV.encode() not in everything and SECRET_INPUT.encode() not in everything


ECHO_ARGV = [sys.executable, "-c", "import json,sys; print(json.dumps({'type':'result','result':sys.argv[1]}))"]


def test_no_shell_unless_asked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    argvs: list[list[str]] = []
    real = subprocess.Popen

    def spy(*a: Any, **kw: Any) -> Any:
        assert not kw.get("shell", False)  # a shell, when asked for, is an argv of our own
        argvs.append(list(a[0]))
        return real(*a, **kw)

    monkeypatch.setattr(subprocess, "Popen", spy)
    marker = tmp_path / "pwned"
    hostile = f"$(touch {marker}); `touch {marker}` | touch {marker} && echo $HOME"
    with spoolparse.run([*ECHO_ARGV, hostile], cwd=tmp_path) as r:
        assert r.text == hostile  # one argument, verbatim
    assert not marker.exists()
    with pytest.raises(UsageError, match="shell=True"):
        spoolparse.run(f"touch {marker}")
    assert not marker.exists()
    with spoolparse.run(f"touch {marker}", shell=True, allow_empty_answer=True) as r:
        assert r.ok
    assert marker.exists()
    # the command reaches the exec as the argv's tail (a start shim may come first, taking it as "$@")
    assert argvs[0][-len(ECHO_ARGV) - 1 :] == [*ECHO_ARGV, hostile]
    assert argvs[1][-3:] == ["/bin/sh", "-c", f"touch {marker}"]


def test_commands_are_shown_as_quoted_argv() -> None:
    argv = [*ECHO_ARGV, "two words; rm -rf ~ 'q' \"d\" $X"]
    with spoolparse.run(argv) as r:
        assert r.args == argv
        assert r.command == shlex.join(argv)
        assert shlex.split(r.command) == argv
    with spoolparse.run("echo '{}'", shell=True) as r:
        assert r.command == "echo '{}'"  # a shell command is shown as given


# -- the API takes what subprocess takes, or says what it wants ------------------------------------------------


def test_argv_of_bytes_and_paths_runs_as_subprocess_runs_it(tmp_path: Path) -> None:
    """``run([b"/bin/echo", ...])`` raised a raw ``TypeError`` from deep inside the start (subprocess takes bytes)."""
    name = b"f\xff"  # not UTF-8: bytes reach the child as they are
    say = tmp_path / "say.py"
    say.write_text("import json, os, sys\n"
                   "print(json.dumps({'type': 'result', 'result': os.fsencode(sys.argv[1]).hex() + sys.argv[2]}))\n")
    for argv in ([os.fsencode(sys.executable), bytes(say), name, b"-end"],
                 [Path(sys.executable), say, os.fsdecode(name), "-end"]):
        with spoolparse.run(argv) as r:  # type: ignore[arg-type]
            assert r.ok and r.text == name.hex() + "-end", (argv, r.error)
    with pytest.raises(UsageError, match="shell=True"):
        spoolparse.run(b"true")
    with spoolparse.run(b"true", shell=True) as r:
        assert r.returncode == 0
    with pytest.raises(UsageError, match="an argument is a string, bytes or a path, not int"):
        spoolparse.run(["echo", 1])  # type: ignore[list-item]


def test_a_missing_working_directory_is_named_as_such(tmp_path: Path) -> None:
    """``run --cwd /nonexistent`` exited 127 blaming the command ("cannot start 'true': No such file")."""
    missing = tmp_path / "missing"
    with pytest.raises(spoolparse.SpawnError, match=f"cannot start 'true': No such file or directory \\({missing}\\)"):
        spoolparse.run(["true"], cwd=missing)  # the library's, as subprocess's: it names the directory
    with spoolparse.run(["true"], cwd=os.fsencode(tmp_path)) as r:  # type: ignore[arg-type]
        assert r.returncode == 0
    for given in (str(missing), "/nonexistent"):
        p = subprocess.run([sys.executable, "-m", "spoolparse", "run", "--cwd", given, "--", "true"],
                           capture_output=True, timeout=60)
        assert p.returncode == 2 and p.stdout == b""
        assert p.stderr.decode() == f"spoolparse: error: --cwd {given!r}: no such directory\n"


def test_parse_takes_a_path_of_bytes_and_refuses_what_is_no_file(tmp_path: Path) -> None:
    """``parse(b"path")`` raised ``AttributeError: 'bytes' object has no attribute 'read'``."""
    path = tmp_path / "t.jsonl"
    path.write_bytes(b'{"type":"result","result":"hi"}\n')
    assert spoolparse.parse(os.fsencode(path)).text == "hi"
    import io

    for wrong in (io.StringIO("{}"), 42, None):
        with pytest.raises(UsageError, match="a path or a file opened in binary mode"):
            spoolparse.parse(wrong)  # type: ignore[arg-type]
