"""Kept transcripts (``batch --results DIR``): a finished task's spools given names under ``DIR/<id>/``.

A spool is a nameless ``O_TMPFILE`` file; keeping it is one ``linkat`` of
``/proc/self/fd/N`` (no copy, however large), and an in-kernel copy
(``copy_file_range``, else ``sendfile``) only where the link is refused
(the results folder on another filesystem, a sandbox). The
folder's name is the task id made safe for a path (``%``-quoted, never ``.``
or ``..``); each attempt that is kept replaces the one before, and a later
attempt that is ``ok`` removes it (when only the tasks not ``ok`` are kept),
in this batch or a resumed one.

An agent may write where its results go (a shared workspace, a batch run as
root in a container). So ``DIR`` is held by a descriptor opened with
``O_NOFOLLOW | O_DIRECTORY``, and everything under it goes through that
descriptor (:mod:`spoolparse._dirfd`): a symbolic link, a file or another
user's directory where a task's folder should be is refused with a warning,
and that task's transcript is not kept, never written through it; nothing of
anyone else's is replaced.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import os
import queue
import threading
from collections.abc import Callable
from typing import IO, Literal
from urllib.parse import quote

from .._dirfd import NotOurs, open_dir, own_dir, unlink_at
from .._signals import helper_thread
from ..errors import UsageError

__all__ = ["KEEP_MODES", "KeepTranscript", "Keeper", "ResultsDir", "folder_name", "keep", "TRANSCRIPT_FILES"]

log = logging.getLogger("spoolparse.runner")

#: The files of a kept transcript, in each task's folder.
TRANSCRIPT_FILES = ("stdout", "stderr")

#: ``failed``: keep the transcripts of tasks that are not ``ok`` (the default); ``all``: of every task.
KeepTranscript = Literal["failed", "all"]
KEEP_MODES: tuple[KeepTranscript, ...] = ("failed", "all")

#: Longest folder name made from an id (bytes of the quoted form); a longer one is cut and ends in ``~`` and a hash.
NAME_MAX = 200


def folder_name(task_id: str) -> str:
    """A file name for ``task_id``, its own: ``/``, control and other unsafe characters ``%``-quoted (a lone
    surrogate too: its code unit's bytes); a long one cut and ended with ``~`` and a hash of the whole id, so
    two ids alike in their first 200 bytes never share a folder."""
    raw = task_id.encode("utf-8", "surrogatepass")  # a file name's undecodable bytes, as Python hands them
    name = quote(raw, safe="-_.,=+@~ ") or "%00"
    if name in (".", ".."):
        name = name.replace(".", "%2E")
    if len(name) > NAME_MAX:
        name = name[: NAME_MAX - 17] + "~" + hashlib.blake2b(raw, digest_size=8).hexdigest()
    return name


class ResultsDir:
    """A results folder (``--results DIR``), held by a descriptor: made when missing (mode 0700); a symbolic
    link or anything but a directory there is a :class:`~spoolparse.UsageError`, as is one that cannot be made."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        try:
            os.makedirs(self.path, mode=0o700, exist_ok=True)
            self.fd = open_dir(self.path)
        except NotOurs:
            raise UsageError(f"results folder {self.path!r} is a symbolic link or not a directory: give the "
                             "directory itself") from None
        except OSError as e:
            raise UsageError(f"cannot make the results folder {self.path!r}: {e.strerror}") from None

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def keep(self, task_id: str, spools: dict[str, IO[bytes]]) -> str | None:
        """Name each spool ``<id>/<key>`` (``stdout``, ``stderr``); the folder's path, or ``None`` (with a
        warning) when the folder's name holds something not ours."""
        name = folder_name(task_id)
        try:
            folder = own_dir(name, self.fd)
        except NotOurs as e:
            log.warning("cannot keep the transcript of %s: %s %s", task_id, os.path.join(self.path, name),
                        e.strerror)
            return None
        try:
            for key, f in spools.items():
                unlink_at(folder, key)  # the attempt kept before, in our own folder
                try:
                    os.link(f"/proc/self/fd/{f.fileno()}", key, dst_dir_fd=folder, follow_symlinks=True)
                except OSError:  # another filesystem, or a spool that cannot be linked: copy inside the kernel
                    _copy(f.fileno(), key, folder)
        finally:
            os.close(folder)
        return os.path.join(self.path, name)

    def forget(self, task_id: str) -> None:
        """Remove the transcript kept for ``task_id`` (a later attempt of it was ``ok``); a folder that is not
        ours, or holds more than a transcript, is left as it is."""
        name = folder_name(task_id)
        try:
            folder = open_dir(name, self.fd)
        except OSError:  # none kept (FileNotFoundError), or not ours to touch (NotOurs)
            return
        try:
            if os.fstat(folder).st_uid != os.geteuid():
                return
            for key in TRANSCRIPT_FILES:
                unlink_at(folder, key)
        finally:
            os.close(folder)
        with contextlib.suppress(OSError):  # only an empty one goes
            os.rmdir(name, dir_fd=self.fd)


def keep(directory: str | os.PathLike[str], task_id: str, spools: dict[str, IO[bytes]]) -> str | None:
    """Name each spool ``directory/<id>/<key>`` (``stdout``, ``stderr``); returns that folder (``None``: refused,
    see :meth:`ResultsDir.keep`)."""
    results = ResultsDir(directory)
    try:
        return results.keep(task_id, spools)
    finally:
        results.close()


def _copy(src: int, dest: str, dir_fd: int) -> None:
    """Copy inside the kernel: ``copy_file_range`` (a reflink where the filesystem shares blocks), else ``sendfile``."""
    size = os.fstat(src).st_size
    out = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dir_fd)
    try:
        offset = 0
        with contextlib.suppress(OSError):  # across filesystems on older kernels (EXDEV), or not offered here
            while offset < size:
                sent = os.copy_file_range(src, out, size - offset, offset, offset)
                if sent == 0:
                    break
                offset += sent
        while offset < size:
            sent = os.sendfile(out, src, offset, size - offset)
            if sent == 0:
                break
            offset += sent
    finally:
        os.close(out)


class Keeper:
    """Keeps transcripts in a thread of its own, one at a time in the order given: a copy (or the removal of
    a large attempt kept before) takes as long as the file is large, and a batch's supervising thread must
    not wait for it. ``done`` is called (in that thread) after each job, whatever it raised.
    """

    def __init__(self, done: Callable[[], None]) -> None:
        self._done = done
        self._jobs: queue.Queue[Callable[[], None] | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        self.pending = 0  # jobs given and not yet done (read by the batch's loop)
        self._idle = threading.Condition()

    def submit(self, job: Callable[[], None], *, then: Callable[[], None] | None = None) -> None:
        """Run ``job`` in the keeper's thread, then ``then`` (whatever ``job`` did)."""
        if then is not None:
            job = functools.partial(_then, job, then)
        with self._idle:
            self.pending += 1
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="spoolparse-keep", daemon=True)
            self._thread.start()
        self._jobs.put(job)

    def _run(self) -> None:
        helper_thread()
        while (job := self._jobs.get()) is not None:
            try:
                job()
            finally:
                with self._idle:
                    self.pending -= 1
                    self._idle.notify_all()
                self._done()

    def wait(self) -> None:
        """Block until every job given so far is done (the batch is ending: nothing else is supervised)."""
        with self._idle:
            while self.pending:
                self._idle.wait()

    def close(self) -> None:
        """After :meth:`wait`: the thread ends."""
        if self._thread is not None:
            self._jobs.put(None)
            self._thread = None


def _then(job: Callable[[], None], then: Callable[[], None]) -> None:
    try:
        job()
    finally:
        then()
