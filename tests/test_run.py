"""Running a child on spools: input, cwd/env, timeouts, group kill, spool full, errors."""

from __future__ import annotations

import errno
import io
import itertools
import os
import shutil
import signal
import sys
import time
import warnings
from pathlib import Path

import pytest

import spoolparse
from spoolparse import SpawnError, SpoolDirError, SpoolDirWarning, SpoolFullError, UsageError
from spoolparse import spool as spool_mod
from spoolparse._cli_common import exit_status

from .helpers import FAKE_CODEX, group_gone, open_fds

ECHO_STDIN = [sys.executable, "-c", "import sys; d=sys.stdin.buffer.read(); "
              "print('{\"type\":\"result\",\"result\":\"%d:%s\"}' % (len(d), d[:20].decode()))"]


def test_demo_answer_and_counters() -> None:
    with spoolparse.run([*FAKE_CODEX, "--size", "2M", "--stderr", "20K", "--noise"]) as r:
        assert r.ok and r.returncode == 0
        assert r.text == "FINAL-ANSWER: the bug is fixed in src/main.py"
        assert r.usage == {"input_tokens": 24763, "cached_input_tokens": 24448, "output_tokens": 122}
        assert r.session_id == "0199a213-81c0-7800-8aa1-bbab2a035a53"
        assert r.provider == "codex"
        assert r.stdout_bytes == len(r.stdout.read())  # type: ignore[union-attr]
        assert r.stderr_bytes == 20 * 1024
        assert len(r.stderr_tail) == spoolparse.limits.STDERR_TAIL
        assert r.invalid_lines >= 2
        assert r.lines > 100
        spools = [r.stdout, r.stderr]
    assert all(f.closed for f in spools)  # type: ignore[union-attr]
    assert r.stdout is None


def test_spool_files_have_no_name_and_mode_0600() -> None:
    with spoolparse.run([*FAKE_CODEX, "--size", "10K"]) as r:
        assert r.stdout is not None
        fd = r.stdout.fileno()
        target = os.readlink(f"/proc/self/fd/{fd}")
        assert target.endswith("(deleted)") or "/#" in target
        assert os.fstat(fd).st_mode & 0o777 == 0o600


@pytest.mark.parametrize("kind", ["bytes", "str", "path", "file", "bytesio"])
def test_input_kinds(kind: str, tmp_path: Path) -> None:
    payload = b"prompt: fix the bug \xe2\x9c\x93" * 1000
    p = tmp_path / "in.txt"
    p.write_bytes(payload)
    inp = {
        "bytes": payload,
        "str": payload.decode(),
        "path": p,
        "file": open(p, "rb"),  # noqa: SIM115
        "bytesio": io.BytesIO(payload),
    }[kind]
    with spoolparse.run(ECHO_STDIN, input=inp) as r:  # type: ignore[arg-type]
        assert r.text == f"{len(payload)}:prompt: fix the bug "
    if kind == "file":
        inp.close()  # type: ignore[union-attr]


def test_no_input_is_dev_null() -> None:
    with spoolparse.run(ECHO_STDIN) as r:
        assert r.text == "0:"


def test_cwd_and_env(tmp_path: Path) -> None:
    code = ("import os,json; print(json.dumps({'type':'result','result':os.getcwd()+'|'+os.environ.get('SP_X','')}))")
    with spoolparse.run([sys.executable, "-c", code], cwd=tmp_path, env={**os.environ, "SP_X": "42"}) as r:
        assert r.text == f"{tmp_path}|42"


def test_child_runs_in_its_own_group() -> None:
    code = "import os,json; print(json.dumps({'type':'result','result':'%d %d' % (os.getpid(), os.getpgid(0))}))"
    with spoolparse.run([sys.executable, "-c", code]) as r:
        pid, pgid = r.text.split()  # type: ignore[union-attr]
        assert pid == pgid and int(pgid) != os.getpgid(0)


def test_timeout_term_then_kill_whole_group() -> None:
    t0 = time.monotonic()
    with spoolparse.run([*FAKE_CODEX, "--size", "10K", "--hang", "60", "--ignore-term", "--orphan"],
                        timeout=0.5, grace=0.5) as r:
        took = time.monotonic() - t0
        assert r.timed_out and not r.ok
        assert r.returncode == -signal.SIGKILL
        assert exit_status(r) == 124
        assert r.session_id is not None  # what was spooled before the timeout is parsed
    assert took < 10
    # the leader's pid was the group id: nothing of the group survives
    assert group_gone(_last_pgid)


_last_pgid = 0


@pytest.fixture(autouse=True)
def _track_groups(monkeypatch: pytest.MonkeyPatch) -> None:
    """Remember the process group of every child started, so tests can check it is gone."""
    from spoolparse import process

    real_init = process.Child.__init__

    def init(self, *a, **kw):  # type: ignore[no-untyped-def]
        global _last_pgid
        real_init(self, *a, **kw)
        _last_pgid = self.pgid

    monkeypatch.setattr(process.Child, "__init__", init)


def test_timeout_sigterm_is_enough_for_a_polite_child() -> None:
    with spoolparse.run([*FAKE_CODEX, "--hang", "60"], timeout=0.3, grace=5) as r:
        assert r.timed_out and r.returncode == -signal.SIGTERM
    assert group_gone(_last_pgid)


def test_grandchild_left_behind_is_ended() -> None:
    t0 = time.monotonic()
    with spoolparse.run([*FAKE_CODEX, "--size", "10K", "--orphan"], grace=0.3) as r:
        assert r.ok and r.text is not None
    assert group_gone(_last_pgid)
    assert time.monotonic() - t0 < 10


def test_exit_code_and_signal() -> None:
    with spoolparse.run([*FAKE_CODEX, "--exit", "3"]) as r:
        assert r.returncode == 3 and not r.ok and exit_status(r) == 1 and r.text is None and r.partial_text
    with spoolparse.run(["sh", "-c", "kill -TERM $$"]) as r:
        assert r.returncode == -signal.SIGTERM and r.signal == signal.SIGTERM and exit_status(r) == 128 + 15


def test_agent_error_with_exit_zero() -> None:
    with spoolparse.run([*FAKE_CODEX, "--fail", "rate limited", "--exit", "0"]) as r:
        assert r.returncode == 0 and r.error == "rate limited" and not r.ok and exit_status(r) == 1


def test_check_raises_like_subprocess() -> None:
    with pytest.raises(spoolparse.CalledProcessError) as e:
        spoolparse.run([*FAKE_CODEX, "--fail", "nope"], check=True)
    assert e.value.returncode == 1 and "nope" in str(e.value)
    with pytest.raises(spoolparse.TimeoutExpired):
        spoolparse.run([*FAKE_CODEX, "--hang", "30"], timeout=0.2, check=True)


def test_keyboard_interrupt_kills_the_group_and_reraises() -> None:
    def boom(ev: spoolparse.LiveEvent) -> None:
        if ev.kind == "session":
            raise KeyboardInterrupt

    before = open_fds()
    with pytest.raises(KeyboardInterrupt):
        spoolparse.run([*FAKE_CODEX, "--pause", "0.05", "--size", "50K", "--orphan", "--ignore-term"], on_event=boom)
    assert group_gone(_last_pgid)
    assert open_fds() == before


def test_spawn_errors_are_typed_and_name_the_command(tmp_path: Path) -> None:
    with pytest.raises(SpawnError) as e:
        spoolparse.run(["definitely-not-a-command-xyz", "--json"])
    assert e.value.argv == ["definitely-not-a-command-xyz", "--json"]
    assert "definitely-not-a-command-xyz" in str(e.value)
    script = tmp_path / "noexec.sh"
    script.write_text("#!/bin/sh\n")
    with pytest.raises(SpawnError, match=r"noexec\.sh"):
        spoolparse.run([str(script)])
    with pytest.raises(UsageError):
        spoolparse.run([])
    with pytest.raises(UsageError):
        spoolparse.run("echo hi")  # a string needs shell=True
    with spoolparse.run('echo \'{"type":"result","result":"via sh"}\'', shell=True) as r:
        assert r.text == "via sh"
    # what cannot be passed to a process at all (a NUL byte; "=" in a name) is a SpawnError too, not a ValueError
    for argv, kw in ((["tr\0ue"], {}), (["true"], {"env": {"A": "x\0y"}}), (["true"], {"env": {"A=B": "x"}}),
                     (["true"], {"cwd": "/tm\0p"})):
        with pytest.raises(SpawnError, match="cannot start"):
            spoolparse.run(argv, **kw)


def test_max_spool_bytes_kills_and_reports() -> None:
    before = open_fds()
    with pytest.raises(SpoolFullError) as e:
        spoolparse.run([*FAKE_CODEX, "--size", "200M"], max_spool_bytes=2 << 20)
    err = e.value
    assert err.directory == spool_mod.resolve_spool_dir()
    assert err.bytes_written > 2 << 20
    assert err.result is not None and err.result.spool_full and not err.result.ok
    assert "spool full" in (err.result.error or "")
    assert err.result.session_id is not None
    err.result.close()
    assert group_gone(_last_pgid)
    assert open_fds() == before


def test_file_size_limit_is_spool_full() -> None:
    with pytest.raises(SpoolFullError, match="RLIMIT_FSIZE"):
        spoolparse.run(["sh", "-c", "ulimit -f 64; exec head -c 10000000 /dev/zero"])


def test_spool_dir_argument_and_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spool_mod, "_warned", set())
    d = tmp_path / "spools"
    d.mkdir()
    monkeypatch.setenv("PDD_AGENT_SPOOL_DIR", str(d))
    assert spool_mod.resolve_spool_dir() == str(d)
    assert spool_mod.resolve_spool_dir(tmp_path) == str(tmp_path)
    with pytest.raises(SpoolDirError) as missing:
        spoolparse.run([*FAKE_CODEX], spool_dir=tmp_path / "missing")
    # a file-system condition, not a malformed call: an OSError with errno and filename, not a UsageError
    assert isinstance(missing.value, OSError) and not isinstance(missing.value, UsageError)
    assert missing.value.errno == errno.ENOENT and missing.value.filename == str(tmp_path / "missing")
    assert "does not exist" in str(missing.value)
    afile = tmp_path / "afile"
    afile.write_text("x")
    monkeypatch.setenv("PDD_AGENT_SPOOL_DIR", str(afile))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            with spoolparse.run([*FAKE_CODEX, "--size", "1K"]) as r:
                assert r.ok
    assert len([w for w in caught if issubclass(w.category, SpoolDirWarning)]) == 1
    assert "is not a directory" in str(caught[0].message)


def test_bounds_are_arguments() -> None:
    with spoolparse.run([*FAKE_CODEX, "--size", "100K", "--answer-size", "3K"], max_line=1024,
                        max_retained=2048) as r:
        assert r.text is None and r.dropped and r.dropped[-1]["reason"] == "over_ceiling"
        assert all(d["reason"] == "oversize" for d in r.dropped[:-1])
        assert r.dropped_count == len(r.dropped)


def test_a_fast_writer_past_max_spool_bytes_is_stopped_at_once() -> None:
    """A child that floods stdout with tiny kept lines: killed within a step, and the rest never parsed."""
    t0 = time.monotonic()
    with pytest.raises(SpoolFullError) as e:
        spoolparse.run(["sh", "-c", "yes '{}'"], max_spool_bytes=64 * 1024)
    took = time.monotonic() - t0
    res = e.value.result
    assert res is not None
    assert res.stdout_bytes >= 64 * 1024
    # parsed up to the cap and not a byte more: the cut last line is counted invalid
    assert res.lines == 64 * 1024 // 3 + 1 and res.invalid_lines == 1
    res.close()
    assert group_gone(_last_pgid)
    assert took < 30, took


# -- programs that cannot be executed: one exec path, never the shell ------------------------------------------


def _native_machine() -> int:
    with open("/proc/self/exe", "rb") as f:
        head = f.read(20)
    if head[:6] != b"\x7fELF\x02\x01":
        pytest.skip("needs an ELF64 little-endian interpreter: the test builds ELF files of that kind")
    return int.from_bytes(head[18:20], "little")


def _elf(machine: int, loader: bytes | None = None) -> bytes:
    """A minimal ELF64 little-endian executable header for ``machine``, with a PT_INTERP naming ``loader``."""
    import struct

    phdrs = body = b""
    if loader is not None:
        name = loader + b"\0"
        phdrs = struct.pack("<IIQQQQQQ", 3, 4, 120, 0, 0, len(name), len(name), 1)  # PT_INTERP at offset 120
        body = name
    phnum = 1 if loader is not None else 0
    header = b"\x7fELF" + bytes([2, 1, 1, 0]) + bytes(8)
    header += struct.pack("<HHIQQQIHHHHHH", 2, machine, 1, 0x400000, 64 if phnum else 0, 0, 0, 64, 56, phnum, 64, 0, 0)
    return header + phdrs + body


#: ``env``, as ``#!/usr/bin/env NAME`` lines name it.
ENV = shutil.which("env", path="/usr/bin:/bin") or "/usr/bin/env"

#: What must go wrong, for each kind of unexecutable program: (errno, what the message must name).
UNEXECUTABLE = ["foreign-elf", "missing-interpreter", "crlf-interpreter", "missing-loader", "script-of-foreign",
                "nested-missing", "no-magic", "too-deep", "env-missing", "env-split-missing", "env-not-executable"]


@pytest.fixture(scope="module")
def unexecutable(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[str, int, str]]:
    """Each kind of program the kernel refuses: (path, errno, a text the error must hold)."""
    native = _native_machine()
    foreign = 183 if native != 183 else 62  # AArch64, or x86-64 on an AArch64 host
    foreign_name = "AArch64" if foreign == 183 else "x86-64"
    d = tmp_path_factory.mktemp("unexecutable")

    def put(name: str, data: bytes) -> str:
        p = d / name
        p.write_bytes(data)
        p.chmod(0o755)
        return str(p)

    def put_plain(name: str, data: bytes) -> str:  # not executable
        p = d / name
        p.write_bytes(data)
        return str(p)

    elf = put("foreign-elf", _elf(foreign))
    missing = put("missing-interpreter", b"#!/nonexistent/interp -x\necho '{}'\n")
    deep = "/bin/true"
    for i in range(6):  # the kernel follows five interpreters of interpreters, not six
        deep = put(f"level{i}", f"#!{deep}\n".encode())
    return {
        "foreign-elf": (elf, errno.ENOEXEC, f"an ELF program for {foreign_name}"),
        "missing-interpreter": (missing, errno.ENOENT, "its #! interpreter was not found (/nonexistent/interp)"),
        "crlf-interpreter": (put("crlf", b"#!/bin/sh\r\necho '{}'\r\n"), errno.ENOENT, "('/bin/sh\\r')"),
        "missing-loader": (put("missing-loader", _elf(native, b"/nonexistent/ld.so")), errno.ENOENT,
                           "its ELF interpreter (dynamic loader) was not found (/nonexistent/ld.so)"),
        "script-of-foreign": (put("script-of-foreign", f"#!{elf}\n".encode()), errno.ENOEXEC,
                              f"its #! interpreter '{elf}' is an ELF program for {foreign_name}"),
        "nested-missing": (put("nested-missing", f"#!{missing}\n".encode()), errno.ENOENT, "(/nonexistent/interp)"),
        "no-magic": (put("no-magic", b"echo '{}'\n"), errno.ENOEXEC, "neither an ELF program nor a #! script"),
        "too-deep": (deep, errno.ELOOP, "#! interpreters nested more than 5 deep"),
        # how npm installs an agent: #!/usr/bin/env node, with no node on the PATH the agent gets
        "env-missing": (put("env-missing", f"#!{ENV} spoolparse-no-such-node\n".encode()), errno.ENOENT,
                        f"its #! line's program (run by {ENV}) was not found on the PATH (spoolparse-no-such-node)"),
        "env-split-missing": (put("env-split-missing", f"#!{ENV} -S spoolparse-no-such-node --flag\n".encode()),
                              errno.ENOENT, "(spoolparse-no-such-node)"),
        "env-not-executable": (put("env-not-executable", f"#!{ENV} {put_plain('plain', b'x')}\n".encode()),
                               errno.EACCES, f"its #! line's program (run by {ENV}) cannot be executed"),
    }


def _start_by(way: str, argv: list[str]) -> object:
    """Start ``argv`` the given way: a SpawnError raised, or the batch's one outcome."""
    import asyncio

    from spoolparse.runner import Task, run_many

    if way == "run-direct":
        return spoolparse.run(argv, containment=None)
    if way == "run-contained":  # the gated start where a cgroup can be made
        return spoolparse.run(argv)
    if way == "run-input":  # the preexec start where a cgroup can be made
        return spoolparse.run(argv, input=b"x")
    if way == "arun":
        return asyncio.run(spoolparse.arun(argv))
    enforce = {"batch": "auto", "batch-cgroup": "cgroup", "batch-watchdog": "watchdog"}[way]
    (out,) = list(run_many([Task(argv=argv, id="t")], enforce=enforce, retries=2, retry_backoff=0))
    return out


@pytest.mark.parametrize("way", ["run-direct", "run-contained", "run-input", "arun", "batch", "batch-cgroup",
                                 "batch-watchdog"])
@pytest.mark.parametrize("kind", UNEXECUTABLE)
def test_a_program_the_kernel_refuses_is_a_spawn_error_on_every_start(
    unexecutable: dict[str, tuple[str, int, str]], kind: str, way: str
) -> None:
    """Never handed to ``/bin/sh`` (``execvp``'s fallback on ENOEXEC), never an exit status: the start fails,
    naming the program or the interpreter at fault; in a batch a ``spawn_error``, which is never retried."""
    path, err, named = unexecutable[kind]
    if way.startswith("batch"):
        out = _start_by(way, [path])
        assert out.verdict == "spawn_error" and out.attempts == 1, out  # type: ignore[attr-defined]
        assert out.error.startswith(f"cannot start {path!r}: ") and named in out.error, out  # type: ignore[attr-defined]
        return
    with pytest.raises(SpawnError) as e:
        _start_by(way, [path, "arg"])
    assert e.value.errno == err, e.value
    assert e.value.argv == [path, "arg"]
    assert str(e.value).startswith(f"cannot start {path!r}: ") and named in str(e.value), str(e.value)


@pytest.mark.parametrize("kind", UNEXECUTABLE)
def test_run_exits_126_or_127_for_a_program_the_kernel_refuses(
    unexecutable: dict[str, tuple[str, int, str]], kind: str
) -> None:
    import subprocess

    path, err, named = unexecutable[kind]
    p = subprocess.run([sys.executable, "-m", "spoolparse", "run", "--", path], capture_output=True, timeout=60)
    assert p.returncode == (127 if err == errno.ENOENT else 126), p.stderr
    assert p.stdout == b""  # no summary: nothing ran, not even a shell reading the file as a script
    assert p.stderr.decode().startswith(f"spoolparse: error: cannot start {path!r}: ") and named in p.stderr.decode()


def test_an_argument_list_too_long_names_the_program_not_a_shell() -> None:
    """The gated start execs a shell first; its E2BIG is the program's arguments' all the same."""
    for containment in (None, "auto"):
        with pytest.raises(SpawnError) as e:
            spoolparse.run(["true", "x" * (256 << 10)], containment=containment)  # type: ignore[arg-type]
        assert e.value.errno == errno.E2BIG
        assert str(e.value) == "cannot start 'true': Argument list too long", str(e.value)


def _kernel_says(path: str) -> int:
    """What execve itself makes of ``path``: 0 when it runs, else its errno (subprocess reports it exactly)."""
    import subprocess

    try:
        subprocess.run([path], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       timeout=30)
    except OSError as e:
        return e.errno or -1
    return 0


def _shebangs() -> list[bytes]:
    """``#!`` lines around every rule of the kernel's reading of one: spaces and tabs before and after the
    name, an argument, a CR, no newline, and names that end just before, at and after its 256 bytes (a run
    of slashes makes ``/bin/true`` as long as needed)."""
    lines = []
    for lead, tail, end in itertools.product([b"", b" ", b"\t "], [b"", b" ", b" -x", b"\t-x y", b"\r"], [b"\n", b""]):
        lines.append(b"#!" + lead + b"/bin/true" + tail + end)
    for length in (240, 250, 252, 253, 254, 255, 256, 260, 300):
        for tail, end in ((b"", b""), (b"", b"\n"), (b" x", b""), (b" x", b"\n")):
            name = b"/" * (length - len(b"#!bin/true")) + b"bin/true"
            lines.append(b"#!" + name + tail + end)
    lines += [b"#!", b"#!\n", b"#! \n", b"#!/nonexistent\n", b"#!/etc\n", b"#!/etc/hostname\n", b"#!bin/true\n"]
    return lines


def test_the_check_before_the_fork_agrees_with_the_kernel(tmp_path: Path) -> None:
    """Whatever :func:`exec_check` says of a ``#!`` script, the kernel does: a script it vouches for runs, and
    one it refuses fails with the very errno; it never vouches for what fails (the gated start would then
    hand it to the shell). What it leaves to execve is only what the kernel refuses (an exact start then
    reports its errno): every script that runs is vouched for."""
    from spoolparse._os.spawn import exec_check

    seen = {"refused": 0, "runs": 0, "left": 0}
    for i, line in enumerate(_shebangs()):
        script = tmp_path / f"s{i}"
        script.write_bytes(line)
        script.chmod(0o755)
        kernel = _kernel_says(str(script))
        try:
            runs = exec_check(str(script), env=None, cwd=None)
        except OSError as e:
            assert e.errno == kernel, (line, e, kernel)
            seen["refused"] += 1
            continue
        assert (kernel == 0) == runs, (line, runs, kernel)
        seen["runs" if runs else "left"] += 1
    assert min(seen.values()) > 0, seen  # each outcome was met


def _env_lines(tmp_path: Path) -> list[bytes]:
    """``#!/usr/bin/env ...`` lines: a program found on the PATH or not, by name or by path, executable or not,
    after ``-S`` (with and without a space, with arguments), and what is left to env (an option, an
    assignment, quoting)."""
    plain = tmp_path / "plain"
    plain.write_bytes(b"x")
    missing = b"spoolparse-no-such-node"
    targets = [b"true", missing, b"/bin/true", b"/nonexistent/node", str(plain).encode(), b"true x", b"sh"]
    lines = []
    for target in targets:
        for form in (b"%s", b"-S %s", b"-S%s", b"-S %s --flag", b"  %s  ", b"%s\r"):
            lines.append(b"#!" + ENV.encode() + b" " + form % target + b"\n")
    # (never env alone, nor an assignment alone: env would run the script itself again, for ever)
    lines += [b"#!" + ENV.encode() + tail + b"\n" for tail in (b" -i true", b" -S A=1 true", b" -S 'true'",
                                                              b" -S -u X true", b" -S -i true", b" -S  true  x")]
    return lines


def test_the_check_before_the_fork_agrees_with_env(tmp_path: Path) -> None:
    """A ``#!/usr/bin/env NAME`` script runs env, which looks ``NAME`` up on the child's PATH: whatever
    :func:`exec_check` refuses, env refuses with the same meaning (127 for ENOENT, 126 for EACCES), and
    whatever env cannot find is refused before the fork (never a run that exits 127)."""
    import subprocess

    from spoolparse._os.spawn import exec_check

    seen = {"refused": 0, "passed": 0}
    for i, line in enumerate(_env_lines(tmp_path)):
        script = tmp_path / f"e{i}"
        script.write_bytes(line)
        script.chmod(0o755)
        status = subprocess.run([str(script)], stdin=subprocess.DEVNULL, capture_output=True, timeout=30).returncode
        try:
            exec_check(str(script), env=None, cwd=None)
        except OSError as e:
            assert (e.errno, status) in ((errno.ENOENT, 127), (errno.EACCES, 126)), (line, e, status)
            seen["refused"] += 1
            continue
        assert status not in (126, 127), (line, status)
        seen["passed"] += 1
    assert min(seen.values()) > 0, seen


def test_env_looks_the_program_up_on_the_childs_path(tmp_path: Path) -> None:
    """The PATH that counts is the one the child gets, not ours."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    node = bindir / "spoolparse-test-node"
    node.write_bytes(b"#!/bin/sh\necho '{}'\n")
    node.chmod(0o755)
    script = tmp_path / "agent"
    script.write_bytes(f"#!{ENV} spoolparse-test-node\n".encode())
    script.chmod(0o755)
    with pytest.raises(SpawnError) as e:
        spoolparse.run([str(script)], containment=None)
    assert e.value.errno == errno.ENOENT and "spoolparse-test-node" in str(e.value)
    env = {**os.environ, "PATH": f"{bindir}:{os.environ.get('PATH', '')}"}
    with spoolparse.run([str(script)], env=env, containment=None, allow_empty_answer=True) as r:
        assert r.returncode == 0, r.error


@pytest.mark.parametrize("containment", [None, "auto"])
def test_a_missing_working_directory_is_named_not_blamed_on_the_program(containment: str | None) -> None:
    with pytest.raises(SpawnError) as e:
        spoolparse.run(["./agent"], cwd="/nonexistent-dir", containment=containment)  # type: ignore[arg-type]
    assert e.value.errno == errno.ENOENT and "/nonexistent-dir" in str(e.value), str(e.value)
