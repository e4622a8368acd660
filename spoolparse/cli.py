"""The ``spoolparse`` command: JSON on stdout, one-line messages on stderr.

Exit statuses: one table for every subcommand, :data:`spoolparse._cli_common.EXIT_STATUSES`
(the docs' table, docs/reference/exit-statuses.md, is generated from it). With ``--events`` on stderr, every
message is an NDJSON event there too.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import signal
import sys
import warnings
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from . import __version__, _limits
from ._cli_common import (
    COMMANDS,
    EXIT_CANNOT_EXECUTE,
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    EXIT_NOT_FOUND,
    EXIT_SIGNAL_BASE,
    EXIT_USAGE,
    add_command,
    add_output_options,
    emit_json,
    events_on_stderr,
    exit_status,
    fail,
    parse_duration,
    parse_size,
    positive_size,
    warn,
)
from ._signals import Interrupted, deferred, interrupt_was_handled, interrupts

if TYPE_CHECKING:
    from .result import Result

# Start-up time is paid on every call: the runner, asyncio, rich, the process machinery and even the errors
# (subprocess) are imported by the subcommands that use them, not here: ``--help`` loads only argparse and the
# command line's own modules.

__all__ = ["main", "build_parser", "parse_size", "parse_duration", "emit_json", "fail", "EXIT_USAGE"]


def _seconds(text: str) -> float:
    return parse_duration(text)


def _grace(text: str) -> float:
    return parse_duration(text, zero=True)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # One line, never a usage block: scripts read stderr too.
        fail(f"{message} (see '{self.prog} --help')", prog=self.prog)
        self.exit(EXIT_USAGE)


RUN_EXAMPLES = """\
examples:
  spoolparse run -- codex exec --json "fix the bug"
  spoolparse run --timeout 900 -- claude -p --output-format stream-json --verbose "…"
  spoolparse run --input prompt.txt --spool-dir /scratch -- gemini -o stream-json
  spoolparse run -- python fixtures/fake_codex.py --size 256M
  spoolparse run --events --no-progress -- python fixtures/fake_codex.py --pause 0.1
"""

PARSE_EXAMPLES = """\
examples:
  spoolparse parse transcript.jsonl
  codex exec --json "…" | spoolparse parse -
  spoolparse parse --provider claude --max-line 4M run.jsonl
"""


def _add_bounds(p: argparse.ArgumentParser) -> None:
    add_output_options(p)
    p.add_argument("--pretty", action="store_true", help="indent the JSON summary")


def build_parser(command: str | None = None, *, lines_only: bool = False) -> argparse.ArgumentParser:
    """The ``spoolparse`` parser, every subcommand in it; with ``command`` one of
    :data:`~spoolparse._cli_common.COMMANDS`, only the module that defines it is imported. ``lines_only``: each
    subcommand is only its line of ``spoolparse --help`` and none of their modules is imported (the top level's
    help, a missing or unknown command)."""
    parser = _Parser(
        prog="spoolparse",
        description="Run JSON-lines agent CLIs, or parse their transcripts, with bounded memory; "
        "print one JSON summary (text, usage, model, session id, error).",
    )
    parser.add_argument("--version", action="version", version=f"spoolparse {__version__}")
    sub = parser.add_subparsers(dest="cmd", metavar="COMMAND", parser_class=_Parser)

    if lines_only:
        for name, line in COMMANDS.items():
            sub.add_parser(name, help=line)
    else:
        wanted = [command] if command in COMMANDS else list(COMMANDS)
        for register in dict.fromkeys(_REGISTER[name] for name in wanted):  # batch and calibrate: one module
            register(sub)
    parser.set_defaults(commands=sorted(sub.choices))
    return parser


def _add_run(sub: Any) -> None:
    r = add_command(
        sub,
        "run",
        "Run CMD with its stdout and stderr spooled to nameless files, parse stdout as it is "
        "written, and print one JSON summary on stdout.",
        RUN_EXAMPLES,
    )
    r.add_argument(
        "--timeout", type=_seconds, metavar="DURATION",
        help="SIGTERM the process group after this long (90, 1.5s, 10m, 2h)",
    )
    r.add_argument(
        "--grace", type=_grace, default=_limits.DEFAULT_GRACE, metavar="DURATION",
        help="time between SIGTERM and SIGKILL (default: 5s)",
    )
    r.add_argument("--spool-dir", metavar="DIR", help="spool directory (default: $PDD_AGENT_SPOOL_DIR or the temp dir)")
    r.add_argument("--max-spool-bytes", type=positive_size, metavar="SIZE", help="kill the child past this much output")
    r.add_argument(
        "--input", metavar="FILE|-", help="the child's stdin: a file, or - for this stdin (default: /dev/null)"
    )
    r.add_argument("--cwd", metavar="DIR", help="the child's working directory")
    r.add_argument("--shell", action="store_true", help="run CMD (one string) through /bin/sh")
    r.add_argument(
        "--events", action="store_true", help="write each event as one NDJSON line to stderr as it happens"
    )
    r.add_argument("--events-file", metavar="FILE", help="write the NDJSON events to FILE instead (implies --events)")
    r.add_argument(
        "--progress", action=argparse.BooleanOptionalAction, default=None,
        help="one live status line on stderr (default: on when stderr is a terminal and spoolparse[cli] "
        "is installed)",
    )
    _add_bounds(r)
    r.add_argument("command", nargs=argparse.REMAINDER, metavar="-- CMD [ARG ...]", help="the command to run")
    r.set_defaults(func=_cmd_run)


def _add_parse(sub: Any) -> None:
    p = add_command(
        sub,
        "parse",
        "Parse a JSON-lines transcript (a file, or - for stdin) and print one JSON summary.",
        PARSE_EXAMPLES,
    )
    p.add_argument("file", metavar="FILE|-", help="the transcript, or - for stdin")
    _add_bounds(p)
    p.set_defaults(func=_cmd_parse)


def _register_runner(sub: Any) -> None:
    from .runner.cli import register  # only when a runner command (or every subcommand) is wanted

    register(sub)


def _register_report(sub: Any) -> None:
    from .report.cli import register  # only when report (or every subcommand) is wanted

    register(sub)


#: What adds each subcommand of :data:`~spoolparse._cli_common.COMMANDS` to the parser (``register(subparsers)``,
#: setting ``func``).
_REGISTER: dict[str, Callable[[Any], None]] = {
    "run": _add_run, "parse": _add_parse, "batch": _register_runner, "calibrate": _register_runner,
    "report": _register_report,
}


def _print_result(res: Result, args: argparse.Namespace) -> int:
    from .errors import TimeoutExpired

    emit_json(res.summary(), pretty=args.pretty)
    if res.timed_out:  # exit 124 is ours, not the child's: say why, as for every other failure of ours
        fail(str(TimeoutExpired(res, res.timeout)))
    return exit_status(res)


def _status_line_wanted(progress: bool | None) -> bool:
    """Whether to draw the live status line; it needs rich (``spoolparse[cli]``).

    Asked for with ``--progress`` but not installed, it is a usage error that
    says what to install; by default (a terminal) it is simply left out.
    """
    if progress is False or (progress is None and not sys.stderr.isatty()):
        return False
    from .errors import UsageError

    try:
        import rich  # noqa: F401  - the drawing itself is imported by spoolparse.progress
    except ImportError:
        if progress:
            raise UsageError(
                "--progress draws its status line with rich, which is not installed: pip install 'spoolparse[cli]'"
            ) from None
        return False
    return True


def _cmd_run(args: argparse.Namespace) -> int:
    from .errors import UsageError

    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise UsageError("run needs a command: spoolparse run [options] -- CMD [ARG ...]")
    if args.shell and len(command) != 1:
        raise UsageError("--shell takes the command as one string")
    if args.cwd is not None and not os.path.isdir(args.cwd):  # else the start would blame the command (127)
        raise UsageError(f"--cwd {args.cwd!r}: no such directory")
    progress = _status_line_wanted(args.progress)
    from .options import ChildOptions
    from .process import run
    from .progress import follow

    inp: Any = None
    if args.input == "-":
        inp = sys.stdin.buffer
    elif args.input is not None:
        from pathlib import Path  # a path, not bytes: run() hands a real file to the child as its stdin

        inp = Path(args.input)
    # the command's options are named as the child's: --timeout, --grace, --cwd, --shell, --provider, ...
    options = ChildOptions.given({**vars(args), "input": inp})
    # SIGINT/TERM/HUP/QUIT (_command's interrupts()): the child is ended, its summary printed, exit 128+N
    res: Result | None = None
    printed = False
    try:
        with follow(events=args.events, events_file=args.events_file, progress=progress) as (on_event, on_start):
            res = run(command[0] if args.shell else command, options, keep_output=False, on_event=on_event,
                      on_start=on_start)
        with deferred():  # a signal now takes effect once the summary is out (and known to be)
            status = _print_result(res, args)
            printed = True
        return status
    except Interrupted as e:
        if e.result is None and not printed:
            e.result = res  # the run was over when the signal came: its summary is printed all the same
        raise


def _cmd_parse(args: argparse.Namespace) -> int:
    from .errors import UsageError
    from .parser import parse

    # anything readable: a file, a pipe or FIFO, /dev/stdin, <(…); a directory is not
    source: Any = sys.stdin.buffer if args.file == "-" else args.file
    if source is not sys.stdin.buffer:
        if not os.path.exists(source):
            raise UsageError(f"no such file: {args.file}")
        if os.path.isdir(source):
            raise UsageError(f"is a directory, not a transcript: {args.file}")
    res = parse(source, provider=args.provider, max_line=args.max_line, max_retained=args.max_retained,
                allow_empty_answer=args.allow_empty_answer)
    return _print_result(res, args)


def _show_warning(message: Any, category: Any, filename: str, lineno: int, file: Any = None, line: Any = None) -> None:
    warn(str(message))


def _command_of(argv: Sequence[str]) -> str | None:
    """The subcommand named in ``argv`` (the top level's own options take no values); ``None`` when the top
    level's ``--help`` comes first (it is what is printed then, every subcommand's line in it)."""
    for arg in argv:
        if not arg.startswith("-"):
            return arg
        if arg in ("--", "-h", "--help"):
            return None
    return None


def _events_to_stderr(argv: Sequence[str]) -> bool:
    """``--events`` without ``--events-file``, before the child's command: messages then go as events."""
    ours = argv[: argv.index("--")] if "--" in argv else argv
    named = any(a == "--events-file" or a.startswith("--events-file=") for a in ours)
    return "--events" in ours and not named


def _hold_standard_descriptors() -> None:
    """Put /dev/null on descriptors 0-2 that were closed when we started (``2>&-``).

    Else the next file opened takes the free number: a spool would become our
    "stderr", and a child handed fd 2 would write into our spool.
    """
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            with contextlib.suppress(OSError):
                os.open(os.devnull, os.O_RDWR)  # the lowest free number: this one


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``spoolparse`` command; returns the exit status."""
    args_in = list(sys.argv[1:] if argv is None else argv)
    _hold_standard_descriptors()
    if sys.stderr is None:  # started with stderr closed: our messages go to the /dev/null now on fd 2
        sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115 - the process's own stream
    warnings.showwarning = _show_warning
    # before parsing: even a usage error must not put a plain line into the event stream
    events_on_stderr(_events_to_stderr(args_in))
    try:
        status = _main(args_in)
    except KeyboardInterrupt:  # Ctrl-C before a command started anything (while parsing its options)
        fail("interrupted")
        status = EXIT_INTERRUPTED
    finally:
        events_on_stderr(False)
    interrupt_was_handled()
    return status


def _main(argv: list[str]) -> int:
    if argv == ["--version"]:  # without building (and importing) every subcommand
        sys.stdout.write(f"spoolparse {__version__}\n")
        return 0
    if sys.stdout is None:  # started with stdout closed (>&-): no outcome could be printed, so start nothing
        fail("standard output is closed: there is nowhere to print the result")
        return EXIT_USAGE
    command = _command_of(argv)
    parser = build_parser(command, lines_only=command not in COMMANDS)
    args = parser.parse_args(argv)  # --help ends here: it needs neither orjson nor the errors
    if getattr(args, "func", None) is None:
        fail(f"a command is needed: {', '.join(args.commands)} (see 'spoolparse --help')")
        return EXIT_USAGE
    with deferred():
        # orjson loads with Ctrl-C held back: its module init crashes (SIGSEGV) when a KeyboardInterrupt is
        # raised inside it. A signal that came meanwhile is raised right after. (ijson loads on first use,
        # the same way: spoolparse._decode.ijson_lazy.)
        import orjson  # noqa: F401
    # The command, what it prints and how it ends, all within: the first ending signal raises Interrupted, those
    # after it change nothing (the summary and the status stay the first one's).
    with interrupts():
        return _command(args)


def _command(args: argparse.Namespace) -> int:
    from .errors import Error, SpawnError, SpoolDirError, SpoolFullError, UsageError

    try:
        return int(args.func(args))
    except SpoolFullError as e:
        if e.result is not None:
            emit_json(e.result.summary(), pretty=getattr(args, "pretty", False))
        fail(str(e))
        return EXIT_FAILURE
    except SpawnError as e:
        fail(str(e))
        return EXIT_NOT_FOUND if e.errno == errno.ENOENT else EXIT_CANNOT_EXECUTE
    except SpoolDirError as e:  # the directory the user named: their value to fix
        fail(str(e))
        return EXIT_USAGE
    except UsageError as e:
        fail(str(e))
        return EXIT_USAGE
    except Error as e:
        fail(str(e))
        return EXIT_FAILURE
    except Interrupted as e:
        if e.result is not None:
            emit_json(e.result.summary(), pretty=getattr(args, "pretty", False))
        fail(str(e))
        return EXIT_SIGNAL_BASE + e.signum
    except KeyboardInterrupt:
        fail("interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # the reader went away (``| head``): end as a pipeline stage killed by SIGPIPE would, silently
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_SIGNAL_BASE + signal.SIGPIPE
    except OSError as e:
        fail(f"{e.strerror or e}" + (f": {e.filename}" if e.filename else ""))
        return EXIT_FAILURE
    except Exception as e:
        signalled = _interrupt_behind(e)
        if signalled is not None:  # a signal inside a class being made: Python wraps it (a RuntimeError)
            fail(str(signalled) if isinstance(signalled, Interrupted) else "interrupted")
            return EXIT_SIGNAL_BASE + signalled.signum if isinstance(signalled, Interrupted) else EXIT_INTERRUPTED
        if os.environ.get("SPOOLPARSE_DEBUG"):
            raise
        fail(f"internal error: {type(e).__name__}: {e} (set SPOOLPARSE_DEBUG=1 for a traceback)")
        return EXIT_FAILURE


def _interrupt_behind(e: BaseException) -> KeyboardInterrupt | None:
    """The interrupt an exception was raised *from*, if one was: a signal's handler raised it where Python turns
    what it raises into another exception (``__set_name__`` of a dataclass field, as a module loads). Only the
    cause counts: an error raised while an interrupt was being handled is an error all the same."""
    cause = e.__cause__
    return cause if isinstance(cause, KeyboardInterrupt) else None
