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
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat

__all__ = ["NotOurs", "open_dir", "own_dir", "make_unique_dir", "unlink_at", "DIR_FLAGS"]

#: How a directory others may write to is opened: never through a symlink, never a file, never inherited.
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


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


def make_unique_dir(dir_fd: int, prefix: str) -> tuple[str, int]:
    """A new directory ``<prefix><random>`` under ``dir_fd`` (mode 0700) and a descriptor on it: what
    :func:`tempfile.mkdtemp` does by path, done through the descriptor."""
    for _ in range(100):
        name = f"{prefix}{secrets.token_hex(4)}"
        try:
            os.mkdir(name, 0o700, dir_fd=dir_fd)
        except FileExistsError:
            continue
        return name, open_dir(name, dir_fd)
    raise FileExistsError(errno.EEXIST, "no unused name", prefix)


def unlink_at(dir_fd: int, name: str) -> None:
    """Remove entry ``name`` of ``dir_fd`` (a symbolic link itself, never what it points to); gone already is fine."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(name, dir_fd=dir_fd)
