"""Small helpers shared by the tests."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"
FAKE_CODEX = [sys.executable, str(FIXTURES / "fake_codex.py")]
#: A command that answers (one event the generic provider reads) and exits 0: ok. ``true`` prints nothing,
#: which is no answer: not ok, unless the run allows an empty answer.
ANSWERS = ["sh", "-c", "echo '{\"text\": \"done\"}'"]


def jl(*objs: Any) -> bytes:
    """Compact JSON lines, as the agent CLIs print them."""
    return b"".join(json.dumps(o, separators=(",", ":")).encode() + b"\n" for o in objs)


def open_fds() -> set[str]:
    """Our open descriptors, the guardian's pipes and the inotify instance included (the first spawn of a
    process starts the guardian, the first follower the one inotify instance every follower shares; both
    live as long as the process, so a count taken before them must see them too), spools kept for reuse
    not (they are closed first), nor the directories of spool placements (see :func:`placement_fd`)."""
    from spoolparse._os.guardian import guardian
    from spoolparse._os.wait import _shared_dispatcher
    from spoolparse.spool import empty_pool

    guardian.start()
    _shared_dispatcher()
    empty_pool()  # spools kept for reuse are closed first: what is left open is a leak
    return {fd for fd in os.listdir("/proc/self/fd") if not placement_fd(fd)}


def placement_fd(fd: str) -> bool:
    """Whether descriptor ``fd`` (a name in ``/proc/self/fd``) is left out of a count of leaks: a spool
    placement's directory (on an ext4 without a journal a process holds ``spoolparse-<uid>`` and its own
    directory under it open for its life, moving to a new one now and then, one pair per spool directory),
    or one closed since (the listing's own: its number depends on those)."""
    from spoolparse.spool import PLACEMENTS

    try:
        target = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return True
    mark = f"/{PLACEMENTS}{os.geteuid()}"
    return target.endswith(mark) or (f"{mark}/{os.getpid()}-" in target and "/#" not in target)


def named_files(path: str | os.PathLike[str]) -> list[str]:
    """Every file under ``path`` that has a name (directories aside: on an ext4 without a journal a process
    makes its spools in a directory of its own there, which lives as long as the process and holds no name)."""
    return sorted(os.path.join(d, f) for d, _, files in os.walk(path) for f in files)


def group_gone(pgid: int) -> bool:
    """No live process is left in the group (zombies waiting for PID 1 count as gone)."""
    from spoolparse.child import group_alive

    return not group_alive(pgid)


def event_dict(ev: Any) -> dict[str, Any]:
    """A live event as JSON, without its read time (the one field two reads of a stream differ in)."""
    d = dict(ev.as_dict())
    d.pop("time")
    return d


def as_from_a_terminal() -> None:
    """A ``preexec_fn``: the ending signals at their defaults, as for a command typed at a terminal.

    A test run started as a background job of a script (``cmd &``) has SIGINT and SIGQUIT ignored, and
    spoolparse, like every well-behaved program, keeps what it was told to ignore.
    """
    import signal

    for sig in (signal.SIGINT, signal.SIGQUIT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


def on_a_terminal(argv: list[str], env: dict[str, str]) -> tuple[int, bytes, bytes]:
    """Run ``argv`` with its stderr on a pseudo-terminal: (its exit status, its stdout, all it drew there)."""
    import select
    import subprocess

    master, slave = os.openpty()
    try:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=slave, env=env)
        os.close(slave)
        slave = -1
        drawn = b""
        while select.select([master], [], [], 30)[0]:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the terminal's last writer is gone
                break
            if not chunk:
                break
            drawn += chunk
        out, _ = proc.communicate(timeout=30)
    finally:
        os.close(master)
        if slave >= 0:
            os.close(slave)
    return proc.returncode, out, drawn


#: Run a command in a time namespace of its own, its clock 1,000 s ahead of ours.
BOOTTIME = ["unshare", "--time", "--boottime", "1000"]


def time_namespaces() -> bool:
    """Whether this host can make time namespaces (Linux 5.6, unshare(1))."""
    return shutil.which("unshare") is not None and subprocess.run(
        [*BOOTTIME, "true"], capture_output=True, check=False).returncode == 0


def identity_of_child(alive: bool, clock: list[str]) -> tuple[str, subprocess.Popen[bytes]]:
    """The identity a runner started now has (and its process: running with ``alive``, else reaped), started
    through ``clock`` (a time namespace of its own, or nothing)."""
    code = "from spoolparse._os.identity import identity; import sys, time; print(identity(), flush=True); " \
           "sys.stdin.read()"
    p = subprocess.Popen([*clock, sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert p.stdout is not None and p.stdin is not None
    ident = p.stdout.readline().decode().strip()
    if not alive:
        p.stdin.close()
        p.wait()
    return ident, p
