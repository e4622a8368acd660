"""One exception hierarchy, and the warning classes.

The library raises only on misuse or on conditions the caller must handle;
bad *data* never raises, it is counted and reported in the result.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .result import Result

__all__ = [
    "Error",
    "UsageError",
    "SpawnError",
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
        other = f" ({self.filename})" if self.filename and os.fspath(self.filename) != name else ""
        return f"cannot start {name!r}: {self.strerror or 'error'}{other}"


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


class TimeoutExpired(Error):
    """Raised by ``check=True`` when the child hit its timeout.

    .. seealso:: :class:`subprocess.TimeoutExpired`
    """

    def __init__(self, result: Result, timeout: float | None) -> None:
        self.result = result
        self.timeout = timeout
        self.cmd = result.args
        super().__init__(str(self))

    def __str__(self) -> str:
        return f"command {self.cmd!r} timed out after {self.timeout} seconds"


class CalledProcessError(Error):
    """Raised by ``check=True`` when the run was not ``ok``.

    .. seealso:: :class:`subprocess.CalledProcessError`
    """

    def __init__(self, result: Result) -> None:
        self.result = result
        self.returncode = result.returncode
        self.cmd = result.args
        super().__init__(str(self))

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
