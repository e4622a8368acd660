"""What ``spoolparse calibrate`` recorded: a per-task memory estimate for each command it measured.

``calibrate`` writes its recommendation here (one JSON object, the command's
identity → ``memory_per_task`` and how it was measured); a batch given no
``memory_per_task`` reserves that much for a task whose command has that
identity (:meth:`spoolparse.runner.Batch.estimate_for`); ``calibrate --list``
shows them.

A command's identity (:func:`command_key`) is its program and the arguments
that pick the CLI it is, not the whole command line (a prompt changes with
every task): ``codex exec``, ``claude -p``, ``python fake_codex.py --size``.

The file may sit in a shared cache, or be named by ``$SPOOLPARSE_CALIBRATIONS``
to anything. Its directory is reached one step at a time
(:func:`~spoolparse._dirfd.open_path`: every link and directory on the way
ours or root's, no directory writable by others unless sticky), and made there
when missing; the file is opened in it ``O_NOFOLLOW | O_NONBLOCK`` (a symlink
is refused, a FIFO does not hang the batch), must be a regular file of ours of
at most :data:`MAX_BYTES`, and is read by orjson (nesting past 1,024 levels is
refused, not a ``RecursionError``). Anything else is a warning, and no
calibration is used. A new record is written to a temporary file made in that
directory and renamed over the old one, both through its descriptor: nothing
is made or replaced anywhere else.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
import time
from collections.abc import Sequence
from typing import Any

import orjson

from .._decode.jsonout import dumps
from .._dirfd import NotOurs, make_unique_file, open_path, refusal, unlink_at
from .._regex import regex

__all__ = ["calibrations_path", "record", "recorded", "listing", "command_key", "MAX_BYTES", "LAUNCHERS"]

log = logging.getLogger("spoolparse.runner")

#: Largest calibrations file read (bytes); a larger one is refused.
MAX_BYTES = 1 << 20

#: Programs that run the script, module or program named after their own options: a command's identity goes
#: on to name that one (a version suffix aside: ``python3.12`` is ``python``).
LAUNCHERS = frozenset({
    "python", "pypy", "node", "nodejs", "bun", "deno", "ruby", "perl", "php", "sh", "bash", "dash", "zsh",
    "env", "npx", "bunx", "pnpx", "uvx",
})

#: An argument that picks a CLI's mode: a subcommand word (``exec``, ``run``) or a switch (``-p``, ``--print``).
_SELECTOR = regex(r"[a-z][a-z0-9_-]{0,31}|--?[A-Za-z][A-Za-z0-9-]{0,31}")
_VERSION = regex(r"[0-9.]+$")
_ASSIGNMENT = regex(r"[A-Za-z_][A-Za-z0-9_]*=")


def command_key(argv: Sequence[str]) -> str:
    """What a recommendation is recorded under: the program's name, then the argument that picks its mode
    when the first one does (a subcommand word or a switch): ``codex exec`` for ``/usr/bin/codex exec --json
    "…"``, ``claude -p`` for ``claude -p "…"``. A launcher (:data:`LAUNCHERS`) is followed by what it runs:
    ``python fake_codex.py --size`` for ``python3 fixtures/fake_codex.py --size 64M``, ``python -m pkg``,
    ``sh -c``, ``npx codex exec``."""
    words: list[str] = []
    rest = [os.fsdecode(a) for a in argv]
    while rest:
        program = os.path.basename(rest.pop(0).rstrip("/")) or "/"
        words.append(program)
        if _VERSION.sub("", program) not in LAUNCHERS:
            if rest and _SELECTOR.fullmatch(rest[0]):
                words.append(rest[0])
            break
        while rest and (rest[0].startswith("-") or _ASSIGNMENT.match(rest[0])):  # its own options, env's VAR=x
            option = rest.pop(0)
            if option in ("-m", "-c", "-e", "--eval"):
                words.append(option)
                if option == "-m" and rest:
                    words.append(rest[0])  # the module is the program
                return " ".join(words)
    return " ".join(words)


def calibrations_path() -> str:
    """Where ``calibrate`` records its recommendations: ``$SPOOLPARSE_CALIBRATIONS``, else
    ``$XDG_CACHE_HOME/spoolparse/calibrations.json`` (``~/.cache/...``)."""
    explicit = os.environ.get("SPOOLPARSE_CALIBRATIONS")
    if explicit:
        return explicit
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "spoolparse", "calibrations.json")


class _Refused(OSError):
    """The calibrations file is not one to read (``strerror`` says why); ``replaceable``: it is a regular file
    of ours that holds no calibrations, which a new record replaces."""

    def __init__(self, err: int, why: str, *, replaceable: bool = False) -> None:
        super().__init__(err, why)
        self.replaceable = replaceable


def _open_dir(path: str, *, make: bool) -> int | None:
    """A descriptor on the directory of ``path`` (``None``: there is none, and ``make`` is false; with ``make``
    it is made, mode 0700); :class:`_Refused` when the way there is not one nobody else can change."""
    try:
        return open_path(os.path.dirname(path) or ".", make=0o700 if make else None)
    except NotOurs as e:
        raise _Refused(e.errno or errno.EPERM, refusal(path, e)) from None
    except FileNotFoundError:
        if make:
            raise
        return None
    except OSError as e:
        raise _Refused(e.errno or errno.EIO, f"cannot be {'made' if make else 'read'} ({e.strerror})") from None


def _load(dir_fd: int | None, name: str) -> dict[str, Any]:
    """The object of file ``name`` in ``dir_fd`` (empty when there is no file); :class:`_Refused` when it is
    not a regular file of ours of at most :data:`MAX_BYTES`, or not a JSON object."""
    if dir_fd is None:
        return {}
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    except FileNotFoundError:
        return {}
    except OSError as e:
        why = "is a symbolic link" if e.errno == errno.ELOOP else f"cannot be read ({e.strerror})"
        raise _Refused(e.errno or errno.EIO, why) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _Refused(errno.EINVAL, "is not a regular file")
        if st.st_uid != os.geteuid():
            raise _Refused(errno.EPERM, f"is owned by another user (uid {st.st_uid})")
        if st.st_size > MAX_BYTES:
            raise _Refused(errno.EFBIG, f"is larger than {MAX_BYTES} bytes", replaceable=True)
        data = b""
        while len(data) <= MAX_BYTES and (chunk := os.read(fd, MAX_BYTES + 1 - len(data))):
            data += chunk  # a file that grew meanwhile is read no further than the bound
    except _Refused:
        raise
    except OSError as e:
        raise _Refused(e.errno or errno.EIO, f"cannot be read ({e.strerror})") from None
    finally:
        os.close(fd)
    if len(data) > MAX_BYTES:
        raise _Refused(errno.EFBIG, f"is larger than {MAX_BYTES} bytes", replaceable=True)
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError as e:
        raise _Refused(errno.EINVAL, f"is not JSON ({e})", replaceable=True) from None
    if not isinstance(obj, dict):
        raise _Refused(errno.EINVAL, "is not a JSON object", replaceable=True)
    return obj


def _entries(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The well-formed entries, each under its command's identity (one recorded under a program's name alone,
    as an older spoolparse did, under the identity of the command it names)."""
    out: dict[str, dict[str, Any]] = {}
    for key, entry in data.items():
        if not isinstance(entry, dict):
            continue
        value = entry.get("memory_per_task")
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            continue
        command = entry.get("command")
        if isinstance(command, list) and command and all(isinstance(a, str) for a in command):
            key = command_key(command)
        out[str(key)] = entry
    return out


def listing(path: str | None = None) -> dict[str, dict[str, Any]]:
    """Every recorded calibration by command identity (``calibrate --list``); a file that cannot be used is a
    warning and gives none."""
    path = path or calibrations_path()
    dir_fd = None
    try:
        dir_fd = _open_dir(path, make=False)
        return _entries(_load(dir_fd, os.path.basename(path)))
    except _Refused as e:
        log.warning("calibrations file %r %s: no calibration is used", path, e.strerror)
        return {}
    finally:
        if dir_fd is not None:
            os.close(dir_fd)


def recorded(path: str | None = None) -> dict[str, int]:
    """The recorded ``memory_per_task`` of each calibrated command identity (empty when there is no record, or
    the file cannot be used: a warning then)."""
    return {key: entry["memory_per_task"] for key, entry in listing(path).items()}


def record(report: dict[str, Any], path: str | None = None) -> str | None:
    """Record a report's ``memory_per_task`` under its command's identity (replacing an older one); the file's
    path, or ``None`` when there is nothing to record. The file is replaced whole (a reader never sees half of
    it), in its directory as :func:`listing` reaches it; one that is not ours to replace (a symlink, another
    user's, not a regular file), or a way there that is not ours, is an ``OSError`` saying why."""
    if not report.get("memory_per_task") or report.get("failures"):
        return None
    path = path or calibrations_path()
    name = os.path.basename(path)
    try:
        dir_fd = _open_dir(path, make=True)
    except _Refused as e:
        raise OSError(e.errno, f"{path} {e.strerror}") from None
    assert dir_fd is not None  # made when missing
    try:
        try:
            data = _load(dir_fd, name)
        except _Refused as e:
            if not e.replaceable:
                raise OSError(e.errno, f"{path} {e.strerror}") from None
            data = {}  # ours, but not a calibrations object: replaced
        data = _entries(data)
        data[command_key(report["command"])] = {
            "memory_per_task": report["memory_per_task"],
            "per_task_peak": report["per_task_peak"],
            "peak_source": report["peak_source"],
            "command": report["command"],
            "recorded": round(time.time()),
        }
        tmp, fd = make_unique_file(dir_fd, ".calibrations-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(dumps(data, pretty=True))  # a lone surrogate in a command spelled out: orjson reads it back
            os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            unlink_at(dir_fd, tmp)
            raise
    finally:
        os.close(dir_fd)
    return path
