"""Starting a child that dies with us: ``PR_SET_PDEATHSIG`` from a thread that lives as long as we do.

The kernel sends the parent-death signal when the *thread* that forked the
child exits, not the process. A child started from a short-lived thread (a
``ThreadPoolExecutor`` worker, a thread per request) would be killed when that
thread ends. So a child is forked either from the main thread (which lives
until the process exits), from a thread that declared itself long-lived with
:func:`mark_long_lived`, or else by one shared daemon thread that never exits
(a hand-over costs some tens of microseconds).

The signal is SIGKILL: by the time it fires nobody is left to read the
answer. It reaches only the direct child; the guardian
(:mod:`spoolparse._os.guardian`) ends the rest of its group and cgroup.

Four ways to start a child (:func:`start_way` picks one, for
:class:`spoolparse.child.Child`), each leaving nothing behind if we die at
any instant, and each running the program with one ``execve`` whose error
is the start's :class:`~spoolparse.SpawnError`, never a shell's exit status.
Every way first asks :func:`exec_check` what the kernel will make of the
program, which also follows a ``#!/usr/bin/env NAME`` line to ``NAME`` on
the child's ``PATH`` (``env`` would exit 127 after an ``exec`` that
worked):

- **direct**, when there is no cgroup to join and no ``preexec_fn``: one
  ``exec`` through ``vfork``, no parent-death signal. The child carries our
  owner mark in its environment, which covers the instant between the fork
  and the guardian's hold (:mod:`spoolparse._os.guardian` sweeps it a while
  after we are gone, for a child still in its ``exec``).
- **joined** (:mod:`.joined`), when its cgroups are v1 ones: the guardian
  is told of them first, the forking thread steps into them, and the same
  one ``exec`` through ``vfork`` starts the child inside them. No
  parent-death signal is needed: the guardian holds the cgroups before the
  child exists, and kills what is in them when we die, what left our
  groups and cleared its environment included.
- **gated** (:func:`gated_argv`, :class:`Gate`), when the child must join
  cgroups a thread cannot (v2) and its stdin is ``/dev/null``: no Python
  runs between fork and exec, so :mod:`subprocess` still uses ``vfork`` (a
  ``fork``'s page-table copy and the parent's write faults that follow grow
  with our memory: 5 ms against 0.5 ms of parent CPU here). The child runs a
  few lines of ``/bin/sh`` that join its cgroups and wait on the gate, a
  pipe as stdin, until the parent has told the guardian about the group and
  cgroups; then the shell execs the agent with stdin ``/dev/null``: two
  ``exec``s, and no parent-death signal, since the guardian holds all of it
  before the agent runs. If we die before opening the gate, the child reads
  end of file and exits without running anything. The shell's ``exec``
  hands a file the kernel refuses (``ENOEXEC``) to ``/bin/sh`` as a script:
  so this way is only for a program :func:`exec_check` knows the kernel
  runs (an ELF executable of this machine, or a ``#!`` script whose
  interpreters end in one).
- **preexec** (:func:`deathsig_preexec` and the guardian's ``Registration``)
  otherwise: the same steps in a ``preexec_fn``, which makes
  :mod:`subprocess` ``fork``. Also for a program only ``execve`` can judge
  (another machine's ELF file, which ``binfmt_misc`` may run): its error
  comes back from the child as :mod:`subprocess` reports it.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import functools
import os
import queue
import signal
import stat
import sys
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from typing import Any, Literal, TypeVar

from .._signals import deferred

__all__ = [
    "spawn", "mark_long_lived", "deathsig_preexec", "gated_argv", "Gate", "exec_check", "explain_exec_error",
    "start_way",
]

T = TypeVar("T")

_PR_SET_PDEATHSIG = 1
_local = threading.local()


@functools.cache  # on first use: finding libc compiles patterns (ctypes.util, Python 3.10), not at import
def _load_prctl() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        lib = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        fn = lib.prctl
        fn.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
        fn.restype = ctypes.c_int
    except (OSError, AttributeError):
        return None
    return fn


def deathsig_preexec() -> Callable[[], None] | None:
    """A ``preexec_fn`` part: SIGKILL the child when its parent thread dies (``None`` off Linux)."""
    prctl = _load_prctl()
    if prctl is None:
        return None
    parent = os.getpid()
    sigkill = int(signal.SIGKILL)

    def set_deathsig() -> None:
        prctl(_PR_SET_PDEATHSIG, sigkill, 0, 0, 0)
        if os.getppid() != parent:  # we died between fork and prctl: nobody will end this child
            os.kill(os.getpid(), sigkill)

    return set_deathsig


# -- the gated start -----------------------------------------------------------

#: ``sh -c SHIM spoolparse-start N PROCS... CMD...``: write our pid into N ``cgroup.procs`` files, wait for
#: the gate's line on stdin (end of file: the parent died first, run nothing), exec CMD with stdin /dev/null.
_SHIM = (
    'n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ >"$1" || exit 126; n=$((n - 1)); shift; done; '
    'IFS= read -r go || exit 126; exec "$@" </dev/null'
)
_SH = "/bin/sh"


@functools.cache
def _have_sh() -> bool:
    return os.access(_SH, os.X_OK)


def gated_argv(argv: list[str], cgroup_procs: list[str]) -> list[str] | None:
    """The argv that starts ``argv`` behind a :class:`Gate`, or ``None`` where that cannot be done here."""
    if not sys.platform.startswith("linux") or not _have_sh():
        return None
    return [_SH, "-c", _SHIM, "spoolparse-start", str(len(cgroup_procs)), *cgroup_procs, *argv]


class Gate:
    """The gated child's stdin: nothing of the agent runs before :meth:`open` (see the module's docstring)."""

    def __init__(self) -> None:
        # close-on-exec: no other child started meanwhile may hold an end (subprocess dups ``r`` to stdin)
        self.r, self.w = os.pipe2(os.O_CLOEXEC)

    def started(self) -> None:
        """The child has its copy: ours goes."""
        if self.r >= 0:
            os.close(self.r)
            self.r = -1

    def open(self) -> None:
        """Let the child run the agent (it then reads stdin from ``/dev/null``)."""
        if self.w >= 0:
            with contextlib.suppress(OSError):  # a child that could not join its cgroup is gone already
                os.write(self.w, b"\n")
        self.close()

    def close(self) -> None:
        """Without :meth:`open`: the child reads end of file and exits without running anything."""
        self.started()
        if self.w >= 0:
            os.close(self.w)
            self.w = -1


# -- what the kernel will make of a program ---------------------------------------------

#: The kernel reads this much of a file to choose its format (``BINPRM_BUF_SIZE``): a ``#!`` line longer than
#: this has its interpreter's name cut, and is refused (``ENOEXEC``) unless a space ends the name first.
_BINPRM_BUF = 256
#: Files the kernel opens after the program before ``ELOOP``: a ``#!`` script's interpreter, that one's, ...
#: (``exec_binprm``: the ELF file at the end may be the fifth interpreter, not the sixth).
_MAX_DEPTH = 5
_ET_EXEC, _ET_DYN = 2, 3
_PT_INTERP = 3
#: ``e_machine`` values of the machines Linux runs, for messages (the ELF specification's names).
_MACHINES = {
    2: "SPARC", 3: "x86", 8: "MIPS", 20: "PowerPC", 21: "PowerPC64", 22: "S/390", 40: "ARM", 43: "SPARC V9",
    62: "x86-64", 183: "AArch64", 243: "RISC-V", 258: "LoongArch",
}


def _machine(code: int) -> str:
    return _MACHINES.get(code, f"machine {code}")


def _elf_ident(head: bytes) -> tuple[int, int, int] | None:
    """(class, byte order, machine) of an ELF header, or ``None`` when ``head`` is not one."""
    if len(head) < 20 or head[:4] != b"\x7fELF" or head[4] not in (1, 2) or head[5] not in (1, 2):
        return None
    return head[4], head[5], int.from_bytes(head[18:20], _order(head[5]))


def _order(data: int) -> Literal["little", "big"]:
    """The byte order of an ELF file's ``EI_DATA``."""
    return "little" if data == 1 else "big"


@functools.cache
def _native_ident() -> tuple[int, int, int] | None:
    """What this process's own executable is (``/proc/self/exe``): the kind of ELF file this kernel runs
    natively. ``None`` where it cannot be read (then no ELF file is known to run: execve alone tells)."""
    try:
        with open("/proc/self/exe", "rb") as f:
            return _elf_ident(f.read(64))
    except OSError:
        return None


def _native_elf(f: Any, head: bytes) -> str | None:
    """For an ELF file: its dynamic loader's path (``""``: none) when it is an executable of this machine's
    kind the kernel loads; ``None`` when only execve can tell (another machine's, which ``binfmt_misc`` may
    run, or a header the kernel may refuse). Reads the file's program headers (an ``OSError`` is the caller's)."""
    ident = _elf_ident(head)
    if ident is None or ident != _native_ident() or len(head) < 64:
        return None
    klass, order = ident[0], _order(ident[1])

    def field(at: int, size: int) -> int:
        return int.from_bytes(head[at : at + size], order)

    if klass == 2:  # ELF64
        e_type, phoff, phentsize, phnum, want = field(16, 2), field(32, 8), field(54, 2), field(56, 2), 56
    else:
        e_type, phoff, phentsize, phnum, want = field(16, 2), field(28, 4), field(42, 2), field(44, 2), 32
    if e_type not in (_ET_EXEC, _ET_DYN) or phentsize != want or not 0 < phnum * phentsize <= 65536:
        return None
    table = os.pread(f.fileno(), phnum * phentsize, phoff)
    if len(table) < phnum * phentsize:
        return None
    for i in range(phnum):
        ph = table[i * phentsize : (i + 1) * phentsize]
        if int.from_bytes(ph[:4], order) != _PT_INTERP:
            continue
        if klass == 2:
            offset, size = int.from_bytes(ph[8:16], order), int.from_bytes(ph[32:40], order)
        else:
            offset, size = int.from_bytes(ph[4:8], order), int.from_bytes(ph[16:20], order)
        name = os.pread(f.fileno(), min(size, 4096), offset)
        if len(name) < 2 or not name.endswith(b"\0") or b"\0" in name[:-1]:
            return None
        return os.fsdecode(name[:-1])
    return ""


def _script_interpreter(head: bytes) -> str | None:
    """The interpreter the kernel takes from a ``#!`` line (its ``load_script``, step for step); ``None`` when
    it refuses the line (no name, or a name that may go on past the bytes it reads)."""
    buf = head[:_BINPRM_BUF].ljust(_BINPRM_BUF, b"\0")  # a shorter file: the kernel's buffer ends in NULs
    end = buf.find(b"\n")
    if end < 0:
        end = _BINPRM_BUF  # the name must end (a space, a tab, a NUL) within these bytes, the last one too
        rest = buf[2:end].lstrip(b" \t")
        if not rest or not any(c in rest for c in (b" ", b"\t", b"\0")):
            return None
    name = buf[2:end].rstrip(b" \t").lstrip(b" \t")
    for stop in (b" ", b"\t", b"\0"):
        name = name.split(stop, 1)[0]
    return os.fsdecode(name) if name else None


def _script_argument(head: bytes) -> bytes | None:
    """The one argument the kernel passes a ``#!`` line's interpreter (what follows its name, the spaces and
    tabs around it trimmed), as its ``load_script`` cuts it; ``None`` when there is none, or when the line
    goes on past the bytes the kernel reads (then only the interpreter can tell what it got)."""
    if b"\n" not in head[:_BINPRM_BUF] and len(head) >= _BINPRM_BUF:
        return None
    buf = head[:_BINPRM_BUF].ljust(_BINPRM_BUF, b"\0")
    end = buf.find(b"\n")
    line = buf[2:end].rstrip(b" \t").lstrip(b" \t")
    name_end = min((i for i in (line.find(c) for c in (b" ", b"\t", b"\0")) if i >= 0), default=-1)
    if name_end < 0 or line[name_end] == 0:
        return None
    arg = line[name_end + 1 :].lstrip(b" \t").split(b"\0", 1)[0]
    return arg or None


#: What ``env -S`` would read as more than words (quotes, escapes, variables, a comment): not judged here.
_ENV_SPECIAL = frozenset(b"'\"\\$#")


def _env_program(arg: bytes | None) -> str | None:
    """The program ``env`` runs when a ``#!`` line gives it ``arg`` (``#!/usr/bin/env node``, ``#!/usr/bin/env
    -S node --flag``), as GNU env reads its one argument; ``None`` when it runs none, or when telling would
    take more than this (another option, an assignment, quoting): env alone then decides."""
    if arg is None:
        return None
    if arg.startswith(b"-S"):
        if _ENV_SPECIAL.intersection(arg):
            return None
        words = arg[2:].split()
        if not words or words[0].startswith(b"-") or b"=" in words[0]:
            return None
        return os.fsdecode(words[0])
    if arg.startswith(b"-") or b"=" in arg:
        return None
    return os.fsdecode(arg)  # the whole argument, spaces and all: env looks for that very name


def _env_check(interpreter: str, head: bytes, env: Mapping[str, str] | None,
               cwd: str | os.PathLike[str] | None) -> None:
    """For a ``#!`` line whose interpreter is ``env``: raise what ``env`` would meet looking its program up on
    the child's ``PATH`` (exit 127 for one not found, 126 for one it cannot execute), before the fork."""
    program = _env_program(_script_argument(head))
    if program is None:
        return
    try:
        _find(program, env, cwd)
    except OSError as e:
        why = "was not found" + ("" if os.sep in program else " on the PATH") if e.errno == errno.ENOENT else (
            "cannot be executed")
        raise OSError(e.errno, f"its #! line's program (run by {interpreter}) {why}", program) from None


def _verdict(
    path: str, cwd: str | os.PathLike[str] | None, depth: int, *, role: str | None = None, loader: bool = False,
    env: Mapping[str, str] | None = None,
) -> bool:
    """:func:`exec_check` for one file the kernel opens: the program (``role`` ``None``) or an interpreter;
    ``env``: the child's environment, whose ``PATH`` a ``#!/usr/bin/env NAME`` line's ``NAME`` is looked up on."""
    where = _where(path, cwd)
    if depth > _MAX_DEPTH:
        raise OSError(errno.ELOOP, f"#! interpreters nested more than {_MAX_DEPTH} deep")
    try:
        st = os.stat(where)
    except OSError as e:
        if role is None:
            raise
        raise OSError(e.errno, f"{role} {'was not found' if e.errno == errno.ENOENT else e.strerror}", path) from None
    if not stat.S_ISREG(st.st_mode) or not os.access(where, os.X_OK):
        raise OSError(errno.EACCES, os.strerror(errno.EACCES) if role is None else f"{role} cannot be executed", path)
    try:
        with open(where, "rb") as f:
            head = f.read(_BINPRM_BUF)
            elf = _native_elf(f, head) if head[:4] == b"\x7fELF" and not loader else None
    except OSError:
        return False  # unreadable here (execute-only, say): execve alone tells
    if loader:
        # its own loader is not looked at; one that is no ELF file of ours is ELIBBAD, never ENOEXEC
        return _elf_ident(head) == _native_ident()
    if head[:4] == b"\x7fELF":
        if not elf:
            return elf == ""  # "": no loader needed
        # the loader is opened by the ELF loader itself, not by another round of exec: no deeper
        return _verdict(elf, cwd, depth, role="its ELF interpreter (dynamic loader)", loader=True)
    if head[:2] != b"#!":
        return False  # binfmt_misc may know it; else ENOEXEC, which only an exact start reports
    interpreter = _script_interpreter(head)
    if interpreter is None:
        return False
    runs = _verdict(interpreter, cwd, depth + 1, role="its #! interpreter", env=env)
    if runs and os.path.basename(interpreter) == "env":
        _env_check(interpreter, head, env, cwd)
    return runs


def _where(path: str, cwd: str | os.PathLike[str] | None) -> str:
    """``path`` as the child sees it: a relative one from its working directory."""
    return path if cwd is None or os.path.isabs(path) else os.path.join(cwd, path)


def _candidates(argv0: str, env: Mapping[str, str] | None, cwd: str | os.PathLike[str] | None) -> list[str]:
    """Where ``argv0`` is looked for, in order (a name without a slash: each folder of the ``PATH`` the child
    gets, as ``execvp`` and :mod:`subprocess` look)."""
    if os.sep in argv0:
        return [argv0]
    return [os.path.join(d, argv0) for d in os.get_exec_path(env)]


def exec_check(argv0: str, *, env: Mapping[str, str] | None, cwd: str | os.PathLike[str] | None) -> bool:
    """What ``execve`` will make of ``argv0``, found before the fork.

    Raises the :class:`OSError` the start would meet, naming what is wrong: the working directory, the
    program (missing, not an executable file) or its interpreter (the ``#!`` line's, or an ELF file's
    dynamic loader: missing, or not executable). Returns ``True`` when the kernel is known to run it: an
    ELF executable of this machine's kind, or a ``#!`` script whose interpreters end in one. ``False`` when
    only ``execve`` can tell (another machine's ELF file, which ``binfmt_misc`` may run; a file of no known
    kind): such a program must be started by a start that reports ``execve``'s error, never through a
    program that would hand it to ``/bin/sh`` on ``ENOEXEC`` as ``execvp`` does (the gated start's
    shell ``exec``).
    """
    if cwd is not None:  # the child's chdir comes first, and fails first
        try:
            is_dir = stat.S_ISDIR(os.stat(cwd).st_mode)
        except OSError as e:
            raise OSError(e.errno, e.strerror, os.fspath(cwd)) from None
        if not is_dir:
            raise OSError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), os.fspath(cwd))
    return _verdict(_find(argv0, env, cwd), cwd, 0, env=env)


def _find(argv0: str, env: Mapping[str, str] | None, cwd: str | os.PathLike[str] | None) -> str:
    """The file ``execvp`` would run for ``argv0``; raises its ``ENOENT`` (none found) or ``EACCES`` (only
    files that cannot be executed)."""
    err = errno.ENOENT
    for path in _candidates(argv0, env, cwd):
        where = _where(path, cwd)
        try:
            st = os.stat(where)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode) and os.access(where, os.X_OK):
            return path
        err = errno.EACCES
    raise OSError(err, os.strerror(err), argv0)


def explain_exec_error(err: OSError, argv0: str, *, env: Mapping[str, str] | None,
                       cwd: str | os.PathLike[str] | None) -> OSError:
    """The error of a start that failed, saying what was wrong where :func:`exec_check` can tell more than
    ``execve``'s number (a missing ``#!`` interpreter is ``ENOENT`` for the script; another machine's ELF
    file is ``ENOEXEC``). Else ``err`` itself."""
    if err.errno not in (errno.ENOENT, errno.ENOEXEC, errno.EACCES, errno.ELIBBAD, errno.ELOOP):
        return err
    try:
        exec_check(argv0, env=env, cwd=cwd)
    except OSError as found:
        # what names an interpreter (or the depth of them) says more; about the program itself, execve's own
        # error stands (it may be about the working directory, which the check cannot tell from the program)
        return found if found.filename != argv0 else err
    if err.errno == errno.ENOEXEC:
        return OSError(err.errno, f"{err.strerror}: {_what_is(argv0, env, cwd)}", err.filename)
    return err


def _what_is(argv0: str, env: Mapping[str, str] | None, cwd: str | os.PathLike[str] | None) -> str:
    """For an ``ENOEXEC``: what the file (or the last interpreter it names) is, as far as its first bytes tell."""
    path = next((p for p in _candidates(argv0, env, cwd) if os.path.isfile(_where(p, cwd))), argv0)
    lead = ""
    for _ in range(_MAX_DEPTH + 1):
        try:
            with open(_where(path, cwd), "rb") as f:
                head = f.read(_BINPRM_BUF)
        except OSError:
            break
        ident = _elf_ident(head)
        if ident is not None:
            native = _native_ident()
            here = f"; this machine runs {_machine(native[2])} programs" if native is not None else ""
            return f"{lead}an ELF program for {_machine(ident[2])} ({64 if ident[0] == 2 else 32}-bit){here}"
        if head[:2] != b"#!":
            return f"{lead}neither an ELF program nor a #! script"
        interpreter = _script_interpreter(head)
        if interpreter is None:
            return f"{lead}a #! script whose first line names no interpreter the kernel can read"
        path, lead = interpreter, f"its #! interpreter {interpreter!r} is "
    return "a file the kernel cannot execute"


def start_way(
    program: list[str], *, marked: bool, cgroups: bool, joinable: bool, devnull_stdin: bool, preexec_fn: bool,
    env: Mapping[str, str] | None, cwd: str | os.PathLike[str] | None,
) -> str:
    """How :class:`spoolparse.child.Child` starts ``program`` (the module's docstring): ``"direct"``,
    ``"joined"``, ``"gated"`` or ``"preexec"``. The one place this is decided. ``joinable``: the forking
    thread can step into the cgroups and back (cgroup v1, :func:`.joined.homes`).

    Every way execs the program once with ``execve`` and reports its error: the direct, joined and preexec
    starts through :mod:`subprocess`, the gated one only for a program :func:`exec_check` knows the kernel
    runs (its shell's ``exec`` would hand a program the kernel refuses to ``/bin/sh``). Raises what
    :func:`exec_check` finds wrong before the fork.
    """
    # every way: what the kernel refuses is raised before the fork, and so is the one failure the kernel cannot
    # see (a #!/usr/bin/env line's program missing from the child's PATH: env would exit 127 after the exec)
    runs = exec_check(program[0], env=env, cwd=cwd)
    if marked and not preexec_fn and not cgroups:
        return "direct"
    if marked and not preexec_fn and joinable:
        return "joined"
    if marked and devnull_stdin and not preexec_fn and gated_argv(program, []) is not None:
        return "gated" if runs else "preexec"
    return "preexec"


def mark_long_lived() -> None:
    """Declare the calling thread to outlive every child it starts (the runner's spawner threads)."""
    _local.long_lived = True


def _here() -> bool:
    return threading.current_thread() is threading.main_thread() or getattr(_local, "long_lived", False)


_jobs: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]]] = queue.SimpleQueue()
_thread: threading.Thread | None = None
_thread_lock = threading.Lock()


def _serve() -> None:
    mark_long_lived()
    while True:
        fn, fut = _jobs.get()
        if not fut.set_running_or_notify_cancel():
            continue
        try:
            fut.set_result(fn())
        except BaseException as e:
            fut.set_exception(e)


def spawn(fn: Callable[[], T], *, off_main: bool = False) -> T:
    """Call ``fn`` (which forks) on a thread that outlives the child: this one, or the shared spawner.
    ``off_main``: never on the main thread (the joined start: cgroup v1 charges the memory of the whole
    process to the cgroup its main thread is in, and that thread would step into the task's). The caller waits
    with the ending signals held: the fork is a matter of milliseconds, and a signal must not part it from the
    child it started."""
    global _thread
    if _here() and not (off_main and threading.current_thread() is threading.main_thread()):
        return fn()
    with _thread_lock:
        if _thread is None or not _thread.is_alive():
            # a daemon thread waiting on a queue is never ended before the process is
            _thread = threading.Thread(target=_serve, name="spoolparse-spawn", daemon=True)
            _thread.start()
    fut: Future[T] = Future()
    with deferred():
        _jobs.put((fn, fut))
        return fut.result()


def _after_fork() -> None:
    global _thread, _jobs, _thread_lock
    _thread = None
    _jobs = queue.SimpleQueue()
    _thread_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)
