"""One exception hierarchy, and the warning classes.

The library raises only on misuse or on conditions the caller must handle;
bad *data* never raises, it is counted and reported in the result.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .result import Result

__all__ = [
    "Error",
    "UsageError",
    "SpawnError",
    "SpoolDirError",
    "SpoolFullError",
    "TimeoutExpired",
    "CalledProcessError",
    "SpoolWarning",
    "SpoolDirWarning",
]


class Error(Exception):
    """Base class of every exception spoolparse raises."""


class UsageError(Error, ValueError):
    """The call's arguments are wrong (a bad bound, an unknown provider, ...)."""


class SpawnError(Error, OSError):
    """The command could not be started.

    ``argv`` is the command as given; ``errno``/``strerror`` come from the OS.
    """

    def __init__(self, argv: Sequence[str], err: OSError) -> None:
        super().__init__(err.errno, err.strerror)
        self.argv = list(argv)
        self.filename = err.filename

    def __str__(self) -> str:
        name = self.argv[0] if self.argv else "<empty argv>"
        # the OS names what it could not find; when that is not the program (a missing cwd), say so
        other = ""
        if self.filename and os.fspath(self.filename) != name:
            shown = os.fspath(self.filename)
            other = f" ({shown if str(shown).isprintable() else repr(shown)})"  # "/bin/sh\r" of a CRLF #! line
        return f"cannot start {name!r}: {self.strerror or 'error'}{other}"


class SpoolDirError(Error, OSError):
    """The spool directory given (``spool_dir=``, ``--spool-dir``) cannot hold spools, or, none given, no temp
    dir can (``filename`` is ``None`` then, and ``strerror`` says why for each).

    An :class:`OSError` (``errno``, ``strerror``, ``filename``: the directory),
    since the cause is the file system, not the call's shape.
    """

    def __init__(self, directory: str | None, err: int, why: str) -> None:
        super().__init__(err, why, directory)

    def __str__(self) -> str:
        if self.filename is None:
            return str(self.strerror)
        return f"spool directory {self.filename!r} {self.strerror}"


class SpoolFullError(Error):
    """The spool filled up (disk full, quota, ``RLIMIT_FSIZE`` or ``max_spool_bytes``).

    The child's process group has been killed. ``result`` holds what could be
    parsed from the bytes spooled before that.
    """

    def __init__(self, directory: str, bytes_written: int, reason: str, result: Result | None = None) -> None:
        self.directory = directory
        self.bytes_written = bytes_written
        self.reason = reason
        self.result = result
        super().__init__(str(self))

    def __str__(self) -> str:
        return f"spool full in {self.directory} after {self.bytes_written} bytes ({self.reason})"


class TimeoutExpired(Error, subprocess.TimeoutExpired):
    """Raised by ``check=True`` when the child hit its timeout.

    Also a :class:`subprocess.TimeoutExpired`, so ``except
    subprocess.TimeoutExpired`` code keeps working, with its attributes:
    ``cmd``, ``timeout``, ``output`` (``None``: the transcript is in
    ``result.stdout``, the spool, not in memory) and ``stderr`` (the tail of
    the child's stderr as bytes, ``result.stderr_tail``).
    """

    def __init__(self, result: Result, timeout: float | None) -> None:
        subprocess.TimeoutExpired.__init__(
            self, result.args, timeout, output=None, stderr=result.stderr_tail.encode() or None  # type: ignore[arg-type]
        )
        self.result = result

    def __str__(self) -> str:
        return f"command {self.cmd!r} timed out after {self.timeout} seconds"


class CalledProcessError(Error, subprocess.CalledProcessError):
    """Raised by ``check=True`` when the run was not ``ok``.

    Also a :class:`subprocess.CalledProcessError`, with its attributes:
    ``returncode`` (``None`` for a parse), ``cmd``, ``output`` (``None``: the
    transcript is in ``result.stdout``) and ``stderr`` (the tail of the
    child's stderr as bytes).
    """

    def __init__(self, result: Result) -> None:
        subprocess.CalledProcessError.__init__(
            self, result.returncode, result.args, output=None,  # type: ignore[arg-type]
            stderr=result.stderr_tail.encode() or None,
        )
        self.result = result

    def __str__(self) -> str:
        from .verdict import exit_reason  # the verdict's own words for a bare non-zero exit

        rc = self.returncode
        if self.result.error and (rc is None or self.result.error != exit_reason(rc)):
            return f"command {self.cmd!r} failed: {self.result.error}"
        return f"command {self.cmd!r} returned non-zero exit status {self.returncode}"


class SpoolWarning(UserWarning):
    """Base class of spoolparse's warnings."""


class SpoolDirWarning(SpoolWarning):
    """``PDD_AGENT_SPOOL_DIR`` (or ``spool_dir``) is unusable or unsafe; a fallback is used."""
