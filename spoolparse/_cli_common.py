"""What every ``spoolparse`` subcommand shares: exit statuses, option values with units, output.

Below both :mod:`spoolparse.cli` and :mod:`spoolparse.runner.cli`, so neither
imports the other, and cheap to import (standard library only; the JSON writer loads when first used):
the command's start-up time is paid on every call.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import re
import sys
from collections.abc import Iterator
from typing import IO, TYPE_CHECKING, Any, cast

from . import _limits
from ._regex import regex
from ._signals import WholeWrites, deferred
from ._terminal import printable

if TYPE_CHECKING:
    from .result import Result

__all__ = [
    "EXIT_OK",
    "EXIT_NOT_OK",
    "EXIT_USAGE",
    "EXIT_TIMEOUT",
    "EXIT_FAILURE",
    "EXIT_CANNOT_EXECUTE",
    "EXIT_NOT_FOUND",
    "EXIT_SIGNAL_BASE",
    "EXIT_INTERRUPTED",
    "EXIT_STATUSES",
    "COMMANDS",
    "add_command",
    "log_messages",
    "exit_status",
    "parse_duration",
    "parse_size",
    "positive_size",
    "add_output_options",
    "emit_json",
    "fail",
    "warn",
    "events_on_stderr",
]

# -- the subcommands -------------------------------------------------------------------------------

#: Every subcommand and its line in ``spoolparse --help``, which is printed from here without importing the
#: module that defines the subcommand (``spoolparse.cli`` registers each).
COMMANDS: dict[str, str] = {
    "run": "run CMD with stdout/stderr spooled to disk and print its answer",
    "parse": "parse a transcript already on disk (or stdin) and print its answer",
    "batch": "run many tasks (NDJSON lines) with bounded concurrency and memory; NDJSON outcomes on stdout",
    "calibrate": "measure a command's peak memory at rising concurrency and recommend -j and --memory-per-task",
    "report": "sum up a batch's outcomes: verdicts, failure causes, tokens and cost, durations, memory",
}


def add_command(sub: Any, name: str, description: str, examples: str, **kw: Any) -> argparse.ArgumentParser:
    """The parser of subcommand ``name`` of :data:`COMMANDS`: its line there as its help, ``examples`` printed as
    written after the options; ``kw`` as ``add_parser`` takes them."""
    return cast(argparse.ArgumentParser, sub.add_parser(name, help=COMMANDS[name], description=description,
                                                        epilog=examples,
                                                        formatter_class=argparse.RawDescriptionHelpFormatter, **kw))


# -- exit statuses: the one table (the docs' is generated from EXIT_STATUSES) ----------

EXIT_OK = 0
EXIT_NOT_OK = 1
EXIT_USAGE = 2
EXIT_TIMEOUT = 124
EXIT_FAILURE = 125
EXIT_CANNOT_EXECUTE = 126
EXIT_NOT_FOUND = 127
EXIT_SIGNAL_BASE = 128
EXIT_INTERRUPTED = EXIT_SIGNAL_BASE + 2  # SIGINT

#: Every exit status of every subcommand, and what it means (the docs' table, row for row).
EXIT_STATUSES: dict[str, str] = {
    str(EXIT_OK): "ok: every agent finished and its answer is in hand",
    str(EXIT_NOT_OK): "an agent was not ok (the summary's `error` says why; the child's own exit code is its "
    "`returncode`); `batch`: a task was not ok, whatever its verdict",
    str(EXIT_USAGE): "usage error (bad option or value, missing command, missing file, unusable --spool-dir or "
    "--results folder)",
    str(EXIT_TIMEOUT): "timeout (`run`: the summary's `timed_out` is true; in `batch` a timed-out task is 1)",
    str(EXIT_FAILURE): "spoolparse's own failure: the spool filled up, a file of ours (job log, events file) "
    "could not be written, an internal error",
    f"{EXIT_CANNOT_EXECUTE} / {EXIT_NOT_FOUND}": "`run`: the command could not be executed / was not found",
    f"{EXIT_SIGNAL_BASE} + N": "signal N ended the child (`run`; its `returncode` stays −N) or spoolparse "
    "itself (130: Ctrl-C)",
}


def exit_status(result: Result) -> int:
    """The command's exit status for one result: the policy every subcommand follows.

    Only the statuses of the table: the child's own non-zero exit code is
    reported in the summary (``returncode``), never passed on, so a child that
    exits 2 or 125 cannot pose as a usage error or a failure of spoolparse.
    """
    if result.spool_full:
        return EXIT_FAILURE
    if result.timed_out:
        return EXIT_TIMEOUT
    rc = result.returncode
    if rc is not None and rc < 0:
        return EXIT_SIGNAL_BASE - rc
    return EXIT_OK if result.ok else EXIT_NOT_OK


# -- option values with units ------------------------------------------------------------------

_NUMBER = r"(\d+(?:\.\d*)?|\.\d+)"
_DURATION = regex(rf"^\s*(-?{_NUMBER})\s*(ms|s|sec|m|min|h|d)?\s*$", re.IGNORECASE)
_DURATION_SCALE = {"": 1.0, "ms": 1e-3, "s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0}
_SIZE = regex(rf"^\s*{_NUMBER}\s*([kmgt]?)(i?b?)\s*$", re.IGNORECASE)
_SIZE_SCALE = {"": 1, "k": _limits.KiB, "m": _limits.MiB, "g": _limits.GiB, "t": _limits.GiB << 10}


def parse_duration(text: str, *, zero: bool = False) -> float:
    """``"10m"`` → 600.0, ``"1.5s"`` / ``"1.5"`` → 1.5, ``"250ms"``, ``"2h"``, ``"1d"``: seconds.

    A number and an optional unit (ms, s, m, h, d; none: seconds). It must
    be finite and positive (``zero=True`` also takes 0, e.g. a grace of none);
    anything else is an :class:`argparse.ArgumentTypeError`, which the command
    reports as a usage error (exit 2).
    """
    m = _DURATION.match(text)
    if m is None:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (try 90, 1.5s, 10m, 2h)")
    value = float(m.group(1)) * _DURATION_SCALE[(m.group(3) or "").lower()]
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"duration out of range: {text!r}")
    if value < 0 or (value == 0 and not zero):
        raise argparse.ArgumentTypeError(f"duration must be {'0 or more' if zero else 'positive'}: {text!r}")
    return value


def parse_size(text: str) -> int:
    """``"16M"``, ``"64MiB"``, ``"1.5G"``, ``"1024"`` → bytes (powers of 1024; a trailing B is optional).

    0 is taken (the library says when a bound cannot be 0);
    :func:`positive_size` refuses it.
    """
    m = _SIZE.match(text)
    if m is None:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (try 16M, 64MiB, 1.5G)")
    value = float(m.group(1)) * _SIZE_SCALE[m.group(2).lower()]
    if not math.isfinite(value) or value >= 1 << 63:
        raise argparse.ArgumentTypeError(f"size out of range: {text!r}")
    return int(value)


def positive_size(text: str) -> int:
    """:func:`parse_size` for sizes that cannot be 0 bytes (memory per task, caps)."""
    value = parse_size(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"size must be positive: {text!r}")
    return value


# -- how a child's output is read ---------------------------------------------------------------


def add_output_options(p: argparse.ArgumentParser, *, batch: bool = False) -> None:
    """``--provider``, ``--max-line``, ``--max-retained``, ``--allow-empty-answer``: how a child's output is read
    (``run``, ``parse``). ``batch``: every task's, each overridden by a task line's key of the same name, and
    left out when not given (the batch's options hold the defaults)."""
    from .providers import names as provider_names  # only the commands that read transcripts load the providers

    def default(value: object) -> dict[str, object]:
        return {} if batch else {"default": value}

    def task(key: str) -> str:
        return f"; for every task, a task line's \"{key}\" overrides it" if batch else ""

    p.add_argument(
        "--provider", choices=provider_names(), **default("auto"),  # type: ignore[arg-type]
        help="stdout format (default: auto, detected from the first events)" + task("provider"),
    )
    p.add_argument(
        "--max-line", type=parse_size, metavar="SIZE", **default(_limits.MAX_LINE),  # type: ignore[arg-type]
        help="longest line read whole; longer lines are classified by type and drained (default: 16M)"
        + task("max_line"),
    )
    p.add_argument(
        "--max-retained", type=parse_size, metavar="SIZE", **default(_limits.MAX_RETAINED),  # type: ignore[arg-type]
        help="longest retained event kept; past it the line is dropped and reported (default: 64M)"
        + task("max_retained"),
    )
    p.add_argument(
        "--allow-empty-answer", action="store_const", const=True, **default(False),  # type: ignore[arg-type]
        help="a run whose agent finished without an answer is ok (default: not ok, 'the agent finished without an "
        "answer')" + task("allow_empty_answer"),
    )


# -- output ------------------------------------------------------------------------------------

#: Set by the command when ``--events`` goes to stderr: then every message of
#: ours on stderr is an NDJSON event too, so that stream stays pure NDJSON.
_events_stream: IO[bytes] | None = None


def events_on_stderr(on: bool) -> None:
    """Say whether stderr carries the NDJSON event stream (``--events`` without a file)."""
    global _events_stream
    _events_stream = sys.stderr.buffer if on else None


def emit_json(obj: Any, *, pretty: bool = False, out: IO[bytes] | None = None) -> None:
    """One JSON value on one line (indented with ``pretty``), flushed, on ``out`` (default: stdout).

    The line goes out whole whatever signal comes meanwhile: the ending signals are held back until it is
    flushed (a reader that has stopped reading holds them back with it), then take effect."""
    from ._decode.jsonout import write  # orjson: not needed by --version, --help or a usage error

    stream = WholeWrites(out if out is not None else sys.stdout.buffer)
    with deferred():
        write(cast(IO[bytes], stream), obj, pretty=pretty)  # integers of any size, exactly; a long answer in pieces
        stream.write(b"\n")
        stream.flush()


def _message(kind: str, message: str, prog: str) -> None:
    if _events_stream is not None:
        # the shape of the agents' events (kind, line, type), the text under "message"
        if sys.stderr is not None:
            sys.stderr.flush()
        event = {"kind": kind, "line": None, "type": None, "source": prog, "message": message}
        emit_json(event, out=_events_stream)
        return
    # started with stderr closed (2>&-), or on a descriptor not open for writing: the message is lost, not us
    with contextlib.suppress(OSError, AttributeError):
        # one line, whatever a task id or an agent's text in it holds: nothing in it reaches the terminal raw
        sys.stderr.write(f"{prog}: {kind}: {printable(message)}\n")
        sys.stderr.flush()


def fail(message: str, *, prog: str = "spoolparse") -> None:
    """Report a failure: one line on stderr (an ``error`` event when stderr carries the events)."""
    _message("error", message, prog)


def warn(message: str, *, prog: str = "spoolparse") -> None:
    """Report a warning: one line on stderr (a ``warning`` event when stderr carries the events)."""
    _message("warning", message, prog)


@contextlib.contextmanager
def log_messages() -> Iterator[None]:
    """For the block, the package's log warnings (a cgroup that cannot be made, a transcript that cannot be
    kept, a torn job-log line) are our messages: one ``spoolparse: warning:`` line each (or an event, when
    stderr carries the events); errors are ``spoolparse: error:`` lines."""
    import logging  # here: ``--help`` and ``--version`` load only what they print

    class Messages(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            (fail if record.levelno >= logging.ERROR else warn)(record.getMessage())

    logger = logging.getLogger("spoolparse")
    handler = Messages(logging.WARNING)
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
