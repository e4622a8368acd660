"""One child's start: made ready ahead (:meth:`Launch.prepare`), then run (:meth:`Launch.start`).

Which of the four ways a child starts is :func:`.spawn.start_way`'s choice
(the module docstring of :mod:`.spawn` says what each guarantees);
:meth:`Launch.prepare` turns it into what :class:`subprocess.Popen` is given,
one named method per way behind one guard, as CPython's :mod:`subprocess`
keeps its ``_posix_spawn`` fast path: :meth:`~Launch.direct`,
:meth:`~Launch.joined`, :meth:`~Launch.gated`, :meth:`~Launch.with_preexec`. Made ready in one thread,
a start may run in another (the runner's spawner threads): it is the part
that waits for the ``exec``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import SpawnError
from .cgroup import Cgroup
from .guardian import Registration, guardian
from .joined import JoinError, homes, joined
from .spawn import Gate, deathsig_preexec, explain_exec_error, gated_argv, spawn, start_way

__all__ = ["Launch"]


@dataclass
class Launch:
    """What one start hands :class:`subprocess.Popen`, and what the start must do around it."""

    args: list[str]  # the command as given, for the SpawnError
    argv: list[str]  # what is exec'd first: the program, or the gated start's shim before it
    program: list[str]  # the program and its arguments
    stdin: Any
    stdout: Any
    stderr: Any
    cwd: str | None
    env: Mapping[str, str] | None
    cgroups: list[str]  # the directories of the cgroup the child joins before it runs
    preexec: Callable[[], None] | None = None
    gate: Gate | None = None
    #: The child tells the guardian about its group itself (the preexec start); else we do, once it runs.
    registration: Registration | None = None
    #: The joined start: the ``tasks`` files the forking thread comes back to (:mod:`.joined`).
    back: list[str] | None = None

    @classmethod
    def prepare(
        cls, args: list[str], program: list[str], *, stdin: Any, stdout: Any, stderr: Any, cwd: str | None,
        env: Mapping[str, str] | None, cgroup: Cgroup | None, preexec_fn: Callable[[], None] | None,
    ) -> Launch:
        """The start of ``program``, made ready; what the way chosen finds wrong with it is a
        :class:`~spoolparse.SpawnError` now, before any fork."""
        # every child carries our owner mark: the guardian ends what has it when we are gone
        marked = guardian.marked_env(env) if sys.platform.startswith("linux") else None
        cgroups = list(cgroup.dirs) if cgroup is not None else []
        plan = cls(args, program, program, stdin, stdout, stderr, cwd, env, cgroups)
        back = homes(cgroups) if cgroups and preexec_fn is None else None
        try:
            way = start_way(
                program, marked=marked is not None, cgroups=bool(cgroups), joinable=back is not None,
                devnull_stdin=stdin is subprocess.DEVNULL, preexec_fn=preexec_fn is not None, env=env, cwd=cwd,
            )
        except (OSError, ValueError) as e:
            raise plan.error(e, exec_failed=False) from None
        if way == "direct":
            return plan.direct(marked)
        if way == "joined" and back is not None and guardian.hold_cgroups(cgroups):
            return plan.joined(back, marked)
        if way == "joined":  # the guardian could not be told: the preexec start, with its parent-death signal
            return plan.with_preexec(marked, cgroup, preexec_fn)
        shim = gated_argv(program, [os.path.join(d, "cgroup.procs") for d in cgroups]) if way == "gated" else None
        if shim is not None:
            return plan.gated(shim, marked)
        return plan.with_preexec(marked, cgroup, preexec_fn)

    def direct(self, marked: Mapping[str, str] | None) -> Launch:
        """No cgroup to join, no ``preexec_fn``: one ``exec`` through ``vfork``; the owner mark covers the instant
        between the fork and our hold."""
        self.env = marked
        return self

    def joined(self, back: list[str], marked: Mapping[str, str] | None) -> Launch:
        """cgroup v1 directories to join, no ``preexec_fn``: the forking thread steps into them, so the child is
        born there; one ``exec`` through ``vfork``, the guardian told of the cgroups before the fork."""
        self.back, self.env = back, marked
        return self

    def gated(self, shim: list[str], marked: Mapping[str, str] | None) -> Launch:
        """A cgroup to join before the program runs, stdin ``/dev/null``: a shim joins it and waits on the gate,
        no Python runs in the child (still ``vfork``)."""
        self.gate = Gate()
        self.argv, self.stdin, self.env = shim, self.gate.r, marked
        return self

    def with_preexec(
        self, marked: Mapping[str, str] | None, cgroup: Cgroup | None, preexec_fn: Callable[[], None] | None
    ) -> Launch:
        """Otherwise: the same steps in a ``preexec_fn`` (a ``fork``); the child itself tells the guardian about
        its group, before it runs anything."""
        if marked is not None:
            self.env = marked
        self.registration = guardian.registration(self.cgroups)
        join = cgroup.preexec() if cgroup is not None else None
        self.preexec = _all_of([deathsig_preexec(), join, self.registration, preexec_fn])
        return self

    def start(self) -> subprocess.Popen[bytes]:
        """Fork and exec (a start with a death signal from a thread that outlives the child, :func:`.spawn.spawn`).
        Raises :class:`~spoolparse.SpawnError`; the gate, if any, is left for :meth:`started` or :meth:`abandon`."""

        def popen() -> subprocess.Popen[bytes]:
            try:
                with self.registration or contextlib.nullcontext(), (
                    joined(self.cgroups, self.back) if self.back is not None else contextlib.nullcontext()
                ):
                    return subprocess.Popen(  # an argv list; a shell only when asked
                        self.argv, stdin=self.stdin, stdout=self.stdout, stderr=self.stderr, cwd=self.cwd,
                        env=self.env, start_new_session=True, preexec_fn=self.preexec,
                    )
            except (OSError, ValueError) as e:
                # a cgroup that could not be joined is the start's failure, not the program's
                raise self.error(e, exec_failed=not isinstance(e, JoinError)) from None

        try:
            # PR_SET_PDEATHSIG is the forking thread's: those starts fork from one that outlives the child; the
            # joined one never from the main thread (its cgroup is where v1 charges the whole process's memory)
            if self.preexec is None and self.gate is None and self.back is None:
                return popen()
            return spawn(popen, off_main=self.back is not None)
        except BaseException:
            if self.registration is not None:
                self.registration.done(None)  # a child that registered itself and then failed to exec
            raise
        finally:
            if self.gate is not None:
                self.gate.started()

    def started(self, pid: int) -> None:
        """The child runs as ``pid``: the guardian holds its group and cgroup, then the gate lets the program run."""
        if self.registration is not None:
            self.registration.done(pid)
        else:
            guardian.hold(pid, self.cgroups)
        if self.gate is not None:
            self.gate.open()

    def abandon(self) -> None:
        """The start will not happen, or failed: a gated child reads end of file and runs nothing."""
        if self.gate is not None:
            self.gate.close()

    def error(self, e: OSError | ValueError, *, exec_failed: bool = True) -> SpawnError:
        """A start that failed, as :class:`~spoolparse.SpawnError`: the OS refused it, or what was to be passed
        cannot be (``ValueError``: a NUL byte in the command, its environment or its directory; ``=`` in a
        variable's name). ``exec_failed``: the fork's ``execve`` failed, and its error names what it can."""
        err = e if isinstance(e, OSError) else OSError(errno.EINVAL, str(e))
        if exec_failed:
            program = self.program[0]
            if err.errno == errno.E2BIG:
                # the program's arguments (and environment) are what is too long, whatever exec'd first
                err = OSError(err.errno, err.strerror, program)
            elif self.argv[0] == program:  # the program's own execve: what made it fail, where more can be said
                err = explain_exec_error(err, program, env=self.env, cwd=self.cwd)
        return SpawnError(self.args, err)


def _all_of(parts: list[Callable[[], None] | None]) -> Callable[[], None] | None:
    """One ``preexec_fn`` that calls each of ``parts`` in turn (``None``: none to call)."""
    todo = [p for p in parts if p is not None]
    if not todo:
        return None
    if len(todo) == 1:
        return todo[0]

    def all_of() -> None:
        for p in todo:
            p()

    return all_of
