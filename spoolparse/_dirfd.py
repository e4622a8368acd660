"""File operations relative to a directory descriptor, for directories others may write to.

A path is looked up again at every use: between a check (``lstat``: a
directory, ours) and the use (``mkdir``, ``rmdir``, ``open``) anyone who can
write the directory above may swap the entry for a symbolic link to anywhere
(``renameat2(RENAME_EXCHANGE)`` does it atomically), and the use then happens
there, with our rights. So spoolparse opens such a directory once, with
``O_NOFOLLOW | O_DIRECTORY`` (a symlink in its place is refused, not followed),
checks the open directory itself (``fstat``: its owner, its mode), and does
everything below it through that descriptor (``openat``, ``mkdirat``,
``unlinkat``, ``linkat``: Python's ``dir_fd=`` arguments). Whatever is swapped
after the open, the descriptor still names the directory that was checked.
Spool placement (:mod:`spoolparse.spool`) and kept transcripts
(:mod:`spoolparse.runner.results`) go through these.

A path named by a setting (a spool directory, the temp dir, the calibrations
file) is reached the same way, one step at a time from ``/``
(:func:`open_path`): the kernel's own lookup would follow any symbolic link on
the way, and a directory on the way that another user owns (or may write to)
lets her put one there, or swap the next step, whenever she likes. So every
link on the way must be ours or root's, and every directory ours or root's
and not writable by others (sticky, as ``/tmp`` is, will do: there nobody
else may rename what is ours). A file the user names to be written (a job log,
an events file) is reached by :func:`open_file`, which asks the same of the
links only: a link of the user's own to their log is followed, one another
user planted is not.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Callable
from typing import TypeVar

from .errors import UsageError

__all__ = [
    "NotOurs", "open_dir", "own_dir", "make_unique_dir", "make_unique_file", "unlink_at", "DIR_FLAGS",
    "open_path", "open_file", "open_named", "refusal", "MAX_LINKS",
]

#: How a directory others may write to is opened: never through a symlink, never a file, never inherited.
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC

#: How each step of a path is opened on its own: whatever is there (a symbolic link itself, never followed).
_STEP = os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC

#: Most symbolic links followed on the way to one path (the kernel's own limit, ``MAXSYMLINKS``).
MAX_LINKS = 40

_T = TypeVar("_T")


class NotOurs(OSError):
    """A name where a directory of ours should be holds something else: a symbolic link, a file, or a
    directory of another user's (or one others may write to, where that matters)."""


def open_dir(name: str, dir_fd: int | None = None) -> int:
    """A descriptor on directory ``name`` (relative to ``dir_fd``); :class:`NotOurs` when ``name`` is a symbolic
    link or no directory (other failures as the kernel gives them, ``FileNotFoundError`` among them)."""
    try:
        return os.open(name, DIR_FLAGS, dir_fd=dir_fd)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENOTDIR):
            raise NotOurs(e.errno, "is a symbolic link or not a directory", name) from None
        raise


def _check(fd: int, name: str, private: bool) -> None:
    """``fd`` is a directory we own (``private``: that nobody else may enter either), or :class:`NotOurs`."""
    st = os.fstat(fd)
    if st.st_uid != os.geteuid():
        raise NotOurs(errno.EPERM, f"is owned by another user (uid {st.st_uid})", name)
    if private and st.st_mode & 0o077:
        raise NotOurs(errno.EPERM, f"is open to others (mode {stat.S_IMODE(st.st_mode):04o})", name)


def own_dir(name: str, dir_fd: int, *, mode: int = 0o700, private: bool = False) -> int:
    """A descriptor on directory ``name`` under ``dir_fd``, made (``mode``) when missing: one of ours, or
    :class:`NotOurs` (a symlink, a file, another user's directory; with ``private``, one open to others)."""
    with contextlib.suppress(FileExistsError):
        os.mkdir(name, mode, dir_fd=dir_fd)
    fd = open_dir(name, dir_fd)
    try:
        _check(fd, name, private)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _unique(prefix: str, suffix: str, make: Callable[[str], _T]) -> tuple[str, _T]:
    """``make(name)`` for the first unused ``<prefix><random><suffix>`` (``make`` raises ``FileExistsError``
    for a used one)."""
    for _ in range(100):
        name = f"{prefix}{secrets.token_hex(4)}{suffix}"
        try:
            return name, make(name)
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no unused name", prefix)


def make_unique_dir(dir_fd: int, prefix: str) -> tuple[str, int]:
    """A new directory ``<prefix><random>`` under ``dir_fd`` (mode 0700) and a descriptor on it: what
    :func:`tempfile.mkdtemp` does by path, done through the descriptor."""

    def make(name: str) -> int:
        os.mkdir(name, 0o700, dir_fd=dir_fd)
        return open_dir(name, dir_fd)

    return _unique(prefix, "", make)


def make_unique_file(dir_fd: int, prefix: str, suffix: str = "") -> tuple[str, int]:
    """A new file ``<prefix><random><suffix>`` under ``dir_fd`` (mode 0600), open for reading and writing: what
    :func:`tempfile.mkstemp` does by path, done through the descriptor."""
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    return _unique(prefix, suffix, lambda name: os.open(name, flags, 0o600, dir_fd=dir_fd))


def unlink_at(dir_fd: int, name: str) -> None:
    """Remove entry ``name`` of ``dir_fd`` (a symbolic link itself, never what it points to); gone already is fine."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(name, dir_fd=dir_fd)


# -- a path named by a setting, one step at a time ----------------------------------------------------------------


def _ours(uid: int) -> bool:
    return uid in (0, os.geteuid())


def _link_owner(st: os.stat_result, shown: str) -> None:
    """A symbolic link is followed only when it is ours or root's."""
    if not _ours(st.st_uid):
        raise NotOurs(errno.EPERM, f"is a symbolic link owned by another user (uid {st.st_uid})", shown)


def _trusted(st: os.stat_result, shown: str, *, shared: bool) -> None:
    """A directory on the way is ours or root's, and nobody else may rename or replace what is in it: not
    writable by others, or sticky (``shared``: the last directory may be writable by others all the same)."""
    if not _ours(st.st_uid):
        raise NotOurs(errno.EPERM, f"is owned by another user (uid {st.st_uid})", shown)
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not st.st_mode & stat.S_ISVTX and not shared:
        raise NotOurs(errno.EPERM, f"is writable by others (mode {stat.S_IMODE(st.st_mode):04o})", shown)


def _walk(path: str, *, make: int | None, strict: bool, shared: bool) -> tuple[int, str]:
    """An ``O_PATH`` descriptor on the directory ``path`` names, and that directory's path with no link in it.

    Each step is opened on its own (``O_PATH | O_NOFOLLOW``, relative to the directory before it) and looked at
    with ``fstat``: a symbolic link must be ours or root's, and is followed by reading it (``readlinkat`` on
    that descriptor: what was checked is what is read); with ``strict``, every directory must pass
    :func:`_trusted` too. ``make``: a missing directory is made with this mode (else ``FileNotFoundError``).
    A step that is not ours is :class:`NotOurs` naming it."""
    if not path:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
    todo = os.path.join(os.getcwd(), path).split("/")[::-1]  # the working directory's path has no link in it
    stack = [(os.open("/", _STEP | os.O_DIRECTORY), "/")]
    try:
        if strict:
            _trusted(os.fstat(stack[0][0]), "/", shared=shared and not any(p not in ("", ".") for p in todo))
        links = 0
        while todo:
            name = todo.pop()
            if name in ("", "."):
                continue
            if name == "..":
                if len(stack) > 1:
                    os.close(stack.pop()[0])
                continue
            cur, where = stack[-1]
            shown = os.path.join(where, name)
            try:
                fd = os.open(name, _STEP, dir_fd=cur)
            except FileNotFoundError:
                if make is None:
                    raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), shown) from None
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, make, dir_fd=cur)
                fd = os.open(name, _STEP, dir_fd=cur)
            st = os.fstat(fd)
            if stat.S_ISLNK(st.st_mode):
                try:
                    _link_owner(st, shown)
                    links += 1
                    if links > MAX_LINKS:
                        raise NotOurs(errno.ELOOP, "has too many levels of symbolic links", shown)
                    target = os.readlink("", dir_fd=fd)
                finally:
                    os.close(fd)
                if target.startswith("/"):
                    while len(stack) > 1:
                        os.close(stack.pop()[0])
                todo.extend(target.split("/")[::-1])
                continue
            stack.append((fd, shown))
            if not stat.S_ISDIR(st.st_mode):
                raise NotOurs(errno.ENOTDIR, "is not a directory", shown)
            if strict:
                _trusted(st, shown, shared=shared and not any(p not in ("", ".") for p in todo))
        fd, where = stack.pop()
        return fd, where
    finally:
        for fd, _ in stack:
            os.close(fd)


def open_path(path: str, *, make: int | None = None, shared: bool = False) -> int:
    """A descriptor (``O_RDONLY | O_DIRECTORY``) on the directory ``path`` names, reached one step at a time:
    every symbolic link on the way ours or root's, every directory ours or root's and not writable by others
    unless sticky (``shared``: the last one may be). :class:`NotOurs` names the step that is not;
    ``FileNotFoundError`` a missing one, unless ``make`` gives the mode to make it with."""
    fd, _ = _walk(path, make=make, strict=True, shared=shared)
    try:
        return os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=fd)
    finally:
        os.close(fd)


def _on_procfs(fd: int) -> bool:
    """Whether directory ``fd`` is in ``/proc``, where the links are the kernel's own (``/proc/self/fd/2``)."""
    try:
        return os.fstat(fd).st_dev == os.stat("/proc").st_dev
    except OSError:
        return False


def open_file(path: str, flags: int, mode: int = 0o666) -> int:
    """``os.open(path, flags, mode)`` for a file the user names, with every symbolic link on the way ours or
    root's (:class:`NotOurs` names one that is not), followed by reading it, never by the kernel's lookup; the
    directories may be anyone's (a group's shared directory). The kernel's own links in ``/proc`` (where
    ``/dev/stderr`` and ``/dev/fd/N`` lead) are opened as the kernel follows them: no user can plant one.
    Other failures (a file on the way among them) are the kernel's, naming ``path``."""
    named, links = path, 0
    try:
        while True:
            head, name = os.path.split(path)
            dir_fd, where = _walk(head or ".", make=None, strict=False, shared=False)
            try:
                try:
                    return os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dir_fd)
                except OSError as e:
                    # a link there: ELOOP, or EACCES (O_CREAT on a link in a sticky directory)
                    failed = e
                link = os.open(name, _STEP, dir_fd=dir_fd)
                try:
                    st = os.fstat(link)
                    if not stat.S_ISLNK(st.st_mode):
                        raise failed
                    _link_owner(st, os.path.join(where, name))
                    if _on_procfs(dir_fd):
                        return os.open(name, flags | os.O_CLOEXEC, mode, dir_fd=dir_fd)
                    target = os.readlink("", dir_fd=link)
                finally:
                    os.close(link)
            finally:
                os.close(dir_fd)
            links += 1
            if links > MAX_LINKS:
                raise NotOurs(errno.ELOOP, "has too many levels of symbolic links", named)
            path = os.path.join(where, target)
    except NotOurs as e:
        if e.errno != errno.ENOTDIR:
            raise
        raise OSError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), named) from None  # a mistake, not a refusal
    except OSError as e:
        raise OSError(e.errno, e.strerror, named) from None


def refusal(path: str, e: NotOurs) -> str:
    """Why ``path`` is refused, to be said after its name: ``e``'s words when ``e`` is about ``path`` itself,
    else which step on the way is not ours and why."""
    if e.filename == os.path.normpath(os.path.join(os.getcwd(), path)):
        return str(e.strerror)
    return f"goes through {e.filename!r}, which {e.strerror}"


def open_named(path: str, flags: int, *, what: str, mode: int = 0o666) -> int:
    """:func:`open_file`, a refusal the caller's :class:`~spoolparse.UsageError` naming ``what`` (``job log``,
    ``events file``) and why."""
    try:
        return open_file(path, flags, mode)
    except NotOurs as e:
        raise UsageError(f"{what} {path!r} {refusal(path, e)}") from None
